//! q4vk: 4-bit weight quantization, Paddle/CUTLASS layouts and a fused int4-dequant GEMV
//! in Vulkan compute, behind a stable C ABI (`include/q4vk.h`).
//!
//! The core (`quant`, `import`, `layout`, `cpu`, `vk`, `parallel`) never dereferences a caller's
//! pointer (it only hands the host's callbacks their user pointers) and never reads the
//! environment; of C it knows only the integer values of the enums it decodes (such as
//! `Dtype::from_c`). `ffi` is the thin layer of exported functions that checks arguments,
//! converts pointers (`ffi::ptr`), reads the kill switches and maps errors to status codes.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod cpu;
pub mod epilogue;
pub mod error;
pub mod ffi;
pub mod import;
pub mod layout;
pub mod parallel;
pub mod plan;
pub mod quant;
pub mod simd;
pub mod size;
pub mod vk;
