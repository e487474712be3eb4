//! [`GpuTraceLde`]: Winterfell's `TraceLde` with the commitments computed by a backend.

use std::{marker::PhantomData, sync::Arc};

use miden_crypto::Felt;
use winter_air::{proof::Queries, PartitionOptions, TraceInfo};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{matrix::ColMatrix, EvaluationFrame, StarkDomain, TraceLde, TracePolyTable};

use super::{
    policy::{CommitterHandle, FallbackPolicy},
    segment::{trace_segment, SegmentLde},
    tree::CommittedTree,
};
use crate::{
    backend::Backend,
    committer::{GpuCommitter, Keep, KeptRows, ResidentPolys},
    error::{GpuError, Result},
    hash::GpuHasher,
};

/// The low-degree extensions of the main and auxiliary trace segments and their Merkle trees,
/// computed on a [`crate::GpuCommitter`]; a drop-in for Winterfell's `DefaultTraceLde` with
/// identical commitments, rows and openings.
pub struct GpuTraceLde<E: FieldElement<BaseField = Felt>, H: GpuHasher> {
    main_lde: SegmentLde<Felt>,
    main_tree: CommittedTree,
    aux: Option<(SegmentLde<E>, CommittedTree)>,
    /// The main and auxiliary segments' polynomials on the device, where kept.
    resident: Vec<Option<ResidentPolys>>,
    /// The main and auxiliary segments' LDE rows on the device, where kept (their
    /// [`SegmentLde`]s then hold no rows).
    kept: Vec<Option<Arc<dyn KeptRows>>>,
    /// Whether the rows are asked to stay on the device.
    keep_rows: bool,
    /// Rows of the LDE.
    lde_len: usize,
    blowup: usize,
    trace_info: TraceInfo,
    _hasher: PhantomData<H>,
    partition_options: PartitionOptions,
    committer: CommitterHandle,
}

impl<E: FieldElement<BaseField = Felt>, H: GpuHasher> GpuTraceLde<E, H> {
    /// Commits to the main segment on `committer` (interpolate, extend over `domain`, hash rows,
    /// build the tree) and returns the LDE with the main segment's polynomials; bad input or a
    /// backend failure is a typed error. [`crate::GpuProver`] builds it through the same path.
    pub fn try_new(
        trace_info: &TraceInfo,
        main_trace: &ColMatrix<Felt>,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: Arc<dyn GpuCommitter>,
    ) -> Result<(Self, TracePolyTable<E>)> {
        let committer = CommitterHandle::new(committer, FallbackPolicy::STRICT);
        Self::with_polys(trace_info, main_trace, domain, partition_options, &committer)
    }

    /// [`Self::build`] returning the polynomials on the host (as `TraceLde::new` does), whatever
    /// `committer` says of keeping them.
    pub(crate) fn with_polys(
        trace_info: &TraceInfo,
        main_trace: &ColMatrix<Felt>,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: &CommitterHandle,
    ) -> Result<(Self, TracePolyTable<E>)> {
        let backend = committer.committer().backend();
        let committer = committer.returning_polys();
        let (lde, polys) =
            Self::build(trace_info, main_trace, domain, partition_options, committer, false)?;
        Ok((lde, TracePolyTable::new(returned(polys, backend)?)))
    }

    /// Commits to the main segment; its polynomials are `None` where the committer kept them on
    /// the device instead ([`FallbackPolicy::keep_polys`]). With `keep_rows` the segments' LDE
    /// rows stay on the device where the committer can keep them ([`Self::kept_rows`]), for an
    /// evaluation there.
    pub(crate) fn build(
        trace_info: &TraceInfo,
        main_trace: &ColMatrix<Felt>,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
        committer: CommitterHandle,
        keep_rows: bool,
    ) -> Result<(Self, Option<ColMatrix<Felt>>)> {
        let blowup = domain.trace_to_lde_blowup();
        let keep = Keep { polys: committer.policy().keep_polys, rows: keep_rows, tree: true };
        let main = committer.try_run(|c| {
            trace_segment(c, main_trace, blowup, partition_options, H::FUNCTION, keep)
        })?;
        let lde = Self {
            main_tree: CommittedTree::new(main.leaves, main.nodes, main.kept_tree),
            main_lde: main.lde,
            aux: None,
            resident: vec![main.resident],
            kept: vec![main.kept_rows],
            keep_rows,
            lde_len: domain.lde_domain_size(),
            blowup,
            trace_info: trace_info.clone(),
            _hasher: PhantomData,
            partition_options,
            committer,
        };
        Ok((lde, host_polys(main.polys)))
    }

    /// Commits to the auxiliary segment, as [`TraceLde::set_aux_trace`] but with typed errors:
    /// [`GpuError::AuxRowMismatch`] if its row count differs from the main segment's.
    ///
    /// # Panics
    /// If an auxiliary segment was already set (Winterfell supports one).
    pub fn try_set_aux_trace(
        &mut self,
        aux_trace: &ColMatrix<E>,
        domain: &StarkDomain<Felt>,
    ) -> Result<(ColMatrix<E>, H::Digest)> {
        let (polys, root) = self.commit_aux(aux_trace, domain, false)?;
        Ok((returned(polys, self.committer.committer().backend())?, root))
    }

    /// Commits to the auxiliary segment; its polynomials are `None` where the committer kept them
    /// on the device instead ([`FallbackPolicy::keep_polys`]).
    pub(crate) fn commit_aux_segment(
        &mut self,
        aux_trace: &ColMatrix<E>,
        domain: &StarkDomain<Felt>,
    ) -> Result<(Option<ColMatrix<E>>, H::Digest)> {
        self.commit_aux(aux_trace, domain, self.committer.policy().keep_polys)
    }

    fn commit_aux(
        &mut self,
        aux_trace: &ColMatrix<E>,
        domain: &StarkDomain<Felt>,
        keep: bool,
    ) -> Result<(Option<ColMatrix<E>>, H::Digest)> {
        assert!(self.aux.is_none(), "the auxiliary trace has already been added");
        let main_rows = self.lde_len / self.blowup;
        if aux_trace.num_rows() != main_rows {
            return Err(GpuError::AuxRowMismatch { main: main_rows, aux: aux_trace.num_rows() });
        }
        let (blowup, partitions) = (domain.trace_to_lde_blowup(), self.partition_options);
        let keep = Keep { polys: keep, rows: self.keep_rows, tree: true };
        let aux = self
            .committer
            .try_run(|c| trace_segment(c, aux_trace, blowup, partitions, H::FUNCTION, keep))?;
        let tree = CommittedTree::new(aux.leaves, aux.nodes, aux.kept_tree);
        let root = tree.root::<H>();
        self.aux = Some((aux.lde, tree));
        self.resident.push(aux.resident);
        self.kept.push(aux.kept_rows);
        Ok((host_polys(aux.polys), root))
    }

    /// The LDE of the main segment.
    pub fn main_segment(&self) -> &SegmentLde<Felt> {
        &self.main_lde
    }

    /// The LDE of the auxiliary segment, once set.
    pub fn aux_segment(&self) -> Option<&SegmentLde<E>> {
        self.aux.as_ref().map(|(lde, _)| lde)
    }

    /// The segments' polynomials on the device (main, then auxiliary once set), where the
    /// committer kept them.
    pub(crate) fn resident_polys(&self) -> &[Option<ResidentPolys>] {
        &self.resident
    }

    /// The main and (once set) auxiliary segments' rows on the device, where every segment's
    /// were kept there.
    pub(crate) fn kept_rows(&self) -> Option<Vec<&dyn KeptRows>> {
        self.kept.iter().map(|rows| rows.as_deref()).collect()
    }

    /// The rows at `positions` of every segment with their batch opening proofs, as
    /// `DefaultTraceLde::query` gives them; read from the device where the rows stay there (a
    /// failed read is the typed error).
    pub(crate) fn try_query(&self, positions: &[usize]) -> Result<Vec<Queries>> {
        let main_rows = match &self.kept[0] {
            Some(kept) => kept.read(positions)?,
            None => self.main_lde.rows_at(positions),
        };
        let mut result = vec![queries_of::<Felt, H>(main_rows, &self.main_tree, positions)?];
        if let Some((lde, tree)) = &self.aux {
            let rows = match self.kept.get(1).and_then(Option::as_ref) {
                Some(kept) => kept
                    .read(positions)?
                    .iter()
                    .map(|row| E::slice_from_base_elements(row).to_vec())
                    .collect(),
                None => lde.rows_at(positions),
            };
            result.push(queries_of::<E, H>(rows, tree, positions)?);
        }
        Ok(result)
    }

    /// The LDEs and the Merkle trees on the host, without the committer handle, for a thread to
    /// free (trees kept on the device are freed here).
    pub(crate) fn into_host_memory(self) -> impl Send {
        let aux = self.aux.map(|(lde, tree)| (lde, tree.into_host()));
        (self.main_lde, self.main_tree.into_host(), aux)
    }

    /// Frees the polynomials kept on the device.
    pub(crate) fn release_resident_polys(&mut self) {
        self.resident.iter_mut().for_each(|polys| *polys = None);
    }
}

impl<E: FieldElement<BaseField = Felt>, H: GpuHasher> TraceLde<E> for GpuTraceLde<E, H> {
    type HashFn = H;
    type VC = MerkleTree<H>;

    fn get_main_trace_commitment(&self) -> H::Digest {
        self.main_tree.root::<H>()
    }

    /// Commits to the auxiliary segment ([`Self::try_set_aux_trace`]).
    ///
    /// # Panics
    /// As `DefaultTraceLde`: if the aux segment's row count differs from the main segment's, an
    /// aux segment was already set (Winterfell never does either), or the backend and its CPU
    /// fallback both fail.
    fn set_aux_trace(
        &mut self,
        aux_trace: &ColMatrix<E>,
        domain: &StarkDomain<Felt>,
    ) -> (ColMatrix<E>, H::Digest) {
        self.try_set_aux_trace(aux_trace, domain)
            .unwrap_or_else(|error| panic!("auxiliary segment commitment failed: {error}"))
    }

    /// # Panics
    /// If the rows stay on the device ([`crate::GpuProver`] keeps them there only for an
    /// evaluation on the device, and reads no frame).
    fn read_main_trace_frame_into(&self, lde_step: usize, frame: &mut EvaluationFrame<Felt>) {
        assert!(self.kept[0].is_none(), "the main LDE rows are on the device");
        let next = (lde_step + self.blowup) % self.trace_len();
        frame.current_mut().copy_from_slice(self.main_lde.row(lde_step));
        frame.next_mut().copy_from_slice(self.main_lde.row(next));
    }

    /// # Panics
    /// If no auxiliary segment was set (Winterfell reads it only after setting it), or its rows
    /// stay on the device.
    fn read_aux_trace_frame_into(&self, lde_step: usize, frame: &mut EvaluationFrame<E>) {
        assert!(self.kept.get(1).is_none_or(Option::is_none), "the aux LDE rows are on the device");
        let next = (lde_step + self.blowup) % self.trace_len();
        let (segment, _) = self.aux.as_ref().expect("expected aux segment to be present");
        frame.current_mut().copy_from_slice(segment.row(lde_step));
        frame.next_mut().copy_from_slice(segment.row(next));
    }

    /// # Panics
    /// If the rows stay on the device and reading them there fails.
    fn query(&self, positions: &[usize]) -> Vec<Queries> {
        self.try_query(positions).unwrap_or_else(|error| panic!("trace queries failed: {error}"))
    }

    /// The number of LDE rows (as `DefaultTraceLde`).
    fn trace_len(&self) -> usize {
        self.lde_len
    }

    fn blowup(&self) -> usize {
        self.blowup
    }

    fn trace_info(&self) -> &TraceInfo {
        &self.trace_info
    }
}

/// Polynomials a commitment returned to the host (`None`: kept on the device instead).
pub(crate) fn host_polys<E: FieldElement>(polys: Vec<Vec<E>>) -> Option<ColMatrix<E>> {
    (!polys.is_empty()).then(|| ColMatrix::new(polys))
}

/// The polynomials of a commitment on `backend` that was not asked to keep them.
fn returned<E: FieldElement>(
    polys: Option<ColMatrix<E>>,
    backend: Backend,
) -> Result<ColMatrix<E>> {
    polys.ok_or_else(|| {
        let condition = "kept polynomials it was not asked to keep";
        GpuError::internal(backend, "commit", condition)
    })
}

/// `rows` (the rows at `positions`) with their batch opening proof, as `DefaultTraceLde` builds
/// them; a failed read of a kept tree is the typed error.
pub(crate) fn queries_of<E, H>(
    rows: Vec<Vec<E>>,
    tree: &CommittedTree,
    positions: &[usize],
) -> Result<Queries>
where
    E: FieldElement<BaseField = Felt>,
    H: GpuHasher,
{
    let proof = tree.prove_batch::<H>(positions)?;
    Ok(Queries::new::<H, E, MerkleTree<H>>(proof, rows))
}
