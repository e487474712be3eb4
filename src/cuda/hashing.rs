//! Row hashing and the Merkle levels on one GPU.
//!
//! The rows of a pass are hashed in chunks straight from the LDE (one GPU) or from the slab
//! gathered from every GPU (several): each thread absorbs one row with the permutation in
//! registers, writes its leaf and its row-major copy for the host. One event after each chunk
//! lets that chunk's rows download while later chunks hash. The chunks alternate between the
//! compute and side streams, so that each launch's last, partial wave of blocks overlaps the
//! next launch. The Merkle levels then reduce this GPU's blocks of leaves to the block roots.

use super::{
    driver::{DriverResult, Event, Stream},
    gpu::{Gpu, GpuState},
    launch::{kernel_args, Kernel},
    plan::{Passes, Plan, Share},
    program::HASH_BLOCK,
};
use crate::hash::HashFunction;

/// Rows hashed per launch (the LDE download of one chunk overlaps the hashing of the next).
const HASH_CHUNK_ROWS: usize = 1 << 20;

/// The last `HASH_CHUNK_ROWS` rows of a GPU are hashed in this many launches, so less is left to
/// download once the hashing ends.
const LAST_CHUNK_SPLIT: usize = 4;

// ROW HASHING
// ================================================================================================

/// Enqueues the row hashes of this GPU's rows over pass `pass`'s cosets in chunks, into the
/// pass's half of the rows buffer.
pub(super) fn enqueue_hash(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    from_slab: bool,
    passes: &Passes,
    pass: usize,
) -> DriverResult<HashedChunks> {
    let shape = &plan.shape;
    let (n, log_c) = (shape.poly_len, passes.log_cosets);
    let t_len = share.t.len();
    let rows = rows_half(gpu, state, plan, share, passes, pass)?;
    let bufs = &mut state.buffers;
    let leaves = bufs.leaves.get(&gpu.alloc, shape.lde_len * 32)?;
    // Source addressing of element (k, t, c): the LDE itself with one GPU, else the slab.
    let (base, k_stride, c_stride) = if from_slab {
        (bufs.slab.get(&gpu.alloc, 0)?, t_len, t_len << log_c)
    } else {
        (bufs.lde.get(&gpu.alloc, 0)?, n, n << log_c)
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
        HashRowsArgs {
            src: base + ((t0 - share.t.start) * 8) as u64,
            k_stride: k_stride as u64,
            t_stride: 1,
            c_stride: c_stride as u64,
            num_cols: shape.num_cols as u32,
            part: plan.part,
            log_blowup: plan.log_blowup,
            k0: passes.k0(pass) as u32,
            log_cosets: log_c,
            t0: t0 as u64,
            t_count: (t1 - t0) as u64,
            leaves,
            rows_out: rows,
            t_base: share.t.start as u64,
            row_width: shape.row_width as u32,
        }
        .launch(stream, kernel)?;
        chunks.push((t0..t1, gpu.completion_on(stream)?));
        t0 = t1;
    }
    // the compute stream's later work (the tree, the next pass) follows every chunk
    gpu.compute.wait(&gpu.completion_on(&gpu.side)?)?;
    Ok(HashedChunks { pass, chunks })
}

/// The hash chunks of one pass on one GPU: each chunk's t-range and the event after it.
pub(super) struct HashedChunks {
    pub(super) pass: usize,
    pub(super) chunks: Vec<(std::ops::Range<usize>, Event)>,
}

/// The device address of the rows buffer half that pass `pass` hashes into.
pub(super) fn rows_half(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    pass: usize,
) -> DriverResult<u64> {
    let half_bytes = (share.t.len() << passes.log_cosets) * plan.shape.row_width * 8;
    let halves = if passes.count > 1 { 2 } else { 1 };
    let rows = state.buffers.rows.get(&gpu.alloc, half_bytes * halves)?;
    Ok(rows + ((pass % halves) * half_bytes) as u64)
}

/// The `hash_rows_*` kernels' parameters (cuda/hash.cu), in their order.
pub(super) struct HashRowsArgs {
    pub(super) src: u64,
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
    pub(super) leaves: u64,
    pub(super) rows_out: u64,
    pub(super) t_base: u64,
    pub(super) row_width: u32,
}

impl HashRowsArgs {
    /// Launches `kernel` on `stream` over `t_count` rows of each of the `2^log_cosets` cosets,
    /// `kernel.lanes()` threads per row.
    pub(super) fn launch(self, stream: &Stream, kernel: &Kernel) -> DriverResult<()> {
        let Self {
            mut src,
            mut k_stride,
            mut t_stride,
            mut c_stride,
            mut num_cols,
            mut part,
            mut log_blowup,
            mut k0,
            mut log_cosets,
            mut t0,
            mut t_count,
            mut leaves,
            mut rows_out,
            mut t_base,
            mut row_width,
        } = self;
        let threads = ((t_count as usize) << log_cosets) * kernel.lanes() as usize;
        let mut args = kernel_args!(
            src, k_stride, t_stride, c_stride, num_cols, part, log_blowup, k0, log_cosets, t0,
            t_count, leaves, rows_out, t_base, row_width
        );
        // SAFETY: the arguments are the kernels' parameters in order; callers size the buffers
        // for the addressed rows.
        unsafe {
            kernel.launch(
                stream,
                threads.div_ceil(HASH_BLOCK as usize) as u32,
                HASH_BLOCK,
                &mut args,
            )
        }
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
    let leaves = bufs.leaves.get(&gpu.alloc, lde_len * 32)?;
    let nodes = bufs.nodes.get(&gpu.alloc, lde_len * 32)?;
    let tree = MerkleTree { hash: plan.hash, leaves, nodes, num_leaves: lde_len, blocks };
    let mut early = Vec::new();
    for count in tree.level_counts() {
        tree.enqueue_level(gpu, &share.blocks, count)?;
        if count / blocks * share.blocks.len() * 32 >= EARLY_LEVEL_BYTES {
            early.push((count, gpu.completion()?));
        }
    }
    Ok(EarlyLevels(early))
}

/// Merkle levels over `leaves` (device) into `nodes` (device, Winterfell's layout) for blocks
/// `mine` of `blocks`.
pub(super) fn merkle_levels(
    gpu: &Gpu,
    hash: HashFunction,
    leaves: u64,
    nodes: u64,
    num_leaves: usize,
    blocks: usize,
    mine: &std::ops::Range<usize>,
) -> DriverResult<()> {
    let tree = MerkleTree { hash, leaves, nodes, num_leaves, blocks };
    tree.level_counts().try_for_each(|count| tree.enqueue_level(gpu, mine, count))
}

/// A Merkle tree of `num_leaves` leaves on the device, built in `blocks` subtrees.
struct MerkleTree {
    hash: HashFunction,
    leaves: u64,
    nodes: u64,
    num_leaves: usize,
    blocks: usize,
}

impl MerkleTree {
    /// The node counts of the levels built on the device, bottom up (down to one per block).
    fn level_counts(&self) -> impl Iterator<Item = usize> {
        let blocks = self.blocks;
        std::iter::successors(Some(self.num_leaves / 2), |c| Some(c / 2))
            .take_while(move |&c| c >= blocks && c >= 1)
    }

    /// Enqueues the level of `count` nodes for blocks `mine`.
    fn enqueue_level(
        &self,
        gpu: &Gpu,
        mine: &std::ops::Range<usize>,
        count: usize,
    ) -> DriverResult<()> {
        let kernel = gpu.kernels.merkle_level(self.hash);
        let per_block = count / self.blocks;
        let first = mine.start * per_block;
        let (mut children, mut parents, mut n) = (
            if count == self.num_leaves / 2 {
                self.leaves + (2 * first * 32) as u64
            } else {
                self.nodes + ((2 * count + 2 * first) * 32) as u64
            },
            self.nodes + ((count + first) * 32) as u64,
            (mine.len() * per_block) as u64,
        );
        let mut args = kernel_args!(children, parents, n);
        // SAFETY: arguments match the Merkle kernels; children and parents lie in the buffers.
        unsafe {
            kernel.launch(
                &gpu.compute,
                (n as usize * kernel.lanes() as usize).div_ceil(HASH_BLOCK as usize) as u32,
                HASH_BLOCK,
                &mut args,
            )
        }
    }
}
