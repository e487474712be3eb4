//! [`GpuConstraintCommitment`]: Winterfell's `ConstraintCommitment` computed by a backend.

use miden_crypto::Felt;
use winter_air::{proof::Queries, PartitionOptions};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{CompositionPoly, CompositionPolyTrace, ConstraintCommitment, StarkDomain};

use super::{
    segment::{composition_segment, CommitterHandle, CompositionShape, SegmentLde},
    trace_lde::segment_queries,
};
use crate::{hash::GpuHasher, resident::ResidentPolys};

/// The LDE of the composition polynomial columns and its Merkle tree, computed on a
/// [`crate::GpuCommitter`]; a drop-in for Winterfell's `DefaultConstraintCommitment`.
pub struct GpuConstraintCommitment<E: FieldElement<BaseField = Felt>, H: GpuHasher> {
    evaluations: SegmentLde<E>,
    tree: MerkleTree<H>,
    resident: Option<ResidentPolys>,
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
        let (trace_len, blowup) = (domain.trace_length(), domain.trace_to_lde_blowup());
        let shape = CompositionShape { trace_len, num_columns, blowup };
        let (segment, poly) = rayon::join(
            || {
                committer.run(|c| {
                    composition_segment(
                        c,
                        &evaluations,
                        shape,
                        partition_options,
                        H::FUNCTION,
                        committer.keep_polys,
                    )
                })
            },
            || {
                CompositionPoly::new(
                    CompositionPolyTrace::new(evaluations.clone()),
                    domain,
                    num_columns,
                )
            },
        );
        (Self { tree: segment.tree(), evaluations: segment.lde, resident: segment.resident }, poly)
    }

    /// The composition columns' LDE.
    pub fn evaluations(&self) -> &SegmentLde<E> {
        &self.evaluations
    }

    /// The composition polynomial's columns on the device, where the committer kept them.
    pub(crate) fn resident_polys(&self) -> Option<&ResidentPolys> {
        self.resident.as_ref()
    }

    /// Frees the polynomials kept on the device.
    pub(crate) fn release_resident_polys(&mut self) {
        self.resident = None;
    }
}

impl<E: FieldElement<BaseField = Felt>, H: GpuHasher> ConstraintCommitment<E>
    for GpuConstraintCommitment<E, H>
{
    type HashFn = H;
    type VC = MerkleTree<H>;

    fn commitment(&self) -> H::Digest {
        *self.tree.root()
    }

    fn query(self, positions: &[usize]) -> Queries {
        segment_queries(&self.evaluations, &self.tree, positions)
    }
}
