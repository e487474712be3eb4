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
//! This module orders the work, in four steps over the GPUs' lanes (`lane`: one GPU's state,
//! share, timeline and events, and the exchange of rows between lanes); the stages a lane
//! enqueues are in `lde` and `hashing`, the host side of the results in `assemble`.

use std::{ops::Range, sync::Arc};

use super::{
    assemble::{download, HostResults},
    driver::DriverResult,
    gpu::{Gpu, GpuState},
    hashing::HashedChunks,
    lane::{enqueue_pass_lde_after_gathers, gather, GpuLane, Split},
    memory,
    plan::{log_blocks, Footprint, Pass, Passes, Plan, Share},
    result_pool::ResultPool,
    timeline::Stage,
    transfer::{Download, Ring},
};
use crate::{
    committer::{Commitment, Keep, Shape, StageTimes},
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

/// Commits as `plan` says on `gpus` (with their states), within `memory_limit` bytes per GPU if
/// given (else within each device's free memory), the host's side as `host_work` says; returns
/// the commitment (its polynomials left in the GPUs' `polys` buffers if `keep.polys`, else
/// downloaded), per-GPU times, and whether the rows were left in the GPUs' `lde` buffers instead
/// of downloaded (asked for with `keep.rows`, and possible where the LDE takes one pass). With
/// `keep.tree` the leaves and the nodes below the Merkle blocks' roots stay in the GPUs' `leaves`
/// and `nodes` buffers, and the commitment's nodes are those from node 0 to the block roots.
pub(super) fn commit(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    plan: Plan<'_>,
    memory_limit: Option<u64>,
    keep: Keep,
    host_work: &HostWork,
) -> Result<(Commitment, Vec<StageTimes>, bool)> {
    let shape = plan.shape;
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
    let split = Split { lanes: g_count, rows_to_host: !keep_rows, blocks };

    // 1. upload, interpolate, and the first pass's LDE, column group by column group, the GPUs
    //    taking turns so that all of them start early; with several GPUs each one gathers a
    //    group's rows from every GPU as soon as that group's LDE is done, while the host still
    //    stages the later groups (the upload, not the GPUs, sets the pace of this step)
    let first = Pass::first(&plan, passes);
    let coset_tables = plan.coset_tables(cosets);
    let mut lanes = gpus
        .iter()
        .zip(states.iter_mut())
        .zip(shares)
        .map(|((gpu, state), share)| GpuLane::open(gpu, state, share, split, first, &coset_tables))
        .collect::<Result<Vec<_>>>()?;
    upload_and_lde(&mut lanes, first)?;
    // results on the host, reserved once the GPUs have the inputs' transforms queued, so that
    // allocating them (dozens of vectors) delays no kernel; on an error here the queued work
    // finishes on its own, in buffers the GPU states keep
    let mut host = HostResults::reserve(
        &shape,
        !keep.polys,
        !keep_rows,
        keep.tree.then_some(blocks),
        &host_work.options,
        &host_work.result_pool,
    )?;
    // the page faults of the large results happen while the GPUs compute, once the host has
    // staged the inputs (faulting beside the upload's copies slowed them many times over);
    // joined on drop, before the vectors are freed
    let _prefault = prefault(&host.large_spare_bytes(), host_work.prefault_threads);
    lanes.iter_mut().for_each(GpuLane::first_lde_done);

    // 2. per pass: LDE (the first one is enqueued), gather, hash; the last pass builds the
    //    subtrees. The rows of one pass download while the next pass runs.
    for pass in passes.each(&plan) {
        let previous: Vec<HashedChunks> =
            lanes.iter_mut().filter_map(GpuLane::take_hashed).collect();
        enqueue_pass(&mut lanes, pass)?;
        // (several passes: the rows of the pass before come to the host)
        if let (false, Some(rows)) = (previous.is_empty(), &mut host.rows) {
            let _span = tracing::info_span!("cuda.download_rows", pass = pass.index - 1).entered();
            download_each(gpus, &mut lanes, |g, lane| {
                lane.downloads_of_pass(&plan, &passes, &previous[g], rows)
            })?;
        }
    }

    // 3. download the polynomials (if wanted), the last pass's rows, the leaves and the subtrees
    {
        let _span = tracing::info_span!("cuda.download", gpus = g_count).entered();
        let last = passes.last(&plan);
        download_each(gpus, &mut lanes, |_, lane| lane.last_downloads(&mut host, last))?;
    }

    // 4. the nodes above the subtrees (none with one GPU), then the unused node 0
    // SAFETY: every element below each length was written by the downloads (the shares and
    // passes cover all columns, rows and subtree ranges).
    let commitment = unsafe { host.assemble(&plan, blocks) };

    let times = lanes
        .iter()
        .map(|lane| lane.stage_times(passes.count))
        .collect::<DriverResult<Vec<_>>>()?;
    Ok((commitment, times, keep_rows))
}

// STEPS
// ================================================================================================

/// Step 1 on `lanes`: round after round, each lane's next upload group, interpolated and
/// extended over the `first` pass's cosets; with several lanes, each lane then gathers its rows
/// of that round's groups from every lane.
fn upload_and_lde(lanes: &mut [GpuLane<'_>], first: Pass<'_>) -> Result<()> {
    let _span = tracing::info_span!("cuda.upload_and_lde", gpus = lanes.len()).entered();
    let rounds = lanes.iter().map(GpuLane::upload_groups).max().unwrap_or(0);
    for round in 0..rounds {
        for lane in lanes.iter_mut() {
            lane.enqueue_group(first, round)?;
        }
        if lanes.len() == 1 {
            continue;
        }
        for me in 0..lanes.len() {
            for source in 0..lanes.len() {
                if let Some(cols) = lanes[source].group_cols(round) {
                    gather(lanes, me, source, cols, first)?;
                }
            }
            lanes[me].mark(Stage::Exchange)?;
        }
    }
    Ok(())
}

/// Step 2 on `lanes` for one `pass`: after the first, each lane's LDE of the pass (once the
/// other lanes have gathered from the one before) and each lane's gather of its rows from every
/// lane (the first pass's rows were gathered group by group); then, lane by lane, the hashing,
/// and on the last pass the subtrees.
fn enqueue_pass(lanes: &mut [GpuLane<'_>], pass: Pass<'_>) -> Result<()> {
    if pass.index > 0 {
        for me in 0..lanes.len() {
            enqueue_pass_lde_after_gathers(lanes, me, pass)?;
        }
    }
    for me in 0..lanes.len() {
        let _span =
            tracing::info_span!("cuda.enqueue_hash", gpu = lanes[me].ordinal(), pass = pass.index)
                .entered();
        if lanes.len() > 1 && pass.index > 0 {
            for source in 0..lanes.len() {
                let cols = lanes[source].cols();
                gather(lanes, me, source, cols, pass)?;
            }
            lanes[me].mark(Stage::Exchange)?;
        }
        lanes[me].hash(pass)?;
    }
    Ok(())
}

/// Runs the downloads `downloads` lists for each lane (by index), through the lanes' rings,
/// every GPU's at once.
fn download_each<'l, 'a: 'l>(
    gpus: &[&Gpu],
    lanes: &'l mut [GpuLane<'a>],
    mut downloads: impl FnMut(
        usize,
        &'l mut GpuLane<'a>,
    ) -> DriverResult<(Vec<Download<'l>>, &'l mut Ring)>,
) -> DriverResult<()> {
    let mut jobs = Vec::with_capacity(lanes.len());
    let mut rings = Vec::with_capacity(lanes.len());
    for (g, lane) in lanes.iter_mut().enumerate() {
        let (list, ring) = downloads(g, lane)?;
        jobs.push(list);
        rings.push(ring);
    }
    download(gpus, &mut rings, jobs)
}
