//! [`GpuConstraintCommitment`]: Winterfell's `ConstraintCommitment` computed by a backend.

use std::borrow::Cow;

use miden_crypto::{Felt, Word};
use winter_air::{proof::Queries, PartitionOptions};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{CompositionPoly, CompositionPolyTrace, ConstraintCommitment, StarkDomain};

use super::{
    segment::{base_components, into_segment, row_hashing, CommitterHandle, SegmentLde},
    trace_lde::segment_queries,
};
use crate::{
    committer::{CommitRequest, PolyInput},
    hash::GpuHasher,
};

/// The LDE of the composition polynomial columns and its Merkle tree, computed on a
/// [`crate::GpuCommitter`]; a drop-in for Winterfell's `DefaultConstraintCommitment`.
pub struct GpuConstraintCommitment<E: FieldElement<BaseField = Felt>, H: GpuHasher> {
    evaluations: SegmentLde<E>,
    tree: MerkleTree<H>,
}

impl<E: FieldElement<BaseField = Felt>, H: GpuHasher> GpuConstraintCommitment<E, H> {
    /// Interpolates the composition trace with the domain offset, splits it into `num_columns`
    /// columns, extends and commits to them.
    ///
    /// `CompositionPoly` has no public constructor from coefficients, so the returned polynomial
    /// is built by Winterfell on the CPU while the backend commits (the two run concurrently).
    ///
    /// Winterfell guarantees what this relies on: the composition trace is a power of two longer
    /// than the trace and holds at least `num_columns · trace_length` evaluations.
    pub(crate) fn new(
        composition_trace: CompositionPolyTrace<E>,
        num_columns: usize,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
    ) -> (Self, CompositionPoly<E>) {
        let evaluations = composition_trace.into_inner();
        let components: Vec<Cow<'_, [Felt]>> = base_components(&evaluations);
        let slices: Vec<&[Felt]> = components.iter().map(|c| c.as_ref()).collect();
        let request = CommitRequest {
            input: PolyInput::Composition {
                components: &slices,
                column_len: domain.trace_length(),
                num_columns,
            },
            blowup: domain.trace_to_lde_blowup(),
            row_hashing: row_hashing::<E>(partition_options, num_columns),
            hash: H::FUNCTION,
        };
        let (commitment, poly) = rayon::join(
            || committer.commit(&request),
            || {
                CompositionPoly::new(
                    CompositionPolyTrace::new(evaluations.clone()),
                    domain,
                    num_columns,
                )
            },
        );
        let segment = into_segment::<E, H>(commitment);
        (Self { evaluations: segment.lde, tree: segment.tree }, poly)
    }

    /// The composition columns' LDE.
    pub fn evaluations(&self) -> &SegmentLde<E> {
        &self.evaluations
    }
}

impl<E: FieldElement<BaseField = Felt>, H: GpuHasher> ConstraintCommitment<E>
    for GpuConstraintCommitment<E, H>
{
    type HashFn = H;
    type VC = MerkleTree<H>;

    fn commitment(&self) -> Word {
        *self.tree.root()
    }

    fn query(self, positions: &[usize]) -> Queries {
        segment_queries(&self.evaluations, &self.tree, positions)
    }
}
