//! The Vulkan runtime (ash, loaded at run time): instance and device (q4vk's own or the
//! host's), memory, pipelines, submission, matrices on the device and GEMV dispatch.
//!
//! Lifetimes: every object holds an `Arc` of what it was created from (buffer → device →
//! instance), so destruction always runs in the right order. Objects the host lent (an
//! adopted instance, device or queue) are never destroyed.

pub mod binding;
pub mod context;
pub mod coop;
pub mod coop_shapes;
pub mod coop_tiles;
pub mod debug_name;
pub mod device;
pub mod export;
pub mod export_blocks;
pub mod features;
pub mod gemv;
mod gemv_host;
mod gemv_plan;
pub mod instance;
pub mod int_dot;
pub mod kernel;
pub mod liveness;
pub mod log;
pub mod matrix;
pub mod matrix_blob;
pub mod matrix_form;
pub mod memory;
mod multi;
mod params;
pub mod pipeline;
mod record;
pub mod rules;
pub mod shaders;
mod staging;
pub mod stats;
pub mod submit;
pub mod tune;
pub mod x_fragments;
pub mod xy_sets;
