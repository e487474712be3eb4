//! The CPU backend: rayon over Winterfell's own FFT and miden-crypto's hashes.
//!
//! Always available, used as the fallback when no GPU is, and the oracle every GPU backend is
//! tested against. It reuses Winterfell's functions wherever Winterfell has one, so its results
//! are Winterfell's by construction.

mod fri;

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;
use winter_math::{fft, FieldElement, StarkField};
use winter_prover::matrix::{build_segments, get_evaluation_offsets, ColMatrix};

use crate::{
    backend::Backend,
    committer::{
        check_lde_rows, check_leaves,
        fri::{FoldingChannel, FriLayers, FriRequest},
        grind::{first_nonce_on_host, GrindRequest},
        CommitRequest, Commitment, GpuCommitter, LdeRows, RowHashing, Shape, SEGMENT_WIDTH,
    },
    error::Result,
    hash::{Digest, HashFunction},
    host::{reserve_host, HostOptions},
};

// OPTIONS
// ================================================================================================

/// Options of the CPU backend.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CpuOptions {
    /// How result vectors are reserved.
    pub host: HostOptions,
}

// COMMITTER
// ================================================================================================

/// The multi-threaded CPU backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuCommitter {
    options: CpuOptions,
}

impl CpuCommitter {
    /// Creates the CPU backend with the default options; it cannot fail.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates the CPU backend with `options`; it cannot fail.
    pub fn with_options(options: CpuOptions) -> Self {
        Self { options }
    }
}

impl GpuCommitter for CpuCommitter {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }

    fn device_name(&self) -> String {
        format!("CPU ({} threads)", rayon::current_num_threads())
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        let shape = request.validate()?;
        let polys = info_span!("cpu.interpolate", cols = shape.num_cols, rows = shape.poly_len)
            .in_scope(|| request.input.interpolate_on_host())?;
        let lde = info_span!("cpu.lde", lde_rows = shape.lde_len)
            .in_scope(|| extend(polys.clone(), &shape, request.blowup, &self.options.host))?;
        let leaves = info_span!("cpu.hash_leaves", hash = %request.hash)
            .in_scope(|| hash_rows(&lde, request.row_hashing, request.hash));
        let nodes = info_span!("cpu.tree").in_scope(|| build_tree(&leaves, request.hash));
        let (leaves, nodes) = (leaves.into(), nodes.into());
        Ok(Commitment {
            polys,
            lde,
            leaves,
            nodes,
            resident: None,
            kept_rows: None,
            kept_tree: None,
        })
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>> {
        check_lde_rows(lde, row_hashing)?;
        Ok(hash_rows(lde, row_hashing, hash))
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>> {
        check_leaves(leaves)?;
        Ok(build_tree(leaves, hash))
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        info_span!("cpu.fri", layers = request.num_layers)
            .in_scope(|| fri::commit_fri(request, channel))
    }

    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        info_span!("cpu.grind", factor = request.grinding_factor)
            .in_scope(|| first_nonce_on_host(request))
    }
}

// STAGES
// ================================================================================================

/// Evaluates the polynomials over the LDE domain into `RowMatrix` layout: Winterfell's segments
/// (`build_segments`, as `RowMatrix::evaluate_polys_over` makes them), transposed here.
/// winter-prover 0.13's own transposition splits the rows into `2 · next_pow2(threads)` batches
/// of `rows / batches` rows, so on more threads than half the LDE's rows (32 and more threads
/// for an LDE of 32 rows, once it has 1024 words) it leaves every row uninitialized.
fn extend(
    polys: Vec<Vec<Felt>>,
    shape: &Shape,
    blowup: usize,
    host: &HostOptions,
) -> Result<LdeRows> {
    let mut data = reserve_host::<Felt>(shape.lde_len * shape.row_width, host)?;
    let twiddles = fft::get_twiddles::<Felt>(shape.poly_len);
    let offsets = get_evaluation_offsets::<Felt>(shape.poly_len, blowup, Felt::GENERATOR);
    let segments =
        build_segments::<Felt, SEGMENT_WIDTH>(&ColMatrix::new(polys), &twiddles, &offsets);
    data.resize(shape.lde_len * shape.row_width, Felt::ZERO);
    data.par_chunks_mut(shape.row_width).enumerate().for_each(|(r, row)| {
        for (words, segment) in row.chunks_exact_mut(SEGMENT_WIDTH).zip(&segments) {
            words.copy_from_slice(&segment[r]);
        }
    });
    Ok(LdeRows { data: data.into(), row_width: shape.row_width, num_cols: shape.num_cols })
}

/// Hashes every row into its leaf, as `RowMatrix::commit_to_rows` does.
pub(crate) fn hash_rows(lde: &LdeRows, row_hashing: RowHashing, hash: HashFunction) -> Vec<Digest> {
    (0..lde.num_rows())
        .into_par_iter()
        .with_min_len(128)
        .map(|i| hash_row(lde.row(i), row_hashing, hash))
        .collect()
}

/// Hashes one row into its leaf.
pub(crate) fn hash_row(row: &[Felt], row_hashing: RowHashing, hash: HashFunction) -> Digest {
    match row_hashing {
        RowHashing::WholeRow => hash.hash_elements(row),
        RowHashing::Partitioned(size) => {
            let digests: Vec<Digest> =
                row.chunks(size).map(|chunk| hash.hash_elements(chunk)).collect();
            hash.merge_many(&digests)
        },
    }
}

/// Builds the Merkle nodes level by level, each level in parallel.
pub(crate) fn build_tree(leaves: &[Digest], hash: HashFunction) -> Vec<Digest> {
    let n = leaves.len();
    let mut nodes = vec![Digest::ZERO; n];
    nodes[n / 2..].par_iter_mut().enumerate().with_min_len(256).for_each(|(i, node)| {
        *node = hash.merge(&[leaves[2 * i], leaves[2 * i + 1]]);
    });
    let mut start = n / 2;
    while start > 1 {
        let half = start / 2;
        let (upper, lower) = nodes.split_at_mut(start);
        upper[half..].par_iter_mut().enumerate().with_min_len(256).for_each(|(i, node)| {
            *node = hash.merge(&[lower[2 * i], lower[2 * i + 1]]);
        });
        start = half;
    }
    nodes
}
