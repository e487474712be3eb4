//! Interpolation on the host, with Winterfell's own FFT.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_math::{fft, StarkField};
use winter_prover::matrix::ColMatrix;

/// Coefficients of each column from its evaluations over the trace domain, as
/// `ColMatrix::interpolate_columns` computes them.
pub(crate) fn interpolate_columns(columns: &[&[Felt]]) -> Vec<Vec<Felt>> {
    let matrix = ColMatrix::new(columns.iter().map(|c| c.to_vec()).collect());
    matrix.interpolate_columns().into_columns()
}

/// The composition columns, as `CompositionPoly::new` cuts them: each component is interpolated
/// over its domain with offset `Felt::GENERATOR`, and chunk `j` of component `c` becomes column
/// `j·k + c` (`k = components.len()`), `num_columns` chunks of `column_len` coefficients each.
pub(crate) fn interpolate_composition(
    components: &[&[Felt]],
    column_len: usize,
    num_columns: usize,
) -> Vec<Vec<Felt>> {
    let inv_twiddles = fft::get_inv_twiddles::<Felt>(components[0].len());
    let coefficients: Vec<Vec<Felt>> = components
        .par_iter()
        .map(|evaluations| {
            let mut values = evaluations.to_vec();
            fft::interpolate_poly_with_offset(&mut values, &inv_twiddles, Felt::GENERATOR);
            values
        })
        .collect();
    (0..num_columns)
        .flat_map(|j| {
            coefficients.iter().map(move |c| c[j * column_len..(j + 1) * column_len].to_vec())
        })
        .collect()
}
