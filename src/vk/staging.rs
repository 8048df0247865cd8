//! The buffers `q4vk_gemv` stages x and y in and runs its pre-passes on, held by the
//! context between calls.

use super::memory::Buffer;

/// Buffers of `q4vk_gemv`, grown on demand and reused: host-visible x and y, and the
/// device-local workspace of the pre-passes.
#[derive(Default)]
pub struct GemvBuffers {
    pub(super) x: Option<Buffer>,
    pub(super) y: Option<Buffer>,
    pub(super) workspace: Option<Buffer>,
}

impl GemvBuffers {
    /// Bytes held (x, y and the workspace).
    pub fn bytes(&self) -> u64 {
        self.held().map(|b| b.size).sum()
    }

    /// Bytes of device memory held: their allocations.
    pub fn allocated_bytes(&self) -> u64 {
        self.held().map(|b| b.allocated).sum()
    }

    /// The buffers held.
    fn held(&self) -> impl Iterator<Item = &Buffer> {
        [&self.x, &self.y, &self.workspace]
            .into_iter()
            .flat_map(|b| b.as_ref())
    }
}
