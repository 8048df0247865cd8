//! Paddle's int4/int8 weight layouts (`paddle.nn.quant.weight_quantize`, CPU kernel of
//! Paddle 3.3.1), as closed-form positions of each code `q[k][n]`:
//!
//! * **plain**: the signed codes row-major `[K][N]`; int4 two per byte along N, even n in
//!   the low nibble, two's complement.
//! * **Volta** (arch 70): row-major `[K][N]` with +8 (+128) bias; int4 words of 8
//!   consecutive n hold them in nibble order `p0 p2 p4 p6 p1 p3 p5 p7`; int8 words of 4
//!   consecutive n swap bytes 1 and 2.
//! * **CUTLASS** (arch 75..100): the mixed-GEMM "B" layout. Each column n owns, per tile
//!   of 64 k, a run of 32 bytes (int4) or 64 bytes (int8); runs of 4 (int4) or 2 (int8)
//!   neighbouring columns are interleaved tile by tile.
//!
//! Formulas and their derivation from Paddle's five-pass construction: see
//! `shared/reference/paddle-int4-spec.md` §4; the golden vectors pin them.

use super::tile::{CodeTile, TILE, TILE_COLS};
use super::transpose::{scatter_columns, BLOCK};
use crate::parallel::{for_each_span, for_each_unit};
use crate::simd::multiversion;

/// Bits per code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bits {
    /// 4-bit codes, stored biased by 8.
    Int4,
    /// 8-bit codes, stored biased by 128.
    Int8,
}

/// Which of Paddle's two byte arrangements an `arch` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// arch 70: row-major, interleaved inside words.
    Volta,
    /// arch 75, 80, 86, 89, 90, 100: CUTLASS mixed-GEMM B layout; needs K % 64 == 0.
    Cutlass,
}

/// A `[K][N]` code matrix in one of Paddle's layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaddleGeometry {
    /// Bits per code.
    pub bits: Bits,
    /// Byte arrangement of the permuted buffer.
    pub arrangement: Arrangement,
    /// Input features (rows of the `[K][N]` weight).
    pub k: usize,
    /// Output features; a multiple of 16.
    pub n: usize,
}

/// For byte b of an int4 CUTLASS column run: the tile rows of its low and high nibbles.
const CUTLASS_INT4_ROWS: [(usize, usize); 32] = {
    let mut rows = [(0, 0); 32];
    let mut b = 0;
    while b < 32 {
        let (word, low) = (b / 4, 2 * (b % 4));
        let first = 32 * (word / 4) + 2 * (word % 4);
        // Nibble d of the word holds row first + 8·(d mod 4) + d / 4.
        rows[b] = (
            first + 8 * (low % 4) + low / 4,
            first + 8 * ((low + 1) % 4) + (low + 1) / 4,
        );
        b += 1;
    }
    rows
};

/// For byte b of an int8 CUTLASS column run: the tile row it holds.
const CUTLASS_INT8_ROWS: [usize; 64] = {
    let mut rows = [0; 64];
    let mut b = 0;
    while b < 64 {
        let (word, e) = (b / 4, b % 4);
        let offset = [0, 8, 1, 9][e];
        rows[b] = 16 * (word / 4) + 2 * (word % 4) + offset;
        b += 1;
    }
    rows
};

/// Volta int4: byte j of a word holds columns `VOLTA_INT4_COLS[j]` (low, high) of 8.
const VOLTA_INT4_COLS: [(usize, usize); 4] = [(0, 2), (4, 6), (1, 3), (5, 7)];
/// Volta int8: byte j of a word holds column `VOLTA_INT8_COLS[j]` of 4.
const VOLTA_INT8_COLS: [usize; 4] = [0, 2, 1, 3];

#[inline(always)]
fn biased_nibble(q: i8) -> u8 {
    (q as u8).wrapping_add(8) & 0x0f
}

#[inline(always)]
fn unbiased_nibble(nibble: u8) -> i8 {
    (nibble & 0x0f) as i8 - 8
}

#[inline(always)]
fn biased_byte(q: i8) -> u8 {
    (q as u8) ^ 0x80
}

#[inline(always)]
fn unbiased_byte(byte: u8) -> i8 {
    (byte ^ 0x80) as i8
}

#[inline(always)]
fn plain_nibble(q: i8) -> u8 {
    (q as u8) & 0x0f
}

#[inline(always)]
fn signed_nibble(nibble: u8) -> i8 {
    ((nibble << 4) as i8) >> 4
}

multiversion! {
    /// Bytes of the CUTLASS runs of tile columns `c0..c0 + width`: `runs[b][j]` is byte b
    /// of column c0 + j (int4: 32 bytes of two biased nibbles; int8: 64 biased bytes).
    fn cutlass_runs<>(tile: &CodeTile, c0: usize, width: usize, int4: bool, runs: &mut [[u8; BLOCK]; 64]) {
        let segment = |r: usize| &tile.row(r)[c0..c0 + width];
        if int4 {
            for (bytes, &(lo, hi)) in runs.iter_mut().zip(&CUTLASS_INT4_ROWS) {
                for ((byte, &l), &h) in bytes.iter_mut().zip(segment(lo)).zip(segment(hi)) {
                    *byte = biased_nibble(l) | biased_nibble(h) << 4;
                }
            }
        } else {
            for (bytes, &r) in runs.iter_mut().zip(&CUTLASS_INT8_ROWS) {
                for (byte, &q) in bytes.iter_mut().zip(segment(r)) {
                    *byte = biased_byte(q);
                }
            }
        }
    }
}

impl PaddleGeometry {
    /// Bytes of the packed matrix (the same for the plain and the permuted layout).
    pub fn bytes(&self) -> usize {
        match self.bits {
            Bits::Int4 => self.k * self.n / 2,
            Bits::Int8 => self.k * self.n,
        }
    }

    /// Bytes of one row (one k) in the row-major arrangements (plain and Volta).
    pub fn row_bytes(&self) -> usize {
        match self.bits {
            Bits::Int4 => self.n / 2,
            Bits::Int8 => self.n,
        }
    }

    fn codes_per_byte(&self) -> usize {
        match self.bits {
            Bits::Int4 => 2,
            Bits::Int8 => 1,
        }
    }

    /// Work units of the permuted buffer: CUTLASS splits by blocks of 64 columns (each a
    /// contiguous byte range), Volta by blocks of 64 rows.
    pub fn layout_units(&self) -> usize {
        match self.arrangement {
            Arrangement::Cutlass => self.n.div_ceil(TILE),
            Arrangement::Volta => self.k.div_ceil(TILE),
        }
    }

    fn unit_extent(total: usize, unit: usize) -> (usize, usize) {
        let first = unit * TILE;
        (first, (total - first).min(TILE))
    }

    /// Bytes of layout unit `unit`.
    pub fn layout_unit_bytes(&self, unit: usize) -> usize {
        match self.arrangement {
            Arrangement::Cutlass => {
                Self::unit_extent(self.n, unit).1 * self.k / self.codes_per_byte()
            }
            Arrangement::Volta => Self::unit_extent(self.k, unit).1 * self.row_bytes(),
        }
    }

    /// Absolute byte offset of layout unit `unit`.
    fn layout_unit_base(&self, unit: usize) -> usize {
        match self.arrangement {
            Arrangement::Cutlass => unit * TILE * self.k / self.codes_per_byte(),
            Arrangement::Volta => unit * TILE * self.row_bytes(),
        }
    }

    /// Calls `f(k0, rows, n0, cols)` for every tile of the layout units in `span`.
    /// CUTLASS walks 64-row bands across the span's columns (so the `[K][N]` input is
    /// read in long row segments, not in 128-byte pieces a page apart); Volta walks each
    /// row block left to right.
    fn for_each_span_tile(
        &self,
        span: std::ops::Range<usize>,
        mut f: impl FnMut(usize, usize, usize, usize),
    ) {
        match self.arrangement {
            Arrangement::Cutlass => {
                let (first, end) = (span.start * TILE, (span.end * TILE).min(self.n));
                for k0 in (0..self.k).step_by(TILE) {
                    for n0 in (first..end).step_by(TILE_COLS) {
                        f(k0, TILE, n0, (end - n0).min(TILE_COLS));
                    }
                }
            }
            Arrangement::Volta => {
                for unit in span {
                    let (k0, rows) = Self::unit_extent(self.k, unit);
                    for n0 in (0..self.n).step_by(TILE_COLS) {
                        f(k0, rows, n0, (self.n - n0).min(TILE_COLS));
                    }
                }
            }
        }
    }

    /// Absolute byte offset of the CUTLASS run of column `n` in the 64-k tile starting at `k0`.
    #[inline(always)]
    fn cutlass_run(&self, k0: usize, n: usize) -> usize {
        let t = k0 / TILE;
        match self.bits {
            Bits::Int4 => 4 * ((n / 4) * (self.k / 2) + 32 * t + 8 * (n % 4)),
            Bits::Int8 => 4 * ((n / 2) * (self.k / 2) + 32 * t + 16 * (n % 2)),
        }
    }

    /// Writes the tile's codes into `out`, the part of the permuted buffer that starts at
    /// byte `base`.
    fn emit(&self, tile: &CodeTile, out: &mut [u8], base: usize) {
        match (self.arrangement, self.bits) {
            (Arrangement::Cutlass, bits) => {
                // Byte b of every column's run is built for 64 columns at once from whole
                // tile rows, then the runs are written column by column (a transpose).
                let run_len = if bits == Bits::Int4 { 32 } else { 64 };
                let mut runs = [[0u8; BLOCK]; 64]; // runs[b][j]: byte b of column c0 + j
                for c0 in (0..tile.cols).step_by(BLOCK) {
                    let width = (tile.cols - c0).min(BLOCK);
                    cutlass_runs(tile, c0, width, bits == Bits::Int4, &mut runs);
                    scatter_columns(&runs[..run_len], width, out, |j| {
                        self.cutlass_run(tile.k0, tile.n0 + c0 + j) - base
                    });
                }
            }
            (Arrangement::Volta, Bits::Int4) => {
                for r in 0..tile.rows {
                    let row = tile.row(r);
                    let start = (tile.k0 + r) * self.row_bytes() + tile.n0 / 2 - base;
                    let dst = &mut out[start..start + tile.cols / 2];
                    for (word, src) in dst.chunks_exact_mut(4).zip(row.chunks_exact(8)) {
                        for (byte, &(lo, hi)) in word.iter_mut().zip(&VOLTA_INT4_COLS) {
                            *byte = biased_nibble(src[lo]) | biased_nibble(src[hi]) << 4;
                        }
                    }
                }
            }
            (Arrangement::Volta, Bits::Int8) => {
                for r in 0..tile.rows {
                    let row = tile.row(r);
                    let start = (tile.k0 + r) * self.row_bytes() + tile.n0 - base;
                    let dst = &mut out[start..start + tile.cols];
                    for (word, src) in dst.chunks_exact_mut(4).zip(row.chunks_exact(4)) {
                        for (byte, &col) in word.iter_mut().zip(&VOLTA_INT8_COLS) {
                            *byte = biased_byte(src[col]);
                        }
                    }
                }
            }
        }
    }

    /// Reads the tile's codes from a whole permuted buffer. CUTLASS tiles must start at a
    /// multiple of 64 in k and span 64 rows; Volta tiles need `n0` and `cols` divisible by 8.
    pub fn gather(&self, qweight: &[u8], tile: &mut CodeTile) {
        let cols = tile.cols;
        match (self.arrangement, self.bits) {
            (Arrangement::Cutlass, bits) => {
                let mut columns = [[0i8; TILE]; TILE];
                for c0 in (0..cols).step_by(TILE) {
                    for (c, column) in (c0..cols).zip(columns.iter_mut()) {
                        let run = &qweight[self.cutlass_run(tile.k0, tile.n0 + c)..];
                        if bits == Bits::Int4 {
                            for (&byte, &(lo, hi)) in run[..32].iter().zip(&CUTLASS_INT4_ROWS) {
                                column[lo] = unbiased_nibble(byte);
                                column[hi] = unbiased_nibble(byte >> 4);
                            }
                        } else {
                            for (&byte, &r) in run[..64].iter().zip(&CUTLASS_INT8_ROWS) {
                                column[r] = unbiased_byte(byte);
                            }
                        }
                    }
                    tile.set_columns(c0, &columns);
                }
            }
            (Arrangement::Volta, Bits::Int4) => {
                let row_bytes = self.row_bytes();
                for r in 0..tile.rows {
                    let start = (tile.k0 + r) * row_bytes + tile.n0 / 2;
                    let src = &qweight[start..start + cols / 2];
                    for (word, dst) in src.chunks_exact(4).zip(tile.row_mut(r).chunks_exact_mut(8))
                    {
                        for (&byte, &(lo, hi)) in word.iter().zip(&VOLTA_INT4_COLS) {
                            dst[lo] = unbiased_nibble(byte);
                            dst[hi] = unbiased_nibble(byte >> 4);
                        }
                    }
                }
            }
            (Arrangement::Volta, Bits::Int8) => {
                let row_bytes = self.row_bytes();
                for r in 0..tile.rows {
                    let start = (tile.k0 + r) * row_bytes + tile.n0;
                    let src = &qweight[start..start + cols];
                    for (word, dst) in src.chunks_exact(4).zip(tile.row_mut(r).chunks_exact_mut(4))
                    {
                        for (&byte, &col) in word.iter().zip(&VOLTA_INT8_COLS) {
                            dst[col] = unbiased_byte(byte);
                        }
                    }
                }
            }
        }
    }

    /// Writes the tile into a slice of the plain layout that starts at row `first_row`.
    fn store_plain(&self, tile: &CodeTile, out: &mut [u8], first_row: usize) {
        let row_bytes = self.row_bytes();
        for r in 0..tile.rows {
            let start = (tile.k0 + r - first_row) * row_bytes + tile.n0 / self.codes_per_byte();
            let src = tile.row(r);
            match self.bits {
                Bits::Int4 => {
                    let dst = &mut out[start..start + tile.cols / 2];
                    for (byte, pair) in dst.iter_mut().zip(src.chunks_exact(2)) {
                        *byte = plain_nibble(pair[0]) | plain_nibble(pair[1]) << 4;
                    }
                }
                Bits::Int8 => {
                    for (byte, &q) in out[start..start + tile.cols].iter_mut().zip(src) {
                        *byte = q as u8;
                    }
                }
            }
        }
    }

    /// Reads the tile's codes from a whole plain buffer.
    fn gather_plain(&self, plain: &[u8], tile: &mut CodeTile) {
        let row_bytes = self.row_bytes();
        for r in 0..tile.rows {
            let start = (tile.k0 + r) * row_bytes + tile.n0 / self.codes_per_byte();
            match self.bits {
                Bits::Int4 => {
                    let src = &plain[start..start + tile.cols / 2];
                    for (pair, &byte) in tile.row_mut(r).chunks_exact_mut(2).zip(src) {
                        pair[0] = signed_nibble(byte);
                        pair[1] = signed_nibble(byte >> 4);
                    }
                }
                Bits::Int8 => {
                    let src = &plain[start..start + tile.cols];
                    for (q, &byte) in tile.row_mut(r).iter_mut().zip(src) {
                        *q = byte as i8;
                    }
                }
            }
        }
    }

    /// Fills the permuted buffer `out` (exactly [`Self::bytes`] long): `fill` produces the
    /// codes of each tile, which are then placed. Runs on up to `threads` threads.
    pub fn write_layout(
        &self,
        out: &mut [u8],
        threads: usize,
        fill: impl Fn(&mut CodeTile) + Sync,
    ) {
        debug_assert_eq!(out.len(), self.bytes());
        for_each_span(
            out,
            self.layout_units(),
            |u| self.layout_unit_bytes(u),
            threads,
            |span, slice| {
                let base = self.layout_unit_base(span.start);
                let mut tile = CodeTile::new();
                self.for_each_span_tile(span, |k0, rows, n0, cols| {
                    tile.place(k0, rows, n0, cols);
                    fill(&mut tile);
                    self.emit(&tile, slice, base);
                });
            },
        );
    }

    /// Permutes plain codes into this layout.
    pub fn permute(&self, plain: &[u8], out: &mut [u8], threads: usize) {
        self.write_layout(out, threads, |tile| self.gather_plain(plain, tile));
    }

    /// Recovers plain codes from this layout (the exact inverse of [`Self::permute`]).
    pub fn unpermute(&self, qweight: &[u8], plain: &mut [u8], threads: usize) {
        let row_bytes = self.row_bytes();
        for_each_rows(
            plain,
            self.k,
            self.n,
            row_bytes,
            threads,
            |tile, slice, first_row| {
                self.gather(qweight, tile);
                self.store_plain(tile, slice, first_row);
            },
        );
    }
}

/// Walks a row-major `[K][N]` output (`row_bytes` bytes per k) in blocks of 64 rows over up
/// to `threads` threads; `body(tile, block, first_row)` gets each tile's rectangle
/// and the block's slice, which starts at row `first_row`.
pub fn for_each_rows(
    out: &mut [u8],
    k: usize,
    n: usize,
    row_bytes: usize,
    threads: usize,
    body: impl Fn(&mut CodeTile, &mut [u8], usize) + Sync,
) {
    let rows_of = |unit: usize| (k - unit * TILE).min(TILE);
    for_each_unit(
        out,
        k.div_ceil(TILE),
        |u| rows_of(u) * row_bytes,
        threads,
        |unit, slice| {
            let mut tile = CodeTile::new();
            for n0 in (0..n).step_by(TILE_COLS) {
                tile.place(unit * TILE, rows_of(unit), n0, (n - n0).min(TILE_COLS));
                body(&mut tile, slice, unit * TILE);
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Position of code (k, n) by the spec's closed form: (byte, nibble) for int4, byte for int8.
    fn closed_form(g: &PaddleGeometry, k: usize, n: usize) -> (usize, usize) {
        match (g.arrangement, g.bits) {
            (Arrangement::Cutlass, Bits::Int4) => {
                let (t, r) = (k / 64, k % 64);
                let j = 4 * (r / 32) + (r % 8) / 2;
                let d = 4 * (r % 2) + (r % 32) / 8;
                let word = (n / 4) * (g.k / 2) + 32 * t + 8 * (n % 4) + j;
                (4 * word + d / 2, d % 2)
            }
            (Arrangement::Cutlass, Bits::Int8) => {
                let (t, r) = (k / 64, k % 64);
                let r16 = r % 16;
                let wi = 4 * (r / 16) + (r16 % 8) / 2;
                let s = 2 * (r16 / 8) + (r16 % 2);
                let e = [0, 2, 1, 3][s];
                (
                    4 * ((n / 2) * (g.k / 2) + 32 * t + 16 * (n % 2) + wi) + e,
                    0,
                )
            }
            (Arrangement::Volta, Bits::Int4) => {
                let e = k * g.n + n;
                let p = e % 8;
                let d = p / 2 + 4 * (p % 2);
                (4 * (e / 8) + d / 2, d % 2)
            }
            (Arrangement::Volta, Bits::Int8) => {
                let e = k * g.n + n;
                (4 * (e / 4) + [0, 2, 1, 3][e % 4], 0)
            }
        }
    }

    #[test]
    fn emit_matches_closed_form_everywhere() {
        for arrangement in [Arrangement::Volta, Arrangement::Cutlass] {
            for bits in [Bits::Int4, Bits::Int8] {
                let (k, n) = if arrangement == Arrangement::Cutlass {
                    (192, 80)
                } else {
                    (70, 48)
                };
                let g = PaddleGeometry {
                    bits,
                    arrangement,
                    k,
                    n,
                };
                // Give every code a value derived from its position, then check each position.
                let code = |k: usize, n: usize| match bits {
                    Bits::Int4 => ((k * 7 + n * 3) % 16) as i8 - 8,
                    Bits::Int8 => ((k * 31 + n * 17) % 256) as u8 as i8,
                };
                let mut out = vec![0u8; g.bytes()];
                g.write_layout(&mut out, 3, |tile| {
                    for r in 0..tile.rows {
                        for c in 0..tile.cols {
                            tile.codes[r * TILE_COLS + c] = code(tile.k0 + r, tile.n0 + c);
                        }
                    }
                });
                for kk in 0..k {
                    for nn in 0..n {
                        let (byte, nibble) = closed_form(&g, kk, nn);
                        let got = match bits {
                            Bits::Int4 => unbiased_nibble(out[byte] >> (4 * nibble)),
                            Bits::Int8 => unbiased_byte(out[byte]),
                        };
                        assert_eq!(got, code(kk, nn), "{arrangement:?} {bits:?} k={kk} n={nn}");
                    }
                }
            }
        }
    }
}
