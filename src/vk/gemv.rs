//! The fused GEMV (or GEMM) as one module: a call's parameters (`vk::params`), its
//! recording into a command buffer (`vk::record`), the host-memory GEMV (`vk::gemv_host`)
//! and the rules that choose its kernel (`vk::gemv_plan`). Nothing inside `vk` imports
//! this module; it is the door for the rest of the crate, the tests and the bench.

pub use super::gemv_host::{gemv_host, gemv_host_with, HostX};
pub use super::gemv_plan::{
    coop_gemv_shape, decide, int_dot_gemv_up_to, prepare, rounds_x, runs_gemm, runs_int_dot,
    simt_gemm_shape, simt_gemv_up_to, workspace_bytes, workspace_key, Choice, KernelChoice,
    PrepassChoice, Room,
};
pub use super::multi::{record_multi, MultiCall, MAX_CALLS};
pub use super::params::{
    check_m, dispatch_grid, xy_extent, BufferRange, Epilogue, EpilogueOperands, GateActivation,
    GemvParams, XRounding, XyExtent, MAX_M,
};
pub use super::record::{
    check_params, record, record_epilogue, record_validated, record_x_fragments, validate,
    validate_operands,
};
pub use super::staging::GemvBuffers;
