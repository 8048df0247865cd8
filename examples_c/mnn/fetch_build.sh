#!/usr/bin/env bash
# Build a minimal MNN (static libMNN.a: core, shape/geometry, Express, the plugin op, a
# scalar CPU backend and the Vulkan backend in buffer mode) into a cache outside any
# checkout. Only the first run pays.
#
#   prefix=$(examples_c/mnn/fetch_build.sh | tail -1)
#   # $prefix/lib/libMNN.a, $prefix/include/MNN (public headers), $prefix/../src (the
#   # source tree: a Vulkan op includes MNN's internal headers, as MNN's own ops do)
#   examples_c/mnn/fetch_build.sh --source-only   # only find, fetch and verify the source
#
# stdout: the prefix as the LAST line. stderr: progress, build log tail on failure,
# elapsed time. Exit status: 0 = built or cached; 77 = NOT RUN: MNN's source is not at hand
# and could not be fetched (the last stdout line is "NOT RUN: <why>"); anything else = an
# error (a build failure, or a local tarball that is not MNN at the pinned commit).
#
# Source: github.com/alibaba/MNN at commit 4d40bdb (release line 3.6.1). MNN has no source
# package on a registry (PyPI's `mnn` is a wheel without headers or Vulkan). The source is
# taken, in this order, from
#   1. the cache: ${Q4VK_CACHE}/sdist/, a tarball kept by an earlier run;
#   2. MNN_SRC_TARBALL (default ../shared/peers/mnn/mnn-4d40bdb-src.tar.xz beside the
#      checkout: the folders a C++ build needs, as CI provides them), copied to the cache;
#   3. MNN_SRC_URL (default GitHub's archive of the commit), one attempt with short
#      timeouts by curl or wget, kept in the cache so it is fetched once.
# Where none works the build is NOT RUN (exit 77), saying why: no network, download
# failed, or digest mismatch.
#
# Verification: the tarballs differ as files (the trimmed one has only some folders, and
# GitHub does not promise byte-stable archives), so what is pinned is the content the build
# reads: MNN_CONTENT_SHA256 = sha256 of the `sha256sum` listing ("<sha256>  <path>" lines,
# paths relative to the source root, sorted bytewise) of every regular file under
# MNN_PATHS except MNN_GENERATED. File modes are not part of it (the trimmed tarball lost
# the executable bits). Only MNN_PATHS are extracted, minus MNN_GENERATED, and symlinks are
# dropped, so the build reads exactly what the digest covers. MNN_GENERATED (AllShader.cpp,
# the SPIR-V of every buffer-mode shader) is a generated file that MNN's git carries and the
# trimmed tarball leaves out; the build writes its own (makeshader.py, below), so MNN's copy
# would never be read. The same digest holds for `git archive` of the commit, which is what
# GitHub's archive is. By hand, in an unpacked tree:
#   find CMakeLists.txt 3rd_party cmake codegen express include schema source test tools \
#     -type f ! -path source/backend/vulkan/buffer/compiler/AllShader.cpp -print0 |
#     LC_ALL=C sort -z | xargs -0 sha256sum -- | sha256sum
#
# Environment:
#   Q4VK_CACHE       cache root (default $HOME/.cache/q4vk)
#   MNN_SRC_TARBALL  a local tarball of MNN at the commit (only read when the cache lacks
#                    one): the trimmed one or GitHub's archive, any top folder
#   MNN_SRC_URL      where to fetch MNN from (default
#                    https://github.com/alibaba/MNN/archive/<commit>.tar.gz; any URL curl
#                    reads, file:// too); empty = never fetch
#   JOBS             parallel build jobs (default 2)
#   MNN_FORCE=1      rebuild even if the stamp says the install is complete
#
# Build choices:
#   * MNN_VULKAN_IMAGE=OFF (buffer mode): tensors are VkBuffer + offset, which is what
#     q4vk_cmd_gemv takes; the default image mode stores tensors in VkImages. The buffer
#     mode's generated shader table (AllShader.cpp, never taken from a tarball) is made here
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
MNN_COMMIT_FULL=4d40bdbd7efb73a58383bb5da867a6f41eb1776e
MNN_TARBALL_NAME=mnn-$MNN_COMMIT-src.tar.xz
# sha256 of mnn-4d40bdb-src.tar.xz (9,241,928 bytes), 2026-12-01. It names the source in the
# build stamp (changing it would invalidate every cached build); any tarball is verified by
# MNN_CONTENT_SHA256 instead.
MNN_TARBALL_SHA256=41908ae8b230cbadc29d9ae9ec6b7962307c176bcbae626b1dd0a8b9b6b88242
# What the build reads from the source (the folders of the trimmed tarball), the one
# file it generates itself, and the content digest (see Verification above), the same for
# mnn-4d40bdb-src.tar.xz and for GitHub's archive of the commit.
MNN_PATHS=(CMakeLists.txt 3rd_party cmake codegen express include schema source test tools)
MNN_GENERATED=source/backend/vulkan/buffer/compiler/AllShader.cpp
MNN_CONTENT_SHA256=dd041172ed6d9c5bae563f43cd5363458d761b91b15583c9f508c20e1e83858e
MNN_SRC_URL=${MNN_SRC_URL-https://github.com/alibaba/MNN/archive/$MNN_COMMIT_FULL.tar.gz}
GLSLANG_VERSION=13.1.1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
CACHE_TAG=mnn
CACHE_NICE=10
# shellcheck source=../cache_build.sh
. "$here/../cache_build.sh"
TARBALL_IN=${MNN_SRC_TARBALL:-$root/../shared/peers/mnn/$MNN_TARBALL_NAME}
# The cached copies: a local tarball under its own name (mnn-4d40bdb-src.tar.xz for the
# default one), a download under GitHub's name.
SDIST=$CACHE_ROOT/sdist
TARBALL_COPY=$SDIST/$(basename "$TARBALL_IN")
TARBALL_FETCHED=$SDIST/MNN-$MNN_COMMIT_FULL.tar.gz
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

# not_run WHY: the source is unavailable; WHY goes out as the last stdout line, which
# run.sh prints.
not_run() {
  echo "NOT RUN: $*"
  exit 77
}

# content_sha256 DIR: the content digest of the MNN tree in DIR.
content_sha256() {
  (cd "$1" && find "${MNN_PATHS[@]}" -type f ! -path "$MNN_GENERATED" -print0 2>/dev/null |
    LC_ALL=C sort -z | xargs -0 sha256sum -- | sha256sum | cut -d' ' -f1)
}

# unpack TARBALL DIR: MNN_PATHS of TARBALL (under any top folder; gz or xz) into DIR, the
# generated file and anything not a regular file or folder left out. Status 0 when the
# content digest matches; otherwise returns 1 with the reason in UNPACK_WHY ("unreadable"
# or "digest mismatch"), the details on stderr.
unpack() {
  local got
  UNPACK_WHY=
  rm -rf "$2"
  mkdir -p "$2"
  # Anchored patterns whose '*' stops at '/': "*/source" is the top folder's source/ only.
  if ! tar -xf "$1" -C "$2" --strip-components=1 --no-same-owner \
      --wildcards --no-wildcards-match-slash --exclude="*/$MNN_GENERATED" \
      "${MNN_PATHS[@]/#/*/}" 2>"$2.tar.err"; then
    # An archive that reads whole failed to extract here (disk full, permissions): a
    # local fault, not a bad tarball, so nothing is discarded or skipped.
    if tar -tf "$1" >/dev/null 2>&1; then
      die "cannot extract $1 into $2: $(head -3 "$2.tar.err" | tr '\n' ' ')"
    fi
    UNPACK_WHY="unreadable"
    log "$1: not a readable tarball holding ${MNN_PATHS[*]}: $(head -3 "$2.tar.err" | tr '\n' ' ')"
    rm -f "$2.tar.err"
    return 1
  fi
  rm -f "$2.tar.err"
  find "$2" ! -type f ! -type d -exec rm -f {} +
  got=$(content_sha256 "$2")
  if [[ "$got" != "$MNN_CONTENT_SHA256" ]]; then
    UNPACK_WHY="digest mismatch"
    log "$1: content sha256 $got, expected $MNN_CONTENT_SHA256 (alibaba/MNN at $MNN_COMMIT_FULL)"
    return 1
  fi
  log "source: $1 (content sha256 OK)"
}

# download URL FILE: one attempt (no retries), 10 s to connect, abandoned when it stalls
# below 1 KB/s for 60 s. On failure, not_run with the reason.
download() {
  local rc=0 err
  rm -f "$2"
  if command -v curl >/dev/null; then
    log "fetching $1 (curl)"
    err=$(curl -fsSL --connect-timeout 10 --speed-limit 1024 --speed-time 60 -o "$2" "$1" 2>&1) || rc=$?
    [[ $rc == 0 ]] && return 0
    rm -f "$2"
    # 23: writing the file failed here (a local fault, not the network's).
    [[ $rc == 23 ]] && die "cannot write $2: $err"
    # 5, 6: proxy or host name not resolved; 7: no connection; 28: a timeout, which is
    # "Operation too slow" once the transfer has started.
    case $rc in
      5 | 6 | 7) not_run "no network: cannot reach $1 ($err)" ;;
      28) [[ "$err" == *"too slow"* ]] || not_run "no network: cannot reach $1 ($err)" ;;
    esac
    not_run "download failed: $1 ($err)"
  elif command -v wget >/dev/null; then
    log "fetching $1 (wget)"
    wget -q --timeout=10 --tries=1 -O "$2" "$1" || rc=$?
    [[ $rc == 0 ]] && return 0
    rm -f "$2"
    case $rc in
      4) not_run "no network: cannot reach $1 (wget: network failure)" ;;
      8) not_run "download failed: $1 (wget: the server answered with an error)" ;;
      *) not_run "download failed: $1 (wget exit status $rc)" ;;
    esac
  fi
  not_run "no MNN source: no $TARBALL_IN, and neither curl nor wget to fetch $1"
}

# Temporary names of the cache's files, removed however the script ends.
trap 'rm -f "$TARBALL_FETCHED.$$.tmp" "$TARBALL_COPY.$$.tmp"' EXIT

# get_source DIR: the verified source in DIR, from the first of: a cached tarball,
# MNN_SRC_TARBALL, MNN_SRC_URL (see Source above). A new tarball is kept in the cache
# (written under a temporary name, then renamed, so a reader never sees half a file).
get_source() {
  local t
  mkdir -p "$SDIST"
  for t in "$TARBALL_COPY" "$SDIST/$MNN_TARBALL_NAME" "$TARBALL_FETCHED"; do
    [[ -f "$t" ]] || continue
    unpack "$t" "$1" && return 0
    log "removing the cached $t: it fails verification"
    rm -f "$t"
  done
  if [[ -f "$TARBALL_IN" ]]; then
    # A tarball given here is expected to be right: a wrong one is an error, not a skip.
    unpack "$TARBALL_IN" "$1" || die "$UNPACK_WHY: $TARBALL_IN is not alibaba/MNN at $MNN_COMMIT_FULL"
    cp "$TARBALL_IN" "$TARBALL_COPY.$$.tmp"
    mv -f "$TARBALL_COPY.$$.tmp" "$TARBALL_COPY"
    return 0
  fi
  [[ -n "$MNN_SRC_URL" ]] ||
    not_run "no MNN source: no $TARBALL_IN, and fetching is off (MNN_SRC_URL is empty)"
  download "$MNN_SRC_URL" "$TARBALL_FETCHED.$$.tmp"
  if ! unpack "$TARBALL_FETCHED.$$.tmp" "$1"; then
    rm -f "$TARBALL_FETCHED.$$.tmp"
    rm -rf "$1"
    if [[ "$UNPACK_WHY" == "digest mismatch" ]]; then
      not_run "digest mismatch: $MNN_SRC_URL is not alibaba/MNN at $MNN_COMMIT_FULL"
    fi
    not_run "download failed: $MNN_SRC_URL gave an unreadable or incomplete tarball"
  fi
  mv -f "$TARBALL_FETCHED.$$.tmp" "$TARBALL_FETCHED"
  log "kept in the cache: $TARBALL_FETCHED ($(stat -c %s "$TARBALL_FETCHED") bytes)"
}

# --source-only: find, fetch and verify the source into a scratch folder, then stop
# (tests the steps above without a build, and fills the cache ahead of one).
if [[ "${1:-}" == --source-only ]]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch" "$TARBALL_FETCHED.$$.tmp" "$TARBALL_COPY.$$.tmp"' EXIT
  get_source "$scratch/src"
  echo "source OK"
  exit 0
fi

# The stamp identifies source + options + shader compiler.
if cache_open "mnn-$MNN_COMMIT" "$MNN_TARBALL_SHA256 ${CMAKE_OPTS[*]} glslang $GLSLANG_VERSION spirv-opt off" \
    lib/libMNN.a "${MNN_FORCE:-0}"; then
  echo "$PREFIX"
  exit 0
fi

rm -rf "$SRC" "$BUILD"
get_source "$SRC"

LD_LIBRARY_PATH="$GLSLANG/lib" "$GLSLANG/bin/glslangValidator" --version 2>/dev/null | grep -q " $GLSLANG_VERSION\$" ||
  die "glslangValidator $GLSLANG_VERSION not found under $GLSLANG (run scripts/setup.sh)"
command -v xxd >/dev/null || die "xxd not found (apt-get install xxd): makeshader.py needs it"

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
