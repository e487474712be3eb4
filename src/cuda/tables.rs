//! Host-side tables the kernels read: power tables for coefficient scaling, column sources, the
//! split of an NTT into fused passes, and the keys and sizes of the twiddle tables (their entries
//! are `host::stage_twiddles`). All roots come from winter-math (`Felt::get_root_of_unity`), so
//! the transforms are Winterfell's.

use miden_crypto::Felt;
use winter_math::{fft::permute_index, FieldElement, StarkField};

use super::program::NTT_TILE_LOG;

/// Consecutive low indices a tile of a later NTT pass holds (2^4 elements = 128 bytes).
const NTT_LOW_BITS: u32 = 4;

/// scale·g^i for i < count.
fn powers(g: Felt, count: usize, scale: Felt) -> Vec<u64> {
    std::iter::successors(Some(scale), |&x| Some(x * g)).take(count).map(|x| x.inner()).collect()
}

/// The split of exponents r < 2^log_n into a low part of `s_bits` bits and a high part.
pub(super) fn split_bits(log_n: u32) -> u32 {
    log_n.div_ceil(2)
}

/// Entries of one power table (see [`power_tables`]).
pub(super) fn power_table_len(log_n: u32) -> usize {
    let s = split_bits(log_n);
    (1 << s) + (1 << (log_n - s))
}

/// Power tables for `scale_coefficients` and `coset_ntt_first_pass`: for each scale (outer) and
/// each base (inner), the entries scale·g^i (i < 2^s) then g^(i·2^s) (i < 2^(log_n - s)), so
/// that `scale·g^r = lo[r mod 2^s] · hi[r >> s]` is one product.
///
/// With `high_bit_reversed` the high part is stored at bit-reversed indices, for outputs that
/// stay bit-reversed: there the exponent of position q is r = rev(q), whose high part r >> s is
/// rev(q mod 2^(log_n - s)), so the kernel reads entry q mod 2^(log_n - s) and a warp's
/// consecutive positions read consecutive entries (in natural order they lie 2^(log_n - s - 5)
/// entries apart, one cache line each).
pub(super) fn power_tables(
    scales: &[Felt],
    bases: &[Felt],
    log_n: u32,
    high_bit_reversed: bool,
) -> Vec<u64> {
    let s = split_bits(log_n);
    let high_bits = log_n - s;
    // a few thousand products per pair, computed here: a GPU call holds its turn meanwhile, and
    // parallel tasks on the caller's pool would wait behind other proofs' work there
    let pairs = scales.iter().flat_map(|&scale| bases.iter().map(move |&g| (scale, g)));
    let tables: Vec<Vec<u64>> = pairs
        .map(|(scale, g)| {
            let mut table = powers(g, 1 << s, scale);
            let high = powers(g.exp(1u64 << s), 1 << high_bits, Felt::ONE);
            if high_bit_reversed {
                table.extend((0..high.len()).map(|i| high[permute_index(high.len(), i)]));
            } else {
                table.extend(high);
            }
            table
        })
        .collect();
    tables.concat()
}

/// Bases of the LDE cosets: shift·ω_N^k for k < blowup (ω_N the root of the LDE domain).
pub(super) fn coset_bases(shift: Felt, log_lde: u32, blowup: usize) -> Vec<Felt> {
    let root = Felt::get_root_of_unity(log_lde);
    (0..blowup as u64).map(|k| shift * root.exp(k)).collect()
}

/// One fused NTT pass: butterfly stages of bits [b0, b0 + t_bits), tiles of 2^t_bits strided
/// elements times 2^c_bits consecutive low indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NttPass {
    pub b0: u32,
    pub t_bits: u32,
    pub c_bits: u32,
}

/// The passes of a size-2^log_n transform in DIT order (reverse them for DIF).
pub(super) fn ntt_passes(log_n: u32) -> Vec<NttPass> {
    let mut passes = Vec::new();
    let mut b0 = 0;
    while b0 < log_n {
        let c_bits = b0.min(NTT_LOW_BITS);
        let t_bits = (log_n - b0).min(NTT_TILE_LOG - c_bits);
        passes.push(NttPass { b0, t_bits, c_bits });
        b0 += t_bits;
    }
    passes
}

// TWIDDLE TABLES
// ================================================================================================

/// A twiddle table's size and direction: `(log_n, inverse)`.
pub(super) type TwiddleKey = (u32, bool);

/// Bytes of the twiddle table of a size-2^log_n transform (`stage_twiddles`: n words).
pub(super) fn twiddle_bytes(log_n: u32) -> u64 {
    8 << log_n
}

/// Bytes of the twiddle tables `keys`.
pub(super) fn twiddles_bytes(keys: &[TwiddleKey]) -> u64 {
    keys.iter().map(|&(log_n, _)| twiddle_bytes(log_n)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_bit_once() {
        for log_n in 1..=28 {
            let passes = ntt_passes(log_n);
            let mut next = 0;
            for p in &passes {
                assert_eq!(p.b0, next);
                assert!(p.t_bits >= 1 && p.t_bits + p.c_bits <= NTT_TILE_LOG && p.c_bits <= p.b0);
                next += p.t_bits;
            }
            assert_eq!(next, log_n);
        }
    }

    #[test]
    fn power_tables_give_scaled_powers() {
        let g = Felt::new(12345);
        let scale = Felt::new(99);
        for log_n in 1..=9 {
            let natural = power_tables(&[scale], &[g], log_n, false);
            let reversed = power_tables(&[scale], &[g], log_n, true);
            let s = split_bits(log_n);
            let high_mask = (1 << (log_n - s)) - 1;
            for r in 0..1usize << log_n {
                let want = scale * g.exp(r as u64);
                let low = Felt::from_mont(natural[r & ((1 << s) - 1)]);
                assert_eq!(low * Felt::from_mont(natural[(1 << s) + (r >> s)]), want);
                // the kernel's reading of the reversed layout: position q = rev(r)
                let q = permute_index(1 << log_n, r);
                let high = Felt::from_mont(reversed[(1 << s) + (q & high_mask)]);
                assert_eq!(Felt::from_mont(reversed[r & ((1 << s) - 1)]) * high, want);
            }
        }
    }
}
