//! A tile of signed codes: the unit in which quantizers produce codes and layouts place
//! them. A tile is a band of at most 64 rows (one CUTLASS k-tile) and up to 4096 columns:
//! wide enough that the `[K][N]` input is read in long sequential row segments, small
//! enough (256 KiB) to stay in L2 while the layout transposes it.

/// Rows of a full tile (and the K granularity of the CUTLASS layout).
pub(crate) const TILE: usize = 64;
/// Column capacity of a tile.
pub(crate) const TILE_COLS: usize = 4096;

/// Signed codes `q[k][n]` for the rectangle `k0..k0+rows` × `n0..n0+cols` of the code
/// matrix, row-major with a row stride of `TILE_COLS`.
pub struct CodeTile {
    /// First K index of the tile.
    pub k0: usize,
    /// Rows in the tile (≤ `TILE`).
    pub rows: usize,
    /// First N index of the tile.
    pub n0: usize,
    /// Columns in the tile (≤ `TILE_COLS`).
    pub cols: usize,
    /// The codes; element (r, c) at `r * TILE_COLS + c`.
    pub codes: Vec<i8>,
}

impl CodeTile {
    /// An empty tile; [`CodeTile::place`] gives it a rectangle.
    pub fn new() -> CodeTile {
        CodeTile {
            k0: 0,
            rows: 0,
            n0: 0,
            cols: 0,
            codes: vec![0; TILE * TILE_COLS],
        }
    }

    /// Moves the tile to a new rectangle (contents are left to be overwritten).
    pub fn place(&mut self, k0: usize, rows: usize, n0: usize, cols: usize) {
        debug_assert!(rows <= TILE && cols <= TILE_COLS);
        (self.k0, self.rows, self.n0, self.cols) = (k0, rows, n0, cols);
    }

    /// Code at tile row `r`, column `c`.
    #[inline(always)]
    pub fn get(&self, r: usize, c: usize) -> i8 {
        self.codes[r * TILE_COLS + c]
    }

    /// Mutable codes of tile row `r` (its `cols` valid entries).
    #[inline(always)]
    pub fn row_mut(&mut self, r: usize) -> &mut [i8] {
        &mut self.codes[r * TILE_COLS..r * TILE_COLS + self.cols]
    }

    /// Stores `columns[j][r]` as the code at row `r`, column `c0 + j`, for the columns that
    /// lie inside the tile (a layout that stores columns fills the tile this way).
    pub fn set_columns(&mut self, c0: usize, columns: &[[i8; TILE]; TILE]) {
        let width = (self.cols - c0).min(TILE);
        for r in 0..self.rows {
            let row = &mut self.codes[r * TILE_COLS + c0..][..width];
            for (q, column) in row.iter_mut().zip(columns) {
                *q = column[r];
            }
        }
    }

    /// Codes of tile row `r` (its `cols` valid entries).
    #[inline(always)]
    pub fn row(&self, r: usize) -> &[i8] {
        &self.codes[r * TILE_COLS..r * TILE_COLS + self.cols]
    }
}

impl Default for CodeTile {
    fn default() -> Self {
        CodeTile::new()
    }
}
