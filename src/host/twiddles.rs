//! The twiddle table of the GPU NTTs, laid out stage by stage.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_math::{get_power_series, FieldElement, StarkField};

/// The twiddles of a size-2^log_n transform over the 2^log_n-th root of unity ω of winter-math
/// (or over ω^-1 if `inverse`), stage by stage: entry 2^b + j is ω^(j·2^(log_n-1-b)) for
/// j < 2^b, the twiddle of butterfly j of the stage whose butterflies pair elements 2^b apart;
/// entry 0 is unused (one). The butterflies of one stage that a warp or subgroup runs together
/// take consecutive j, so they read consecutive words: in a table of the powers ω^i alone they
/// would read words 2^(log_n-1-b) apart, one memory transaction each.
///
/// `log_n` must be at least 1.
pub(crate) fn stage_twiddles(log_n: u32, inverse: bool) -> Vec<Felt> {
    let root = Felt::get_root_of_unity(log_n);
    let root = if inverse { root.inv() } else { root };
    let half = 1usize << (log_n - 1);
    let powers = get_power_series(root, half);
    let mut table = vec![Felt::ONE; 2 * half];
    for b in 0..log_n {
        let stride = half >> b;
        table[1 << b..2 << b].par_iter_mut().enumerate().for_each(|(j, w)| *w = powers[j * stride]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_the_powers_of_each_stage_root() {
        for log_n in 1..=10 {
            for inverse in [false, true] {
                let table = stage_twiddles(log_n, inverse);
                let root = Felt::get_root_of_unity(log_n);
                let root = if inverse { root.inv() } else { root };
                assert_eq!(table.len(), 1 << log_n);
                for b in 0..log_n {
                    for j in 0..1u64 << b {
                        let expected = root.exp(j << (log_n - 1 - b));
                        assert_eq!(table[(1 << b) + j as usize], expected, "log_n {log_n} b {b}");
                    }
                }
            }
        }
    }
}
