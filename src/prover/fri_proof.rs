//! The FRI query phase: openings of committed layers, serialized as winter-fri's `FriProof`.
//!
//! `FriProof`'s constructors are private to winter-fri, so the proof is written in its
//! serialized form (winter-fri 0.13 `proof.rs`: layer count, each layer's value and path bytes,
//! the remainder bytes, the partition count) and read back through its public
//! `Deserializable` implementation.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_crypto::{MerkleTree, VectorCommitment};
use winter_fri::{folding::fold_positions, FriProof};
use winter_math::{fft, FieldElement, StarkField};
use winter_utils::{ByteWriter, Deserializable, Serializable};

use crate::{fri::FriLayer, hash::GpuHasher};

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

/// Opens every layer at the folded query positions and assembles the FRI proof.
pub(super) fn build_fri_proof<E: FieldElement<BaseField = Felt>, H: GpuHasher>(
    layers: &[FriLayer],
    remainder: &[E],
    folding_factor: usize,
    positions: &[usize],
) -> FriProof {
    let mut bytes = Vec::new();
    bytes.write_u8(layers.len() as u8);
    let mut positions = positions.to_vec();
    for layer in layers {
        positions = fold_positions(&positions, layer.num_rows * folding_factor, folding_factor);
        open_layer::<H>(layer, &positions).write_into(&mut bytes);
    }
    let mut remainder_bytes = Vec::with_capacity(E::ELEMENT_BYTES * remainder.len());
    remainder_bytes.write_many(remainder);
    bytes.write_u16(remainder_bytes.len() as u16);
    bytes.write_bytes(&remainder_bytes);
    bytes.write_u8(0); // one partition, stored as its log2
    FriProof::read_from_bytes(&bytes).expect("a FRI proof written in winter-fri's format")
}

/// A layer's opening in `FriProofLayer`'s serialized form: the queried rows, then the batch
/// Merkle proof.
struct LayerOpening {
    values: Vec<u8>,
    paths: Vec<u8>,
}

impl Serializable for LayerOpening {
    fn write_into<W: ByteWriter>(&self, target: &mut W) {
        target.write_u32(self.values.len() as u32);
        target.write_bytes(&self.values);
        target.write_u32(self.paths.len() as u32);
        target.write_bytes(&self.paths);
    }
}

fn open_layer<H: GpuHasher>(layer: &FriLayer, positions: &[usize]) -> LayerOpening {
    let mut values = Vec::new();
    for &position in positions {
        values.write_many(layer.row(position));
    }
    let tree = MerkleTree::<H>::from_raw_parts(
        layer.nodes.par_iter().map(|&d| H::from_digest(d)).collect(),
        layer.leaves.par_iter().map(|&d| H::from_digest(d)).collect(),
    )
    .expect("a FRI layer has a power-of-two number of rows");
    let (_, proof) = tree.open_many(positions).expect("query positions lie within the layer");
    let mut paths = Vec::new();
    proof.write_into(&mut paths);
    LayerOpening { values, paths }
}
