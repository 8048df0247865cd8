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
        [&self.x, &self.y, &self.workspace]
            .iter()
            .flat_map(|b| b.as_ref())
            .map(|b| b.size)
            .sum()
    }
}
