//! The probe of the tensor-core path (`shaders/gemv_q4_coop.comp`,
//! `shaders/gemm_q4_coop.comp`, `VK_KHR_cooperative_matrix`): it checks that the device's
//! fragment layout is the one the kernels and `layout::coop` are written for (what a
//! device must offer for them: `vk::features`; the shapes per call: `vk::coop_shapes`).

use super::device::Device;
use super::kernel::Kernel;
use super::memory::{Buffer, MemoryKind};
use super::shaders;
use super::submit::{record_barrier, QueueLock, Submitter, SHADER_TO_HOST};
use crate::error::{Error, Result};
use crate::layout::coop::{a_element, b_element, c_element};
use std::sync::Arc;

/// Words of the probe's output: A (256), B (128), C (128) and the three lengths.
const PROBE_WORDS: usize = 515;

/// Runs `shaders/coop_probe.comp` (through the context's `submitter`) and checks that
/// every fragment element of A, B and C sits where `layout::coop` puts it: `Ok`, or an
/// error that says what differs (or which Vulkan call failed); the context then uses the
/// SIMT kernels.
pub fn probe(
    device: &Arc<Device>,
    submitter: &mut Submitter,
    lock: Option<&QueueLock>,
) -> Result<()> {
    let out = Buffer::new(
        device,
        4 * PROBE_WORDS as u64,
        MemoryKind::Readback,
        "q4vk coop_probe output",
    )?;
    let kernel = Kernel::new(device, shaders::COOP_PROBE, "coop_probe", 1, 0, 1)?;
    let set = kernel.set(&[&out])?;
    submitter.run(lock, |cmd| {
        let [src, dst] = SHADER_TO_HOST;
        // SAFETY: q4vk's own command buffer, recording; the set's buffer lives until the
        // submission was waited for.
        unsafe {
            kernel.record(cmd, set, &[], 1);
            record_barrier(&device.device, cmd, src, dst);
        }
        Ok(())
    })?;
    let mut bytes = vec![0u8; 4 * PROBE_WORDS];
    out.read(0, &mut bytes);
    let v: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .collect();
    if mapping_matches(&v) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "fragment layout differs from the kernel's: lengths {:?}, invocation 1's A elements {:?}, B {:?}, C {:?}",
        &v[512..515],
        &v[8..16],
        &v[260..264],
        &v[388..392]
    )))
}

/// Whether the probe's output `v` is the fragment layout of `layout::coop`.
pub fn mapping_matches(v: &[f32]) -> bool {
    if v.len() < PROBE_WORDS || v[512..515] != [8.0, 4.0, 4.0] {
        return false;
    }
    (0..32).all(|lane| {
        (0..8).all(|e| {
            let (r, k) = a_element(lane, e);
            v[8 * lane + e] == (16 * r + k) as f32
        }) && (0..4).all(|e| {
            let (k, n) = b_element(lane, e);
            let (r, c) = c_element(lane, e);
            v[256 + 4 * lane + e] == (8 * k + n) as f32
                && v[384 + 4 * lane + e] == (8 * r + c) as f32
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the probe writes on a device with `layout::coop`'s fragment layout.
    fn expected() -> Vec<f32> {
        let mut v = vec![0.0; PROBE_WORDS];
        for lane in 0..32 {
            for e in 0..8 {
                let (r, k) = a_element(lane, e);
                v[8 * lane + e] = (16 * r + k) as f32;
            }
            for e in 0..4 {
                let (k, n) = b_element(lane, e);
                v[256 + 4 * lane + e] = (8 * k + n) as f32;
                let (r, c) = c_element(lane, e);
                v[384 + 4 * lane + e] = (8 * r + c) as f32;
            }
        }
        v[512..515].copy_from_slice(&[8.0, 4.0, 4.0]);
        v
    }

    #[test]
    fn the_probe_accepts_only_the_expected_layout() {
        let good = expected();
        assert!(mapping_matches(&good));
        // Every element of A, B and C is checked: swapping any two values is refused.
        for i in (0..512).step_by(7) {
            let mut bad = good.clone();
            bad.swap(i, (i + 1) % 512);
            assert!(!mapping_matches(&bad), "swap at {i} accepted");
        }
        let mut wrong_length = good.clone();
        wrong_length[512] = 16.0;
        assert!(!mapping_matches(&wrong_length));
    }
}
