#!/usr/bin/env bash
# The Q4Linear MNN op, end to end: build a minimal MNN with the Vulkan backend (cached in
# ${Q4VK_CACHE:-$HOME/.cache/q4vk}; minutes once, then instant), install q4vk (or use
# Q4VK_PREFIX), configure + build examples_c/mnn, and run q4linear_mnn_test on the Vulkan
# device (lavapipe on CPU-only machines) with the Khronos validation layer. Exit status 0 =
# every case matched MNN's MatMul to ||d||/||ref|| < 1e-5 for every m, with no validation
# message and no Vulkan object left at teardown. Exit status 77 = NOT RUN: MNN is not built
# yet and its source could neither be found nor fetched (fetch_build.sh); the last stdout
# line, "MNN op test NOT RUN: <why>", says why. Any other status is a failure.
#
#   examples_c/mnn/run.sh
# Environment:
#   Q4VK_PREFIX          an existing scripts/install.sh prefix (default: install one into
#                        build/mnn/q4vk)
#   Q4VK_CACHE           cache root for MNN (default $HOME/.cache/q4vk)
#   MNN_SRC_TARBALL      MNN's source tarball, read on the first run (see fetch_build.sh)
#   MNN_SRC_URL          where the first run fetches MNN's source when neither the cache nor
#                        MNN_SRC_TARBALL has it (default: GitHub's archive of the commit;
#                        empty = never fetch; see fetch_build.sh)
#   MNN_Q4_BUILD         build directory (default build/mnn/build)
#   Q4VK_MNN_M           the m (rows of x) to test (default "1 3 8 9 64": the GEMV kernels
#                        for m ≤ 8, the prefill GEMM above)
#   Q4VK_MNN_VALIDATION  0 runs without the validation layer (default 1: required)
# The test runs three times: with VK_KHR_push_descriptor enabled on the device (when offered)
# and without it (q4vk's descriptor-set ring), since MNN resubmits what it recorded; then with
# the integer dot-product GEMV forced (Q4VK_INTDOT=1: lavapipe has the dot products but does
# not report them accelerated), where the op passes q4vk a workspace from MNN's memory pool.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS

echo "== MNN (cached build, examples_c/mnn/fetch_build.sh)"
# Its last stdout line is the prefix, or "NOT RUN: <why>" with status 77.
mnn_status=0
mnn_out=$("$here/fetch_build.sh") || mnn_status=$?
mnn_prefix=${mnn_out##*$'\n'}
if [[ $mnn_status == 77 ]]; then
    echo "MNN op test NOT RUN: ${mnn_prefix#NOT RUN: }"
    exit 77
fi
[[ $mnn_status == 0 ]] || exit "$mnn_status"
[[ -f "$mnn_prefix/lib/libMNN.a" ]] || { echo "no MNN install at '$mnn_prefix'" >&2; exit 1; }

q4vk_prefix=${Q4VK_PREFIX:-}
if [[ -z "$q4vk_prefix" ]]; then
    q4vk_prefix="$root/build/mnn/q4vk"
    "$root/scripts/install.sh" "$q4vk_prefix"
fi
[[ -f "$q4vk_prefix/lib/cmake/q4vk/q4vk-config.cmake" ]] || { echo "no q4vk install at '$q4vk_prefix'" >&2; exit 1; }

build=${MNN_Q4_BUILD:-$root/build/mnn/build}
echo "== configure + build examples_c/mnn ($build)"
mkdir -p "$(dirname "$build")"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMNN_PREFIX="$mnn_prefix" \
    -DCMAKE_PREFIX_PATH="$q4vk_prefix" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
nice -n 10 cmake --build "$build" --parallel "$(nproc)" --target q4linear_mnn_test

for push in 1 0; do
    echo "== q4linear_mnn_test (Q4Linear vs MNN MatMul, Vulkan, shared context; push descriptors $push)"
    # shellcheck disable=SC2086 # the m list is split on purpose
    Q4VK_MNN_VALIDATION=${Q4VK_MNN_VALIDATION:-1} Q4VK_MNN_PUSH_DESCRIPTORS=$push \
        "$build/q4linear_mnn_test" ${Q4VK_MNN_M:-1 3 8 9 64}
done
echo "== q4linear_mnn_test with the integer dot-product GEMV forced (a workspace from MNN's pool)"
# shellcheck disable=SC2086 # the m list is split on purpose
Q4VK_MNN_VALIDATION=${Q4VK_MNN_VALIDATION:-1} Q4VK_MNN_PUSH_DESCRIPTORS=1 Q4VK_INTDOT=1 \
    Q4VK_MNN_EXPECT_INT_DOT=1 "$build/q4linear_mnn_test" ${Q4VK_MNN_M:-1 3 8 9 64}
echo "run.sh: passed in $((SECONDS - start)) s"
