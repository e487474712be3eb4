//! Segment commitments in Winterfell's types, on any [`GpuCommitter`].
//!
//! Extension-field columns are split into base components on the way in and joined on the way
//! out (see [`crate::committer`]); the backend's result becomes `E` polynomials, a typed LDE view
//! and Merkle nodes. [`commit_trace_segment`] and [`commit_composition`] are what
//! [`crate::GpuTraceLde`] and [`crate::GpuConstraintCommitment`] run, and what the parity harness
//! compares with Winterfell.

use std::{borrow::Cow, marker::PhantomData, sync::Arc};

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;
use winter_air::PartitionOptions;
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::matrix::ColMatrix;

use crate::{
    committer::{
        composition::KeptEvaluations, CommitRequest, Commitment, GpuCommitter, Keep, KeptRows,
        KeptTree, LdeRows, PolyInput, ResidentPolys, RowHashing, Shape,
    },
    error::{GpuError, Result},
    hash::{Digest, GpuHasher, HashFunction},
    host::{on_copy_pool, HostBuffer},
};

// SEGMENT COMMITMENT
// ================================================================================================

/// The LDE of one segment as rows of `E` (Winterfell's `RowMatrix<E>` layout).
#[derive(Debug, Clone)]
pub struct SegmentLde<E> {
    rows: LdeRows,
    _element: PhantomData<E>,
}

impl<E: FieldElement<BaseField = Felt>> SegmentLde<E> {
    /// Number of LDE rows.
    pub fn num_rows(&self) -> usize {
        self.rows.num_rows()
    }

    /// Number of columns, in `E` elements.
    pub fn num_cols(&self) -> usize {
        self.rows.num_cols / E::EXTENSION_DEGREE
    }

    /// Row `i` as `E` elements.
    pub fn row(&self, i: usize) -> &[E] {
        E::slice_from_base_elements(self.rows.row(i))
    }

    /// The rows at `positions`, copied.
    pub(crate) fn rows_at(&self, positions: &[usize]) -> Vec<Vec<E>> {
        positions.iter().map(|&p| self.row(p).to_vec()).collect()
    }

    /// The base-element rows as the backend produced them.
    pub fn base_rows(&self) -> &LdeRows {
        &self.rows
    }
}

/// One committed segment in Winterfell's terms.
#[derive(Debug, Clone)]
pub struct SegmentCommitment<E> {
    /// Column polynomials in coefficient form.
    pub polys: Vec<Vec<E>>,
    /// The LDE rows.
    pub lde: SegmentLde<E>,
    /// Row hashes (Merkle leaves); none where the tree stays in the backend's memory.
    pub leaves: HostBuffer<Digest>,
    /// Merkle nodes in Winterfell's layout (`nodes[1]` is the root); nodes 0 and 1 alone where
    /// the tree stays in the backend's memory.
    pub nodes: HostBuffer<Digest>,
    /// The polynomials kept in the backend's memory, if they were asked for and kept.
    pub resident: Option<ResidentPolys>,
    /// The LDE rows kept in the backend's memory (and not in [`Self::lde`]), if they were asked
    /// for and kept.
    pub kept_rows: Option<Arc<dyn KeptRows>>,
    /// The Merkle tree kept in the backend's memory (its leaves and nodes not in [`Self::leaves`]
    /// and [`Self::nodes`]), if it was asked for and kept.
    pub kept_tree: Option<Arc<dyn KeptTree>>,
}

impl<E> SegmentCommitment<E> {
    /// The Merkle root.
    pub fn root(&self) -> Digest {
        self.nodes[1]
    }

    /// The Merkle tree as Winterfell's type; a kept tree is read whole from the backend's memory
    /// (an error of that read is returned).
    pub fn tree<H: GpuHasher>(&self) -> Result<MerkleTree<H>> {
        let read;
        let (leaves, nodes): (&[Digest], &[Digest]) = match &self.kept_tree {
            Some(kept) => {
                let n = kept.num_leaves();
                let (leaves, nodes) =
                    kept.read(&(0..n).collect::<Vec<_>>(), &(1..n).collect::<Vec<_>>())?;
                read = (leaves, [vec![Digest::ZERO], nodes].concat());
                (&read.0, &read.1)
            },
            None => (&self.leaves, &self.nodes),
        };
        // on the copy threads: a proof waits for it, and on the caller's pool it would wait
        // behind other proofs' tasks
        let (nodes, leaves) = on_copy_pool(|| {
            let nodes = nodes.par_iter().map(|&d| H::from_digest(d)).collect();
            (nodes, leaves.par_iter().map(|&d| H::from_digest(d)).collect())
        });
        Ok(MerkleTree::from_raw_parts(nodes, leaves)
            .expect("a validated LDE domain has at least 4 rows, a power of two"))
    }
}

/// Commits to a trace segment (`DefaultTraceLde::new` / `set_aux_trace`): interpolates the
/// columns, extends them by `blowup`, hashes rows as `partitions` says, builds the tree.
pub fn commit_trace_segment<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    trace: &ColMatrix<E>,
    blowup: usize,
    partitions: PartitionOptions,
    hash: HashFunction,
) -> Result<SegmentCommitment<E>> {
    let keep = Keep::default();
    trace_segment(committer, trace, blowup, partitions, hash, keep)
}

/// [`commit_trace_segment`], keeping on the device what `keep` says.
pub(crate) fn trace_segment<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    trace: &ColMatrix<E>,
    blowup: usize,
    partitions: PartitionOptions,
    hash: HashFunction,
    keep: Keep,
) -> Result<SegmentCommitment<E>> {
    let trace_columns: Vec<&[E]> = trace.columns().collect();
    let components: Vec<Cow<'_, [Felt]>> =
        trace_columns.iter().flat_map(|c| base_components(c)).collect();
    let columns: Vec<&[Felt]> = components.iter().map(|c| c.as_ref()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &columns },
        blowup,
        row_hashing: row_hashing::<E>(partitions, trace.num_cols()),
        hash,
    };
    commit(committer, &request, keep)
}

/// Commits to the composition polynomial (`DefaultConstraintCommitment::new`): interpolates the
/// evaluations over the constraint-evaluation domain with the domain offset, splits the
/// coefficients into `num_columns` columns of `trace_len`, extends and commits to them.
pub fn commit_composition<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    evaluations: &[E],
    trace_len: usize,
    num_columns: usize,
    blowup: usize,
    partitions: PartitionOptions,
    hash: HashFunction,
) -> Result<SegmentCommitment<E>> {
    let shape = CompositionShape { trace_len, num_columns, blowup };
    composition_segment(committer, evaluations, shape, partitions, hash, Keep::default())
}

/// The dimensions of a composition commitment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompositionShape {
    pub trace_len: usize,
    pub num_columns: usize,
    pub blowup: usize,
}

/// [`commit_composition`], keeping on the device what `keep` says.
pub(crate) fn composition_segment<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    evaluations: &[E],
    shape: CompositionShape,
    partitions: PartitionOptions,
    hash: HashFunction,
    keep: Keep,
) -> Result<SegmentCommitment<E>> {
    let CompositionShape { trace_len, num_columns, blowup } = shape;
    let components = base_components(evaluations);
    let slices: Vec<&[Felt]> = components.iter().map(|c| c.as_ref()).collect();
    let request = CommitRequest {
        input: PolyInput::Composition { components: &slices, column_len: trace_len, num_columns },
        blowup,
        row_hashing: row_hashing::<E>(partitions, num_columns),
        hash,
    };
    commit(committer, &request, keep)
}

/// [`composition_segment`] of the evaluations `kept` in the backend's memory (read to the host
/// by a backend that does not hold them).
pub(crate) fn kept_composition_segment<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    kept: &dyn KeptEvaluations,
    shape: CompositionShape,
    partitions: PartitionOptions,
    hash: HashFunction,
    keep: Keep,
) -> Result<SegmentCommitment<E>> {
    let CompositionShape { trace_len, num_columns, blowup } = shape;
    let request = CommitRequest {
        input: PolyInput::KeptComposition { evaluations: kept, column_len: trace_len, num_columns },
        blowup,
        row_hashing: row_hashing::<E>(partitions, num_columns),
        hash,
    };
    commit(committer, &request, keep)
}

fn commit<E: FieldElement<BaseField = Felt>>(
    committer: &dyn GpuCommitter,
    request: &CommitRequest<'_>,
    keep: Keep,
) -> Result<SegmentCommitment<E>> {
    let shape = request.validate()?;
    let span =
        info_span!("commit_segment", backend = %committer.backend(), blowup = request.blowup);
    let commitment = span.in_scope(|| committer.commit_keeping(request, keep))?;
    check_commitment(committer, &shape, &commitment)?;
    Ok(SegmentCommitment {
        polys: join_components(commitment.polys),
        lde: SegmentLde { rows: commitment.lde, _element: PhantomData },
        leaves: commitment.leaves,
        nodes: commitment.nodes,
        resident: commitment.resident,
        kept_rows: commitment.kept_rows,
        kept_tree: commitment.kept_tree,
    })
}

/// A [`GpuError::Device`] of `committer` unless `commitment` has the sizes of `shape`: the
/// polynomials (all of them, or none where they were kept), the LDE rows (none where they were
/// kept), the leaves and the nodes. A result of the wrong size is a backend failure (and falls
/// back to the CPU), never read.
fn check_commitment(
    committer: &dyn GpuCommitter,
    shape: &Shape,
    commitment: &Commitment,
) -> Result<()> {
    let Commitment { polys, lde, leaves, nodes, kept_rows, kept_tree, .. } = commitment;
    let polys_fit = polys.is_empty()
        || polys.len() == shape.num_cols && polys.iter().all(|p| p.len() == shape.poly_len);
    let lde_fits = lde.row_width == shape.row_width
        && lde.num_cols == shape.num_cols
        && (lde.num_rows() == shape.lde_len || kept_rows.is_some() && lde.data.is_empty())
        && lde.data.len().is_multiple_of(shape.row_width);
    let tree_fits = match kept_tree {
        Some(kept) => kept.num_leaves() == shape.lde_len && leaves.is_empty() && nodes.len() == 2,
        None => leaves.len() == shape.lde_len && nodes.len() == shape.lde_len,
    };
    if polys_fit && lde_fits && tree_fits {
        return Ok(());
    }
    let condition = format!(
        "returned a commitment of the wrong size: {} polynomials, {} LDE elements in rows of {} \
         ({} columns), {} leaves and {} nodes for {} columns of {} coefficients and {} LDE rows \
         of {}",
        polys.len(),
        lde.data.len(),
        lde.row_width,
        lde.num_cols,
        leaves.len(),
        nodes.len(),
        shape.num_cols,
        shape.poly_len,
        shape.lde_len,
        shape.row_width
    );
    Err(GpuError::internal(committer.backend(), "commit", condition))
}

// CONVERSIONS
// ================================================================================================

/// The base components of `values`: one borrowed slice for `E = Felt`, `k` owned columns for an
/// extension of degree `k` (copied on the copy threads).
pub(super) fn base_components<E: FieldElement<BaseField = Felt>>(
    values: &[E],
) -> Vec<Cow<'_, [Felt]>> {
    let k = E::EXTENSION_DEGREE;
    let flat = E::slice_as_base_elements(values);
    if k == 1 {
        return vec![Cow::Borrowed(flat)];
    }
    on_copy_pool(|| {
        (0..k).map(|c| Cow::Owned(flat.par_iter().skip(c).step_by(k).copied().collect())).collect()
    })
}

/// Joins groups of `k` base component columns back into `E` columns, one column per task (a
/// main segment's polynomials are hundreds of megabytes).
fn join_components<E: FieldElement<BaseField = Felt>>(base: Vec<Vec<Felt>>) -> Vec<Vec<E>> {
    let k = E::EXTENSION_DEGREE;
    base.par_chunks(k)
        .map(|group| {
            if k == 1 {
                return E::slice_from_base_elements(&group[0]).to_vec();
            }
            let n = group[0].len();
            let flat: Vec<Felt> = (0..n).flat_map(|i| group.iter().map(move |c| c[i])).collect();
            E::slice_from_base_elements(&flat).to_vec()
        })
        .collect()
}

/// How Winterfell's `commit_to_rows` hashes rows of `num_cols` elements of `E`.
fn row_hashing<E: FieldElement>(options: PartitionOptions, num_cols: usize) -> RowHashing {
    let size = options.partition_size::<E>(num_cols);
    if size == num_cols {
        RowHashing::WholeRow
    } else {
        RowHashing::Partitioned(size * E::EXTENSION_DEGREE)
    }
}
