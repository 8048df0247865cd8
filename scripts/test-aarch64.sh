#!/usr/bin/env bash
# Runs the CPU tests built for aarch64 (the NEON kernels) under qemu-user on this machine:
# the library's unit tests and tests/cpu_context.rs, release build, minus the two that need
# a Vulkan device (the aarch64 binaries find no loader here; both run natively in
# scripts/test.sh). Each binary runs twice: on qemu's `max` CPU (ARMv8.x with the dot
# product and i8mm extensions) and on a Cortex-A53 (ARMv8.0: NEON without the dot product),
# so both of the NEON paths run. Linker and runner come from environment variables set
# here, for this target only; no cargo configuration outside the command is changed.
# Needs qemu-user, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (scripts/setup.sh) and
# the aarch64-unknown-linux-gnu Rust target; fails when any is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

sysroot_libc=/usr/aarch64-linux-gnu
for tool in qemu-aarch64 aarch64-linux-gnu-gcc; do
    command -v "$tool" >/dev/null ||
        { echo "NOT RUN: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
[ -d "$sysroot_libc/lib" ] ||
    { echo "NOT RUN: $sysroot_libc is missing (libc6-dev-arm64-cross)" >&2; exit 1; }
rustup target list --installed | grep -q '^aarch64-unknown-linux-gnu$' ||
    { echo "NOT RUN: rustup target add aarch64-unknown-linux-gnu" >&2; exit 1; }

# GNU ld refuses the cdylib's two anonymous version scripts (rustc's and
# src/ffi/exports.map); link with the LLVM linker the toolchain ships, as the x86-64 build does.
gcc_ld="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/gcc-ld"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-Clink-arg=-fuse-ld=lld -Clink-arg=-B$gcc_ld"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot_libc"

# The tests that create a Vulkan context.
vulkan_tests=(vk::submit::tests::failed_wait_makes_the_context_lost matrices_do_not_cross_context_kinds)
skips=()
for t in "${vulkan_tests[@]}"; do skips+=(--skip "$t"); done

for cpu in max cortex-a53; do
    echo "== aarch64 tests under qemu-aarch64 -cpu $cpu"
    # QEMU_CPU picks the CPU model the runner emulates; Q4VK_TEST_AARCH64_CPU tells the
    # detection test which kernel family that CPU must get.
    QEMU_CPU="$cpu" Q4VK_TEST_AARCH64_CPU="$cpu" cargo test --quiet --release \
        --target aarch64-unknown-linux-gnu --lib --test cpu_context -- --exact "${skips[@]}"
done
