#!/usr/bin/env bash
# The Rust test suite under AddressSanitizer, and a leak count of the GPU path under
# valgrind. Stable Rust's ASan runtime is enabled with RUSTC_BOOTSTRAP=1 (-Zsanitizer).
#   1. CPU tests (unit tests but those that create a Vulkan context, golden vectors, layout
#      properties): ASan + LeakSanitizer.
#   2. GPU tests on lavapipe (and the unit tests that create a context, `vk::submit`):
#      ASan with leak detection off. lavapipe keeps pointers to its
#      allocations in JIT-compiled code that LeakSanitizer does not scan, so it reports
#      128 bytes per VkDevice as lost (allocated from an unknown module); valgrind, which
#      scans all memory, sees them reachable (step 3).
#   3. valgrind --leak-check=full on the create/destroy churn test (2 contexts, 20
#      matrices, GEMVs): "definitely lost" and "indirectly lost" must be 0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
host="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address"
asan_target="${CARGO_TARGET_DIR:-$root/target}/asan"
asan() { CARGO_TARGET_DIR="$asan_target" cargo test --release --target "$host" "$@"; }

echo "== ASan + LSan: CPU tests"
ASAN_OPTIONS=detect_leaks=1 asan --lib --test paddle_vectors --test permute_roundtrip -- --skip vk::submit::
echo "== ASan: GPU tests (lavapipe)"
ASAN_OPTIONS=detect_leaks=0 asan --lib vk::submit::
# One test at a time: Debian 12's validation layer (1.3.239) can crash inside vkCreateBuffer
# when several instances and devices are created and destroyed on other threads at once, a
# race ASan's slowdown makes likelier; q4vk's own threading is tested within a test
# (gpu_reliability's eight threads on one context).
# The create/destroy churn with a tenth of its default counts: the same paths under ASan
# (the plain pass runs the full counts).
ASAN_OPTIONS=detect_leaks=0 Q4VK_CHURN_CONTEXTS=10 Q4VK_CHURN_MATRICES=200 \
    asan --test gpu_reliability --test gpu_gemv --test gpu_api --test gpu_sync_validation -- --test-threads=1
unset RUSTC_BOOTSTRAP RUSTFLAGS

echo "== valgrind: GPU create/destroy churn"
cargo test --release --no-run --test gpu_reliability 2>/dev/null
binary="$(ls -t "${CARGO_TARGET_DIR:-$root/target}"/release/deps/gpu_reliability-* | grep -v '\.d$' | head -n1)"
log="$(mktemp)"
Q4VK_CHURN_CONTEXTS=2 Q4VK_CHURN_MATRICES=20 valgrind --leak-check=full --errors-for-leak-kinds=definite \
    --num-callers=30 "$binary" create_destroy --test-threads=1 >"$log" 2>&1 || { cat "$log"; exit 1; }
grep -E "definitely lost|indirectly lost|possibly lost|test result" "$log"
if ! grep -q "definitely lost: 0 bytes in 0 blocks" "$log" || ! grep -q "indirectly lost: 0 bytes in 0 blocks" "$log"; then
    echo "valgrind found lost memory:" >&2
    cat "$log" >&2
    exit 1
fi
rm -f "$log"
echo "test-sanitizers.sh: ASan/LSan and valgrind runs clean"
