//! The commitment pipeline over one or more GPUs.
//!
//! Work split: the output columns are divided between the GPUs for interpolation and LDE
//! (uneven splits allowed); the LDE rows are divided into contiguous, power-of-two aligned
//! blocks for hashing and the Merkle subtrees. With several GPUs each one gathers all columns of
//! its own rows from every GPU's LDE (a kernel reading its peers' memory, over NVLink where
//! the GPUs have it; about 1/G of the LDE per GPU), column group by column group as the LDE of
//! each group ends, while the host still uploads the later groups,
//! and then hashes only its rows, so every GPU hashes 1/G of the rows with the whole
//! permutation in registers, and downloads its rows, leaves and subtrees over its own PCIe
//! link. The top levels above the subtrees (at most a few hundred nodes) are merged on the
//! host. Results do not depend on the split: they equal one GPU's and the CPU's bit for bit.
//!
//! Per GPU, on its compute stream: interpolation (DIF, inverse twiddles) of the uploaded
//! columns, scaling into natural-order polynomials (for the host) and into bit-reversed coset
//! inputs, the coset DITs (the LDE), the gather, the row hashes in chunks (each chunk's
//! row-major rows are downloaded while later chunks hash), and the Merkle levels.
//!
//! Where the whole LDE does not fit the device memory budget (see `memory`), the LDE, gather
//! and hashing run in passes over groups of cosets, each pass's rows downloading (scattered to
//! their strided host rows) while the next pass runs; polynomials, leaves and the tree are
//! whole. On the host, the result vectors are faulted in by background threads while the GPUs
//! compute, since with several GPUs the page faults of fresh memory bound the download.
//!
//! This module orders the work; the stages it enqueues on each GPU are in `lde` and `hashing`,
//! the host side of the results in `assemble`.

use std::{ops::Range, sync::Arc};

use super::{
    assemble::{download, row_downloads, HostResults},
    buffer::Scratch,
    driver::{DriverResult, Event},
    gpu::{Buffers, Gpu, GpuState},
    hashing::{enqueue_hash, enqueue_tree, HashedChunks},
    kernels::{self, Grid},
    lde::{enqueue_pass_lde, Upload},
    memory::{self, Footprint},
    plan::{log_blocks, Passes, Plan, Share},
    result_pool::ResultPool,
    timeline::{Stage, Timeline},
    transfer::Ring,
};
use crate::{
    committer::StageTimes,
    committer::{CommitRequest, Commitment, Keep, Shape},
    error::Result,
    host::{prefault, HostOptions},
};

/// The host's part in a commitment: how its result vectors are reserved, how many threads
/// fault them in while the GPUs compute, and the registered memory the large results may take.
pub(super) struct HostWork {
    pub options: HostOptions,
    pub prefault_threads: usize,
    pub result_pool: Arc<ResultPool>,
}

// COMMITMENT
// ================================================================================================

/// The output columns each of `gpus` GPUs interpolates in a commitment of `shape` (whose
/// polynomials its `polys` buffer holds afterwards, column after column); fewer ranges than GPUs
/// where there are fewer columns.
pub(super) fn column_shares(gpus: usize, shape: &Shape) -> Vec<Range<usize>> {
    let g_count = gpus.min(shape.num_cols).max(1);
    Share::for_gpus(shape, g_count, log_blocks(g_count, shape.poly_len.ilog2()))
        .into_iter()
        .map(|s| s.cols)
        .collect()
}

/// Commits `request` on `gpus` (with their states), within `memory_limit` bytes per GPU if given
/// (else within each device's free memory), the host's side as `host_work` says (the request's
/// sources in registered memory where `sources_registered`, see `staged_sources`); returns the
/// commitment (its polynomials left in the GPUs' `polys` buffers if `keep.polys`, else
/// downloaded), per-GPU times, and whether the rows were left in the GPUs' `lde` buffers instead
/// of downloaded (asked for with `keep.rows`, and possible where the LDE takes one pass).
#[allow(clippy::too_many_arguments)]
pub(super) fn commit(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    request: &CommitRequest<'_>,
    sources_registered: bool,
    shape: Shape,
    memory_limit: Option<u64>,
    keep: Keep,
    host_work: &HostWork,
) -> Result<(Commitment, Vec<StageTimes>, bool)> {
    let plan = Plan::new(request, shape, sources_registered);
    let g_count = gpus.len().min(shape.num_cols).max(1);
    let (gpus, states) = (&gpus[..g_count], &mut states[..g_count]);
    let log_b = log_blocks(g_count, plan.log_n);
    let blocks = 1usize << log_b;
    let shares = Share::for_gpus(&shape, g_count, log_b);
    let blowup = 1usize << plan.log_blowup;
    let footprints: Vec<Footprint> = shares.iter().map(|s| plan.footprint(s, g_count)).collect();
    let cosets = memory::cosets_per_pass(gpus, states, &footprints, blowup, memory_limit)?;
    let passes = Passes::new(cosets, blowup);
    let keep_rows = keep.rows && passes.count == 1;
    memory::grow(gpus, states, &footprints, cosets, blowup, keep_rows)?;
    if passes.count > 1 {
        tracing::info!(
            passes = passes.count,
            cosets,
            "cuda: the LDE exceeds the device memory budget; streaming it in coset groups"
        );
    }

    // 1. upload, interpolate, and the first pass's LDE, column group by column group, the GPUs
    //    taking turns so that all of them start early; with several GPUs each one gathers a
    //    group's rows from every GPU as soon as that group's LDE is done, while the host still
    //    stages the later groups (the upload, not the GPUs, sets the pace of this step)
    let coset_tables = plan.coset_tables(cosets);
    let mut timelines = Vec::with_capacity(g_count);
    let mut uploads = Vec::with_capacity(g_count);
    for ((gpu, state), share) in gpus.iter().zip(states.iter_mut()).zip(&shares) {
        timelines.push(Timeline::new(gpu)?);
        uploads.push(Upload::new(gpu, state, &plan, share, &passes, &coset_tables)?);
        if g_count > 1 {
            let slab_len = shape.num_cols * (share.t.len() << passes.log_cosets);
            state.buffers.slab.get(&gpu.alloc, slab_len)?;
        }
    }
    {
        let _span = tracing::info_span!("cuda.upload_and_lde", gpus = g_count).entered();
        let rounds = uploads.iter().map(|u| u.groups.len()).max().unwrap_or(0);
        for round in 0..rounds {
            for (g, (gpu, state)) in gpus.iter().zip(states.iter_mut()).enumerate() {
                uploads[g].enqueue_group(gpu, state, &plan, &passes, round, &mut timelines[g])?;
            }
            if g_count == 1 {
                continue;
            }
            for me in 0..g_count {
                for (source, upload) in uploads.iter().enumerate() {
                    if let Some((cols, _)) = upload.groups.get(round) {
                        let from =
                            Source { gpu: source, cols: cols.clone(), ready: &upload.lde_ready };
                        gather(gpus, states, me, from, &shares, &plan, &passes)?;
                    }
                }
                timelines[me].mark(gpus[me], Stage::Exchange)?;
            }
        }
    }
    // results on the host, reserved once the GPUs have the inputs' transforms queued, so that
    // allocating them (dozens of vectors) delays no kernel; on an error here the queued work
    // finishes on its own, in buffers the GPU states keep
    let mut host = HostResults::reserve(
        &shape,
        !keep.polys,
        !keep_rows,
        &host_work.options,
        &host_work.result_pool,
    )?;
    // the page faults of the large results happen while the GPUs compute, once the host has
    // staged the inputs (faulting beside the upload's copies slowed them many times over);
    // joined on drop, before the vectors are freed
    let _prefault = prefault(&host.large_spare_bytes(), host_work.prefault_threads);
    let mut interpolated = Vec::with_capacity(g_count);
    for (upload, timeline) in uploads.into_iter().zip(&mut timelines) {
        timeline.first_lde_done();
        interpolated.push(upload.polys_ready);
    }

    // 2. per pass: LDE (the first one is enqueued), gather, hash; the last pass builds the
    //    subtrees. The rows of one pass download while the next pass runs.
    let mut tree_done = Vec::with_capacity(g_count);
    let mut early_levels = Vec::with_capacity(g_count);
    let mut previous: Option<Vec<HashedChunks>> = None;
    // each GPU's LDE of the pass (after the first), then what each GPU gathered
    let mut lde_done: Vec<Event> = Vec::with_capacity(g_count);
    for pass in 0..passes.count {
        if pass > 0 {
            let gathered = std::mem::take(&mut lde_done);
            for (g, ((gpu, state), share)) in
                gpus.iter().zip(states.iter_mut()).zip(&shares).enumerate()
            {
                // the LDE buffer is overwritten: every GPU must have gathered from it
                for (h, event) in gathered.iter().enumerate() {
                    if h != g {
                        gpu.compute.wait(event)?;
                    }
                }
                lde_done.push(enqueue_pass_lde(
                    gpu,
                    state,
                    &plan,
                    share,
                    &passes,
                    pass,
                    &mut timelines[g],
                )?);
            }
        }
        let mut hashed = Vec::with_capacity(g_count);
        let mut gathered = Vec::with_capacity(g_count);
        for (g, (gpu, share)) in gpus.iter().zip(&shares).enumerate() {
            let _span = tracing::info_span!("cuda.enqueue_hash", gpu = gpu.ordinal, pass).entered();
            // the first pass's rows were gathered group by group
            if g_count > 1 && pass > 0 {
                for (source, (ready, from_share)) in lde_done.iter().zip(&shares).enumerate() {
                    let from = Source { gpu: source, cols: 0..from_share.cols.len(), ready };
                    gather(gpus, states, g, from, &shares, &plan, &passes)?;
                }
                timelines[g].mark(gpu, Stage::Exchange)?;
            }
            let state = &mut *states[g];
            gathered.push(gpu.completion()?);
            hashed.push(enqueue_hash(
                gpu,
                state,
                &plan,
                share,
                g_count > 1,
                !keep_rows,
                &passes,
                pass,
            )?);
            timelines[g].mark(gpu, Stage::Hash)?;
            if pass + 1 == passes.count {
                early_levels.push(enqueue_tree(gpu, state, &plan, share, blocks)?);
                timelines[g].mark(gpu, Stage::Tree)?;
                tree_done.push(gpu.completion()?);
            }
        }
        // from here on `lde_done` holds "gathered": what the next pass's LDE waits for
        lde_done = gathered;
        // (several passes: the rows come to the host)
        if let (Some(chunks), Some(rows)) = (previous.take(), &mut host.rows) {
            let _span = tracing::info_span!("cuda.download_rows", pass = pass - 1).entered();
            let (buffers, mut rings) = buffers_and_rings(states);
            let jobs = buffers
                .iter()
                .zip(&shares)
                .zip(&chunks)
                .map(|((buffers, share), chunks)| {
                    row_downloads(buffers, &plan, share, &passes, chunks, rows)
                })
                .collect::<DriverResult<Vec<_>>>()?;
            download(gpus, &mut rings, jobs)?;
        }
        previous = Some(hashed);
    }

    // 3. download the polynomials (if wanted), the last pass's rows, the leaves and the subtrees
    {
        let _span = tracing::info_span!("cuda.download", gpus = g_count).entered();
        let last = previous.expect("at least one pass");
        let (buffers, mut rings) = buffers_and_rings(states);
        let mut jobs = Vec::with_capacity(g_count);
        for (g, (buffers, share)) in buffers.iter().zip(&shares).enumerate() {
            jobs.push(host.final_downloads(
                buffers,
                &plan,
                share,
                &passes,
                blocks,
                &interpolated[g],
                &last[g],
                &early_levels[g],
                &tree_done[g],
            )?);
        }
        download(gpus, &mut rings, jobs)?;
    }

    // 4. the nodes above the subtrees (none with one GPU), then the unused node 0
    // SAFETY: every element below each length was written by the downloads (the shares and
    // passes cover all columns, rows and subtree ranges).
    let commitment = unsafe { host.assemble(&plan, blocks) };

    let times = gpus
        .iter()
        .zip(&timelines)
        .map(|(gpu, timeline)| timeline.stage_times(gpu.ordinal, passes.count, g_count > 1))
        .collect::<DriverResult<Vec<_>>>()?;
    Ok((commitment, times, keep_rows))
}

// EXCHANGE
// ================================================================================================

/// Each GPU's buffers, to read, and its ring, to transfer through (for downloads).
fn buffers_and_rings<'s>(states: &'s mut [&mut GpuState]) -> (Vec<&'s Buffers>, Vec<&'s mut Ring>) {
    states
        .iter_mut()
        .map(|state| {
            let state = &mut **state;
            (&state.buffers, &mut state.ring)
        })
        .unzip()
}

/// Threads per block of `copy_rows`.
const COPY_BLOCK: u32 = 256;

/// The launch of a `copy_rows` of `words` words: a thread per word, up to 2^20 blocks (the
/// kernel strides over the rest).
fn copy_grid(words: usize) -> Grid {
    let blocks = words.div_ceil(COPY_BLOCK as usize).clamp(1, 1 << 20) as u32;
    Grid { blocks, threads_per_block: COPY_BLOCK }
}

/// Columns of one GPU's LDE that another GPU gathers rows from: local columns `cols` of GPU
/// `gpu`, readable once `ready` has passed.
struct Source<'a> {
    gpu: usize,
    cols: Range<usize>,
    ready: &'a Event,
}

/// Copies GPU `me`'s rows over the pass's cosets of the columns `from` names into `me`'s slab
/// (several GPUs, the slab sized), once `from.ready` has passed: the rows' t-range of each
/// (column, coset), which is contiguous in the coset-major layout. Where GPU `me` reads the
/// source's memory directly, one `copy_rows` launch moves them all (W1 on 4 x H100: 7-10 ms a
/// GPU for every column, against 17-19 ms for a copy each); otherwise one peer copy per
/// (column, coset).
fn gather(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    me: usize,
    from: Source<'_>,
    shares: &[Share],
    plan: &Plan<'_>,
    passes: &Passes,
) -> DriverResult<()> {
    let (n, cosets) = (plan.shape.poly_len, passes.cosets);
    let t = &shares[me].t;
    let gpu = gpus[me];
    let first_col = shares[from.gpu].cols.start + from.cols.start;
    let rows = from.cols.len() * cosets;
    gpu.compute.wait(from.ready)?;
    if rows == 0 || t.is_empty() {
        return Ok(());
    }
    let (ldes, mut slabs): (Vec<&Scratch<_>>, Vec<&mut Scratch<_>>) = states
        .iter_mut()
        .map(|state| {
            let buffers = &mut state.buffers;
            (&buffers.lde, &mut buffers.slab)
        })
        .unzip();
    let lde = ldes[from.gpu].current()?;
    let slab = slabs[me].current_mut()?;
    let first_row = from.cols.start * cosets * n;
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
    for (local, c) in from.cols.clone().zip(first_col..) {
        for k in 0..cosets {
            let src = ((local * cosets + k) * n) + t.start;
            let dst = (c * cosets + k) * t.len();
            gpu.compute
                .copy_peer(slab.slice_mut(dst..dst + t.len())?, lde.slice(src..src + t.len())?)?;
        }
    }
    Ok(())
}
