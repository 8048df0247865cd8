#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, cargo-fuzz with libFuzzer + ASan) for a short while
# (default 30 s each) starting from the committed corpus; any crash, sanitizer finding or
# failed assertion fails. Stable Rust enables -Z flags with RUSTC_BOOTSTRAP=1.
# Usage: scripts/fuzz-smoke.sh [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-30}"
cd "$root/fuzz"
export RUSTC_BOOTSTRAP=1
export LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
target_dir="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}"
target_dir="${target_dir:-$root/fuzz/target}"
targets=$(cargo fuzz list)
cargo fuzz build -O --target-dir "$target_dir"
for target in $targets; do
    mkdir -p "corpus/$target"
    scratch="$(mktemp -d)" # new inputs go here; the committed corpus stays as it is
    echo "== fuzz $target (${seconds} s)"
    log="$scratch.log"
    status=0
    cargo fuzz run -O --target-dir "$target_dir" "$target" "$scratch" "corpus/$target" -- -max_total_time="$seconds" \
        -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec" "$log" || true
    rm -rf "$scratch"
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz target $target failed (artifacts in fuzz/artifacts/$target)" >&2
        exit 1
    fi
    rm -f "$log"
done
echo "fuzz-smoke.sh: all targets ran clean"
