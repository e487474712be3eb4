//! The FRI query phase: openings of committed layers, serialized as winter-fri's `FriProof`.
//!
//! `FriProof`'s constructors are private to winter-fri, so the proof is written in its
//! serialized form (winter-fri 0.13 `proof.rs`: layer count, each layer's value and path bytes,
//! the remainder bytes, the partition count) and read back through its public
//! `Deserializable` implementation.

use miden_crypto::Felt;
use tracing::info_span;
use winter_crypto::BatchMerkleProof;
use winter_fri::{folding::fold_positions, FriProof};
use winter_math::{fft, FieldElement, StarkField};
use winter_utils::{ByteWriter, Deserializable, Serializable};

use crate::{
    committer::fri::{FriLayers, LayerOpening},
    error::{FriError, GpuError, Result},
    hash::GpuHasher,
};

// REMAINDER
// ================================================================================================

/// The remainder polynomial sent in the proof: the coefficients of the last evaluations' degree
/// `len / blowup` interpolant, highest degree first (winter-fri's `set_remainder`).
pub(super) fn remainder_poly<E: FieldElement<BaseField = Felt>>(
    evaluations: &[E],
    blowup: usize,
) -> Vec<E> {
    let mut coefficients = evaluations.to_vec();
    let inv_twiddles = fft::get_inv_twiddles::<Felt>(coefficients.len());
    fft::interpolate_poly_with_offset(&mut coefficients, &inv_twiddles, Felt::GENERATOR);
    coefficients.truncate(coefficients.len() / blowup);
    coefficients.reverse();
    coefficients
}

// QUERIES
// ================================================================================================

/// Opens every layer (of `layer_rows` rows each) at the folded query positions, where the layers
/// are, and assembles the FRI proof.
pub(super) fn build_fri_proof<E: FieldElement<BaseField = Felt>, H: GpuHasher>(
    layers: &FriLayers,
    layer_rows: &[usize],
    remainder: &[E],
    folding_factor: usize,
    positions: &[usize],
) -> Result<FriProof> {
    let mut bytes = Vec::new();
    bytes.write_u8(fits_format(layer_rows.len(), "FRI layers")?);
    let mut positions = positions.to_vec();
    for (l, &rows) in layer_rows.iter().enumerate() {
        positions = fold_positions(&positions, rows * folding_factor, folding_factor);
        let opening = info_span!("fri.open_layer", layer = l, queries = positions.len())
            .in_scope(|| layers.open(l, &positions))?;
        serialize_opening::<H>(&opening, &positions)?.write_into(&mut bytes);
    }
    let mut remainder_bytes = Vec::with_capacity(E::ELEMENT_BYTES * remainder.len());
    remainder_bytes.write_many(remainder);
    bytes.write_u16(fits_format(remainder_bytes.len(), "remainder bytes")?);
    bytes.write_bytes(&remainder_bytes);
    bytes.write_u8(0); // one partition, stored as its log2
    Ok(FriProof::read_from_bytes(&bytes).expect("a FRI proof written in winter-fri's format"))
}

/// `count` in the integer type winter-fri's format stores it in, or [`GpuError::InvalidFri`]
/// naming `what` where it does not fit (Winterfell's proof options keep every count far below).
fn fits_format<T: TryFrom<usize>>(count: usize, what: &'static str) -> Result<T> {
    T::try_from(count).map_err(|_| GpuError::InvalidFri(FriError::CountTooLarge { what, count }))
}

/// A layer's opening in `FriProofLayer`'s serialized form: the queried rows, then the batch
/// Merkle proof.
struct LayerBytes {
    values: Vec<u8>,
    paths: Vec<u8>,
    /// `values.len()` and `paths.len()` as the format stores them.
    lengths: (u32, u32),
}

impl Serializable for LayerBytes {
    fn write_into<W: ByteWriter>(&self, target: &mut W) {
        target.write_u32(self.lengths.0);
        target.write_bytes(&self.values);
        target.write_u32(self.lengths.1);
        target.write_bytes(&self.paths);
    }
}

/// The rows, and the paths merged into the batch proof `MerkleTree::open_many` builds.
fn serialize_opening<H: GpuHasher>(
    opening: &LayerOpening,
    positions: &[usize],
) -> Result<LayerBytes> {
    let mut values = Vec::new();
    for row in &opening.rows {
        values.write_many(row);
    }
    let paths: Vec<(H::Digest, Vec<H::Digest>)> = opening
        .paths
        .iter()
        .map(|(leaf, path)| {
            (H::from_digest(*leaf), path.iter().map(|&d| H::from_digest(d)).collect())
        })
        .collect();
    let proof = BatchMerkleProof::<H>::from_single_proofs(&paths, positions);
    let mut path_bytes = Vec::new();
    proof.write_into(&mut path_bytes);
    let lengths = (
        fits_format(values.len(), "bytes of layer values")?,
        fits_format(path_bytes.len(), "bytes of layer paths")?,
    );
    Ok(LayerBytes { values, paths: path_bytes, lengths })
}
