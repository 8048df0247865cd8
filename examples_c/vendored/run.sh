#!/usr/bin/env bash
# Tests the CMake source build (the repository's CMakeLists.txt) from a host project:
#  1. this directory's project vendors q4vk with add_subdirectory; cargo builds the library
#     inside the host's build tree and CTest runs the demos against q4vk::q4vk and
#     q4vk::q4vk_static;
#  2. the ANDROID_ABI -> Rust target mapping (android_abi.cmake);
#  3. a configure with the variables the NDK's toolchain file sets (ANDROID,
#     ANDROID_ABI=armeabi-v7a, ANDROID_PLATFORM_LEVEL=26): no NDK here, so only the
#     generated cargo command and link paths are checked, nothing is built for Android;
#  4. a Debug configure uses cargo's debug profile (configure only).
# Usage: examples_c/vendored/run.sh [BUILD_DIR]   (default build/vendored; the cargo build
# in it is reused by later runs, from any checkout)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/vendored}"
mkdir -p "$build"
# One run at a time per build tree (several checkouts may share one in a cache).
exec 9>"$build.lock"
flock 9

echo "-- add_subdirectory build in $build"
# A fresh configure each time (the source path may differ between runs); q4vk/cargo stays.
rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
grep -q 'RUNPATH.*q4vk/cargo/release' <(readelf -d "$build/gemv_demo") ||
    { echo "FAIL: gemv_demo does not link the cargo-built library of the build tree"; exit 1; }
(cd "$build" && ctest --output-on-failure)

echo "-- ANDROID_ABI mapping"
cmake -P "$here/android_abi.cmake"

echo "-- Android configure (simulated toolchain variables)"
android="$build/android-configure"
rm -rf "$android"
cmake -S "$here" -B "$android" -DCMAKE_BUILD_TYPE=Release -DANDROID=ON \
    -DANDROID_ABI=armeabi-v7a -DANDROID_PLATFORM_LEVEL=26 >"$android.log" 2>&1 ||
    { cat "$android.log"; exit 1; }
cc_dir="$(dirname "$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$android/CMakeCache.txt")")"
cargo_cmd="$(cat "$android"/q4vk/CMakeFiles/q4vk_cargo_build.dir/build.make)"
link_cmd="$(cat "$android"/CMakeFiles/gemv_demo.dir/link.txt "$android"/CMakeFiles/quantize_demo_static.dir/link.txt)"
for want in "--target armv7-linux-androideabi" \
    "CARGO_TARGET_ARMV7_LINUX_ANDROIDEABI_LINKER=$cc_dir/armv7a-linux-androideabi26-clang"; do
    grep -qF -- "$want" <<<"$cargo_cmd" || { echo "FAIL: cargo command lacks '$want'"; exit 1; }
    echo "   ok: cargo command has $want"
done
for want in "q4vk/cargo/armv7-linux-androideabi/release/libq4vk.so" \
    "q4vk/cargo/armv7-linux-androideabi/release/libq4vk.a" "-llog"; do
    grep -qF -- "$want" <<<"$link_cmd" || { echo "FAIL: link lines lack '$want'"; exit 1; }
    echo "   ok: link lines have $want"
done
echo "-- Debug configure"
debug="$build/debug-configure"
rm -rf "$debug"
cmake -S "$here" -B "$debug" -DCMAKE_BUILD_TYPE=Debug >"$debug.log" 2>&1 ||
    { cat "$debug.log"; exit 1; }
if grep -qF -- "--release" "$debug"/q4vk/CMakeFiles/q4vk_cargo_build.dir/build.make ||
    ! grep -qF "q4vk/cargo/debug/libq4vk.so" "$debug"/CMakeFiles/gemv_demo.dir/link.txt; then
    echo "FAIL: a Debug build does not use cargo's debug profile"
    exit 1
fi
echo "   ok: cargo build without --release, linking q4vk/cargo/debug/libq4vk.so"
echo "vendored: ok"
