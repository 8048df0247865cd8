#!/usr/bin/env bash
# Runs every C test: installs q4vk into build/c-test/install; a pkg-config consumer; the
# CMake source build (examples_c/vendored/run.sh) and the release archive (scripts/package.sh);
# then configures, builds and runs examples_c/ with CTest twice: a normal build, then one
# with ASan + UBSan; then the JNI test (examples_c/jni/run.sh), the ncnn custom layer
# (examples_c/ncnn/run.sh) and the MNN op (examples_c/mnn/run.sh).
# Exits non-zero on any failure. Usage: scripts/test-c.sh [VECTORS_DIR]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$root/build/c-test"
prefix="$work/install"
vectors="${1:-$root/tests/data/paddle}"
jobs="$(nproc 2>/dev/null || echo 2)"

"$root/scripts/install.sh" "$prefix"

status=0

# pkg-config consumer, from a copy of the install tree at another path (relocatable).
echo
echo "== pkg-config consumer (relocated prefix)"
reloc="$work/relocated"
rm -rf "$reloc" && cp -a "$prefix" "$reloc"
pc() { PKG_CONFIG_PATH="$reloc/lib/pkgconfig" pkg-config "$@" q4vk; }
echo "   q4vk $(pc --modversion): $(pc --cflags --libs)"
if cc -std=c11 -Wall -Wextra -Werror $(pc --cflags) "$root/examples_c/abi_static_assert.c" \
        -o "$work/pc_shared" $(pc --libs) &&
    LD_LIBRARY_PATH="$reloc/lib" "$work/pc_shared" &&
    cc -std=c11 -Wall -Wextra -Werror $(pc --cflags) "$root/examples_c/abi_static_assert.c" \
        -o "$work/pc_static" "$reloc/lib/libq4vk.a" $(pc --static --libs-only-l | sed 's/-lq4vk//') &&
    "$work/pc_static" && ! ldd "$work/pc_static" | grep -q libq4vk; then
    echo "   ok: shared and static builds via pkg-config run"
else
    echo "   FAIL: pkg-config consumer"
    status=1
fi

# The CMake source build from a host project (add_subdirectory; its cargo build is kept in
# the cache between runs) and its Android wiring; then the release archive, checked at
# another path.
echo
echo "== CMake source build (examples_c/vendored/run.sh)"
"$root/examples_c/vendored/run.sh" "${Q4VK_CACHE:-$HOME/.cache/q4vk}/vendored" || status=1
echo
echo "== release archive (scripts/package.sh)"
"$root/scripts/package.sh" "$work/package" || status=1

run_suite() { # name, extra cmake args...
    local name="$1"
    shift
    local dir="$work/$name"
    echo
    echo "== examples_c: $name build"
    rm -rf "$dir"
    cmake -S "$root/examples_c" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
        -DQ4VK_VECTORS_DIR="$vectors" "$@" >"$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; return 1; }
    cmake --build "$dir" -j "$jobs" || return 1
    echo "== ctest ($name)"
    (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

run_suite default || status=1
ASAN_OPTIONS=detect_leaks=1 run_suite sanitize -DQ4VK_SANITIZE=ON || status=1

# The JNI binding: javac -h, the shim against the installed library, the Java test on the
# Vulkan device (validation on, -Xcheck:jni). Needs a JDK (javac); fails without one.
echo
echo "== JNI (examples_c/jni/run.sh)"
if command -v javac >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ]; then
    Q4VK_PREFIX="$prefix" "$root/examples_c/jni/run.sh" || status=1
else
    echo "   FAIL: no JDK (javac) found; install openjdk-17-jdk-headless (scripts/setup.sh)"
    status=1
fi

# ncnn: the Q4Linear custom layer (q4vk's exported kernel in ncnn's own pipeline and
# command buffer) against ncnn's InnerProduct, validation on. ncnn itself (only the layers
# the test uses) is built once into ${Q4VK_CACHE:-$HOME/.cache/q4vk} and reused after that.
echo
echo "== ncnn custom layer (examples_c/ncnn/run.sh)"
Q4VK_PREFIX="$prefix" NCNN_Q4_BUILD="$work/ncnn" "$root/examples_c/ncnn/run.sh" || status=1

# MNN: the Q4Linear op (q4vk_cmd_gemv in MNN's command buffer, on the app's device shared
# with MNN) against MNN's MatMul, validation on. MNN (Vulkan buffer mode, static, only the
# library) is built once into ${Q4VK_CACHE:-$HOME/.cache/q4vk} and reused after that.
# MNN's source has no package registry. The first build takes it from q4vk's cache, else
# from MNN_SRC_TARBALL (default: the tarball in ../shared/peers/mnn beside the checkout, as
# in CI), else fetches GitHub's archive of the pinned commit (MNN_SRC_URL; empty = never),
# verified by a pinned digest of its content and kept in the cache. Where none of that
# works (no network, download failed, digest mismatch) run.sh exits 77 with one line
# "MNN op test NOT RUN: <why>": reported as not run, never as passed.
echo
echo "== MNN op (examples_c/mnn/run.sh)"
mnn_status=0
Q4VK_PREFIX="$prefix" MNN_Q4_BUILD="$work/mnn" "$root/examples_c/mnn/run.sh" |
    tee "$work/mnn.out" || mnn_status=$?
# 77 counts as not run only with run.sh's reason line; any other failure fails.
mnn_not_run=
if [ "$mnn_status" -eq 77 ]; then
    mnn_not_run=$(sed -n 's/^MNN op test NOT RUN: //p' "$work/mnn.out" | tail -1)
fi
if [ "$mnn_status" -ne 0 ] && [ -z "$mnn_not_run" ]; then
    status=1
fi

echo
if [ "$status" -ne 0 ]; then
    echo "test-c.sh: FAILED (see above)"
elif [ -n "$mnn_not_run" ]; then
    echo "test-c.sh: the C tests that ran passed (default and ASan+UBSan builds, JNI, ncnn layer);" \
        "the MNN op test was NOT RUN: $mnn_not_run"
else
    echo "test-c.sh: all C tests passed (default and ASan+UBSan builds, JNI, ncnn layer, MNN op)"
fi
exit "$status"
