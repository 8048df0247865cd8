//! CPU computations on quantized matrices: the f64 reference GEMV the GPU is tested against.

pub mod reference;
