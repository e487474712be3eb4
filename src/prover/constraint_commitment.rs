//! [`GpuConstraintCommitment`]: Winterfell's `ConstraintCommitment` computed by a backend.

use std::{marker::PhantomData, sync::Arc};

use miden_crypto::Felt;
use tracing::warn;
use winter_air::{proof::Queries, PartitionOptions};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, ConstraintCommitment, StarkDomain,
};

use super::{
    evaluation::CompositionEvaluations,
    policy::{CommitterHandle, FallbackPolicy},
    segment::{
        composition_segment, kept_composition_segment, CompositionShape, SegmentCommitment,
        SegmentLde,
    },
    trace_lde::{host_polys, queries_of},
    tree::CommittedTree,
};
use crate::{
    committer::{composition::KeptEvaluations, Keep, KeptRows, ResidentPolys},
    cpu::CpuCommitter,
    error::{GpuError, Result},
    hash::GpuHasher,
    host::{turn_priority, with_turn_priority},
};

/// The LDE of the composition polynomial columns and its Merkle tree, computed on a
/// [`crate::GpuCommitter`]; a drop-in for Winterfell's `DefaultConstraintCommitment`.
pub struct GpuConstraintCommitment<E: FieldElement<BaseField = Felt>, H: GpuHasher> {
    rows: CompositionRows<E>,
    tree: CommittedTree,
    /// What commits again on the CPU should a read of the rows or tree the backend kept fail
    /// (none for a commitment of [`Self::new`], which keeps nothing).
    recompute: Option<Recompute<E>>,
    _hasher: PhantomData<H>,
    resident: Option<ResidentPolys>,
}

/// Where the composition columns' LDE rows are.
enum CompositionRows<E: FieldElement<BaseField = Felt>> {
    /// On the host.
    Host(SegmentLde<E>),
    /// In the backend's memory, read at the query positions alone.
    Kept(Arc<dyn KeptRows>),
}

/// What commits to the composition again on the CPU.
struct Recompute<E: FieldElement<BaseField = Felt>> {
    source: CompositionSource<E>,
    shape: CompositionShape,
    partition_options: PartitionOptions,
    policy: FallbackPolicy,
}

/// A CPU evaluation of the composition, for when the backend's evaluations cannot be read.
pub(crate) type EvaluateOnCpu<'a, E> = &'a dyn Fn() -> CompositionPolyTrace<E>;

/// Where the composition's evaluations are, for the host to read should it need them.
#[derive(Clone)]
pub(crate) enum CompositionSource<E: FieldElement<BaseField = Felt>> {
    /// On the host.
    Host(Arc<Vec<E>>),
    /// In the backend's memory, where the commitment read them.
    Kept(Arc<dyn KeptEvaluations>),
}

impl<E: FieldElement<BaseField = Felt>> CompositionSource<E> {
    /// The evaluations on the host, read from the backend where they are kept (an error of
    /// that read is returned).
    pub(crate) fn evaluations(&self) -> Result<Arc<Vec<E>>> {
        match self {
            Self::Host(evaluations) => Ok(evaluations.clone()),
            Self::Kept(kept) => {
                let words = kept.read()?;
                Ok(Arc::new(E::slice_from_base_elements(&words).to_vec()))
            },
        }
    }
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
        // the join may run the commitment on another thread: it keeps this job's rank
        let priority = turn_priority();
        let (segment, poly) = rayon::join(
            || {
                with_turn_priority(priority, || {
                    Self::commit(&evaluations, shape, partition_options, committer, Keep::default())
                })
            },
            || {
                let trace = CompositionPolyTrace::new(evaluations.clone());
                CompositionPoly::new(trace, domain, num_columns)
            },
        );
        (Self::from_host_segment(segment), poly)
    }

    /// Commits to the composition polynomial for [`crate::GpuProver`]'s own proof, reading
    /// `composition` where it was evaluated (on the backend, or on the host): the columns'
    /// polynomials come back as the commitment returned them, or, where the committer kept them
    /// on the device ([`FallbackPolicy::keep_polys`]), as the evaluations to interpolate them
    /// from should the host need them. With `keep_polys` the LDE rows stay on the device too
    /// where the backend can keep them: only the queried rows come back ([`Self::try_query`]).
    /// Should the commitment of kept evaluations fail and the policy fall back,
    /// `evaluate_on_cpu` evaluates the composition again and the CPU commits to it.
    pub(crate) fn build(
        composition: CompositionEvaluations<E>,
        num_columns: usize,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
        evaluate_on_cpu: EvaluateOnCpu<'_, E>,
    ) -> (Self, CompositionPolys<E>) {
        let shape = composition_shape(domain, num_columns);
        let policy = committer.policy();
        let keep = Keep { polys: policy.keep_polys, rows: policy.keep_polys, tree: true };
        let on_host = |evaluations: Vec<E>| {
            let evaluations = Arc::new(evaluations);
            let segment = Self::commit(&evaluations, shape, partition_options, committer, keep);
            (segment, CompositionSource::Host(evaluations))
        };
        let (mut segment, source) = match composition {
            CompositionEvaluations::Host(trace) => on_host(trace.into_inner()),
            CompositionEvaluations::Kept(kept) => {
                let committed = committer.try_run(|c| {
                    kept_composition_segment(
                        c,
                        kept.as_ref(),
                        shape,
                        partition_options,
                        H::FUNCTION,
                        keep,
                    )
                });
                match committed {
                    Ok(segment) => (segment, CompositionSource::Kept(kept)),
                    Err(error) if policy.cpu_fallback => {
                        warn!(%error, "committing to the composition failed; evaluating it again on the CPU");
                        on_host(evaluate_on_cpu().into_inner())
                    },
                    Err(error) => panic!("constraint commitment failed: {error}"),
                }
            },
        };
        let polys = match host_polys(std::mem::take(&mut segment.polys)) {
            Some(columns) => CompositionPolys::Columns(columns),
            None => CompositionPolys::Evaluations(source.clone()),
        };
        let tree = CommittedTree::new(segment.leaves, segment.nodes, segment.kept_tree);
        let rows = match segment.kept_rows {
            Some(rows) => CompositionRows::Kept(rows),
            None => CompositionRows::Host(segment.lde),
        };
        let recompute = Some(Recompute { source, shape, partition_options, policy });
        let resident = segment.resident;
        (Self { rows, tree, recompute, resident, _hasher: PhantomData }, polys)
    }

    /// Commits to the composition `evaluations` on the committer (falling back as it says).
    fn commit(
        evaluations: &[E],
        shape: CompositionShape,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
        keep: Keep,
    ) -> SegmentCommitment<E> {
        committer.run(|c| {
            composition_segment(c, evaluations, shape, partition_options, H::FUNCTION, keep)
        })
    }

    fn from_host_segment(segment: SegmentCommitment<E>) -> Self {
        let tree = CommittedTree::new(segment.leaves, segment.nodes, segment.kept_tree);
        let rows = CompositionRows::Host(segment.lde);
        Self { tree, rows, recompute: None, resident: segment.resident, _hasher: PhantomData }
    }

    /// The composition columns' LDE, where it is on the host (`None` where the rows stay on
    /// the device).
    pub fn evaluations(&self) -> Option<&SegmentLde<E>> {
        match &self.rows {
            CompositionRows::Host(lde) => Some(lde),
            CompositionRows::Kept(_) => None,
        }
    }

    /// The rows at `positions` with their batch opening proof: the rows and tree read from the
    /// device where they stay there. If a read fails and the CPU fallback is on, the composition
    /// is committed again on the CPU (with a warning) and its rows are opened: from its
    /// evaluations, read from the backend where they are kept, or, should that read fail too,
    /// evaluated again by `evaluate_on_cpu` where given; otherwise the typed error.
    pub(crate) fn try_query(
        &self,
        positions: &[usize],
        evaluate_on_cpu: Option<EvaluateOnCpu<'_, E>>,
    ) -> Result<Queries> {
        let rows = match &self.rows {
            CompositionRows::Host(lde) => Ok(lde.rows_at(positions)),
            CompositionRows::Kept(rows) => rows.read(positions).map(|rows| {
                rows.iter().map(|row| E::slice_from_base_elements(row).to_vec()).collect()
            }),
        };
        let error = match rows.and_then(|rows| queries_of::<E, H>(rows, &self.tree, positions)) {
            Ok(queries) => return Ok(queries),
            // the positions, not the backend, are at fault: a CPU commitment would refuse them too
            Err(error @ GpuError::InvalidOpening(_)) => return Err(error),
            Err(error) => error,
        };
        let Some(recompute) = self.recompute.as_ref().filter(|r| r.policy.cpu_fallback) else {
            return Err(error);
        };
        warn!(%error, "reading the composition rows or tree failed; committing to them again on the CPU");
        let Recompute { source, shape, partition_options, .. } = recompute;
        let evaluations = match (source.evaluations(), evaluate_on_cpu) {
            (Ok(evaluations), _) => evaluations,
            (Err(error), Some(evaluate)) => {
                warn!(%error, "reading the composition failed; evaluating it again on the CPU");
                Arc::new(evaluate().into_inner())
            },
            (Err(error), None) => return Err(error),
        };
        let cpu = CpuCommitter::new();
        let segment = composition_segment::<E>(
            &cpu,
            &evaluations,
            *shape,
            *partition_options,
            H::FUNCTION,
            Keep::default(),
        )?;
        let tree = CommittedTree::new(segment.leaves, segment.nodes, segment.kept_tree);
        queries_of::<E, H>(segment.lde.rows_at(positions), &tree, positions)
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
        self.tree.root::<H>()
    }

    fn query(self, positions: &[usize]) -> Queries {
        self.try_query(positions, None)
            .unwrap_or_else(|error| panic!("constraint queries failed: {error}"))
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
    /// Where the composition trace the commitment was computed from is.
    Evaluations(CompositionSource<E>),
}
