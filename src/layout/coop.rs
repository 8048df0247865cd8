//! q4vk's tensor-core layout of a Q4 matrix, for `shaders/gemv_q4_coop.comp` on devices
//! whose cooperative-matrix fragments are laid out as [`a_element`], [`b_element`] and
//! [`c_element`] say (checked at context creation by `vk::coop::probe`):
//!
//! * weights: tiles of 16 rows; per tile, quads of 64 k (four k-steps of 16 k); per quad,
//!   32 invocations × one uvec4 (component j: k-step j of the quad). The 32-bit word of
//!   invocation L and k-step holds the eight codes of L's A fragment elements, element e in
//!   nibble `ELEMENT_NIBBLE[e]`. One subgroup-wide uvec4 load fetches four k-steps of a
//!   tile, 512 contiguous bytes; K is padded to whole stages of 128 k (the kernel's step).
//! * scales: f32, `[tile][group][16 rows]` (f16 scales widened: exact);
//! * zero points: bytes, `[tile][group][16 rows]`, padded to 4 bytes (absent when
//!   symmetric).
//!
//! Rows past n (to a whole tile) and k past K (to a whole stage) hold the zero point (u − z
//! = 0), padded groups scale 0: padding adds nothing. Groups are counted to the padded K, so
//! every block of the last stage has a scale.

use crate::quant::q4::{Q4Data, Q4Shape};
use std::ops::Range;

/// Rows per tile (the M of the 16 × 8 × 16 MMA).
pub(crate) const TILE_ROWS: usize = 16;
/// k per stage (eight k-steps; what a subgroup loads per tile and step).
pub(crate) const STAGE_K: usize = 128;
/// Bytes of one tile's stage.
pub(crate) const STAGE_BYTES: usize = TILE_ROWS * STAGE_K / 2;

/// The nibble of its invocation's word that holds A element e. The kernel decodes nibble
/// pairs (0, 4), (2, 6) (low nibbles: the first row) into elements (0, 1), (2, 3) and
/// (1, 5), (3, 7) (high nibbles: the second row) into (4, 5), (6, 7).
pub(crate) const ELEMENT_NIBBLE: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];

/// (row, k) of element `e` (0..8) of invocation `lane`'s 16 × 16 A fragment.
pub fn a_element(lane: usize, e: usize) -> (usize, usize) {
    let (g, c) = (lane / 4, lane % 4);
    (g + 8 * (e / 4), 2 * c + e % 2 + 8 * ((e / 2) % 2))
}

/// (k, column) of element `e` (0..4) of invocation `lane`'s 16 × 8 B fragment.
pub fn b_element(lane: usize, e: usize) -> (usize, usize) {
    let (g, c) = (lane / 4, lane % 4);
    (2 * c + e % 2 + 8 * (e / 2), g)
}

/// (row, column) of element `e` (0..4) of invocation `lane`'s 16 × 8 accumulator.
pub fn c_element(lane: usize, e: usize) -> (usize, usize) {
    let (g, c) = (lane / 4, lane % 4);
    (g + 8 * (e / 2), 2 * c + e % 2)
}

/// Geometry of the tensor-core layout of one matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoopLayout {
    /// Stages of 128 k per tile (K padded).
    pub stages: usize,
    /// Scale groups per row, counted to the padded K (1 per channel).
    pub groups: usize,
    /// log2(group size / 32); 31 per channel.
    pub group_shift: u32,
    /// k per block of the kernel (one scale, one x exponent): min(group, 128).
    pub block: u32,
    /// Group size in k (K per channel).
    group_size: usize,
}

impl CoopLayout {
    /// The layout of a Q4 shape.
    pub fn of(shape: &Q4Shape) -> CoopLayout {
        let stages = shape.k.div_ceil(STAGE_K).max(1);
        let (groups, group_shift, block, group_size) = if shape.per_channel {
            (1, 31, STAGE_K as u32, shape.k)
        } else {
            let g = shape.group_size;
            (
                (stages * STAGE_K).div_ceil(g),
                (g / 32).trailing_zeros(),
                g.min(STAGE_K) as u32,
                g,
            )
        };
        CoopLayout {
            stages,
            groups,
            group_shift,
            block,
            group_size,
        }
    }

    /// Weight bytes of one tile.
    pub fn tile_bytes(&self) -> usize {
        self.stages * STAGE_BYTES
    }

    /// Weight, scale and zero-point bytes of one tile (what a part's size is made of).
    pub fn tile_device_bytes(&self, zero_points: bool) -> usize {
        self.tile_bytes() + TILE_ROWS * self.groups * (4 + zero_points as usize)
    }

    /// Bytes of the packed weights of `rows` rows (whole tiles).
    pub fn weights_bytes(&self, rows: usize) -> usize {
        rows.div_ceil(TILE_ROWS) * self.tile_bytes()
    }

    /// Bytes of the f32 scales of `rows` rows (whole tiles).
    pub fn scales_bytes(&self, rows: usize) -> usize {
        rows.div_ceil(TILE_ROWS) * self.groups * TILE_ROWS * 4
    }

    /// Bytes of the zero points of `rows` rows (whole tiles), padded to 4 (0 when
    /// symmetric).
    pub fn zeros_bytes(&self, zero_points: bool, rows: usize) -> usize {
        if zero_points {
            (rows.div_ceil(TILE_ROWS) * self.groups * TILE_ROWS).next_multiple_of(4)
        } else {
            0
        }
    }

    fn group_of(&self, k: usize) -> usize {
        (k / self.group_size).min(self.groups - 1)
    }

    /// The tiles of a row range that starts on a tile.
    fn tiles(rows: &Range<usize>) -> Range<usize> {
        debug_assert_eq!(rows.start % TILE_ROWS, 0);
        rows.start / TILE_ROWS..rows.end.div_ceil(TILE_ROWS)
    }

    /// Writes the packed weights of `rows` (starting on a tile) into `out`, exactly
    /// [`weights_bytes`](Self::weights_bytes) long; every byte is written once (the
    /// destination may be write-combined mapped memory).
    pub fn pack_weights(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        let shape = &data.shape;
        let row_bytes = shape.row_bytes();
        let code = |row: usize, k: usize| -> u32 {
            if row >= shape.n {
                return 8;
            }
            if k >= shape.k {
                return zero_point(data, row, self.group_of(k.min(shape.k - 1)));
            }
            let byte = data.weight[row * row_bytes + k / 2];
            u32::from((byte >> (4 * (k % 2))) & 0x0f)
        };
        debug_assert_eq!(out.len(), self.weights_bytes(rows.len()));
        let mut words = out.chunks_exact_mut(4);
        for tile in Self::tiles(&rows) {
            for quad in 0..self.stages * STAGE_K / 64 {
                for lane in 0..32 {
                    for j in 0..4 {
                        let k0 = quad * 64 + j * 16;
                        let mut word = 0u32;
                        for (e, &nibble) in ELEMENT_NIBBLE.iter().enumerate() {
                            let (r, kk) = a_element(lane, e);
                            word |= code(tile * TILE_ROWS + r, k0 + kk) << (4 * nibble);
                        }
                        let dst = words.next().expect("sized by weights_bytes");
                        dst.copy_from_slice(&word.to_le_bytes());
                    }
                }
            }
        }
    }

    /// Writes the f32 scales of `rows` (starting on a tile), `[tile][group][16]`, into
    /// `out`, exactly [`scales_bytes`](Self::scales_bytes) long.
    pub fn pack_scales(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        let shape = &data.shape;
        let stored = shape.groups();
        debug_assert_eq!(out.len(), self.scales_bytes(rows.len()));
        let mut values = out.chunks_exact_mut(4);
        for tile in Self::tiles(&rows) {
            for g in 0..self.groups {
                for r in 0..TILE_ROWS {
                    let row = tile * TILE_ROWS + r;
                    let s = if row < shape.n && g < stored {
                        data.scale(row * stored + g)
                    } else {
                        0.0
                    };
                    let dst = values.next().expect("sized by scales_bytes");
                    dst.copy_from_slice(&s.to_le_bytes());
                }
            }
        }
    }

    /// Writes the f32 offsets (`offsets`: `[n][groups]`, one per scale of `data`) of `rows`
    /// (starting on a tile), `[tile][group][16]`, into `out`, exactly
    /// [`scales_bytes`](Self::scales_bytes) long; padded rows and groups get 0.
    pub fn pack_offsets(&self, data: &Q4Data, offsets: &[f32], rows: Range<usize>, out: &mut [u8]) {
        let stored = data.shape.groups();
        let mut values = out.chunks_exact_mut(4);
        for tile in Self::tiles(&rows) {
            for g in 0..self.groups {
                for r in 0..TILE_ROWS {
                    let row = tile * TILE_ROWS + r;
                    let o = if row < data.shape.n && g < stored {
                        offsets[row * stored + g]
                    } else {
                        0.0
                    };
                    let dst = values.next().expect("sized by scales_bytes");
                    dst.copy_from_slice(&o.to_le_bytes());
                }
            }
        }
    }

    /// Writes the zero points of `rows` (starting on a tile), `[tile][group][16]` bytes,
    /// into `out`, exactly [`zeros_bytes`](Self::zeros_bytes) long (empty when symmetric),
    /// padding included.
    pub fn pack_zeros(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        if !data.shape.zero_points {
            return;
        }
        let mut bytes = out.iter_mut();
        for tile in Self::tiles(&rows) {
            for g in 0..self.groups {
                for r in 0..TILE_ROWS {
                    let row = tile * TILE_ROWS + r;
                    let z = if row < data.shape.n {
                        zero_point(data, row, g.min(data.shape.groups() - 1))
                    } else {
                        8
                    };
                    *bytes.next().expect("sized by zeros_bytes") = z as u8;
                }
            }
        }
        bytes.for_each(|b| *b = 8);
    }
}

/// Zero point of (row, group): stored, or 8 when symmetric.
fn zero_point(data: &Q4Data, row: usize, group: usize) -> u32 {
    if data.shape.zero_points {
        u32::from(data.zeros[row * data.shape.groups() + group])
    } else {
        8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::q4::ScaleType;
    use std::borrow::Cow;

    /// Random Q4 data (a small LCG; every code, scale and zero point differs).
    fn data(n: usize, k: usize, group: i32, zeros: bool) -> Q4Data<'static> {
        let shape = Q4Shape::new(n as u64, k as u64, group, zeros as u32).unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let weight: Vec<u8> = (0..n * shape.row_bytes()).map(|_| next() as u8).collect();
        let groups = shape.groups();
        let scales: Vec<u8> = (0..n * groups)
            .flat_map(|_| half::f16::from_f32(0.001 * (1 + next() % 1000) as f32).to_le_bytes())
            .collect();
        let zeros = if zeros {
            (0..n * groups).map(|_| (next() % 16) as u8).collect()
        } else {
            Vec::new()
        };
        Q4Data {
            shape,
            weight: Cow::Owned(weight),
            scale_type: ScaleType::F16,
            scales: Cow::Owned(scales),
            zeros: Cow::Owned(zeros),
        }
    }

    /// Undoes the layout: the f32 weight (row, k) the kernel sees, s · (u − z), from the
    /// packed buffers, walking them as the kernel's invocations do.
    fn unpack(l: &CoopLayout, n: usize, w: &[u8], s: &[u8], z: &[u8]) -> Vec<Vec<f32>> {
        let tiles = n.div_ceil(TILE_ROWS);
        let k_pad = l.stages * STAGE_K;
        let mut out = vec![vec![f32::NAN; k_pad]; tiles * TILE_ROWS];
        for tile in 0..tiles {
            for stage in 0..l.stages {
                for ks in 0..STAGE_K / 16 {
                    for lane in 0..32 {
                        let quad = (tile * l.stages + stage) * (STAGE_K / 64) + ks / 4;
                        let word_at = (quad * 32 + lane) * 16 + (ks % 4) * 4;
                        let word = u32::from_le_bytes(w[word_at..word_at + 4].try_into().unwrap());
                        for (e, &nib) in ELEMENT_NIBBLE.iter().enumerate() {
                            let (r, kk) = a_element(lane, e);
                            let k = stage * STAGE_K + ks * 16 + kk;
                            let g = if l.group_shift == 31 {
                                0
                            } else {
                                (k >> 5) >> l.group_shift
                            };
                            let at = (tile * l.groups + g) * TILE_ROWS + r;
                            let scale =
                                f32::from_le_bytes(s[4 * at..4 * at + 4].try_into().unwrap());
                            let zero = if z.is_empty() { 8.0 } else { z[at] as f32 };
                            let u = ((word >> (4 * nib)) & 15) as f32;
                            out[tile * TILE_ROWS + r][k] = scale * (u - zero);
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn fragments_partition_the_tiles() {
        let mut a = [[false; 16]; 16];
        let mut b = [[false; 8]; 16];
        let mut c = [[false; 8]; 16];
        for lane in 0..32 {
            for e in 0..8 {
                let (r, k) = a_element(lane, e);
                assert!(!a[r][k]);
                a[r][k] = true;
            }
            for e in 0..4 {
                let (k, n) = b_element(lane, e);
                assert!(!b[k][n]);
                b[k][n] = true;
                let (r, col) = c_element(lane, e);
                assert!(!c[r][col]);
                c[r][col] = true;
                // The kernel pairs accumulator elements (0, 1) and (2, 3) as the hi and lo
                // columns of one activation row, on the rows of A elements 0..4 and 4..8.
                assert_eq!(r, a_element(lane, 4 * (e / 2)).0);
            }
        }
        assert!(a.iter().flatten().chain(b.iter().flatten()).all(|&x| x));
        assert!(c.iter().flatten().all(|&x| x));
    }

    #[test]
    fn unpacking_recovers_every_weight() {
        for &(n, k, group, zeros) in &[
            (16, 128, 128, false),
            (33, 100, 32, true),
            (7, 300, 64, false),
            (40, 520, 256, true),
            (17, 1000, -1, true),
            (5, 40, 32, false),
        ] {
            let d = data(n, k, group, zeros);
            let l = CoopLayout::of(&d.shape);
            let mut w = vec![0xAA; l.weights_bytes(n)];
            l.pack_weights(&d, 0..n, &mut w);
            let mut s = vec![0xAA; l.scales_bytes(n)];
            l.pack_scales(&d, 0..n, &mut s);
            let mut z = vec![0xAA; l.zeros_bytes(zeros, n)];
            l.pack_zeros(&d, 0..n, &mut z);
            assert_eq!(w.len(), n.div_ceil(TILE_ROWS) * l.tile_bytes());
            let got = unpack(&l, n, &w, &s, &z);
            let groups = d.shape.groups();
            for (row, got_row) in got.iter().enumerate() {
                for (kk, &v) in got_row.iter().enumerate() {
                    let want = if row >= n || kk >= k {
                        0.0
                    } else {
                        let g = if d.shape.per_channel {
                            0
                        } else {
                            kk / d.shape.group_size
                        };
                        let u =
                            (d.weight[row * d.shape.row_bytes() + kk / 2] >> (4 * (kk % 2))) & 15;
                        let zero = if zeros {
                            d.zeros[row * groups + g] as f32
                        } else {
                            8.0
                        };
                        d.scale(row * groups + g) * (u as f32 - zero)
                    };
                    assert_eq!(v, want, "n {n} k {k} group {group} row {row} k {kk}");
                }
            }
        }
    }
}
