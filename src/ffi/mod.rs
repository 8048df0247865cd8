//! The C ABI: every `extern "C"` item and `#[repr(C)]` type, and nothing else. Each module
//! checks arguments, calls the safe core inside the panic boundary and maps errors.
#![allow(non_camel_case_types)]

mod backend;
mod byte_counts;
pub mod context;
pub mod gemv;
pub mod kernel;
pub mod matrix;
pub mod pack_blocks;
mod panic;
mod ptr;
pub mod status;
pub mod version;
pub mod weight;
// Last, so that the header keeps the order of the items before it.
pub mod binding;
pub mod blob;
pub mod footprint;
pub mod import;
pub mod tune;
pub mod upload;
