//! A CPU context: no Vulkan; GEMVs run on the host's cores with the best kernel family
//! the CPU has.

use super::kernels::Isa;

/// What a CPU context needs: its kernel family and thread cap.
pub struct CpuContext {
    /// Kernel family (chosen at creation from the CPU's features).
    pub isa: Isa,
    /// Most threads one GEMV uses.
    pub threads: usize,
    name: String,
}

impl CpuContext {
    /// A context using up to `threads` threads (≥ 1) and the CPU's best kernels.
    pub fn new(threads: usize) -> CpuContext {
        let isa = Isa::detect();
        let threads = threads.max(1);
        let plural = if threads == 1 { "" } else { "s" };
        CpuContext {
            isa,
            threads,
            name: format!("CPU ({}, {threads} thread{plural})", isa.name()),
        }
    }

    /// E.g. `CPU (AVX2+FMA, 2 threads)`.
    pub fn device_name(&self) -> &str {
        &self.name
    }
}
