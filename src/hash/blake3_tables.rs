//! What the BLAKE3 kernels are generated from: the initial value, the message permutation, the
//! depth of their chaining-value stack and the row widths it allows.
//!
//! Nothing here is a table typed in: the initial value is computed as the BLAKE3 specification
//! defines it (SHA-256's, the first 32 bits of the fractional parts of the square roots of the
//! first eight primes), and the permutation is the one the `blake3` crate's `MSG_SCHEDULE`
//! applies between rounds (its row 1; row `r` is it applied `r` times). The backends' parity
//! tests compare every kernel with the CPU backend, which hashes with the `blake3` crate.

use super::HashFunction;
use crate::error::{GpuError, Result};

/// Chaining values a kernel's BLAKE3 tree stack holds: a message may span at most
/// `2^CV_STACK` chunks of 1024 bytes.
pub(crate) const CV_STACK: usize = 8;

/// The widest row the BLAKE3 kernels hash: `2^CV_STACK` chunks hold 128 elements each, or 32
/// partition digests (8 words each) when every element is its own partition.
pub(crate) const MAX_COLS: usize = 32 << CV_STACK;

/// BLAKE3's message permutation: word `i` of a round's message is word `PERMUTATION[i]` of the
/// previous round's.
pub(crate) const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];

/// BLAKE3's initial value: `floor(frac(sqrt(q)) · 2^32)` for the first eight primes `q`.
pub(crate) fn iv() -> [u32; 8] {
    const PRIMES: [u128; 8] = [2, 3, 5, 7, 11, 13, 17, 19];
    // floor(sqrt(q · 2^64)) = floor(sqrt(q) · 2^32); its low 32 bits are the fraction's.
    PRIMES.map(|q| (q << 64).isqrt() as u32)
}

/// Words of one digest of `hash` in a BLAKE3 message (6 for BLAKE3-192, 8 for BLAKE3-256).
#[cfg(feature = "wgpu")]
pub(crate) fn digest_words(hash: HashFunction) -> usize {
    hash.digest_bytes() / 4
}

/// An error if a BLAKE3 kernel cannot hash rows of `num_cols` elements (wider than
/// [`MAX_COLS`]); algebraic hashes take rows of any width.
pub(crate) fn check_row_width(hash: HashFunction, num_cols: usize) -> Result<()> {
    if hash.is_algebraic() || num_cols <= MAX_COLS {
        return Ok(());
    }
    Err(GpuError::RowTooWide { hash: hash.to_string(), num_cols, max: MAX_COLS })
}
