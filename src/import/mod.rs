//! Lossless import of 4-bit checkpoints that are already quantized — GGUF Q4_0/Q4_1/Q4_K
//! blocks, GPTQ and AWQ (GEMM) tensors — into q4vk's canonical form
//! ([`canonical::ImportedMatrix`]): the same codes, scales and zero points (or float
//! offsets) the checkpoint stores, never requantized; and the f32 weights they stand for
//! ([`dequant`]), bit for bit what the formats' reference implementations compute.

pub mod awq;
pub mod canonical;
pub mod dequant;
pub mod gguf;
pub mod gguf_blocks;
pub mod gptq;
