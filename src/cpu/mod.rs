//! CPU computations on quantized matrices: the f64 reference GEMV the GPU is tested
//! against, and the CPU context's matrices and multi-threaded SIMD GEMV.

#[cfg(target_arch = "x86_64")]
pub mod avx2dot;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod block_steps;
pub mod blocks;
#[cfg(target_arch = "x86_64")]
pub mod blocks_avx2;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod blocks_dot;
#[cfg(target_arch = "aarch64")]
pub mod blocks_sdot;
pub mod context;
pub mod digits;
pub mod gemv;
pub mod kernels;
pub mod matrix;
pub mod reference;
#[cfg(target_arch = "aarch64")]
pub mod sdot;
#[cfg(target_arch = "x86_64")]
pub mod vnni;
