#!/usr/bin/env bash
# Runs the CPU tests built for aarch64 (the NEON kernels) under qemu-user on this machine:
# the library's unit tests and tests/cpu_context.rs, release build, minus the two that need
# a Vulkan device (the aarch64 binaries find no loader here; both run natively in
# scripts/test.sh), on qemu's `max` CPU (ARMv8.x with the dot product: the kernel tests run
# the f32 NEON kernels and the SDOT ones); then the unit tests again on a Cortex-A53
# (ARMv8.0: NEON without the dot product), where the detection must fall back to the f32
# NEON kernels (tests/cpu_context.rs adds nothing there but 15 s). Linker and runner come from environment variables set
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

# Linked by GNU ld (the cross gcc's default), as aarch64 Linux users link.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot_libc"

# The tests that create a Vulkan context.
vulkan_tests=(vk::submit::tests::failed_wait_makes_the_context_lost matrices_do_not_cross_context_kinds)
skips=()
for t in "${vulkan_tests[@]}"; do skips+=(--skip "$t"); done

for run in "max --lib --test cpu_context" "cortex-a53 --lib"; do
    read -r cpu targets <<<"$run"
    echo "== aarch64 tests ($targets) under qemu-aarch64 -cpu $cpu"
    # QEMU_CPU picks the CPU model the runner emulates; Q4VK_TEST_AARCH64_CPU tells the
    # detection test which kernel family that CPU must get.
    # shellcheck disable=SC2086 # $targets is a list of cargo arguments
    QEMU_CPU="$cpu" Q4VK_TEST_AARCH64_CPU="$cpu" cargo test --quiet --release \
        --target aarch64-unknown-linux-gnu $targets -- --exact "${skips[@]}"
done
