//! The trait's single stages on the first GPU: [`GpuCommitter::hash_rows`] over host rows and
//! [`GpuCommitter::build_tree`] over host leaves.
//!
//! Each uploads its input through the pinned ring, runs the same kernels as the commitment
//! (one hashing launch over every row, or every Merkle level) and downloads the digests.
//!
//! [`GpuCommitter::hash_rows`]: crate::committer::GpuCommitter::hash_rows
//! [`GpuCommitter::build_tree`]: crate::committer::GpuCommitter::build_tree

use miden_crypto::Felt;
use winter_math::FieldElement;

use super::{
    assemble::download_vec,
    gpu::{Gpu, GpuState},
    hashing::{merkle_levels, HashRowsArgs},
    memory,
    plan::partition_size,
};
use crate::{
    committer::{LdeRows, RowHashing},
    error::Result,
    hash::{Digest, HashFunction},
};

// SINGLE STAGES
// ================================================================================================

/// Hashes host rows on `gpu`, its rows and leaves within the budget `limit` (as
/// [`memory::fit`] counts it).
pub(super) fn hash_rows(
    gpu: &Gpu,
    state: &mut GpuState,
    lde: &LdeRows,
    row_hashing: RowHashing,
    hash: HashFunction,
    limit: Option<u64>,
) -> Result<Vec<Digest>> {
    let num_rows = lde.num_rows();
    if num_rows == 0 {
        return Ok(Vec::new());
    }
    memory::fit(gpu, state, (lde.data.len() * 8 + num_rows * 32) as u64, &[], limit)?;
    let bufs = &mut state.buffers;
    let src = bufs.source.get(&gpu.alloc, lde.data.len() * 8)?;
    let leaves = bufs.leaves.get(&gpu.alloc, num_rows * 32)?;
    gpu.upload(&mut state.ring, src, Felt::elements_as_bytes(&lde.data))?;
    let _uploaded = gpu.wait_for_uploads()?;
    let part = partition_size(row_hashing);
    HashRowsArgs {
        src,
        k_stride: 0,
        t_stride: lde.row_width as u64,
        c_stride: 1,
        num_cols: lde.num_cols as u32,
        part,
        log_blowup: 0,
        k0: 0,
        log_cosets: 0,
        t0: 0,
        t_count: num_rows as u64,
        leaves,
        rows_out: 0,
        t_base: 0,
        row_width: lde.row_width as u32,
    }
    .launch(&gpu.compute, gpu.kernels.hash_rows(hash, part != 0))?;
    let done = gpu.completion()?;
    download_vec(gpu, state, leaves, num_rows, &done)
}

/// Builds the Merkle nodes over host leaves on `gpu`, its leaves and nodes within the budget
/// `limit` (as [`memory::fit`] counts it).
pub(super) fn build_tree(
    gpu: &Gpu,
    state: &mut GpuState,
    leaves: &[Digest],
    hash: HashFunction,
    limit: Option<u64>,
) -> Result<Vec<Digest>> {
    let n = leaves.len();
    memory::fit(gpu, state, (n * 32 * 2) as u64, &[], limit)?;
    let bufs = &mut state.buffers;
    let leaves_ptr = bufs.leaves.get(&gpu.alloc, n * 32)?;
    let nodes_ptr = bufs.nodes.get(&gpu.alloc, n * 32)?;
    gpu.upload(&mut state.ring, leaves_ptr, Digest::slice_as_bytes(leaves))?;
    let _uploaded = gpu.wait_for_uploads()?;
    merkle_levels(gpu, hash, leaves_ptr, nodes_ptr, n, 1, &(0..1))?;
    let done = gpu.completion()?;
    let mut nodes: Vec<Digest> = download_vec(gpu, state, nodes_ptr, n, &done)?;
    nodes[0] = Digest::ZERO;
    Ok(nodes)
}
