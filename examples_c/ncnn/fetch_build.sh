#!/usr/bin/env bash
# Fetch ncnn (Tencent) from its PyPI sdist and build ONLY the C++ library with
# Vulkan, into a cache outside any checkout. Only the first run pays.
#
#   prefix=$(examples_c/ncnn/fetch_build.sh | tail -1)
#   cmake -S my_layer -B build -Dncnn_DIR="$prefix/lib/cmake/ncnn"
#
# stdout: "-Dncnn_DIR=<prefix>/lib/cmake/ncnn", then the prefix as the LAST line.
# stderr: progress, build logs (tail on failure), elapsed time.
#
# Environment:
#   Q4VK_CACHE   cache root (default $HOME/.cache/q4vk)
#   JOBS         parallel build jobs (default: nproc)
#   NCNN_FORCE=1 rebuild even if the stamp says the install is complete
#
# Build choices (see the report in the commit message / smoke.sh comments):
#   * NCNN_VULKAN=ON, NCNN_SIMPLEVK=OFF: use the SYSTEM Vulkan headers
#     (libvulkan-dev, <vulkan/vulkan.h>) and link the system loader
#     (Vulkan::Vulkan, libvulkan.so.1). With the default SIMPLEVK=ON, ncnn's
#     public gpu.h pulls in its own simplevk.h (a private copy of the Vulkan
#     declarations + dlopen loader), which clashes with a custom layer or
#     q4vk code that includes <vulkan/vulkan.h> itself. ncnn's
#     vulkan_header_fix.h fills in what the Debian 12 headers (1.3.239) lack.
#   * NCNN_SYSTEM_GLSLANG=OFF: the sdist bundles the glslang version ncnn
#     expects; Debian 12 has no glslang-dev installed here and its API differs.
#     The bundled glslang is built statically and installed next to ncnn
#     (libglslang.a, libSPIRV.a ... ; ncnnConfig.cmake finds them).
#   * No python/tools/examples/benchmark/tests/C API/pixel helpers,
#     NCNN_RUNTIME_CPU=OFF and every x86 ISA variant above SSE2 OFF.
#   * Only the layers in NCNN_LAYERS are built (WITH_LAYER_<name>=OFF for every
#     other layer ncnn's src/CMakeLists.txt declares): what q4linear_test's net
#     and smoke.cpp's net instantiate (Input, Split, InnerProduct) plus what
#     ncnn creates internally on the Vulkan path (Flatten inside InnerProduct,
#     Packing for layout conversions, Cast for storage-type conversions). A net
#     that names another layer fails load_param with "layer ... not exists".
set -euo pipefail

NCNN_VERSION=1.0.20261020
# sha256 of ncnn-1.0.20261020.tar.gz as downloaded from PyPI on 2026-11-30
# (5,485,264 bytes). Fail on mismatch.
NCNN_SDIST_SHA256=ad8cdd63e9755cfa8e23b9b6d9ce46156077d80298a89e7c3ba325ffccfca200
# The sdist's setup.py computes its version from today's date, so pip rejects
# "==1.0.20261020" unless time is faked to that day while it prepares metadata.
NCNN_FAKETIME='2026-10-20 12:00:00'

CACHE_ROOT=${Q4VK_CACHE:-$HOME/.cache/q4vk}
SDIST=$CACHE_ROOT/sdist/ncnn-$NCNN_VERSION.tar.gz
JOBS=${JOBS:-$(nproc)}
NCNN_LAYERS="Input Split InnerProduct Flatten Packing Cast"

CMAKE_OPTS=(
  -DCMAKE_BUILD_TYPE=Release
  # CMakeLists.txt defaults NCNN_VERSION to the BUILD date (string(TIMESTAMP)),
  # which lands in platform.h NCNN_VERSION_STRING and ncnnConfig.cmake; pin it.
  -DNCNN_VERSION="${NCNN_VERSION##*.}"
  -DNCNN_VULKAN=ON
  -DNCNN_SIMPLEVK=OFF
  -DNCNN_SYSTEM_GLSLANG=OFF
  -DNCNN_SHARED_LIB=OFF
  -DNCNN_PYTHON=OFF
  -DNCNN_BUILD_TOOLS=OFF
  -DNCNN_BUILD_EXAMPLES=OFF
  -DNCNN_BUILD_BENCHMARK=OFF
  -DNCNN_BUILD_TESTS=OFF
  -DNCNN_RUNTIME_CPU=OFF
  -DNCNN_C_API=OFF
  -DNCNN_PIXEL=OFF -DNCNN_PIXEL_ROTATE=OFF -DNCNN_PIXEL_AFFINE=OFF -DNCNN_PIXEL_DRAWING=OFF
  # x86 ISA variants (CMakeLists.txt ~line 735-820); SSE2 stays (x86-64 baseline).
  # The nested ones are only defined when NCNN_AVX is ON; set anyway.
  -DNCNN_AVX=OFF -DNCNN_FMA=OFF -DNCNN_FMA4=OFF -DNCNN_XOP=OFF -DNCNN_F16C=OFF
  -DNCNN_AVX2=OFF -DNCNN_AVXVNNI=OFF -DNCNN_AVXVNNIINT8=OFF -DNCNN_AVXVNNIINT16=OFF
  -DNCNN_AVXNECONVERT=OFF -DNCNN_AVX512=OFF -DNCNN_AVX512VNNI=OFF
  -DNCNN_AVX512BF16=OFF -DNCNN_AVX512FP16=OFF
  --no-warn-unused-cli
)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_TAG=ncnn
CACHE_NICE=19
# shellcheck source=../cache_build.sh
. "$here/../cache_build.sh"

emit() {
  echo "-Dncnn_DIR=$PREFIX/lib/cmake/ncnn"
  echo "$PREFIX"
}

# The stamp identifies sdist + options, so changing options here rebuilds.
if cache_open "ncnn-$NCNN_VERSION" "$NCNN_SDIST_SHA256 ${CMAKE_OPTS[*]} layers: $NCNN_LAYERS" \
    lib/cmake/ncnn/ncnnConfig.cmake "${NCNN_FORCE:-0}"; then
  emit
  exit 0
fi
mkdir -p "$(dirname "$SDIST")"
sha_ok() { sha256_is "$1" "$NCNN_SDIST_SHA256"; }

if sha_ok "$SDIST"; then
  log "sdist cached: $SDIST"
else
  if ! command -v faketime >/dev/null; then
    log "installing faketime (apt-get)"
    SUDO=
    if [[ $(id -u) != 0 ]]; then
      command -v sudo >/dev/null || die "faketime missing, not root and no sudo: apt-get install faketime"
      SUDO=sudo
    fi
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq faketime >&2
  fi
  PY=$(command -v python3 || command -v python) || die "python3 not found (needed for pip)"
  DL=$(mktemp -d "$ROOT/dl.XXXXXX")
  log "downloading sdist ncnn==$NCNN_VERSION from PyPI (pip under faketime; a few minutes)"
  # pip builds the sdist's metadata in an isolated env: slow under faketime.
  PIP_DISABLE_PIP_VERSION_CHECK=1 faketime "$NCNN_FAKETIME" \
    "$PY" -m pip download --no-deps --no-binary :all: -d "$DL" "ncnn==$NCNN_VERSION" >&2 \
    || { rm -rf "$DL"; die "pip download failed"; }
  [[ -f "$DL/ncnn-$NCNN_VERSION.tar.gz" ]] || { ls -la "$DL" >&2; rm -rf "$DL"; die "sdist not found after download"; }
  if ! sha_ok "$DL/ncnn-$NCNN_VERSION.tar.gz"; then
    log "got sha256 $(sha256sum "$DL/ncnn-$NCNN_VERSION.tar.gz" | cut -d' ' -f1)"
    rm -rf "$DL"
    die "sha256 mismatch for ncnn-$NCNN_VERSION.tar.gz (expected $NCNN_SDIST_SHA256)"
  fi
  mv -f "$DL/ncnn-$NCNN_VERSION.tar.gz" "$SDIST"
  rm -rf "$DL"
fi
log "sdist sha256 OK ($(stat -c %s "$SDIST") bytes)"

# Partial work from an earlier interrupted run is thrown away. The old install
# (if any) stays until the new one is complete, then is swapped (cache_install).
rm -rf "$SRC" "$BUILD"
mkdir -p "$SRC"
tar -xzf "$SDIST" -C "$SRC" --strip-components=1
[[ -f "$SRC/CMakeLists.txt" && -f "$SRC/glslang/CMakeLists.txt" ]] || die "unexpected sdist layout"

# WITH_LAYER_<lowercase name>=OFF for every declared layer not in NCNN_LAYERS.
LAYER_OPTS=()
declared=$(sed -n 's/^ncnn_add_layer(\([A-Za-z0-9_]*\).*/\1/p' "$SRC/src/CMakeLists.txt")
for keep in $NCNN_LAYERS; do
  grep -qx "$keep" <<<"$declared" || die "layer $keep is not declared in ncnn's src/CMakeLists.txt"
done
for layer in $declared; do
  [[ " $NCNN_LAYERS " == *" $layer "* ]] || LAYER_OPTS+=("-DWITH_LAYER_${layer,,}=OFF")
done

log "configuring (log: $BUILD_LOG)"
run_logged cmake -S "$SRC" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$PREFIX" "${CMAKE_OPTS[@]}" "${LAYER_OPTS[@]}"
log "building with $JOBS jobs (nice $CACHE_NICE)"
run_logged cmake --build "$BUILD" --parallel "$JOBS"
# Keeps the sdist (and src, for reading shaders/headers); drops the build tree.
cache_install lib/cmake/ncnn/ncnnConfig.cmake
cache_close "install size $(du -sh "$PREFIX" | cut -f1)"
emit
