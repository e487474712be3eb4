//! The DEEP composition polynomial in coefficient form, as winter-prover's private
//! `DeepCompositionPoly::add_trace_polys` defines it.
//!
//! Winterfell accumulates `Σ kᵢ·Tᵢ − Σ kᵢ·Tᵢ(z)` and `Σ kᵢ·Tᵢ − Σ kᵢ·Tᵢ(gz)` column by column, then
//! divides them by `x − z` and `x − gz` and adds them. Both sums share `S = Σ kᵢ·Tᵢ` and differ in
//! the constant term only, so here `S` is computed once, in cache-sized blocks of coefficients
//! across all columns; the field arithmetic gives the same coefficients.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_air::{
    proof::{QuotientOodFrame, TraceOodFrame},
    DeepCompositionCoefficients,
};
use winter_math::{polynom, FieldElement, StarkField};
use winter_prover::{CompositionPoly, TracePolyTable};

/// Coefficients combined per block: a block of `S` stays in cache while every column adds in.
const BLOCK: usize = 2048;

/// The DEEP composition polynomial's coefficients (`trace_length` of them).
pub(super) fn deep_composition_poly<E: FieldElement<BaseField = Felt>>(
    trace_polys: &TracePolyTable<E>,
    quotient_polys: &CompositionPoly<E>,
    ood_trace: &TraceOodFrame<E>,
    ood_quotients: &QuotientOodFrame<E>,
    coefficients: &DeepCompositionCoefficients<E>,
    z: E,
) -> Vec<E> {
    let n = trace_polys.poly_size();
    let main: Vec<&[Felt]> = trace_polys.main_trace_polys().collect();
    let aux: Vec<&[E]> = trace_polys.aux_trace_polys().collect();
    let quotients: Vec<&[E]> = quotient_polys.data().columns().collect();
    let (k_main, k_aux) = coefficients.trace.split_at(main.len());
    let k_quotients = &coefficients.constraints;

    let mut sum = vec![E::ZERO; n];
    sum.par_chunks_mut(BLOCK).enumerate().for_each(|(block, acc)| {
        let range = block * BLOCK..block * BLOCK + acc.len();
        for (poly, &k) in main.iter().zip(k_main) {
            for (a, &c) in acc.iter_mut().zip(&poly[range.clone()]) {
                *a += k.mul_base(c);
            }
        }
        for (poly, &k) in aux.iter().chain(&quotients).zip(k_aux.iter().chain(k_quotients)) {
            for (a, &c) in acc.iter_mut().zip(&poly[range.clone()]) {
                *a += k * c;
            }
        }
    });

    let weighted = |trace: &[E], quotients: &[E]| -> E {
        let k = coefficients.trace.iter().chain(k_quotients);
        trace.iter().chain(quotients).zip(k).fold(E::ZERO, |acc, (&v, &k)| acc + v * k)
    };
    let at_z = weighted(ood_trace.current_row(), ood_quotients.current_row());
    let at_gz = weighted(ood_trace.next_row(), ood_quotients.next_row());
    let gz = z * E::from(Felt::get_root_of_unity(n.ilog2()));

    let mut over_gz = sum.clone();
    let mut over_z = sum;
    rayon::join(
        || quotient_by_linear(&mut over_z, at_z, z),
        || quotient_by_linear(&mut over_gz, at_gz, gz),
    );
    over_z.par_iter_mut().zip(&over_gz).for_each(|(a, &b)| *a += b);
    over_z
}

/// `(p − value) / (x − point)`, in place.
fn quotient_by_linear<E: FieldElement>(p: &mut [E], value: E, point: E) {
    p[0] -= value;
    polynom::syn_div_in_place(p, 1, point);
}
