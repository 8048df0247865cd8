#!/usr/bin/env bash
# The Q4Linear ncnn custom layer, end to end: fetch + build ncnn with Vulkan (cached in
# ${Q4VK_CACHE:-$HOME/.cache/q4vk}; a few minutes once, then instant), install q4vk (or use
# Q4VK_PREFIX), configure + build examples_c/ncnn, and run q4linear_test on the Vulkan
# device (lavapipe on CPU-only machines) under the Khronos validation layer. Exit status
# 0 = every case matched ncnn's InnerProduct to ||d||/||ref|| < 1e-5 and the validation
# layer was active and reported no error, warning or performance message.
#
#   examples_c/ncnn/run.sh
# Environment:
#   Q4VK_PREFIX          an existing scripts/install.sh prefix (default: install one into
#                        build/ncnn/q4vk)
#   Q4VK_CACHE           cache root for ncnn (default $HOME/.cache/q4vk)
#   NCNN_Q4_BUILD        build directory (default build/ncnn/build)
#   Q4VK_NCNN_VALIDATION 0 runs without the validation layer (default 1: required)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS

echo "== ncnn (cached build, examples_c/ncnn/fetch_build.sh)"
ncnn_prefix=$("$here/fetch_build.sh" | tail -1)
[[ -f "$ncnn_prefix/lib/cmake/ncnn/ncnnConfig.cmake" ]] || { echo "no ncnn install at '$ncnn_prefix'" >&2; exit 1; }

q4vk_prefix=${Q4VK_PREFIX:-}
if [[ -z "$q4vk_prefix" ]]; then
    q4vk_prefix="$root/build/ncnn/q4vk"
    "$root/scripts/install.sh" "$q4vk_prefix"
fi
[[ -f "$q4vk_prefix/lib/cmake/q4vk/q4vk-config.cmake" ]] || { echo "no q4vk install at '$q4vk_prefix'" >&2; exit 1; }

build=${NCNN_Q4_BUILD:-$root/build/ncnn/build}
echo "== configure + build examples_c/ncnn ($build)"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -Dncnn_DIR="$ncnn_prefix/lib/cmake/ncnn" \
    -DCMAKE_PREFIX_PATH="$q4vk_prefix" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep -q "q4vk not found" "$build.configure.log" && { cat "$build.configure.log"; echo "q4vk not found" >&2; exit 1; }
nice -n 10 cmake --build "$build" --parallel "$(nproc)" --target q4linear_test

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== q4linear_test (Q4Linear vs ncnn InnerProduct, Vulkan)"
if [[ "${Q4VK_NCNN_VALIDATION:-1}" == 1 ]]; then
    # ncnn enables validation only when compiled with ENABLE_VALIDATION_LAYER (gpu.cpp; off in
    # release builds) and reads no environment variable for it, so the loader injects the
    # layer (VK_INSTANCE_LAYERS) and a settings file routes every message to a log (ncnn
    # registers no debug messenger). INFO is on so the log proves the layer was active.
    cat >"$work/vk_layer_settings.txt" <<EOF
khronos_validation.report_flags = error,warn,perf,info
khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG
khronos_validation.log_filename = $work/validation.log
EOF
    VK_LAYER_SETTINGS_PATH="$work/vk_layer_settings.txt" VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation \
        "$build/q4linear_test" "$work" "$root/tests/data"
    grep -q "Khronos Validation Layer Active" "$work/validation.log" 2>/dev/null ||
        { echo "FAIL: the validation layer did not load (vulkan-validationlayers installed?)" >&2; exit 1; }
    bad=$(grep "msgNum:" "$work/validation.log" | grep -vc "(INFO" || true)
    if [[ "$bad" != 0 ]]; then
        cat "$work/validation.log" >&2
        echo "FAIL: $bad validation message(s)" >&2
        exit 1
    fi
    echo "   validation layer active: 0 errors, warnings or performance messages"
else
    "$build/q4linear_test" "$work" "$root/tests/data"
fi
echo "run.sh: passed in $((SECONDS - start)) s"
