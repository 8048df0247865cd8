//! Where each code of a quantized matrix lives in memory: Paddle's plain and CUTLASS
//! layouts (byte-identical to `weight_quantize`), walked tile by tile and in parallel, and
//! q4vk's GPU layout.

pub mod convert;
pub mod coop;
pub mod paddle;
pub mod tile;
mod transpose;
pub mod vk;
