//! The FRI commit phase on the CPU, built from winter-fri's own pieces: the oracle every GPU
//! backend's FRI layers are tested against.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_fri::folding::apply_drp;
use winter_math::{fft, FieldElement, StarkField};
use winter_utils::transpose_slice;

use super::build_tree;
use crate::{
    committer::fri::{FoldingChannel, FriLayer, FriLayers, FriRequest},
    error::{FriError, GpuError, Result},
    hash::HashFunction,
};

// COMMIT PHASE
// ================================================================================================

/// Evaluates the DEEP polynomial over the LDE domain and commits to and folds every layer.
pub(super) fn commit_fri(
    request: &FriRequest<'_>,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayers> {
    let shape = request.validate()?;
    match shape.ext_degree {
        1 => commit::<Felt>(request, channel),
        2 => commit::<winter_math::fields::QuadExtension<Felt>>(request, channel),
        _ => commit::<winter_math::fields::CubeExtension<Felt>>(request, channel),
    }
}

fn commit<E: FieldElement<BaseField = Felt>>(
    request: &FriRequest<'_>,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayers> {
    let poly_len = request.components[0].len();
    let flat: Vec<Felt> =
        (0..poly_len).flat_map(|i| request.components.iter().map(move |c| c[i])).collect();
    let twiddles = fft::get_twiddles::<Felt>(poly_len);
    let mut evaluations = fft::evaluate_poly_with_offset(
        E::slice_from_base_elements(&flat),
        &twiddles,
        Felt::GENERATOR,
        request.blowup,
    );
    let mut layers = Vec::with_capacity(request.num_layers);
    for _ in 0..request.num_layers {
        let layer = match request.folding_factor {
            2 => fold_layer::<E, 2>(&mut evaluations, request.hash, channel),
            4 => fold_layer::<E, 4>(&mut evaluations, request.hash, channel),
            8 => fold_layer::<E, 8>(&mut evaluations, request.hash, channel),
            _ => fold_layer::<E, 16>(&mut evaluations, request.hash, channel),
        }?;
        layers.push(layer);
    }
    Ok(FriLayers {
        layers,
        kept: None,
        remainder: E::slice_as_base_elements(&evaluations).to_vec(),
    })
}

/// Commits to one layer as winter-fri's `build_layer` does, and replaces `evaluations` with the
/// folded ones.
fn fold_layer<E: FieldElement<BaseField = Felt>, const N: usize>(
    evaluations: &mut Vec<E>,
    hash: HashFunction,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayer> {
    let rows: Vec<[E; N]> = transpose_slice(evaluations);
    let leaves: Vec<_> = rows
        .par_iter()
        .with_min_len(256)
        .map(|row| hash.hash_elements(E::slice_as_base_elements(row)))
        .collect();
    let nodes = build_tree(&leaves, hash);
    let alpha = challenge::<E>(&channel(nodes[1]))?;
    *evaluations = apply_drp(&rows, Felt::GENERATOR, alpha);

    let num_rows = rows.len();
    let mut columns = vec![Felt::ZERO; N * E::EXTENSION_DEGREE * num_rows];
    columns.par_chunks_mut(num_rows).enumerate().for_each(|(c, column)| {
        let (slot, component) = (c / E::EXTENSION_DEGREE, c % E::EXTENSION_DEGREE);
        for (value, row) in column.iter_mut().zip(&rows) {
            *value = E::slice_as_base_elements(&row[slot..slot + 1])[component];
        }
    });
    Ok(FriLayer { columns, num_rows, leaves, nodes })
}

/// `alpha` from the base-field components the channel returned.
fn challenge<E: FieldElement<BaseField = Felt>>(components: &[Felt]) -> Result<E> {
    if components.len() != E::EXTENSION_DEGREE {
        return Err(GpuError::InvalidFri(FriError::ChallengeComponents {
            drawn: components.len(),
            degree: E::EXTENSION_DEGREE,
        }));
    }
    Ok(E::slice_from_base_elements(components)[0])
}
