#!/bin/sh
# Regenerates shaders/spv/*.spv from the GLSL sources (committed; CI runs this and fails
# if any byte changes). Pinned flags; glslc from shaderc (Debian 12: glslc 2022.x).
set -eu
cd "$(dirname "$0")/../shaders"
FLAGS="--target-env=vulkan1.1 -O -Werror"
glslc $FLAGS -DSUBGROUP gemv_q4.comp -o spv/gemv_q4_subgroup.spv
glslc $FLAGS gemv_q4.comp -o spv/gemv_q4_portable.spv
glslc $FLAGS naive_q4.comp -o spv/naive_q4.spv
glslc $FLAGS copy.comp -o spv/copy.spv
