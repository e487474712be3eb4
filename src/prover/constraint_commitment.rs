//! [`GpuConstraintCommitment`]: Winterfell's `ConstraintCommitment` computed by a backend.

use miden_crypto::Felt;
use winter_air::{proof::Queries, PartitionOptions};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, ConstraintCommitment, StarkDomain,
};

use super::{
    segment::{
        composition_segment, CommitterHandle, CompositionShape, SegmentCommitment, SegmentLde,
    },
    trace_lde::{host_polys, segment_queries},
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
        let shape = composition_shape(domain, num_columns);
        let (segment, poly) = rayon::join(
            || Self::commit(&evaluations, shape, partition_options, committer, false),
            || {
                let trace = CompositionPolyTrace::new(evaluations.clone());
                CompositionPoly::new(trace, domain, num_columns)
            },
        );
        (Self::from_segment(segment), poly)
    }

    /// Commits to the composition polynomial for [`crate::GpuProver`]'s own proof: the columns'
    /// polynomials come back as the commitment returned them, or, where the committer kept them
    /// on the device ([`CommitterHandle::keep_polys`]), as the evaluations to interpolate them
    /// from should the host need them.
    pub(crate) fn build(
        composition_trace: CompositionPolyTrace<E>,
        num_columns: usize,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
    ) -> (Self, CompositionPolys<E>) {
        let evaluations = composition_trace.into_inner();
        let shape = composition_shape(domain, num_columns);
        let mut segment =
            Self::commit(&evaluations, shape, partition_options, committer, committer.keep_polys);
        let polys = match host_polys(std::mem::take(&mut segment.polys)) {
            Some(columns) => CompositionPolys::Columns(columns),
            None => CompositionPolys::Evaluations(evaluations),
        };
        (Self::from_segment(segment), polys)
    }

    /// Commits to the composition `evaluations` on the committer (falling back as it says).
    fn commit(
        evaluations: &[E],
        shape: CompositionShape,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
        keep_polys: bool,
    ) -> SegmentCommitment<E> {
        committer.run(|c| {
            composition_segment(c, evaluations, shape, partition_options, H::FUNCTION, keep_polys)
        })
    }

    fn from_segment(segment: SegmentCommitment<E>) -> Self {
        Self { tree: segment.tree(), evaluations: segment.lde, resident: segment.resident }
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

/// The shape of a composition commitment of `num_columns` columns over `domain`.
fn composition_shape(domain: &StarkDomain<Felt>, num_columns: usize) -> CompositionShape {
    let (trace_len, blowup) = (domain.trace_length(), domain.trace_to_lde_blowup());
    CompositionShape { trace_len, num_columns, blowup }
}

/// The composition polynomial's columns on the host, or the evaluations over the constraint
/// evaluation domain to interpolate them from (where the backend kept them on the device).
pub(crate) enum CompositionPolys<E: FieldElement<BaseField = Felt>> {
    /// The columns' coefficients, as the commitment returned them.
    Columns(ColMatrix<E>),
    /// The composition trace the commitment was computed from.
    Evaluations(Vec<E>),
}
