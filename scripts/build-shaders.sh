#!/bin/sh
# Regenerates shaders/spv/*.spv from the GLSL sources in shaders/ (the SPIR-V is committed
# and embedded, so building q4vk needs no shader compiler). Pinned flags; the committed
# files come from shaderc 2023.2 (Debian 12's glslc).
# With --check, compiles into a temporary directory and fails if any byte differs.
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/shaders"
out="spv"
if [ "${1:-}" = "--check" ]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
FLAGS="--target-env=vulkan1.1 -O -Werror"
glslc $FLAGS -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_subgroup.spv"
glslc $FLAGS gemv_q4.comp -o "$out/gemv_q4_portable.spv"
# Kernel export (q4vk_kernel_export): ncnn's conventions (shaders/gemv_export.glsl); the
# portable variant targets Vulkan 1.0 (SPIR-V 1.0) so any host device can take it; -g keeps
# the names ncnn's reflection reads (the push-constant block type `parameter`).
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT gemv_q4.comp -o "$out/gemv_q4_export_portable.spv"
glslc $FLAGS -g -DEXPORT -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_export_subgroup.spv"
glslc $FLAGS naive_q4.comp -o "$out/naive_q4.spv"
glslc $FLAGS copy.comp -o "$out/copy.spv"
if [ "$out" != "spv" ]; then
    for f in "$out"/*.spv; do
        if ! cmp -s "$f" "spv/$(basename "$f")"; then
            echo "shaders/spv/$(basename "$f") is stale: run scripts/build-shaders.sh and commit" >&2
            exit 1
        fi
    done
    if [ "$(ls spv | wc -l)" != "$(ls "$out" | wc -l)" ]; then
        echo "shaders/spv holds files the script does not build" >&2
        exit 1
    fi
    echo "shaders/spv is up to date"
fi
