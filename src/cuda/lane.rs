//! One GPU's lane through a commitment: the GPU and its state, its share of the work, the
//! timeline of its compute stream, and the events that order its stages, its exchange of LDE
//! rows with the other lanes and its downloads.
//!
//! A lane's methods enqueue its own stages (`lde`, `hashing`) on its compute stream; the
//! exchange ([`gather`]) reads one lane's LDE into another's slab, so it takes every lane. The
//! order in which the lanes are walked is `commit`'s.

use std::ops::Range;

use miden_crypto::Felt;

use super::{
    assemble::{row_downloads, GpuOutputs, HostResults, Landing},
    buffer::Scratch,
    driver::{DriverResult, Event},
    gpu::{Gpu, GpuState},
    hashing::{enqueue_hash, enqueue_tree, EarlyLevels, HashedChunks},
    kernels::{self, Grid},
    lde::{enqueue_pass_lde, Upload},
    plan::{Pass, Passes, Plan, Share},
    timeline::{Stage, Timeline},
    transfer::{Download, Ring},
};
use crate::{committer::StageTimes, error::Result};

// LANE
// ================================================================================================

/// How a commitment is split between its lanes, the same for each of them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Split {
    /// The lanes (GPUs) that do the commitment: with several, each one hashes the rows it
    /// gathered from every lane into its slab, else the rows of its own LDE.
    pub(super) lanes: usize,
    /// Whether the rows come to the host: the hashing copies them row-major for the downloads.
    pub(super) rows_to_host: bool,
    /// The Merkle blocks of the tree (each lane builds the subtrees of its share's blocks).
    pub(super) blocks: usize,
}

impl Split {
    /// Whether the lanes exchange LDE rows (several lanes).
    fn exchanges(&self) -> bool {
        self.lanes > 1
    }
}

/// One GPU's part in a commitment, from its upload to its last downloads.
pub(super) struct GpuLane<'a> {
    gpu: &'a Gpu,
    state: &'a mut GpuState,
    share: Share,
    split: Split,
    timeline: Timeline,
    /// The upload, interpolation and first-pass LDE, group by group; its events stay for the
    /// gathers of step 1 and the polynomials' download.
    upload: Upload,
    /// After the lane's LDE of the current pass (passes after the first): the lanes gather its
    /// rows once it has passed.
    lde_done: Option<Event>,
    /// After the lane gathered the rows of the current pass: the next pass's LDE on the other
    /// lanes overwrites what it gathered from, so it waits for this.
    gathered: Option<Event>,
    /// The hash chunks of the last pass hashed, until their rows download.
    hashed: Option<HashedChunks>,
    /// The lane's subtrees, once the last pass has built them: the levels that download early,
    /// and the event after the tree.
    tree: Option<(EarlyLevels, Event)>,
}

impl<'a> GpuLane<'a> {
    /// The lane of `gpu` doing `share` of a commitment split as `split`: starts its timeline,
    /// uploads its small tables and sizes its buffers for the `first` pass (its coset tables
    /// `coset_tables`), and with several lanes sizes its slab.
    pub(super) fn open(
        gpu: &'a Gpu,
        state: &'a mut GpuState,
        share: Share,
        split: Split,
        first: Pass<'_>,
        coset_tables: &[u64],
    ) -> Result<Self> {
        let timeline = Timeline::new(gpu)?;
        let upload = Upload::new(gpu, state, first.plan, &share, &first.passes, coset_tables)?;
        if split.exchanges() {
            let slab_len = first.plan.shape.num_cols * (share.t.len() << first.passes.log_cosets);
            state.buffers.slab.get(&gpu.alloc, slab_len)?;
        }
        Ok(Self {
            gpu,
            state,
            share,
            split,
            timeline,
            upload,
            lde_done: None,
            gathered: None,
            hashed: None,
            tree: None,
        })
    }

    /// Upload groups this lane has (the rounds of step 1 run to the largest count).
    pub(super) fn upload_groups(&self) -> usize {
        self.upload.groups.len()
    }

    /// The lane's local output columns of its upload group `round`, if it has one.
    pub(super) fn group_cols(&self, round: usize) -> Option<Range<usize>> {
        self.upload.groups.get(round).map(|(cols, _)| cols.clone())
    }

    /// The lane's local output columns.
    pub(super) fn cols(&self) -> Range<usize> {
        0..self.share.cols.len()
    }

    /// Uploads, interpolates and extends over the `first` pass's cosets the lane's group `round`
    /// (if it has one).
    pub(super) fn enqueue_group(&mut self, first: Pass<'_>, round: usize) -> Result<()> {
        self.upload.enqueue_group(self.gpu, self.state, first, round, &mut self.timeline)
    }

    /// Notes on the timeline that the first pass's LDE is enqueued.
    pub(super) fn first_lde_done(&mut self) {
        self.timeline.first_lde_done();
    }

    /// The CUDA ordinal of the lane's GPU.
    pub(super) fn ordinal(&self) -> usize {
        self.gpu.ordinal
    }

    /// Ends the current span of the lane's compute stream as `stage`.
    pub(super) fn mark(&mut self, stage: Stage) -> DriverResult<()> {
        self.timeline.mark(self.gpu, stage)
    }

    /// The event after the lane's latest LDE: of the current pass where one was enqueued, else
    /// of the first pass's latest group.
    fn lde_ready(&self) -> &Event {
        self.lde_done.as_ref().unwrap_or(&self.upload.lde_ready)
    }

    /// The hash chunks of the last pass hashed, taken (their rows are to download).
    pub(super) fn take_hashed(&mut self) -> Option<HashedChunks> {
        self.hashed.take()
    }

    /// Hashes the lane's rows of `pass` (after what is enqueued: the LDE, or the gathers), and
    /// on the last pass builds its subtrees; records first that its gathers of the pass are
    /// enqueued (what the next pass's LDE on the other lanes waits for).
    pub(super) fn hash(&mut self, pass: Pass<'_>) -> DriverResult<()> {
        let gpu = self.gpu;
        self.gathered = Some(gpu.completion()?);
        let (from_slab, copy_rows) = (self.split.exchanges(), self.split.rows_to_host);
        let hashed = enqueue_hash(gpu, self.state, &self.share, pass, from_slab, copy_rows)?;
        self.hashed = Some(hashed);
        self.mark(Stage::Hash)?;
        if pass.is_last() {
            let blocks = self.split.blocks;
            let early_levels = enqueue_tree(gpu, self.state, pass.plan, &self.share, blocks)?;
            self.mark(Stage::Tree)?;
            self.tree = Some((early_levels, gpu.completion()?));
        }
        Ok(())
    }

    /// The downloads of the rows of `hashed` (an earlier pass of this lane, over `plan` walked in
    /// `passes`) into `rows`, with the ring they go through.
    pub(super) fn downloads_of_pass<'l>(
        &'l mut self,
        plan: &Plan<'_>,
        passes: &Passes,
        hashed: &'l HashedChunks,
        rows: &mut Landing<Felt>,
    ) -> DriverResult<(Vec<Download<'l>>, &'l mut Ring)> {
        let GpuState { buffers, ring, .. } = &mut *self.state;
        let jobs = row_downloads(buffers, plan, &self.share, passes, hashed, rows)?;
        Ok((jobs, ring))
    }

    /// The last downloads of the lane into `host` after the `last` pass (see
    /// [`HostResults::final_downloads`]), with the ring they go through.
    pub(super) fn last_downloads<'l>(
        &'l mut self,
        host: &mut HostResults,
        last: Pass<'_>,
    ) -> DriverResult<(Vec<Download<'l>>, &'l mut Ring)> {
        let Self { state, share, split, upload, hashed, tree, .. } = self;
        let GpuState { buffers, ring, .. } = &mut **state;
        let (Some(hashed), Some((early, tree_done))) = (hashed.as_ref(), tree.as_ref()) else {
            unreachable!("the last pass hashed the rows and built the subtrees");
        };
        let outputs = GpuOutputs {
            buffers,
            share,
            interpolated: &upload.polys_ready,
            last: hashed,
            early,
            tree_done,
        };
        let jobs = host.final_downloads(outputs, last.plan, &last.passes, split.blocks)?;
        Ok((jobs, ring))
    }

    /// The lane's stage times over `passes` passes, once its work is done.
    pub(super) fn stage_times(&self, passes: usize) -> DriverResult<StageTimes> {
        self.timeline.stage_times(self.gpu.ordinal, passes, self.split.exchanges())
    }
}

// EXCHANGE
// ================================================================================================

/// Extends lane `me` over the cosets of `pass` (a pass after the first), once every other lane
/// has gathered from its LDE of the pass before (which this one overwrites).
pub(super) fn enqueue_pass_lde_after_gathers(
    lanes: &mut [GpuLane<'_>],
    me: usize,
    pass: Pass<'_>,
) -> Result<()> {
    let gpu = lanes[me].gpu;
    for (_, lane) in lanes.iter().enumerate().filter(|&(other, _)| other != me) {
        if let Some(gathered) = &lane.gathered {
            gpu.compute.wait(gathered)?;
        }
    }
    let lane = &mut lanes[me];
    let done = enqueue_pass_lde(lane.gpu, lane.state, &lane.share, pass, &mut lane.timeline)?;
    lane.lde_done = Some(done);
    Ok(())
}

/// Threads per block of `copy_rows`.
const COPY_BLOCK: u32 = 256;

/// The launch of a `copy_rows` of `words` words: a thread per word, up to 2^20 blocks (the
/// kernel strides over the rest).
fn copy_grid(words: usize) -> Grid {
    let blocks = words.div_ceil(COPY_BLOCK as usize).clamp(1, 1 << 20) as u32;
    Grid { blocks, threads_per_block: COPY_BLOCK }
}

/// Copies lane `me`'s rows over the cosets of `pass` of local columns `cols` of lane `source`'s
/// LDE into `me`'s slab (several lanes, the slab sized), once the source's latest LDE has
/// passed: the rows' t-range of each (column, coset), which is contiguous in the coset-major
/// layout. Where lane `me`'s GPU reads the source's memory directly, one `copy_rows` launch
/// moves them all (measured faster than a copy each on 4 x H100); otherwise one peer copy per
/// (column, coset).
pub(super) fn gather(
    lanes: &mut [GpuLane<'_>],
    me: usize,
    source: usize,
    cols: Range<usize>,
    pass: Pass<'_>,
) -> DriverResult<()> {
    let (n, cosets) = (pass.plan.shape.poly_len, pass.passes.cosets);
    let t = lanes[me].share.t.clone();
    let gpu = lanes[me].gpu;
    let first_col = lanes[source].share.cols.start + cols.start;
    let rows = cols.len() * cosets;
    gpu.compute.wait(lanes[source].lde_ready())?;
    if rows == 0 || t.is_empty() {
        return Ok(());
    }
    let (ldes, mut slabs): (Vec<&Scratch<_>>, Vec<&mut Scratch<_>>) = lanes
        .iter_mut()
        .map(|lane| {
            let buffers = &mut lane.state.buffers;
            (&buffers.lde, &mut buffers.slab)
        })
        .unzip();
    let lde = ldes[source].current()?;
    let slab = slabs[me].current_mut()?;
    let first_row = cols.start * cosets * n;
    if let Some(src) = gpu.readable(lde.slice(first_row + t.start..)?) {
        // source row (local column, coset) r at r·n; slab row (column, coset) at its index
        // times t.len()
        let dst = slab.slice_mut(first_col * cosets * t.len()..)?;
        let width = t.len() as u64;
        let grid = copy_grid(rows * t.len());
        // SAFETY: `rows` rows of `width` words fit both ranges: the source's last row starts
        // at (rows - 1)·n + t.start past `first_row`, within its LDE of (local columns ·
        // cosets) rows of n; the slab holds every column's rows. Both stay allocated until the
        // compute stream has passed the copy (the slab's hashing and the next pass wait on it).
        unsafe {
            kernels::copy_rows(
                &gpu.kernels.copy_rows,
                &gpu.compute,
                grid,
                dst,
                src,
                width,
                n as u64,
                width,
                rows as u64,
            )?;
        }
        return Ok(());
    }
    for (local, c) in cols.zip(first_col..) {
        for k in 0..cosets {
            let src = ((local * cosets + k) * n) + t.start;
            let dst = (c * cosets + k) * t.len();
            gpu.compute
                .copy_peer(slab.slice_mut(dst..dst + t.len())?, lde.slice(src..src + t.len())?)?;
        }
    }
    Ok(())
}
