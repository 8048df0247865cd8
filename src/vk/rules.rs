//! What the kernel rules (`vk::gemv_plan`) read of a context, as plain data: the device's
//! class, the tuning row of that class, the caller's fixed choices, which kernel families
//! the context runs and the SIMT GEMV's workgroup shape. A context builds it once; tools
//! and tests build it for any device class, real or made up, without Vulkan.

use super::pipeline::Tuning;
use crate::error::Result;
use crate::plan::blocks_gemv::{BlocksGemvShape, BlocksGemvTable};
use crate::plan::tuned::{SimtGroup, TUNED_BLOCKS_CLASS};
use crate::plan::tuned_gemm::TunedGemmTiles;
use crate::plan::{DeviceClass, DeviceTuning, FragmentShape, Overrides};

/// The integer dot-product GEMV's shapes on x rounded to bytes, by the matrix's class as
/// the row's `plan::BytesGemv` (which holds the classes' bounds) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BytesShapes {
    /// Matrices of long rows.
    pub long_rows: Tuning,
    /// Matrices of many short rows.
    pub many_rows: Tuning,
    /// As `many_rows`, in passes of 8 activation rows on the shorter rows.
    pub many_rows_at_8: Tuning,
    /// Matrices of fewer short rows.
    pub few_rows: Tuning,
}

impl BytesShapes {
    /// The shapes, for edits that apply to each.
    pub fn each_mut(&mut self) -> [&mut Tuning; 4] {
        [
            &mut self.long_rows,
            &mut self.many_rows,
            &mut self.many_rows_at_8,
            &mut self.few_rows,
        ]
    }
}

/// The inputs of every kernel decision of a context (`vk::gemv::decide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// What the device is.
    pub class: DeviceClass,
    /// The tuning row of the device's class.
    pub row: &'static DeviceTuning,
    /// The portable SIMT kernels (no subgroup operations) run instead of the subgroup ones.
    pub portable: bool,
    /// The SIMT GEMV runs on x in 8-bit digits with packed integer dot products
    /// (`vk::int_dot`), behind a pre-pass into a workspace, where a call has one and the
    /// tuning row says x in digits pays (`IntDotReach::pays`; on x rounded to bytes, where
    /// a call allows it, `IntDotReach::bytes_pay`).
    pub int_dot: bool,
    /// With `int_dot`: wherever a call has a workspace, whatever the tuning row says
    /// (`IntDot::Forced`: tests and experiments).
    pub int_dot_everywhere: bool,
    /// The SIMT GEMV's workgroup shape per group of calls (`plan::tuned::SimtGroup::index`):
    /// the row's shape of the group's class of row length (`DeviceTuning::short_rows_simt_gemv`,
    /// `simt_gemv`) unless a tuning blob chose another for the group ([`Rules::simt_for`]).
    pub simt_groups: [Tuning; 8],
    /// The integer dot-product GEMV's shape where the row gives it one
    /// (`DeviceTuning::int_dot_gemv`) or a tuning blob chose one; else the f32 GEMV's of
    /// the matrix's class.
    pub int_dot_simt: Option<Tuning>,
    /// The integer dot-product GEMV's shapes on x rounded to bytes where the row gives them
    /// (`DeviceTuning::bytes_gemv`: long rows, many short rows, few short rows; else
    /// [`Rules::int_dot_simt_for`]'s).
    pub bytes_simt: Option<BytesShapes>,
    /// `simt_groups` came from a tuning blob (`vk::tune`), not the device's row.
    pub simt_tuned: bool,
    /// `int_dot_simt` came from a tuning blob.
    pub int_dot_tuned: bool,
    /// The GEMV on GGUF blocks' shapes per class of block type (`DeviceTuning::blocks_gemv`),
    /// the one-pass shape of `plan::tuned::TUNED_BLOCKS_CLASS` replaced where a tuning blob
    /// chose another.
    pub blocks_gemv: BlocksGemvTable,
    /// `blocks_gemv`'s tuned class came from a tuning blob.
    pub blocks_tuned: bool,
    /// The SIMT GEMM's tiles a tuning blob chose per prefill m (on the SIMT layout; none
    /// without a blob): where one applies to a call's m it replaces the row's
    /// (`DeviceTuning::simt_gemm_tiles`).
    pub simt_gemm_tuned: TunedGemmTiles,
    /// The GEMM on GGUF blocks' tiles a tuning blob chose per prefill m, as
    /// `simt_gemm_tuned` (over `DeviceTuning::blocks_gemm_tiles`).
    pub blocks_gemm_tuned: TunedGemmTiles,
    /// The fragment shape of the tensor-core GEMM on the SIMT layout
    /// (`vk::coop_tiles`), where the device offers a usable one and the context enabled
    /// cooperative matrices.
    pub coop_tiles: Option<FragmentShape>,
    /// The context uses the tensor-core layout (its probe found the fragment layout the
    /// kernels with fragments in registers assume): GGUF blocks run their tensor-core GEMM
    /// with fragments in registers too.
    pub coop_fragments: bool,
    /// The caller's fixed choices, checked ([`Rules::set_overrides`]).
    overrides: Overrides,
}

impl Rules {
    /// The rules on a device of `class`: its class's tuning row, the SIMT GEMV's shape from
    /// that row (`portable`: the portable kernels'), the integer dot-product GEMV where
    /// `int_dot` (where it pays), no tensor-core GEMM on the SIMT layout and no fixed
    /// choices.
    pub fn for_class(class: DeviceClass, portable: bool, int_dot: bool) -> Rules {
        Self::with_row(class, DeviceTuning::for_class(&class), portable, int_dot)
    }

    /// [`Rules::for_class`] with another tuning row than the class's (comparisons: a
    /// device treated as one q4vk has no row for).
    pub fn with_row(
        class: DeviceClass,
        row: &'static DeviceTuning,
        portable: bool,
        int_dot: bool,
    ) -> Rules {
        let shape =
            |s| Tuning::for_device(portable, s, class.subgroup_size, class.min_subgroup_size);
        let classes = [shape(row.short_rows_simt_gemv()), shape(&row.simt_gemv)];
        Rules {
            class,
            row,
            portable,
            int_dot,
            int_dot_everywhere: false,
            simt_groups: SimtGroup::ALL.map(|g| classes[usize::from(g.long_rows)]),
            int_dot_simt: row.int_dot_gemv.as_ref().map(shape),
            bytes_simt: row.bytes_gemv.as_ref().map(|b| BytesShapes {
                long_rows: shape(&b.long_rows),
                many_rows: shape(&b.many_rows),
                many_rows_at_8: shape(&b.many_rows_at_8),
                few_rows: shape(&b.few_rows),
            }),
            simt_tuned: false,
            int_dot_tuned: false,
            blocks_gemv: row.blocks_gemv,
            blocks_tuned: false,
            simt_gemm_tuned: TunedGemmTiles::default(),
            blocks_gemm_tuned: TunedGemmTiles::default(),
            coop_tiles: None,
            coop_fragments: false,
            overrides: Overrides::default(),
        }
    }

    /// The SIMT GEMV's workgroup shape for calls of several activation rows on matrices of
    /// short rows and few rows (the first group); also the shape whose workgroup and
    /// subgroup size the GEMV on GGUF blocks takes.
    pub fn simt(&self) -> &Tuning {
        &self.simt_groups[0]
    }

    /// The SIMT GEMV's workgroup shape for a call of `m` activation rows on an `n` × `k`
    /// matrix, by its tuning group (`plan::tuned::SimtGroup`).
    pub fn simt_for(&self, n: usize, k: u64, m: u32) -> &Tuning {
        &self.simt_groups[SimtGroup::of(n, k, m).index()]
    }

    /// Sets the SIMT GEMV's shape of every group of the class of long rows (`long_rows`)
    /// or of short rows to `shape`.
    pub fn set_simt_class(&mut self, long_rows: bool, shape: Tuning) {
        for (group, slot) in SimtGroup::ALL.iter().zip(&mut self.simt_groups) {
            if group.long_rows == long_rows {
                *slot = shape;
            }
        }
    }

    /// The integer dot-product GEMV's workgroup shape for a call of `m` activation rows on
    /// an `n` × `k` matrix.
    pub fn int_dot_simt_for(&self, n: usize, k: u64, m: u32) -> &Tuning {
        self.int_dot_simt
            .as_ref()
            .unwrap_or_else(|| self.simt_for(n, k, m))
    }

    /// Whether the integer dot-product GEMV's shape on x in digits came from a tuning blob:
    /// its own shape's, or where it has none the f32 GEMV's it takes.
    pub fn int_dot_shape_tuned(&self) -> bool {
        match self.int_dot_simt {
            Some(_) => self.int_dot_tuned,
            None => self.simt_tuned,
        }
    }

    /// The integer dot-product GEMV's workgroup shape on x rounded to bytes for a call of
    /// `m` activation rows on an `n` × `k` matrix, in passes of `pass_rows` of them.
    pub fn bytes_simt_for(&self, n: usize, k: u64, m: u32, pass_rows: u32) -> &Tuning {
        let (Some(s), Some(row)) = (&self.bytes_simt, &self.row.bytes_gemv) else {
            return self.int_dot_simt_for(n, k, m);
        };
        match (
            crate::plan::tuned::has_long_rows(k),
            n >= row.many_rows_from,
        ) {
            (true, _) => &s.long_rows,
            (false, true) if pass_rows >= 8 && k < row.many_rows_at_8_below_k => &s.many_rows_at_8,
            (false, true) => &s.many_rows,
            (false, false) => &s.few_rows,
        }
    }

    /// Takes `shape` as the one-pass shape of the GEMV on GGUF blocks of tuning's class
    /// (`plan::tuned::TUNED_BLOCKS_CLASS`) at every height (a candidate, or a blob's choice).
    pub fn set_tuned_blocks_shape(&mut self, shape: BlocksGemvShape) {
        let class = self.blocks_gemv.of_mut(TUNED_BLOCKS_CLASS);
        class.few_rows = shape;
        class.many_rows = shape;
    }

    /// The caller's fixed choices.
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// Replaces one or more fixed choices, checked (`Overrides::checked`); on an error
    /// nothing changes.
    pub fn set_overrides(&mut self, edit: impl FnOnce(&mut Overrides)) -> Result<()> {
        let mut next = self.overrides;
        edit(&mut next);
        self.overrides = next.checked()?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{DeviceClass, Family};

    /// The rules of an NVIDIA-like class (subgroups of 32, 48 KiB of shared memory) with
    /// `row`, the integer dot-product GEMV on.
    pub(crate) fn rules(row: &'static DeviceTuning) -> Rules {
        let class = DeviceClass {
            family: Family::Nvidia,
            vendor: 0x10de,
            cpu: false,
            subgroup_size: 32,
            min_subgroup_size: 32,
            max_shared: 49152,
            max_workgroup: 1024,
            max_storage_range: 1 << 32,
            max_groups: [65535; 2],
            sm_count: None,
        };
        Rules::with_row(class, row, false, true)
    }

    #[test]
    fn x_in_bytes_takes_a_shape_per_matrix_class() {
        let r = rules(&crate::plan::tuning::NVIDIA);
        let b = crate::plan::tuning::NVIDIA.bytes_gemv.unwrap();
        let split = |n, k, m| r.bytes_simt_for(n, k, m, m).split;
        let rows = |n, k, m| r.bytes_simt_for(n, k, m, m).rows;
        assert_eq!(rows(1536, 8960, 8), b.long_rows.rows);
        assert_eq!(split(8960, 1536, 1), b.many_rows.split);
        assert_eq!(split(8960, 1536, 8), b.many_rows_at_8.split);
        assert_eq!(split(8192, 2048, 8), b.many_rows.split);
        assert_eq!(rows(2048, 2048, 8), b.few_rows.rows);
        assert_ne!(b.long_rows, b.few_rows);
        assert_ne!(b.many_rows, b.many_rows_at_8);
        // A row without them takes the digits' shape.
        let d = rules(&crate::plan::tuning::DEFAULT);
        assert_eq!(
            d.bytes_simt_for(2048, 2048, 1, 1),
            d.int_dot_simt_for(2048, 2048, 1)
        );
        assert_eq!(
            d.bytes_simt_for(1536, 8960, 8, 8),
            d.int_dot_simt_for(1536, 8960, 8)
        );
    }
}
