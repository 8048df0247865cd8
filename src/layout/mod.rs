//! Where each code of a quantized matrix lives in memory: Paddle's plain and CUTLASS
//! layouts (byte-identical to `weight_quantize`), walked tile by tile and in parallel, and
//! q4vk's GPU layouts (Q4 codes, and GGUF blocks in their native bytes).

pub mod blocks;
pub mod convert;
pub mod coop;
pub mod paddle;
pub mod tile;
mod transpose;
pub mod vk;
