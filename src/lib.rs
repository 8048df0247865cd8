//! q4vk: 4-bit weight quantization, Paddle/CUTLASS layouts and a fused int4-dequant GEMV
//! in Vulkan compute, behind a stable C ABI (`include/q4vk.h`).
//!
//! The safe core (`quant`, `import`, `layout`, `cpu`, `vk`, `parallel`) knows nothing of C; `ffi` is
//! the thin layer of exported functions that checks arguments and maps errors to status
//! codes.
#![deny(missing_docs)]

pub mod alloc;
pub mod cpu;
pub mod error;
pub mod ffi;
pub mod import;
pub mod layout;
pub mod parallel;
pub mod quant;
pub mod simd;
pub mod vk;
