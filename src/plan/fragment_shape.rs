//! The cooperative-matrix shapes a device offers the tensor-core GEMM on the SIMT layout
//! (`vk::coop_tiles`), as plain data: which the kernel can use, and which it takes.

/// An f16 × f16 → f32 subgroup-scope shape of `VK_KHR_cooperative_matrix`: A is `m` × `k`,
/// B `k` × `n`, C `m` × `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentShape {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
}

impl FragmentShape {
    /// Whether the kernel can use the shape: `k` a multiple of 8 that divides 32 (the
    /// smallest block; A and B are staged as 8 f16 per 16 bytes), `n` a multiple of 4 (C is
    /// stored 16-byte aligned) and `m` from 4 to 64.
    pub fn usable(&self) -> bool {
        [8, 16, 32].contains(&self.k)
            && self.n.is_multiple_of(4)
            && (4..=64).contains(&self.n)
            && (4..=64).contains(&self.m)
    }

    /// The shape the kernel takes of those a device offers: the usable one with the most
    /// products per multiply, the narrower of equals (fewer unused columns at small m).
    pub fn best(offered: &[FragmentShape]) -> Option<FragmentShape> {
        offered
            .iter()
            .filter(|s| s.usable())
            .max_by_key(|s| (s.m * s.n * s.k, std::cmp::Reverse(s.n)))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_usable_shape_is_taken() {
        let s = |m, n, k| FragmentShape { m, n, k };
        // lavapipe: 8 × 8 × 8 only.
        assert_eq!(FragmentShape::best(&[s(8, 8, 8)]), Some(s(8, 8, 8)));
        // NVIDIA lists 16 × 8 × 16 and 16 × 16 × 16 (and larger ones the kernel cannot use).
        assert_eq!(
            FragmentShape::best(&[s(16, 8, 16), s(16, 16, 16), s(16, 8, 8), s(128, 128, 32)]),
            Some(s(16, 16, 16))
        );
        // K must be a multiple of 8 dividing 32; N a multiple of 4.
        assert_eq!(FragmentShape::best(&[s(16, 16, 64), s(16, 6, 16)]), None);
        // Equal products: the narrower.
        assert_eq!(
            FragmentShape::best(&[s(8, 32, 16), s(32, 8, 16)]),
            Some(s(32, 8, 16))
        );
    }
}
