#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, cargo-fuzz with libFuzzer + ASan) for a short while
# (default 30 s each, as many at once as there are cores) starting from the committed
# corpus; any crash, sanitizer finding or failed assertion fails. Stable Rust enables -Z
# flags with RUSTC_BOOTSTRAP=1.
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
# One target's run; its log and exit status land in $results/<target>.{log,status}.
run_target() {
    local target="$1" scratch status=0
    mkdir -p "corpus/$target"
    scratch="$(mktemp -d)" # new inputs go here; the committed corpus stays as it is
    cargo fuzz run -O --target-dir "$target_dir" "$target" "$scratch" "corpus/$target" -- -max_total_time="$seconds" \
        -rss_limit_mb=4096 -print_final_stats=1 >"$results/$target.log" 2>&1 || status=$?
    rm -rf "$scratch"
    echo "$status" >"$results/$target.status"
}
# The targets run side by side, one per core (each libFuzzer run is single-threaded),
# then report in order.
results="$(mktemp -d)"
jobs_at_once="$(nproc)"
for target in $targets; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do
        wait -n || true
    done
    run_target "$target" &
done
wait
failed=""
for target in $targets; do
    echo "== fuzz $target (${seconds} s)"
    grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec" "$results/$target.log" || true
    if [ "$(cat "$results/$target.status")" -ne 0 ]; then
        tail -n 60 "$results/$target.log" >&2
        echo "fuzz target $target failed (artifacts in fuzz/artifacts/$target)" >&2
        failed="$failed $target"
    fi
done
rm -rf "$results"
[ -z "$failed" ] || exit 1
echo "fuzz-smoke.sh: all targets ran clean"
