//! Host glue between Winterfell's segment types and a [`GpuCommitter`] request.
//!
//! Extension-field columns are split into base components on the way in and joined on the way
//! out (see the module docs of [`crate::committer`]); the backend result becomes a typed LDE
//! view and a `MerkleTree<H>`.

use std::{borrow::Cow, marker::PhantomData, sync::Arc};

use miden_crypto::{Felt, Word};
use tracing::{info_span, warn};
use winter_air::PartitionOptions;
use winter_crypto::MerkleTree;
use winter_math::FieldElement;

use crate::{
    committer::{CommitRequest, Commitment, GpuCommitter, LdeRows, RowHashing},
    cpu::CpuCommitter,
    hash::GpuHasher,
};

// COMMITTER HANDLE
// ================================================================================================

/// The committer a prover uses, and whether a failure falls back to the CPU.
#[derive(Clone)]
pub(crate) struct CommitterHandle {
    pub committer: Arc<dyn GpuCommitter>,
    pub cpu_fallback: bool,
}

impl CommitterHandle {
    /// Runs `request` on the backend. Winterfell's trait methods return no `Result`, so a backend
    /// error either falls back to the CPU with a warning or, if the caller disabled fallback,
    /// panics with the typed error's message; a wrong commitment is never returned.
    pub fn commit(&self, request: &CommitRequest<'_>) -> Commitment {
        let backend = self.committer.backend();
        let span = info_span!("commit_segment", %backend, blowup = request.blowup).entered();
        let result = self.committer.commit(request);
        drop(span);
        match result {
            Ok(commitment) => commitment,
            Err(error) if self.cpu_fallback => {
                warn!(%backend, %error, "backend failed; recomputing this commitment on the CPU");
                CpuCommitter::new()
                    .commit(request)
                    .unwrap_or_else(|e| panic!("CPU fallback failed: {e}"))
            },
            Err(error) => panic!("{backend} commitment failed (CPU fallback disabled): {error}"),
        }
    }
}

// TYPED LDE VIEW
// ================================================================================================

/// The LDE of one segment as rows of `E` (Winterfell's `RowMatrix<E>` layout).
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

    /// The base-element rows as the backend produced them.
    pub fn base_rows(&self) -> &LdeRows {
        &self.rows
    }
}

/// One committed segment: polynomials (as `E` columns), LDE and Merkle tree.
pub(crate) struct CommittedSegment<E, H: GpuHasher> {
    pub polys: Vec<Vec<E>>,
    pub lde: SegmentLde<E>,
    pub tree: MerkleTree<H>,
}

// CONVERSIONS
// ================================================================================================

/// The base components of `values`: one slice for `E = Felt`, `k` copies for an extension.
pub(crate) fn base_components<E: FieldElement<BaseField = Felt>>(values: &[E]) -> Vec<Cow<'_, [Felt]>> {
    let k = E::EXTENSION_DEGREE;
    let flat = E::slice_as_base_elements(values);
    if k == 1 {
        return vec![Cow::Borrowed(flat)];
    }
    (0..k).map(|c| Cow::Owned(flat.iter().skip(c).step_by(k).copied().collect())).collect()
}

/// Joins groups of `k` base component columns back into `E` columns.
fn join_components<E: FieldElement<BaseField = Felt>>(base: Vec<Vec<Felt>>) -> Vec<Vec<E>> {
    let k = E::EXTENSION_DEGREE;
    if k == 1 {
        return base.into_iter().map(|c| E::slice_from_base_elements(&c).to_vec()).collect();
    }
    base.chunks(k)
        .map(|group| {
            let n = group[0].len();
            let flat: Vec<Felt> = (0..n).flat_map(|i| group.iter().map(move |c| c[i])).collect();
            E::slice_from_base_elements(&flat).to_vec()
        })
        .collect()
}

/// How Winterfell's `commit_to_rows` hashes rows of `num_cols` elements of `E`.
pub(crate) fn row_hashing<E: FieldElement>(options: PartitionOptions, num_cols: usize) -> RowHashing {
    let size = options.partition_size::<E>(num_cols);
    if size == num_cols {
        RowHashing::WholeRow
    } else {
        RowHashing::Partitioned(size * E::EXTENSION_DEGREE)
    }
}

/// Turns a backend [`Commitment`] into Winterfell types.
pub(crate) fn into_segment<E, H>(commitment: Commitment) -> CommittedSegment<E, H>
where
    E: FieldElement<BaseField = Felt>,
    H: GpuHasher,
{
    let Commitment { polys, lde, leaves, nodes } = commitment;
    let tree = MerkleTree::from_raw_parts(
        nodes.into_iter().map(Word::new).collect(),
        leaves.into_iter().map(Word::new).collect(),
    )
    .expect("an LDE domain has at least 4 rows, a power of two");
    CommittedSegment {
        polys: join_components(polys),
        lde: SegmentLde { rows: lde, _element: PhantomData },
        tree,
    }
}
