//! Quantization of float weights: element types, Paddle-compatible int4/int8, and q4vk's
//! own Q4 format.

pub mod codes;
#[cfg(target_arch = "x86_64")]
mod codes_x86;
pub mod dtype;
pub mod paddle;
pub mod q4;
#[cfg(target_arch = "x86_64")]
mod q4_x86;
