//! A tile of signed codes: the unit in which quantizers produce codes and layouts place
//! them. Tiles are at most 64 × 64 so they stay in L1 while being transposed.

/// Rows and columns of a full tile.
pub const TILE: usize = 64;

/// Signed codes `q[k][n]` for the rectangle `k0..k0+rows` × `n0..n0+cols` of the code
/// matrix, row-major with a row stride of [`TILE`].
pub struct CodeTile {
    /// First K index of the tile.
    pub k0: usize,
    /// Rows in the tile (≤ 64).
    pub rows: usize,
    /// First N index of the tile.
    pub n0: usize,
    /// Columns in the tile (≤ 64).
    pub cols: usize,
    /// The codes; element (r, c) at `r * TILE + c`.
    pub codes: [i8; TILE * TILE],
}

impl CodeTile {
    /// An empty tile; [`CodeTile::place`] gives it a rectangle.
    pub fn new() -> CodeTile {
        CodeTile {
            k0: 0,
            rows: 0,
            n0: 0,
            cols: 0,
            codes: [0; TILE * TILE],
        }
    }

    /// Moves the tile to a new rectangle (contents are left to be overwritten).
    pub fn place(&mut self, k0: usize, rows: usize, n0: usize, cols: usize) {
        debug_assert!(rows <= TILE && cols <= TILE);
        (self.k0, self.rows, self.n0, self.cols) = (k0, rows, n0, cols);
    }

    /// Code at tile row `r`, column `c`.
    #[inline(always)]
    pub fn get(&self, r: usize, c: usize) -> i8 {
        self.codes[r * TILE + c]
    }

    /// Mutable codes of tile row `r` (its `cols` valid entries).
    #[inline(always)]
    pub fn row_mut(&mut self, r: usize) -> &mut [i8] {
        &mut self.codes[r * TILE..r * TILE + self.cols]
    }

    /// Codes of tile row `r` (its `cols` valid entries).
    #[inline(always)]
    pub fn row(&self, r: usize) -> &[i8] {
        &self.codes[r * TILE..r * TILE + self.cols]
    }
}

impl Default for CodeTile {
    fn default() -> Self {
        CodeTile::new()
    }
}
