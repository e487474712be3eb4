//! Row hashing and the Merkle levels on one GPU.
//!
//! The rows of a pass are hashed in chunks straight from the LDE (one GPU) or from the slab
//! gathered from every GPU (several): each thread absorbs one row with the permutation in
//! registers, writes its leaf and its row-major copy for the host. One event after each chunk
//! lets that chunk's rows download while later chunks hash. The chunks alternate between the
//! compute and side streams, so that each launch's last, partial wave of blocks overlaps the
//! next launch. The Merkle levels then reduce this GPU's blocks of leaves to the block roots.

use std::ops::Range;

use miden_crypto::Felt;

use super::{
    buffer::{DeviceSlice, DeviceSliceMut},
    driver::{DriverResult, Event, Stream},
    gpu::{Gpu, GpuState},
    kernels::{self, sig, Grid},
    launch::Kernel,
    plan::{Pass, Passes, Plan, Share},
    program::{HASH_BLOCK, MERKLE_TOP_BLOCK},
};
use crate::{
    error::to_u32,
    hash::{Digest, HashFunction},
};

/// Rows hashed per launch (the LDE download of one chunk overlaps the hashing of the next).
const HASH_CHUNK_ROWS: usize = 1 << 20;

/// The last `HASH_CHUNK_ROWS` rows of a GPU are hashed in this many launches, so less is left to
/// download once the hashing ends.
const LAST_CHUNK_SPLIT: usize = 4;

// ROW HASHING
// ================================================================================================

/// Enqueues the row hashes of this GPU's rows over the cosets of `pass` in chunks, read from the
/// slab where `from_slab` (several GPUs) else from the LDE, and with `copy_rows` their row-major
/// copies into the pass's half of the rows buffer.
pub(super) fn enqueue_hash(
    gpu: &Gpu,
    state: &mut GpuState,
    share: &Share,
    pass: Pass<'_>,
    from_slab: bool,
    copy_rows: bool,
) -> DriverResult<HashedChunks> {
    let (plan, passes) = (pass.plan, &pass.passes);
    let shape = &plan.shape;
    let (n, log_c) = (shape.poly_len, passes.log_cosets);
    let t_len = share.t.len();
    let bufs = &mut state.buffers;
    let mut rows = match copy_rows {
        true => {
            let rows_buffer = bufs.rows.get(&gpu.alloc, rows_len(plan, share, passes))?;
            Some(rows_buffer.slice_mut(rows_half(plan, share, passes, pass.index))?)
        },
        false => None,
    };
    let mut leaves = bufs.leaves.get(&gpu.alloc, shape.lde_len)?.as_slice_mut();
    // Source addressing of element (k, t, c): the LDE itself with one GPU, else the slab.
    let (base, k_stride, c_stride) = if from_slab {
        (bufs.slab.current()?.as_slice(), t_len, t_len << log_c)
    } else {
        (bufs.lde.current()?.as_slice(), n, n << log_c)
    };
    let kernel = gpu.kernels.hash_rows(plan.hash, plan.part != 0);
    let chunk_t = (HASH_CHUNK_ROWS >> log_c).max(1);
    // both streams start after the work enqueued so far (the LDE, or the gather)
    gpu.side.wait(&gpu.completion()?)?;
    let mut chunks = Vec::new();
    let mut t0 = share.t.start;
    while t0 < share.t.end {
        // the rows of the last chunks download after the hashing ends: keep them short
        let size =
            if share.t.end - t0 <= chunk_t { (chunk_t / LAST_CHUNK_SPLIT).max(1) } else { chunk_t };
        let t1 = (t0 + size).min(share.t.end);
        let stream = if chunks.len() % 2 == 0 { &gpu.compute } else { &gpu.side };
        let rows_of = RowsOf {
            k_stride: k_stride as u64,
            t_stride: 1,
            c_stride: c_stride as u64,
            num_cols: to_u32(shape.num_cols, "columns of a commitment")?,
            part: plan.part,
            log_blowup: plan.log_blowup,
            k0: to_u32(pass.k0(), "the first coset of a pass")?,
            log_cosets: log_c,
            t0: t0 as u64,
            t_count: (t1 - t0) as u64,
            t_base: share.t.start as u64,
            row_width: to_u32(shape.row_width, "the row width of a commitment")?,
        };
        // SAFETY: the chunk's rows lie in `base` from element t0 - t.start on (columns
        // k_stride and cosets c_stride apart), their leaves in `leaves` (indexed by absolute
        // row) and their row-major copies (if made) in the pass's half of the rows buffer.
        unsafe {
            hash_rows(
                stream,
                kernel,
                base.slice(t0 - share.t.start..)?,
                leaves.reborrow(),
                rows.as_mut().map(|rows| rows.reborrow()),
                rows_of,
            )?;
        }
        chunks.push((t0..t1, gpu.completion_on(stream)?));
        t0 = t1;
    }
    // the compute stream's later work (the tree, the next pass) follows every chunk
    gpu.compute.wait(&gpu.completion_on(&gpu.side)?)?;
    Ok(HashedChunks { pass: pass.index, chunks })
}

/// The hash chunks of one pass on one GPU: each chunk's t-range and the event after it.
pub(super) struct HashedChunks {
    pub(super) pass: usize,
    pub(super) chunks: Vec<(Range<usize>, Event)>,
}

/// Elements of one pass's rows on the GPU doing `share`.
fn rows_half_len(plan: &Plan<'_>, share: &Share, passes: &Passes) -> usize {
    (share.t.len() << passes.log_cosets) * plan.shape.row_width
}

/// Elements of the rows buffer: one pass's rows, twice over when there are several passes (the
/// rows of one pass download while the next pass hashes into the other half).
fn rows_len(plan: &Plan<'_>, share: &Share, passes: &Passes) -> usize {
    let halves = if passes.count > 1 { 2 } else { 1 };
    rows_half_len(plan, share, passes) * halves
}

/// The elements of the rows buffer that pass `pass` hashes into.
pub(super) fn rows_half(
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    pass: usize,
) -> Range<usize> {
    let half = rows_half_len(plan, share, passes);
    let halves = if passes.count > 1 { 2 } else { 1 };
    let start = (pass % halves) * half;
    start..start + half
}

/// The scalars of a `hash_rows_*` launch (see `cuda/hash.cu`): which rows it reads, where in
/// its source, and how they are laid out.
pub(super) struct RowsOf {
    pub(super) k_stride: u64,
    pub(super) t_stride: u64,
    pub(super) c_stride: u64,
    pub(super) num_cols: u32,
    pub(super) part: u32,
    pub(super) log_blowup: u32,
    pub(super) k0: u32,
    pub(super) log_cosets: u32,
    pub(super) t0: u64,
    pub(super) t_count: u64,
    pub(super) t_base: u64,
    pub(super) row_width: u32,
}

/// Launches `kernel` on `stream` over `t_count` rows of each of the `2^log_cosets` cosets,
/// `kernel.lanes()` threads per row: their leaves into `leaves`, and with `rows_out` the rows
/// row-major.
///
/// # Safety
/// As [`kernels::hash_rows`]: the rows `rows` addresses lie in `src`, their leaves in `leaves`
/// and their copies in `rows_out`, which stay allocated until the kernel completes.
pub(super) unsafe fn hash_rows(
    stream: &Stream,
    kernel: &Kernel<sig::HashRows>,
    src: DeviceSlice<'_, Felt>,
    leaves: DeviceSliceMut<'_, Digest>,
    rows_out: Option<DeviceSliceMut<'_, Felt>>,
    rows: RowsOf,
) -> DriverResult<()> {
    let threads = (rows.t_count << rows.log_cosets) * u64::from(kernel.lanes());
    let grid = Grid {
        blocks: to_u32(threads.div_ceil(u64::from(HASH_BLOCK)), "blocks of a row-hashing launch")?,
        threads_per_block: HASH_BLOCK,
    };
    // SAFETY: the caller's promise.
    unsafe {
        kernels::hash_rows(
            kernel,
            stream,
            grid,
            src,
            rows.k_stride,
            rows.t_stride,
            rows.c_stride,
            rows.num_cols,
            rows.part,
            rows.log_blowup,
            rows.k0,
            rows.log_cosets,
            rows.t0,
            rows.t_count,
            leaves,
            rows_out,
            rows.t_base,
            rows.row_width,
        )
    }
}

// MERKLE LEVELS
// ================================================================================================

/// A GPU's Merkle levels whose nodes download as soon as they are built (while the levels
/// above them are computed), bottom level first: each level's node count and the event after
/// its kernel. The levels above them, a few MiB at most, download once the tree is done.
pub(super) struct EarlyLevels(pub(super) Vec<(usize, Event)>);

/// Smallest share of a level's nodes (bytes per GPU) that downloads on its own.
const EARLY_LEVEL_BYTES: usize = 4 << 20;

/// Enqueues the Merkle levels of this GPU's blocks, from the leaves up to the block roots, with
/// an event after each level large enough to download early.
pub(super) fn enqueue_tree(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    blocks: usize,
) -> DriverResult<EarlyLevels> {
    let lde_len = plan.shape.lde_len;
    let bufs = &mut state.buffers;
    let leaves = bufs.leaves.get(&gpu.alloc, lde_len)?.slice(..lde_len)?;
    let nodes = bufs.nodes.get(&gpu.alloc, lde_len)?.slice_mut(..lde_len)?;
    let mut tree = MerkleTree { hash: plan.hash, leaves, nodes, blocks };
    let mut early = Vec::new();
    tree.enqueue(gpu, &share.blocks, |count| {
        if count / blocks * share.blocks.len() * 32 >= EARLY_LEVEL_BYTES {
            early.push((count, gpu.completion()?));
        }
        Ok(())
    })?;
    Ok(EarlyLevels(early))
}

/// Merkle levels over `leaves` into `nodes` (of the same length, Winterfell's layout) for
/// blocks `mine` of `blocks`.
pub(super) fn merkle_levels(
    gpu: &Gpu,
    hash: HashFunction,
    leaves: DeviceSlice<'_, Digest>,
    nodes: DeviceSliceMut<'_, Digest>,
    blocks: usize,
    mine: &Range<usize>,
) -> DriverResult<()> {
    MerkleTree { hash, leaves, nodes, blocks }.enqueue(gpu, mine, |_| Ok(()))
}

/// A Merkle tree on the device over `leaves`, into `nodes` (one per leaf), built in `blocks`
/// subtrees.
struct MerkleTree<'a> {
    hash: HashFunction,
    leaves: DeviceSlice<'a, Digest>,
    nodes: DeviceSliceMut<'a, Digest>,
    blocks: usize,
}

impl MerkleTree<'_> {
    /// Enqueues the levels of blocks `mine`, bottom up (down to one node per block): a launch
    /// per level while a level needs more than [`MERKLE_TOP_BLOCK`] threads, then one launch for
    /// every level above. `after(count)` runs after each level launched on its own.
    fn enqueue(
        &mut self,
        gpu: &Gpu,
        mine: &Range<usize>,
        mut after: impl FnMut(usize) -> DriverResult<()>,
    ) -> DriverResult<()> {
        let lanes = gpu.kernels.merkle_level(self.hash).lanes() as usize;
        let counts: Vec<usize> =
            std::iter::successors(Some(self.leaves.len() / 2), |c| Some(c / 2))
                .take_while(|&c| c >= self.blocks && c >= 1)
                .collect();
        for (i, &count) in counts.iter().enumerate() {
            if mine.len() * (count / self.blocks) * lanes <= MERKLE_TOP_BLOCK as usize {
                return self.enqueue_top(gpu, mine, count, counts.len() - i);
            }
            self.enqueue_level(gpu, mine, count)?;
            after(count)?;
        }
        Ok(())
    }

    /// The level of `count` nodes for blocks `mine`: its children (the leaves for the bottom
    /// level, else nodes `2·count..4·count`), the nodes below `2·count` (where it and every level
    /// above it go), its first parent and its parent count.
    fn level(
        &mut self,
        mine: &Range<usize>,
        count: usize,
    ) -> DriverResult<(DeviceSlice<'_, Digest>, DeviceSliceMut<'_, Digest>, usize, usize)> {
        let per_block = count / self.blocks;
        let first = mine.start * per_block;
        let parents = mine.len() * per_block;
        let children_range = 2 * first..2 * (first + parents);
        let (lower, upper) = self.nodes.reborrow().split_at(2 * count)?;
        let children = if count == self.leaves.len() / 2 {
            self.leaves.slice(children_range)?
        } else {
            upper.into_read().slice(children_range)?
        };
        Ok((children, lower, first, parents))
    }

    /// Enqueues the level of `count` nodes for blocks `mine`: nodes `count..2·count`.
    fn enqueue_level(&mut self, gpu: &Gpu, mine: &Range<usize>, count: usize) -> DriverResult<()> {
        let kernel = gpu.kernels.merkle_level(self.hash);
        let (children, lower, first, parents_count) = self.level(mine, count)?;
        let parents = lower.into_slice(count + first..count + first + parents_count)?;
        let threads = parents_count as u64 * u64::from(kernel.lanes());
        let grid = Grid {
            blocks: to_u32(threads.div_ceil(u64::from(HASH_BLOCK)), "blocks of a Merkle level")?,
            threads_per_block: HASH_BLOCK,
        };
        // SAFETY: `children` holds two children for each of the `parents_count` parents.
        unsafe {
            kernels::merkle_level(
                kernel,
                &gpu.compute,
                grid,
                children,
                parents,
                parents_count as u64,
            )
        }
    }

    /// Enqueues the `levels` levels from the level of `count` nodes up for blocks `mine`, in
    /// one block.
    fn enqueue_top(
        &mut self,
        gpu: &Gpu,
        mine: &Range<usize>,
        count: usize,
        levels: usize,
    ) -> DriverResult<()> {
        let kernel = gpu.kernels.merkle_top(self.hash);
        let (children, lower, first, parents) = self.level(mine, count)?;
        let grid = Grid { blocks: 1, threads_per_block: MERKLE_TOP_BLOCK };
        let levels = to_u32(levels as u64, "Merkle levels in one block")?;
        // SAFETY: `children` holds two children for each of the `parents` parents, and `lower`
        // every node of the levels above (block counts and levels are powers of two, so each
        // level's first node and count are the one below's halved).
        unsafe {
            kernels::merkle_top(
                kernel,
                &gpu.compute,
                grid,
                children,
                lower,
                count as u64,
                first as u64,
                parents as u64,
                levels,
            )
        }
    }
}
