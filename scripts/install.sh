#!/usr/bin/env bash
# Builds q4vk in release mode and installs it for C/C++ consumers:
#   PREFIX/lib/libq4vk.so            shared library (SONAME libq4vk.so)
#   PREFIX/lib/libq4vk.a             static library
#   PREFIX/include/q4vk.h            the C header
#   PREFIX/lib/cmake/q4vk/           CMake package: targets q4vk::q4vk, q4vk::q4vk_static
#   PREFIX/lib/pkgconfig/q4vk.pc     pkg-config file
# Usage: scripts/install.sh [PREFIX]   (default: build/install in the repository)
# The installed tree is relocatable: the CMake and pkg-config files find it relative to
# their own location.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$root/build/install}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

# System libraries the static library needs (x86_64/aarch64 Linux, glibc).
native_static_libs="$(grep -v '^#' "$root/cmake/native-static-libs.txt")"

echo "== cargo build --release"
(cd "$root" && cargo build --release --lib)

target_dir="${CARGO_TARGET_DIR:-$root/target}"
version="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n1)"
description="$(sed -n 's/^description *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n1)"
IFS=. read -r v_major v_minor v_patch <<<"$version"

echo "== installing q4vk $version to $prefix"
install -d "$prefix/lib" "$prefix/include" "$prefix/lib/cmake/q4vk" "$prefix/lib/pkgconfig"
install -m 0755 "$target_dir/release/libq4vk.so" "$prefix/lib/libq4vk.so"
install -m 0644 "$target_dir/release/libq4vk.a" "$prefix/lib/libq4vk.a"
install -m 0644 "$root/include/q4vk.h" "$prefix/include/q4vk.h"

subst() {
    sed -e "s|@Q4VK_VERSION@|$version|g" \
        -e "s|@Q4VK_VERSION_MAJOR@|$v_major|g" \
        -e "s|@Q4VK_VERSION_MINOR@|$v_minor|g" \
        -e "s|@Q4VK_VERSION_PATCH@|$v_patch|g" \
        -e "s|@Q4VK_DESCRIPTION@|$description|g" \
        -e "s|@Q4VK_NATIVE_STATIC_LIBS@|$native_static_libs|g" \
        -e "s|@Q4VK_NATIVE_STATIC_LIBS_CMAKE@|${native_static_libs// /;}|g" \
        "$1" >"$2"
}
subst "$root/cmake/q4vk-config.cmake.in" "$prefix/lib/cmake/q4vk/q4vk-config.cmake"
install -m 0644 "$root/cmake/q4vk-targets.cmake" "$prefix/lib/cmake/q4vk/q4vk-targets.cmake"
subst "$root/cmake/q4vk-config-version.cmake.in" "$prefix/lib/cmake/q4vk/q4vk-config-version.cmake"
subst "$root/cmake/q4vk.pc.in" "$prefix/lib/pkgconfig/q4vk.pc"

# The header's version must match the library's (the C ABI's run-time check relies on it).
for part in MAJOR:$v_major MINOR:$v_minor PATCH:$v_patch; do
    grep -q "^#define Q4VK_VERSION_${part%%:*} ${part#*:}\$" "$prefix/include/q4vk.h" || {
        echo "install.sh: include/q4vk.h Q4VK_VERSION_${part%%:*} differs from Cargo.toml $version" >&2
        exit 1
    }
done
echo "   lib/libq4vk.so lib/libq4vk.a include/q4vk.h lib/cmake/q4vk/ lib/pkgconfig/q4vk.pc"
