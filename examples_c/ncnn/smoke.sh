#!/usr/bin/env bash
# Build ncnn (cached, see fetch_build.sh), then build and run the Vulkan smoke test.
#   examples_c/ncnn/smoke.sh            # build dir: build/ncnn/smoke in this checkout
# (not in the shared cache: CMake refuses a build dir configured from another checkout)
# Runs on lavapipe (Mesa CPU Vulkan) when there is no GPU. Exit status 0 = pass.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

prefix=$("$here/fetch_build.sh" | tail -1)
[[ -f "$prefix/lib/cmake/ncnn/ncnnConfig.cmake" ]] || { echo "no ncnn install at '$prefix'" >&2; exit 1; }

build=${NCNN_SMOKE_BUILD:-$(cd "$here/../.." && pwd)/build/ncnn/smoke}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -Dncnn_DIR="$prefix/lib/cmake/ncnn" >/dev/null
nice -n 19 cmake --build "$build" --parallel "$(nproc)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# VK_LOADER_DEBUG / VK_ICD_FILENAMES can be set by the caller to pick a driver.
# VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation examples_c/ncnn/smoke.sh runs it
# under the validation layer (clean on lavapipe, Mesa 22.3.6, 2026-11-30).
"$build/ncnn_smoke" "$work"
