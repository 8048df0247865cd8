#!/usr/bin/env bash
# The main job, end to end as a C user sees it: installs missing prerequisites
# (scripts/setup.sh --demo), builds and installs q4vk (build/install),
# builds the C examples against the installed package (build/examples_c) and runs
# quantize_demo, then gemv_demo (quantize -> upload -> GEMV on the Vulkan device). Arguments
# go to quantize_demo: [K N]... (default 4096 4096 4096 11008).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/build/install"
build="$root/build/examples_c"
"$root/scripts/setup.sh" --demo
"$root/scripts/install.sh" "$prefix" >/dev/null
cmake -S "$root/examples_c" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$build" --target quantize_demo gemv_demo -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
"$build/quantize_demo" "$@"
echo
# The GPU half: quantize -> upload -> fused GEMV on whatever Vulkan device exists
# (lavapipe on CPU-only machines), error vs an f64 reference and GB/s.
"$build/gemv_demo"
