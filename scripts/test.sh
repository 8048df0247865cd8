#!/usr/bin/env bash
# Runs every test of q4vk: formatting, lints and doc links, the header drift and ABI checks, the Rust unit and
# integration tests (golden vectors; Vulkan tests on whatever device exists, lavapipe on
# CPU-only machines, with the validation layer on; again with the integer dot-product GEMV
# forced (the files where that can change what runs), and on Mesa 26.1's lavapipe with
# cooperative matrices),
# the CPU tests built for aarch64 under
# qemu-user (NEON kernels, with and without the dot product), and the C consumer tests (CMake/CTest,
# default and ASan+UBSan builds), the Rust tests under ASan/LSan with a valgrind leak count,
# and a 10-second smoke run of every fuzz target. Installs missing prerequisites first
# (scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
echo "== cargo doc (broken intra-doc links fail)"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --lib
echo "== header drift"
scripts/gen-header.sh --check
echo "== C ABI against every released version (abi/), and the check's self-test"
scripts/abi-check.py
scripts/abi-check.py --self-test
echo "== header names (q4vk_/Q4VK_ only)"
scripts/check-header-names.sh --self-test
scripts/check-header-names.sh
echo "== import circles (src/vk, src/plan), and the check's self-test"
scripts/check-import-cycles.py --self-test
scripts/check-import-cycles.py
if [ -x scripts/build-shaders.sh ]; then
    echo "== SPIR-V drift"
    scripts/build-shaders.sh --check
fi
echo "== cargo test"
cargo test --release
echo "== GPU tests again with the integer dot-product GEMV forced (Q4VK_INTDOT=1: lavapipe has"
echo "   the dot products but does not report them accelerated; the default on devices that do)"
gpu_tests=$(cd tests && ls gpu_*.rs | sed 's/\.rs$//; s/^/--test /')
# Not again where the switch cannot change what runs: contexts made in Rust with their own
# settings (the environment is read by q4vk_context_create only; gpu_int_dot* force the
# integer dot products themselves), the exported kernels, which have no integer
# dot-product form, GGUF blocks without Q4VK_GEMV_ROUND_X_TO_INT8 (their f32 decode
# either way), and no GPU GEMV at all. A new test file runs here until listed.
same_either_way="gpu_act_order gpu_adopt_coop gpu_coop_tiles gpu_debug_names gpu_int_dot
    gpu_int_dot_bytes gpu_tuning gpu_x_fragments gpu_kernel_export gpu_kernel_export_blocks
    gpu_kernel_export_imported gpu_blocks gpu_blocks_frag gpu_no_device gpu_cpu_fallback"
int_dot_tests=$(cd tests && ls gpu_*.rs | sed 's/\.rs$//' | grep -vxF -f <(tr -s ' \n' '\n' <<<"$same_either_way") | sed 's/^/--test /')
# shellcheck disable=SC2086 # one --test per file
Q4VK_INTDOT=1 cargo test --release --quiet $int_dot_tests
echo "== SIMT GPU tests at other subgroup sizes: llvmpipe at 512 bits (subgroups of 16, Mali's)"
echo "   and 128 bits (4); the runs above have 8"
simt_tests="--test gpu_gemv --test gpu_gemm --test gpu_kernel_export --test gpu_int_dot --test gpu_act_order --test gpu_tuning"
for width in 512 128; do
    # shellcheck disable=SC2086 # one --test per file
    LP_NATIVE_VECTOR_WIDTH=$width cargo test --release --quiet $simt_tests
done
echo "== GPU tests on cooperative matrices that are not NVIDIA's: Mesa 26.1's lavapipe (8 x 8 x 8"
echo "   fragments, subgroups of 8, its own fragment layout), unpacked beside the system's; the"
echo "   tensor-core GEMM on the SIMT layout must run there (Q4VK_EXPECT_COOP_TILES=1)"
coop_env="$(sh scripts/lavapipe-coopmat.sh)"
# shellcheck disable=SC1090,SC2086 # the env file is generated; one --test per file
( . "$coop_env" && Q4VK_EXPECT_COOP_TILES=1 cargo test --release --quiet $gpu_tests )
echo "== Android link flags (build.rs run as for target_os = android)"
# No NDK here: run the compiled build script as cargo would for an Android target and
# check the 16 KB page alignment flag (Android 15) and the SONAME (the exports are rustc's
# version script, as on Linux, where examples_c/check_exports.sh checks them).
build_script="$(ls -t "${CARGO_TARGET_DIR:-$root/target}"/release/build/q4vk-*/build-script-build | head -n1)"
android_out="$(CARGO_CFG_TARGET_OS=android CARGO_MANIFEST_DIR="$root" "$build_script")"
for flag in '-Wl,-z,max-page-size=16384' '-Wl,-soname,libq4vk.so'; do
    grep -qF "cargo:rustc-cdylib-link-arg=$flag" <<<"$android_out" ||
        { echo "build.rs does not emit $flag for Android" >&2; exit 1; }
done
echo "   ok: max-page-size=16384, SONAME libq4vk.so"
echo "== Android type check and lint (aarch64-linux-android: NEON kernels, the loader's libvulkan.so path)"
# No NDK here, so nothing links: clippy compiles the library for the target (a c_char is
# u8 there, NEON replaces the x86 kernels) and fails on any warning.
cargo clippy --release --lib --target aarch64-linux-android -- -D warnings
echo "== aarch64 CPU tests under qemu (NEON kernels)"
scripts/test-aarch64.sh
echo "== C tests"
scripts/test-c.sh
echo "== sanitizers (Rust tests under ASan/LSan, valgrind leak count)"
scripts/test-sanitizers.sh
echo "== fuzz smoke"
scripts/fuzz-smoke.sh 10
