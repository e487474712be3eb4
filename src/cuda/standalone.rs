//! The trait's single stages on the first GPU: [`GpuCommitter::hash_rows`] over host rows,
//! [`GpuCommitter::build_tree`] over host leaves, and [`GpuCommitter::grind`].
//!
//! The first two upload their input through the pinned ring, run the same kernels as the
//! commitment (one hashing launch over every row, or every Merkle level) and download the
//! digests. Grinding launches batches of nonces until one is accepted.
//!
//! [`GpuCommitter::hash_rows`]: crate::committer::GpuCommitter::hash_rows
//! [`GpuCommitter::build_tree`]: crate::committer::GpuCommitter::build_tree
//! [`GpuCommitter::grind`]: crate::committer::GpuCommitter::grind

use super::{
    assemble::download_vec,
    gpu::{Gpu, GpuState},
    hashing::{hash_rows as enqueue_hash_rows, merkle_levels, RowsOf},
    kernels::{self, Grid},
    memory,
    plan::partition_size,
    program::HASH_BLOCK,
};
use crate::{
    backend::Backend,
    committer::{
        grind::{batch_len, first_in_batches, GrindRequest},
        LdeRows, RowHashing,
    },
    error::{to_u32, GpuError, Result},
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
    let src = bufs.source.get(&gpu.alloc, lde.data.len())?;
    let leaves = bufs.leaves.get(&gpu.alloc, num_rows)?;
    gpu.upload(&mut state.ring, src.slice_mut(..lde.data.len())?, &lde.data)?;
    let _uploaded = gpu.wait_for_uploads()?;
    let part = partition_size(row_hashing);
    let rows = RowsOf {
        k_stride: 0,
        t_stride: lde.row_width as u64,
        c_stride: 1,
        num_cols: to_u32(lde.num_cols, "columns of a row")?,
        part,
        log_blowup: 0,
        k0: 0,
        log_cosets: 0,
        t0: 0,
        t_count: num_rows as u64,
        t_base: 0,
        row_width: to_u32(lde.row_width, "the width of a row")?,
    };
    // SAFETY: `src` holds the rows (row_width apart, num_cols each), `leaves` one per row.
    unsafe {
        enqueue_hash_rows(
            &gpu.compute,
            gpu.kernels.hash_rows(hash, part != 0),
            src.as_slice(),
            leaves.as_slice_mut(),
            None,
            rows,
        )?;
    }
    let done = gpu.completion()?;
    download_vec(gpu, &mut state.ring, leaves.slice(..num_rows)?, &done)
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
    let device_leaves = bufs.leaves.get(&gpu.alloc, n)?;
    let device_nodes = bufs.nodes.get(&gpu.alloc, n)?;
    gpu.upload(&mut state.ring, device_leaves.slice_mut(..n)?, leaves)?;
    let _uploaded = gpu.wait_for_uploads()?;
    merkle_levels(gpu, hash, device_leaves.slice(..n)?, device_nodes.slice_mut(..n)?, 1, &(0..1))?;
    let done = gpu.completion()?;
    let mut nodes = download_vec(gpu, &mut state.ring, device_nodes.slice(..n)?, &done)?;
    nodes[0] = Digest::ZERO;
    Ok(nodes)
}

/// Nonces of one grinding launch: at least a wave of blocks, at most 2^24, so that one launch
/// stays short.
const GRIND_BATCH: (u64, u64) = (1 << 12, 1 << 24);

/// The first nonce `request` (validated) accepts, on `gpu`: batches in order, each launch
/// keeping its smallest accepted nonce, until one has any ([`batch_len`]).
pub(super) fn grind(gpu: &Gpu, request: &GrindRequest) -> Result<u64> {
    let kernel = gpu.kernels.grind(request.hash).ok_or(GpuError::Unsupported {
        backend: Backend::Cuda,
        operation: "grinding with this hash",
    })?;
    let state: Vec<u64> = request.state.iter().map(|x| x.inner()).collect();
    let state = gpu.upload_table(&state)?;
    let mut found = gpu.upload_table(&[u64::MAX])?;
    let batch = batch_len(request.grinding_factor, GRIND_BATCH.0, GRIND_BATCH.1);
    first_in_batches(batch, |start, count| {
        let blocks = to_u32(count.div_ceil(HASH_BLOCK as u64), "blocks of a grinding launch")?;
        // SAFETY: `found` holds one word and `state` twelve, as the kernel reads them.
        unsafe {
            kernels::grind(
                kernel,
                &gpu.compute,
                Grid { blocks, threads_per_block: HASH_BLOCK },
                found.as_slice_mut(),
                state.as_slice(),
                start,
                count,
                request.grinding_factor,
            )?;
        }
        let nonce = gpu.download_table(found.as_slice())?[0];
        Ok((nonce != u64::MAX).then_some(nonce))
    })
}
