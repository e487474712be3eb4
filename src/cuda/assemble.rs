//! The results on the host: their memory, the downloads that fill it, and their assembly.
//!
//! The result vectors are reserved up front and filled in their spare capacity by the
//! downloads of every GPU (polynomials by column, LDE rows by hash chunk, scattered to their
//! strided rows when the LDE is streamed, leaves by row range, nodes by subtree level); the
//! lengths are set once everything has landed, and the few nodes above the GPUs' subtrees are
//! merged on the host. The large results (LDE rows, leaves, nodes) go into blocks of the
//! committer's registered memory where it lends them (`result_pool`), else into vectors like
//! the rest.

use std::{mem::MaybeUninit, sync::Arc};

use miden_crypto::Felt;

use super::{
    buffer::{DeviceElement, DeviceSlice},
    driver::{DriverResult, Event},
    gpu::{Buffers, Gpu},
    hashing::{rows_half, EarlyLevels, HashedChunks},
    plan::{Passes, Plan, Share},
    result_pool::ResultPool,
    transfer::{self, Download, HostDst, Lane, Ring},
};
use crate::{
    committer::{Commitment, LdeRows, Shape},
    error::Result,
    hash::Digest,
    host::{reserve_host, spare_bytes, HostBuffer, HostOptions},
};

// HOST RESULTS
// ================================================================================================

/// The vectors of a commitment's results, reserved but not filled: the downloads write into
/// their spare capacity.
pub(super) struct HostResults {
    /// Polynomial coefficients, one vector per output column; none where they stay on the
    /// GPUs.
    polys: Vec<Vec<Felt>>,
    /// LDE rows, row-major and padded to the row width: each pass's rows download into it
    /// ([`row_downloads`]); none where they stay on the GPUs.
    pub(super) rows: Option<Landing<Felt>>,
    /// Leaves, one per LDE row; none where the tree stays on the GPUs.
    leaves: Option<Landing<Digest>>,
    /// Merkle nodes in Winterfell's layout; where the tree stays on the GPUs, the nodes from the
    /// root down to the Merkle blocks' roots alone.
    nodes: Landing<Digest>,
}

impl HostResults {
    /// Reserves the results of a commitment of `shape` as `host` says, the polynomials only
    /// `with_polys`, the rows only `with_rows`, the leaves and nodes only where `kept_tree` does
    /// not give the Merkle blocks of a tree kept on the GPUs (the large results in blocks of
    /// `pool` where it lends them).
    pub(super) fn reserve(
        shape: &Shape,
        with_polys: bool,
        with_rows: bool,
        kept_tree: Option<usize>,
        host: &HostOptions,
        pool: &Arc<ResultPool>,
    ) -> Result<Self> {
        let n = shape.poly_len;
        let lde_len = shape.lde_len;
        let poly_cols = if with_polys { shape.num_cols } else { 0 };
        let polys: Vec<Vec<Felt>> =
            (0..poly_cols).map(|_| reserve_host(n, host)).collect::<Result<_>>()?;
        let rows = match with_rows {
            true => Some(Landing::reserve(lde_len * shape.row_width, host, pool)?),
            false => None,
        };
        let (leaves, nodes) = match kept_tree {
            Some(blocks) => (None, Landing::Staged(reserve_host(2 * blocks, host)?)),
            None => {
                let leaves = Landing::reserve(lde_len, host, pool)?;
                (Some(leaves), Landing::reserve(lde_len, host, pool)?)
            },
        };
        Ok(Self { polys, rows, leaves, nodes })
    }

    /// The spare capacity of the large results (rows, leaves, nodes) in vectors, for the
    /// prefault (registered blocks were faulted in when they were registered).
    pub(super) fn large_spare_bytes(&mut self) -> [(usize, usize); 3] {
        let rows = self.rows.as_mut().map_or((0, 0), Landing::spare_bytes);
        let leaves = self.leaves.as_mut().map_or((0, 0), Landing::spare_bytes);
        [rows, leaves, self.nodes.spare_bytes()]
    }

    /// The last downloads of one GPU, of its `outputs` (`plan` walked in `passes`, the tree in
    /// `blocks` Merkle blocks): its polynomials where reserved (once interpolated), the last
    /// pass's rows, its leaves (after the last hash chunk) and its subtrees: the early levels one
    /// by one as they are built, the levels above them once the tree is done. Where the tree
    /// stays on the GPUs, its block roots alone.
    pub(super) fn final_downloads<'a>(
        &mut self,
        outputs: GpuOutputs<'a>,
        plan: &Plan<'_>,
        passes: &Passes,
        blocks: usize,
    ) -> DriverResult<Vec<Download<'a>>> {
        let GpuOutputs { buffers, share, interpolated, last, early, tree_done } = outputs;
        let (n, lde_len) = (plan.shape.poly_len, plan.shape.lde_len);
        // the polynomials are ready first: they download while the last pass hashes
        let mut list: Vec<Download<'_>> = Vec::new();
        if !self.polys.is_empty() {
            let polys = buffers.polys.current()?;
            for (local, c) in share.cols.clone().enumerate() {
                let src = polys.slice(local * n..(local + 1) * n)?;
                list.push(Download::new(src, spare(&mut self.polys[c], 0, n), Some(interpolated))?);
            }
        }
        if let Some(rows) = &mut self.rows {
            list.extend(row_downloads(buffers, plan, share, passes, last, rows)?);
        }
        let nodes = buffers.nodes.current()?;
        let mine = &share.blocks;
        let Some(leaves) = &mut self.leaves else {
            let (start, end) = (blocks + mine.start, blocks + mine.end);
            let dst = self.nodes.range(start, end - start);
            list.push(Download::new(nodes.slice(start..end)?, dst, Some(tree_done))?);
            return Ok(list);
        };
        // the leaves are final after the last hash chunk: their download overlaps the tree
        if let Some((_, last_chunk)) = last.chunks.last() {
            let (r0, r1) = (share.t.start << plan.log_blowup, share.t.end << plan.log_blowup);
            let src = buffers.leaves.current()?.slice(r0..r1)?;
            list.push(Download::new(src, leaves.range(r0, r1 - r0), Some(last_chunk))?);
        }
        for (count, done) in &early.0 {
            let per_block = count / blocks;
            let (start, end) = (count + mine.start * per_block, count + mine.end * per_block);
            let dst = self.nodes.range(start, end - start);
            list.push(Download::new(nodes.slice(start..end)?, dst, Some(done))?);
        }
        let below = early.0.last().map_or(lde_len, |&(count, _)| count);
        for (start, end) in subtree_ranges(below, blocks, mine) {
            let dst = self.nodes.range(start, end - start);
            list.push(Download::new(nodes.slice(start..end)?, dst, Some(tree_done))?);
        }
        Ok(list)
    }

    /// The commitment: sets the lengths of the results, then writes the nodes above the
    /// subtrees of `blocks` Merkle blocks (none for one block) and the unused node 0. Where the
    /// tree stays on the GPUs, its leaves are empty and its nodes are the `2·blocks` from node 0
    /// down to the block roots.
    ///
    /// # Safety
    /// Every element below each length must have been written by the downloads: every column,
    /// every row and leaf, and the subtree ranges of every block.
    pub(super) unsafe fn assemble(self, plan: &Plan<'_>, blocks: usize) -> Commitment {
        let Self { mut polys, rows, leaves, mut nodes } = self;
        let shape = &plan.shape;
        let (n, lde_len) = (shape.poly_len, shape.lde_len);
        // SAFETY: the elements below the lengths are written (the caller's promise) or are
        // written right here before use: node i < blocks after its children 2i and 2i + 1.
        unsafe {
            for p in &mut polys {
                p.set_len(n);
            }
            for i in (1..blocks).rev() {
                let children = [nodes.read(2 * i), nodes.read(2 * i + 1)];
                nodes.write(i, plan.hash.merge(&children));
            }
            nodes.write(0, Digest::ZERO);
            let data = match rows {
                Some(rows) => rows.finish(lde_len * shape.row_width),
                None => Vec::new().into(),
            };
            let lde = LdeRows { data, row_width: shape.row_width, num_cols: shape.num_cols };
            let (leaves, nodes) = match leaves {
                Some(leaves) => (leaves.finish(lde_len), nodes.finish(lde_len)),
                None => (Vec::new().into(), nodes.finish(2 * blocks)),
            };
            Commitment {
                polys,
                lde,
                leaves,
                nodes,
                resident: None,
                kept_rows: None,
                kept_tree: None,
            }
        }
    }
}

/// What one GPU leaves for the last downloads: its buffers and share, and the events after which
/// each part is final.
pub(super) struct GpuOutputs<'a> {
    pub(super) buffers: &'a Buffers,
    pub(super) share: &'a Share,
    /// After its polynomials.
    pub(super) interpolated: &'a Event,
    /// The last pass's hash chunks (each chunk's rows after its event, the leaves after the last).
    pub(super) last: &'a HashedChunks,
    /// The Merkle levels that download as soon as they are built.
    pub(super) early: &'a EarlyLevels,
    /// After its subtrees.
    pub(super) tree_done: &'a Event,
}

/// Where a large result lands on the host.
pub(super) enum Landing<T: DeviceElement> {
    /// A vector, written in its spare capacity through the pinned slots.
    Staged(Vec<T>),
    /// A block of registered memory, written by the DMA directly.
    Registered(HostBuffer<T>),
}

impl<T: DeviceElement> Landing<T> {
    /// `len` elements: a block of `pool` where it lends one, else a vector reserved as `host`
    /// says.
    fn reserve(len: usize, host: &HostOptions, pool: &Arc<ResultPool>) -> Result<Self> {
        match pool.take(len) {
            Some(block) => Ok(Self::Registered(block)),
            None => Ok(Self::Staged(reserve_host(len, host)?)),
        }
    }

    /// The spare capacity of a vector (nothing for a registered block).
    fn spare_bytes(&mut self) -> (usize, usize) {
        match self {
            Self::Staged(vec) => spare_bytes(vec),
            Self::Registered(_) => (0, 0),
        }
    }

    /// The host destination of elements `start..start + len`.
    fn range(&mut self, start: usize, len: usize) -> HostDst {
        self.destination(start, len, len, 1)
    }

    /// The host destination of `count` runs of `run` elements, `stride` elements apart, the
    /// first at `start`.
    fn destination(&mut self, start: usize, run: usize, stride: usize, count: usize) -> HostDst {
        match self {
            Self::Staged(vec) => spare_strided(vec, start, run, stride, count),
            Self::Registered(block) => {
                assert!(
                    count == 0 || start + (count - 1) * stride + run <= block.len(),
                    "destination exceeds the block"
                );
                let size = size_of::<T>();
                // SAFETY: every run lies in the block, registered until it goes back to the
                // pool (after the commitment's downloads), and each run goes to one download.
                unsafe {
                    HostDst::strided(
                        block.as_mut_ptr().add(start).cast(),
                        run * size,
                        stride * size,
                        count,
                    )
                    .registered()
                }
            },
        }
    }

    /// Element `i`, once written.
    ///
    /// # Safety
    /// A download or [`Self::write`] must have written element `i`.
    unsafe fn read(&mut self, i: usize) -> T {
        match self {
            // SAFETY: written (the caller's promise)
            Self::Staged(vec) => unsafe { vec.spare_capacity_mut()[i].assume_init() },
            Self::Registered(block) => block[i],
        }
    }

    /// Writes element `i` (below the reserved length).
    fn write(&mut self, i: usize, value: T) {
        match self {
            Self::Staged(vec) => {
                vec.spare_capacity_mut()[i] = MaybeUninit::new(value);
            },
            Self::Registered(block) => block[i] = value,
        }
    }

    /// The first `len` elements as a buffer.
    ///
    /// # Safety
    /// Every element below `len` must have been written.
    unsafe fn finish(self, len: usize) -> HostBuffer<T> {
        match self {
            Self::Staged(mut vec) => {
                // SAFETY: written (the caller's promise), within the reserved capacity
                unsafe { vec.set_len(len) };
                vec.into()
            },
            Self::Registered(block) => {
                debug_assert_eq!(block.len(), len);
                block
            },
        }
    }
}

// DOWNLOADS
// ================================================================================================

/// Runs the downloads of every GPU (one list per GPU) through their rings (one per GPU).
pub(super) fn download(
    gpus: &[&Gpu],
    rings: &mut [&mut Ring],
    jobs: Vec<Vec<Download<'_>>>,
) -> DriverResult<()> {
    let mut lanes: Vec<Lane<'_>> =
        gpus.iter().zip(rings.iter_mut()).map(|(gpu, ring)| gpu.copy_lane(ring)).collect();
    let stats = transfer::download(&mut lanes, jobs)?;
    tracing::info!(
        bytes = stats.bytes,
        direct_bytes = stats.direct,
        wait_ms = stats.wait.as_secs_f32() * 1e3,
        copy_ms = stats.copy.as_secs_f32() * 1e3,
        "cuda download: host time waiting for the GPUs and copying out of pinned memory"
    );
    Ok(())
}

/// The downloads of one pass's rows on one GPU into the host rows: per hash chunk, the
/// `(t1 - t0) · cosets` rows of the pass's rows buffer go to rows t·blowup + k0 .. + cosets
/// (contiguous when the pass holds every coset).
pub(super) fn row_downloads<'a>(
    buffers: &'a Buffers,
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    hashed: &'a HashedChunks,
    rows: &mut Landing<Felt>,
) -> DriverResult<Vec<Download<'a>>> {
    let rw = plan.shape.row_width;
    let half = buffers.rows.current()?.slice(rows_half(plan, share, passes, hashed.pass))?;
    let k0 = passes.k0(hashed.pass);
    hashed
        .chunks
        .iter()
        .map(|(range, event)| {
            let first = ((range.start - share.t.start) << passes.log_cosets) * rw;
            let src = half.slice(first..first + (range.len() << passes.log_cosets) * rw)?;
            let dst = rows.destination(
                ((range.start << plan.log_blowup) + k0) * rw,
                rw << passes.log_cosets,
                rw << plan.log_blowup,
                range.len(),
            );
            Download::new(src, dst, Some(event))
        })
        .collect()
}

/// Downloads `src` from `gpu` through `ring` once `ready` fires.
pub(super) fn download_vec<T: DeviceElement>(
    gpu: &Gpu,
    ring: &mut Ring,
    src: DeviceSlice<'_, T>,
    ready: &Event,
) -> Result<Vec<T>> {
    let count = src.len();
    let mut out: Vec<T> = reserve_host(count, &gpu.host)?;
    let job = Download::new(src, spare(&mut out, 0, count), Some(ready))?;
    download(&[gpu], &mut [ring], vec![vec![job]])?;
    // SAFETY: the download wrote all `count` values.
    unsafe { out.set_len(count) };
    Ok(out)
}

/// The host destination of `len` elements of `vec` starting at `start`, in its spare capacity.
pub(super) fn spare<T>(vec: &mut Vec<T>, start: usize, len: usize) -> HostDst {
    spare_strided(vec, start, len, len, 1)
}

/// The host destination of `count` runs of `run` elements of `vec`, `stride` elements apart,
/// the first at `start`, in its spare capacity.
fn spare_strided<T>(
    vec: &mut Vec<T>,
    start: usize,
    run: usize,
    stride: usize,
    count: usize,
) -> HostDst {
    let spare = vec.spare_capacity_mut();
    assert!(
        count == 0 || start + (count - 1) * stride + run <= spare.len(),
        "destination exceeds the reserved capacity"
    );
    let size = std::mem::size_of::<T>();
    // SAFETY: every run lies in the vector's allocation; each is handed to one download.
    unsafe {
        HostDst::strided(spare.as_mut_ptr().add(start).cast(), run * size, stride * size, count)
    }
}

/// Node ranges [start, end) a GPU owning `mine` of `blocks` Merkle blocks fills in the levels of
/// fewer than `below` nodes, level by level below the block roots, adjacent ranges merged.
fn subtree_ranges(
    below: usize,
    blocks: usize,
    mine: &std::ops::Range<usize>,
) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut count = blocks;
    while count < below {
        let per_block = count / blocks;
        let (start, end) = (count + mine.start * per_block, count + mine.end * per_block);
        match ranges.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => ranges.push((start, end)),
        }
        count *= 2;
    }
    ranges
}
