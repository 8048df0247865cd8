//! Quantization of float weights: element types, Paddle-compatible int4/int8.

pub mod codes;
pub mod dtype;
pub mod paddle;
