#!/usr/bin/env bash
# Build a minimal MNN (static libMNN.a: core, shape/geometry, Express, the plugin op, a
# scalar CPU backend and the Vulkan backend in buffer mode) into a cache outside any
# checkout. Only the first run pays.
#
#   prefix=$(examples_c/mnn/fetch_build.sh | tail -1)
#   # $prefix/lib/libMNN.a, $prefix/include/MNN (public headers), $prefix/../src (the
#   # source tree: a Vulkan op includes MNN's internal headers, as MNN's own ops do)
#
# stdout: the prefix as the LAST line. stderr: progress, build log tail on failure,
# elapsed time.
#
# Source: github.com/alibaba/MNN at commit 4d40bdb (release line 3.6.1), as the tarball of
# the folders a C++ build needs (sha256 pinned below). MNN has no source package on a
# registry (PyPI's `mnn` is a wheel without headers or Vulkan), so the tarball is taken
# from MNN_SRC_TARBALL (default: ../shared/peers/mnn/ beside the checkout) once and kept in
# the cache.
#
# Environment:
#   Q4VK_CACHE       cache root (default $HOME/.cache/q4vk)
#   MNN_SRC_TARBALL  the source tarball (only read when the cache lacks it)
#   JOBS             parallel build jobs (default 2)
#   MNN_FORCE=1      rebuild even if the stamp says the install is complete
#
# Build choices:
#   * MNN_VULKAN_IMAGE=OFF (buffer mode): tensors are VkBuffer + offset, which is what
#     q4vk_cmd_gemv takes; the default image mode stores tensors in VkImages. The buffer
#     mode's generated shader table (AllShader.cpp, absent from the source) is made here
#     with MNN's own compiler/makeshader.py and glslangValidator 13.1.1 (scripts/setup.sh
#     installs it; MNN's cooperative-matrix shaders need GL_KHR_cooperative_matrix, which
#     Debian 12's glslang 11 lacks). MNN_VULKAN_DISABLE_SPIRV_OPT=1: the SPIR-V is not run
#     through spirv-opt -O (faster to make; the shaders are only correctness-tested here).
#   * MNN_USE_SYSTEM_LIB=ON: MNN links the system Vulkan loader. Without it MNN defines
#     its own global function-pointer variables named vkCreateInstance etc. (its dlopen
#     wrapper), which clash with any other code in the process that calls Vulkan.
#   * MNN_BUILD_SHARED_LIBS=OFF, MNN_SEP_BUILD=OFF: one static libMNN.a. A Release MNN
#     builds with -fvisibility=hidden, so a shared libMNN would not export
#     VulkanBackend::addCreator and the other internals a custom Vulkan op uses. MNN
#     registers its backends and ops from static initializers: link it with
#     -Wl,--whole-archive.
#   * MNN_WITH_PLUGIN=ON: OpType_Plugin with shape inference registered by name
#     (MNN/plugin/PluginShapeInference.hpp), MNN's way to add an op to a graph.
#   * Trimmed: no tools, converter, demo, tests, benchmark, training, LLM, OpenCV, audio;
#     no other GPU backend; MNN_USE_SSE=OFF (no x86 SSE/AVX kernels: the CPU backend is
#     only glue here), KleidiAI and ARMv8.2 off; only the MNN library target is built.
set -euo pipefail

MNN_COMMIT=4d40bdb
MNN_TARBALL_NAME=mnn-$MNN_COMMIT-src.tar.xz
# sha256 of mnn-4d40bdb-src.tar.xz (9,241,928 bytes), 2026-12-01.
MNN_TARBALL_SHA256=41908ae8b230cbadc29d9ae9ec6b7962307c176bcbae626b1dd0a8b9b6b88242
GLSLANG_VERSION=13.1.1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
CACHE_TAG=mnn
CACHE_NICE=10
# shellcheck source=../cache_build.sh
. "$here/../cache_build.sh"
TARBALL=$CACHE_ROOT/sdist/$MNN_TARBALL_NAME
TARBALL_IN=${MNN_SRC_TARBALL:-$root/../shared/peers/mnn/$MNN_TARBALL_NAME}
JOBS=${JOBS:-2}
GLSLANG=$CACHE_ROOT/tools/glslang-$GLSLANG_VERSION/cmeel.prefix

CMAKE_OPTS=(
  -DCMAKE_BUILD_TYPE=Release
  -DMNN_VULKAN=ON
  -DMNN_VULKAN_IMAGE=OFF
  -DMNN_USE_SYSTEM_LIB=ON
  -DMNN_BUILD_SHARED_LIBS=OFF
  -DMNN_SEP_BUILD=OFF
  -DMNN_WITH_PLUGIN=ON
  -DMNN_BUILD_TOOLS=OFF -DMNN_BUILD_CONVERTER=OFF -DMNN_BUILD_DEMO=OFF -DMNN_BUILD_TEST=OFF
  -DMNN_BUILD_BENCHMARK=OFF -DMNN_BUILD_TRAIN=OFF -DMNN_BUILD_QUANTOOLS=OFF
  -DMNN_BUILD_LLM=OFF -DMNN_BUILD_OPENCV=OFF -DMNN_BUILD_AUDIO=OFF -DMNN_BUILD_PROTOBUFFER=OFF
  -DMNN_OPENCL=OFF -DMNN_OPENGL=OFF -DMNN_METAL=OFF -DMNN_CUDA=OFF
  -DMNN_USE_SSE=OFF -DMNN_AVX2=OFF -DMNN_AVX512=OFF -DMNN_KLEIDIAI=OFF -DMNN_ARM82=OFF
  -DMNN_OPENMP=OFF
  --no-warn-unused-cli
)

# The stamp identifies tarball + options + shader compiler.
if cache_open "mnn-$MNN_COMMIT" "$MNN_TARBALL_SHA256 ${CMAKE_OPTS[*]} glslang $GLSLANG_VERSION spirv-opt off" \
    lib/libMNN.a "${MNN_FORCE:-0}"; then
  echo "$PREFIX"
  exit 0
fi
mkdir -p "$(dirname "$TARBALL")"
if ! sha256_is "$TARBALL" "$MNN_TARBALL_SHA256"; then
  [[ -f "$TARBALL_IN" ]] || die "no MNN source: $TARBALL_IN does not exist (set MNN_SRC_TARBALL to $MNN_TARBALL_NAME: alibaba/MNN at $MNN_COMMIT)"
  sha256_is "$TARBALL_IN" "$MNN_TARBALL_SHA256" || die "sha256 mismatch for $TARBALL_IN (expected $MNN_TARBALL_SHA256)"
  cp "$TARBALL_IN" "$TARBALL.tmp" && mv -f "$TARBALL.tmp" "$TARBALL"
fi
log "source tarball sha256 OK ($(stat -c %s "$TARBALL") bytes)"

LD_LIBRARY_PATH="$GLSLANG/lib" "$GLSLANG/bin/glslangValidator" --version 2>/dev/null | grep -q " $GLSLANG_VERSION\$" ||
  die "glslangValidator $GLSLANG_VERSION not found under $GLSLANG (run scripts/setup.sh)"
command -v xxd >/dev/null || die "xxd not found (apt-get install xxd): makeshader.py needs it"

rm -rf "$SRC" "$BUILD"
mkdir -p "$SRC"
tar -xJf "$TARBALL" -C "$SRC" --strip-components=1
[[ -f "$SRC/CMakeLists.txt" && -f "$SRC/source/backend/vulkan/buffer/compiler/makeshader.py" ]] ||
  die "unexpected source layout"

# AllShader.cpp/.h and VulkanShaderMap.cpp of the buffer mode, from MNN's GLSL. makeshader.py
# does not stop when glslangValidator fails, so its output is checked for errors and for one
# SPIR-V array per shader variant.
log "generating the buffer-mode shaders (makeshader.py, glslangValidator $GLSLANG_VERSION)"
shader_start=$SECONDS
compiler=$SRC/source/backend/vulkan/buffer/compiler
(
  cd "$compiler"
  PATH="$GLSLANG/bin:$PATH" LD_LIBRARY_PATH="$GLSLANG/lib" MNN_VULKAN_DISABLE_SPIRV_OPT=1 \
    run_logged python3 makeshader.py -f
)
grep -q "ERROR" "$BUILD_LOG" && { grep -B2 -A5 "ERROR" "$BUILD_LOG" | head -40 >&2; die "shader compilation failed (log: $BUILD_LOG)"; }
arrays=$(grep -c '^const unsigned char ' "$compiler/AllShader.cpp" || true)
declared=$(grep -c '^extern const unsigned char ' "$SRC/source/backend/vulkan/buffer/shaders/AllShader.h" || true)
[[ "$arrays" -gt 0 && "$arrays" == "$declared" ]] || die "AllShader.cpp has $arrays arrays, AllShader.h declares $declared"
rm -rf "$compiler/.cache"
log "  $arrays shader variants in $((SECONDS - shader_start)) s"

log "configuring (log: $BUILD_LOG)"
run_logged cmake -S "$SRC" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$PREFIX" "${CMAKE_OPTS[@]}"
log "building libMNN.a with $JOBS jobs (nice $CACHE_NICE)"
run_logged cmake --build "$BUILD" --parallel "$JOBS" --target MNN
cache_install lib/libMNN.a
# src/ stays: its internal headers are what a Vulkan op includes. What no op includes goes:
# the other backends (CUDA alone is 74 MB), tools, tests, protobuf.
find "$SRC/source/backend" -mindepth 1 -maxdepth 1 ! -name vulkan ! -name cpu -exec rm -rf {} +
rm -rf "$SRC/tools" "$SRC/test" "$SRC/3rd_party/protobuf"
cache_close "libMNN.a $(du -h "$PREFIX/lib/libMNN.a" | cut -f1)"
echo "$PREFIX"
