//! The DEEP composition polynomial in coefficient form, as winter-prover's private
//! `DeepCompositionPoly::add_trace_polys` defines it.
//!
//! Winterfell accumulates `Σ kᵢ·Tᵢ − Σ kᵢ·Tᵢ(z)` and `Σ kᵢ·Tᵢ − Σ kᵢ·Tᵢ(gz)` column by column, then
//! divides them by `x − z` and `x − gz` and adds them. Both sums share `S = Σ kᵢ·Tᵢ` and differ in
//! the constant term only, so `S` is computed once (on the backend from the polynomials it kept,
//! else on the host, see [`crate::committer::deep`]) and both quotients are taken from it; the field
//! arithmetic gives the same coefficients.

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;
use winter_air::{
    proof::{QuotientOodFrame, TraceOodFrame},
    DeepCompositionCoefficients,
};
use winter_math::{FieldElement, StarkField};
use winter_prover::{matrix::ColMatrix, TracePolyTable};

use crate::committer::deep::combine_on_host;

/// `S = Σ kᵢ·Tᵢ` over the trace polynomials and the composition polynomial's columns, on the
/// host.
pub(super) fn host_sum<E: FieldElement<BaseField = Felt>>(
    trace_polys: &TracePolyTable<E>,
    quotient_polys: &ColMatrix<E>,
    coefficients: &DeepCompositionCoefficients<E>,
) -> Vec<E> {
    let main: Vec<&[Felt]> = trace_polys.main_trace_polys().collect();
    let ext: Vec<&[E]> = trace_polys.aux_trace_polys().chain(quotient_polys.columns()).collect();
    let (k_main, k_aux) = coefficients.trace.split_at(main.len());
    let k_ext: Vec<E> = k_aux.iter().chain(&coefficients.constraints).copied().collect();
    combine_on_host(&main, k_main, &ext, &k_ext, trace_polys.poly_size())
}

/// The DEEP composition polynomial's coefficients (`trace_length` of them) from `sum` (`S`).
pub(super) fn deep_composition_poly<E: FieldElement<BaseField = Felt>>(
    sum: Vec<E>,
    ood_trace: &TraceOodFrame<E>,
    ood_quotients: &QuotientOodFrame<E>,
    coefficients: &DeepCompositionCoefficients<E>,
    z: E,
) -> Vec<E> {
    let n = sum.len();
    let k_quotients = &coefficients.constraints;
    let weighted = |trace: &[E], quotients: &[E]| -> E {
        let k = coefficients.trace.iter().chain(k_quotients);
        trace.iter().chain(quotients).zip(k).fold(E::ZERO, |acc, (&v, &k)| acc + v * k)
    };
    let at_z = weighted(ood_trace.current_row(), ood_quotients.current_row());
    let at_gz = weighted(ood_trace.next_row(), ood_quotients.next_row());
    let gz = z * E::from(Felt::get_root_of_unity(n.ilog2()));

    let mut over_gz = sum.clone();
    let mut over_z = sum;
    info_span!("deep.divide").in_scope(|| {
        rayon::join(
            || quotient_by_linear(&mut over_z, at_z, z),
            || quotient_by_linear(&mut over_gz, at_gz, gz),
        );
        over_z.par_iter_mut().zip(&over_gz).for_each(|(a, &b)| *a += b);
    });
    over_z
}

// OUT-OF-DOMAIN FRAME
// ================================================================================================

/// Every trace and quotient polynomial at `z` and `gz` (Winterfell's `get_ood_frame`s), one
/// pass over each polynomial's coefficients for both points, all polynomials in parallel.
pub(super) fn ood_frames<E: FieldElement<BaseField = Felt>>(
    trace_polys: &TracePolyTable<E>,
    quotient_polys: &ColMatrix<E>,
    z: E,
) -> (TraceOodFrame<E>, QuotientOodFrame<E>) {
    let n = trace_polys.poly_size();
    let gz = z * E::from(Felt::get_root_of_unity(n.ilog2()));
    let main: Vec<&[Felt]> = trace_polys.main_trace_polys().collect();
    let main_values: Vec<(E, E)> =
        main.par_iter().map(|p| eval_pair(p, z, gz, |c| E::from(c))).collect();
    let ext: Vec<&[E]> = trace_polys.aux_trace_polys().chain(quotient_polys.columns()).collect();
    let ext_values: Vec<(E, E)> = ext.par_iter().map(|p| eval_pair(p, z, gz, |c| c)).collect();
    let (trace_values, quotient_values) =
        ext_values.split_at(ext.len() - quotient_polys.num_cols());
    let (current, next): (Vec<E>, Vec<E>) = main_values.iter().chain(trace_values).copied().unzip();
    let (q_current, q_next): (Vec<E>, Vec<E>) = quotient_values.iter().copied().unzip();
    (TraceOodFrame::new(current, next, main.len()), QuotientOodFrame::new(q_current, q_next))
}

/// `p(a)` and `p(b)` by Horner's rule, reading the coefficients once.
fn eval_pair<F: Copy, E: FieldElement>(p: &[F], a: E, b: E, lift: impl Fn(F) -> E) -> (E, E) {
    p.iter().rev().fold((E::ZERO, E::ZERO), |(x, y), &c| {
        let c = lift(c);
        (x * a + c, y * b + c)
    })
}

// DIVISION BY A LINEAR FACTOR
// ================================================================================================

/// Coefficients per block of the parallel division.
const DIVISION_BLOCK: usize = 1 << 14;

/// `(p − value) / (x − point)`, in place; `p − value` must vanish at `point`.
///
/// The quotient's coefficients are the suffix sums `q_i = Σ_{j>i} p_j·point^(j−i−1)`: each
/// block computes its own suffix sums (as `syn_div_in_place` does), then adds the carry from
/// the blocks above it times the matching power of `point`.
fn quotient_by_linear<E: FieldElement>(p: &mut [E], value: E, point: E) {
    p[0] -= value;
    let n = p.len();
    // within each block: q_i = p_{i+1} + point·q_{i+1}, with q_{end-1} = 0 locally
    let mut block_heads: Vec<E> = p
        .par_chunks_mut(DIVISION_BLOCK)
        .map(|block| {
            let mut acc = E::ZERO;
            for c in block.iter_mut().rev() {
                let q = acc;
                acc = *c + point * acc;
                *c = q;
            }
            acc // = Σ_j p_j·point^(j−start): the block's value at `point`, shifted
        })
        .collect();
    // carry into block b: c_b = Σ_{blocks above} head·point^(distance)
    // point^DIVISION_BLOCK by products alone (exact on canonical words, like Winterfell's own
    // sequential division): `exp` squares, and winter_math's cubic square is inexact on rare words
    let step = (0..DIVISION_BLOCK).fold(E::ONE, |power, _| power * point);
    let mut carry = E::ZERO;
    for head in block_heads.iter_mut().rev() {
        let here = carry;
        carry = *head + step * carry;
        *head = here;
    }
    p.par_chunks_mut(DIVISION_BLOCK).zip(block_heads).for_each(|(block, carry)| {
        // q_i += carry·point^(end−1−i)
        let mut power = carry;
        for c in block.iter_mut().rev() {
            *c += power;
            power *= point;
        }
    });
    debug_assert!(n < 2 || p[n - 1] == E::ZERO);
}
