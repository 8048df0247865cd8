#!/usr/bin/env bash
# Runs every test of q4vk: formatting and lints, the header drift check, the Rust unit and
# integration tests (golden vectors; Vulkan tests on whatever device exists, lavapipe on
# CPU-only machines, with the validation layer on), and the C consumer tests (CMake/CTest,
# default and ASan+UBSan builds). Installs missing prerequisites first (scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
echo "== header drift"
scripts/gen-header.sh --check
if [ -x scripts/build-shaders.sh ]; then
    echo "== SPIR-V drift"
    scripts/build-shaders.sh --check
fi
echo "== cargo test"
cargo test --release
echo "== C tests"
scripts/test-c.sh
