//! The commitment pipeline over one or more GPUs.
//!
//! Work split: the output columns are divided between the GPUs for interpolation and LDE
//! (uneven splits allowed); the LDE rows are divided into contiguous, power-of-two aligned
//! blocks for hashing and the Merkle subtrees. With several GPUs each one gathers all columns of
//! its own rows from every GPU's LDE (peer copies over NVLink, about 1/G of the LDE per GPU,
//! a few milliseconds) and then hashes only its rows, so every GPU hashes 1/G of the rows with
//! the whole permutation in registers, and downloads its rows, leaves and subtrees over its own
//! PCIe link. The top levels above the subtrees (at most a few hundred nodes) are merged on the
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

use miden_crypto::Felt;
use winter_math::{FieldElement, StarkField};

use super::{
    driver::{kernel_args, DriverResult, Event, Kernel},
    gpu::{Gpu, GpuState},
    memory::{self, Footprint},
    program::{HASH_BLOCK, NTT_BLOCK},
    tables,
    timeline::{Stage, StageTimes, Timeline},
    transfer::{self, Download, HostDst, Lane},
};
use crate::{
    committer::{CommitRequest, Commitment, LdeRows, PolyInput, RowHashing, Shape},
    error::Result,
    hash::{Digest, HashFunction},
    host::{prefault, reserve_host, spare_bytes},
};

/// Rows hashed per launch (the LDE download of one chunk overlaps the hashing of the next).
const HASH_CHUNK_ROWS: usize = 1 << 20;

/// The last `HASH_CHUNK_ROWS` rows of a GPU are hashed in this many launches, so less is left to
/// download once the hashing ends.
const LAST_CHUNK_SPLIT: usize = 4;

/// Trace columns uploaded per group (each group's transforms start once its upload is done).
const UPLOAD_GROUP_COLS: usize = 8;

// PLAN
// ================================================================================================

/// Everything the kernels need to know about a request, computed on the host.
struct Plan<'a> {
    shape: Shape,
    log_n: u32,
    log_blowup: u32,
    /// Source columns (trace columns or composition components) and their length `m`.
    sources: &'a [&'a [Felt]],
    log_src: u32,
    /// Composition: output column j·k + c is component c's coefficient chunk j.
    composition_components: Option<usize>,
    /// Per scale group (1 for a trace, one per composition column index j).
    scales: Vec<Felt>,
    /// Base of the polynomials' power factor (1 for a trace, 7^-1 for a composition).
    polys_base: Felt,
    /// Shift of the LDE domain folded into the coset bases (7 for a trace, 1 for a composition,
    /// whose coefficients already carry the offset).
    lde_shift: Felt,
    hash: HashFunction,
    /// 0 for whole rows, else the partition size.
    part: u32,
}

impl<'a> Plan<'a> {
    fn new(request: &CommitRequest<'a>, shape: Shape) -> Self {
        let log_n = shape.poly_len.ilog2();
        let (sources, composition_components, scales, polys_base, lde_shift) = match request.input {
            PolyInput::Trace { columns } => {
                let inv_n = Felt::new(shape.poly_len as u64).inv();
                (columns, None, vec![inv_n], Felt::ONE, Felt::GENERATOR)
            }
            PolyInput::Composition {
                components,
                column_len,
                num_columns,
            } => {
                // a_{j·n + r} = m^-1 · 7^-(j·n) · 7^-r · (iNTT output)
                let m = components[0].len();
                let inv_m = Felt::new(m as u64).inv();
                let inv_shift = Felt::GENERATOR.inv();
                let step = inv_shift.exp(column_len as u64);
                let scales = (0..num_columns as u64)
                    .map(|j| inv_m * step.exp(j))
                    .collect();
                (
                    components,
                    Some(components.len()),
                    scales,
                    inv_shift,
                    Felt::ONE,
                )
            }
        };
        let part = partition_size(request.row_hashing);
        Self {
            shape,
            log_n,
            log_blowup: request.blowup.ilog2(),
            sources,
            log_src: sources[0].len().ilog2(),
            composition_components,
            scales,
            polys_base,
            lde_shift,
            hash: request.hash,
            part,
        }
    }

    /// Source column, offset and scale group of output column `c`, given the index of the first
    /// source column this GPU uploaded.
    fn col_src(&self, c: usize, first_source: usize) -> [u32; 3] {
        match self.composition_components {
            None => [(c - first_source) as u32, 0, 0],
            Some(k) => {
                let (j, comp) = (c / k, c % k);
                let off = tables::bit_reverse(j, self.log_src - self.log_n);
                [comp as u32, off as u32, j as u32]
            }
        }
    }

    /// The source columns a GPU with output columns `cols` uploads.
    fn sources_for(&self, cols: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        match self.composition_components {
            None => cols.clone(),
            Some(k) => 0..k,
        }
    }
}

impl Plan<'_> {
    /// Element counts of the buffers of the GPU doing `share` (of `gpus`).
    fn footprint(&self, share: &Share, gpus: usize) -> Footprint {
        let (n, shape) = (self.shape.poly_len, &self.shape);
        let t_len = share.t.len();
        Footprint {
            source: self.sources_for(&share.cols).len() * self.sources[0].len(),
            polys: share.cols.len() * n,
            lde_per_coset: share.cols.len() * n,
            slab_per_coset: if gpus > 1 { shape.num_cols * t_len } else { 0 },
            rows_per_coset: t_len * shape.row_width,
            row_bytes: shape.row_width * 8,
            digests: shape.lde_len * 4,
        }
    }

    /// Power tables of the coset scaling, pass after pass (`cosets` cosets each): pass `p`'s
    /// tables start at `p · scales · cosets · power_table_len`.
    fn coset_tables(&self, cosets: usize) -> Vec<u64> {
        let blowup = 1usize << self.log_blowup;
        let bases = tables::coset_bases(self.lde_shift, self.log_n + self.log_blowup, blowup);
        bases
            .chunks(cosets)
            .flat_map(|group| tables::power_tables(&self.scales, group, self.log_n))
            .collect()
    }
}

/// How the LDE is walked: `passes` passes of `cosets` cosets each (one pass of every coset
/// unless the device memory budget asks for streaming).
#[derive(Debug, Clone, Copy)]
struct Passes {
    cosets: usize,
    log_cosets: u32,
    count: usize,
}

impl Passes {
    fn new(cosets: usize, blowup: usize) -> Self {
        Self {
            cosets,
            log_cosets: cosets.ilog2(),
            count: blowup / cosets,
        }
    }

    /// First coset of pass `p`.
    fn k0(&self, p: usize) -> usize {
        p * self.cosets
    }
}

/// What one GPU does: its output columns, its LDE rows (as a t-range: rows t·blowup + k) and its
/// Merkle blocks.
#[derive(Debug, Clone)]
struct Share {
    cols: std::ops::Range<usize>,
    t: std::ops::Range<usize>,
    blocks: std::ops::Range<usize>,
}

/// Splits `count` items into `parts` contiguous ranges whose sizes differ by at most one.
fn split(count: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    (0..parts)
        .map(|p| count * p / parts..count * (p + 1) / parts)
        .collect()
}

/// log2 of the number of Merkle blocks for `gpus` GPUs over 2^log_n t-values: one block for one
/// GPU, else at least 8 per GPU (so uneven splits stay within 1/8), and at most one per t-value.
fn log_blocks(gpus: usize, log_n: u32) -> u32 {
    if gpus == 1 {
        0
    } else {
        ((gpus * 8).next_power_of_two().ilog2()).min(log_n)
    }
}

// PIPELINE
// ================================================================================================

/// Commits `request` on `gpus` (with their states), within `memory_limit` bytes per GPU if given
/// (else within each device's free memory); returns the commitment and per-GPU times.
pub(crate) fn commit(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    request: &CommitRequest<'_>,
    shape: Shape,
    memory_limit: Option<u64>,
) -> Result<(Commitment, Vec<StageTimes>)> {
    let plan = Plan::new(request, shape);
    let g_count = gpus.len().min(shape.num_cols).max(1);
    let (gpus, states) = (&gpus[..g_count], &mut states[..g_count]);
    let log_b = log_blocks(g_count, plan.log_n);
    let blocks = 1usize << log_b;
    let shares: Vec<Share> = split(shape.num_cols, g_count)
        .into_iter()
        .zip(split(blocks, g_count))
        .map(|(cols, blocks)| {
            let per_block = shape.poly_len >> log_b;
            Share {
                cols,
                t: blocks.start * per_block..blocks.end * per_block,
                blocks,
            }
        })
        .collect();
    let blowup = 1usize << plan.log_blowup;
    let footprints: Vec<Footprint> = shares.iter().map(|s| plan.footprint(s, g_count)).collect();
    let cosets = memory::cosets_per_pass(gpus, states, &footprints, blowup, memory_limit)?;
    let passes = Passes::new(cosets, blowup);
    if passes.count > 1 {
        tracing::info!(
            passes = passes.count,
            cosets,
            "cuda: the LDE exceeds the device memory budget; streaming it in coset groups"
        );
    }

    // results on the host
    let n = shape.poly_len;
    let lde_len = shape.lde_len;
    let mut polys: Vec<Vec<Felt>> = (0..shape.num_cols)
        .map(|_| reserve_host(n))
        .collect::<Result<_>>()?;
    let mut rows: Vec<Felt> = reserve_host(lde_len * shape.row_width)?;
    let mut leaves: Vec<Digest> = reserve_host(lde_len)?;
    let mut nodes: Vec<Digest> = reserve_host(lde_len)?;
    // the page faults of the large results happen while the GPUs compute; joined on drop,
    // before the vectors are
    let _prefault = prefault(&[
        spare_bytes(&mut rows),
        spare_bytes(&mut leaves),
        spare_bytes(&mut nodes),
    ]);

    // 1. upload, interpolate, and the first pass's LDE, column group by column group, the GPUs
    //    taking turns so that all of them start early
    let coset_tables = plan.coset_tables(cosets);
    let mut timelines = Vec::with_capacity(g_count);
    let mut uploads = Vec::with_capacity(g_count);
    for ((gpu, state), share) in gpus.iter().zip(states.iter_mut()).zip(&shares) {
        timelines.push(Timeline::new(gpu)?);
        uploads.push(Upload::new(
            gpu,
            state,
            &plan,
            share,
            &passes,
            &coset_tables,
        )?);
    }
    {
        let _span = tracing::info_span!("cuda.upload_and_lde", gpus = g_count).entered();
        let rounds = uploads.iter().map(|u| u.groups.len()).max().unwrap_or(0);
        for round in 0..rounds {
            for (g, (gpu, state)) in gpus.iter().zip(states.iter_mut()).enumerate() {
                uploads[g].enqueue_group(gpu, state, &plan, &passes, round, &mut timelines[g])?;
            }
        }
    }
    let mut interpolated = Vec::with_capacity(g_count);
    let mut lde_done = Vec::with_capacity(g_count);
    for ((gpu, upload), timeline) in gpus.iter().zip(uploads).zip(&mut timelines) {
        timeline.first_lde_done();
        interpolated.push(upload.polys_ready);
        lde_done.push(completion(gpu)?);
    }
    let lde_ptrs: Vec<u64> = gpus
        .iter()
        .zip(states.iter_mut())
        .map(|(gpu, state)| state.buffers.lde.get(&gpu.ctx, 0))
        .collect::<DriverResult<_>>()?;

    // 2. per pass: LDE (the first one is enqueued), gather, hash; the last pass builds the
    //    subtrees. The rows of one pass download while the next pass runs.
    let mut tree_done = Vec::with_capacity(g_count);
    let mut previous: Option<Vec<HashedChunks>> = None;
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
        for (g, ((gpu, state), share)) in
            gpus.iter().zip(states.iter_mut()).zip(&shares).enumerate()
        {
            let _span = tracing::info_span!("cuda.enqueue_hash", gpu = gpu.ordinal, pass).entered();
            if g_count > 1 {
                let slab_words = shape.num_cols * (share.t.len() << passes.log_cosets);
                let slab = state.buffers.slab.get(&gpu.ctx, slab_words * 8)?;
                gather(gpus, &lde_ptrs, slab, g, &shares, &lde_done, &plan, &passes)?;
            }
            timelines[g].mark(gpu, Stage::Exchange)?;
            gathered.push(completion(gpu)?);
            hashed.push(enqueue_hash(
                gpu,
                state,
                &plan,
                share,
                g_count > 1,
                &passes,
                pass,
            )?);
            timelines[g].mark(gpu, Stage::Hash)?;
            if pass + 1 == passes.count {
                enqueue_tree(gpu, state, &plan, share, blocks)?;
                timelines[g].mark(gpu, Stage::Tree)?;
                tree_done.push(completion(gpu)?);
            }
        }
        // from here on `lde_done` holds "gathered": what the next pass's LDE waits for
        lde_done = gathered;
        if let Some(chunks) = previous.take() {
            let _span = tracing::info_span!("cuda.download_rows", pass = pass - 1).entered();
            let jobs = gpus
                .iter()
                .zip(states.iter_mut())
                .zip(&shares)
                .zip(&chunks)
                .map(|(((gpu, state), share), chunks)| {
                    row_downloads(gpu, state, &plan, share, &passes, chunks, &mut rows)
                })
                .collect::<DriverResult<Vec<_>>>()?;
            download(gpus, states, jobs)?;
        }
        previous = Some(hashed);
    }

    // 3. download the polynomials, the last pass's rows, the leaves and the subtrees
    {
        let _span = tracing::info_span!("cuda.download", gpus = g_count).entered();
        let last = previous.expect("at least one pass");
        let mut jobs = Vec::with_capacity(g_count);
        for (g, ((gpu, state), share)) in
            gpus.iter().zip(states.iter_mut()).zip(&shares).enumerate()
        {
            // the polynomials are ready first: they download while the last pass hashes
            let polys_ptr = state.buffers.polys.get(&gpu.ctx, 0)?;
            let mut list: Vec<Download<'_>> = share
                .cols
                .clone()
                .enumerate()
                .map(|(local, c)| Download {
                    src: polys_ptr + (local * n * 8) as u64,
                    dst: spare(&mut polys[c], 0, n),
                    ready: Some(&interpolated[g]),
                })
                .collect();
            list.extend(row_downloads(
                gpu, state, &plan, share, &passes, &last[g], &mut rows,
            )?);
            let bufs = &mut state.buffers;
            // the leaves are final after the last hash chunk: their download overlaps the tree
            if let Some((_, last_chunk)) = last[g].chunks.last() {
                let (r0, r1) = (
                    share.t.start << plan.log_blowup,
                    share.t.end << plan.log_blowup,
                );
                list.push(Download {
                    src: bufs.leaves.get(&gpu.ctx, 0)? + (r0 * 32) as u64,
                    dst: spare(&mut leaves, r0, r1 - r0),
                    ready: Some(last_chunk),
                });
            }
            let nodes_ptr = bufs.nodes.get(&gpu.ctx, 0)?;
            for (start, end) in subtree_ranges(lde_len, blocks, &share.blocks) {
                list.push(Download {
                    src: nodes_ptr + (start * 32) as u64,
                    dst: spare(&mut nodes, start, end - start),
                    ready: Some(&tree_done[g]),
                });
            }
            jobs.push(list);
        }
        download(gpus, states, jobs)?;
    }

    // 4. the nodes above the subtrees (none with one GPU), then the unused node 0
    // SAFETY: every element below each length was written by the downloads (the shares and
    // passes cover all columns, rows and subtree ranges) or is written right here before use.
    unsafe {
        for p in &mut polys {
            p.set_len(n);
        }
        rows.set_len(lde_len * shape.row_width);
        leaves.set_len(lde_len);
        let spare_nodes = nodes.spare_capacity_mut();
        spare_nodes[0].write([Felt::ZERO; 4]);
        for i in (1..blocks).rev() {
            let children = [
                spare_nodes[2 * i].assume_init(),
                spare_nodes[2 * i + 1].assume_init(),
            ];
            spare_nodes[i].write(plan.hash.merge(&children));
        }
        nodes.set_len(lde_len);
    }

    let times = gpus
        .iter()
        .zip(&timelines)
        .map(|(gpu, timeline)| timeline.stage_times(gpu.ordinal, passes.count))
        .collect::<DriverResult<Vec<_>>>()?;
    for t in &times {
        tracing::info!(
            gpu = t.device,
            passes = t.passes,
            upload_lde_ms = t.upload_lde_ms,
            interpolate_ms = t.interpolate_ms,
            lde_ms = t.lde_ms,
            exchange_ms = t.exchange_ms,
            hash_ms = t.hash_ms,
            tree_ms = t.tree_ms,
            "cuda stage times"
        );
    }
    let lde = LdeRows {
        data: rows,
        row_width: shape.row_width,
        num_cols: shape.num_cols,
    };
    Ok((
        Commitment {
            polys,
            lde,
            leaves,
            nodes,
        },
        times,
    ))
}

/// Runs the downloads of every GPU (one list per GPU) through their rings.
fn download(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    jobs: Vec<Vec<Download<'_>>>,
) -> DriverResult<()> {
    let mut lanes: Vec<Lane<'_>> = gpus
        .iter()
        .zip(states.iter_mut())
        .map(|(gpu, state)| Lane {
            ctx: &gpu.ctx,
            stream: &gpu.copy,
            ring: &mut state.ring,
        })
        .collect();
    let stats = transfer::download(&mut lanes, jobs)?;
    tracing::info!(
        bytes = stats.bytes,
        wait_ms = stats.wait.as_secs_f32() * 1e3,
        copy_ms = stats.copy.as_secs_f32() * 1e3,
        "cuda download: host time waiting for the GPUs and copying out of pinned memory"
    );
    Ok(())
}

/// The hash chunks of one pass on one GPU: each chunk's t-range and the event after it.
struct HashedChunks {
    pass: usize,
    chunks: Vec<(std::ops::Range<usize>, Event)>,
}

/// The downloads of one pass's rows on one GPU into the host rows: per hash chunk, the
/// `(t1 - t0) · cosets` rows of the pass's rows buffer go to rows t·blowup + k0 .. + cosets
/// (contiguous when the pass holds every coset).
fn row_downloads<'a>(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    hashed: &'a HashedChunks,
    rows: &mut Vec<Felt>,
) -> DriverResult<Vec<Download<'a>>> {
    let rw = plan.shape.row_width;
    let half = rows_half(gpu, state, plan, share, passes, hashed.pass)?;
    let k0 = passes.k0(hashed.pass);
    Ok(hashed
        .chunks
        .iter()
        .map(|(range, event)| Download {
            src: half + (((range.start - share.t.start) << passes.log_cosets) * rw * 8) as u64,
            dst: spare_strided(
                rows,
                ((range.start << plan.log_blowup) + k0) * rw,
                rw << passes.log_cosets,
                rw << plan.log_blowup,
                range.len(),
            ),
            ready: Some(event),
        })
        .collect())
}

/// The device address of the rows buffer half that pass `pass` hashes into.
fn rows_half(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    pass: usize,
) -> DriverResult<u64> {
    let half_bytes = (share.t.len() << passes.log_cosets) * plan.shape.row_width * 8;
    let halves = if passes.count > 1 { 2 } else { 1 };
    let rows = state.buffers.rows.get(&gpu.ctx, half_bytes * halves)?;
    Ok(rows + ((pass % halves) * half_bytes) as u64)
}

/// The host destination of `len` elements of `vec` starting at `start`, in its spare capacity.
fn spare<T>(vec: &mut Vec<T>, start: usize, len: usize) -> HostDst {
    let spare = vec.spare_capacity_mut();
    assert!(
        start + len <= spare.len(),
        "destination exceeds the reserved capacity"
    );
    // SAFETY: the range lies in the vector's allocation; each range is handed to one download.
    unsafe {
        HostDst::new(
            spare.as_mut_ptr().add(start).cast(),
            len * std::mem::size_of::<T>(),
        )
    }
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
        HostDst::strided(
            spare.as_mut_ptr().add(start).cast(),
            run * size,
            stride * size,
            count,
        )
    }
}

/// Node ranges [start, end) a GPU owning `mine` of `blocks` Merkle blocks fills, level by level
/// below the block roots, adjacent ranges merged.
fn subtree_ranges(
    leaves: usize,
    blocks: usize,
    mine: &std::ops::Range<usize>,
) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut count = blocks;
    while count < leaves {
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

// STAGES
// ================================================================================================

/// One GPU's upload, interpolation and first-pass LDE, enqueued column group by column group:
/// each group's kernels wait only for its own upload, so the transforms of one group overlap the
/// host staging of the next (a composition is one group: it needs every component at once).
struct Upload {
    /// (output columns, source columns) per group, local to this GPU.
    groups: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    /// First source column of this GPU.
    first_source: usize,
    /// Recorded after each group's polynomials: the last recording is the one waited on.
    polys_ready: Event,
}

impl Upload {
    /// Uploads the small tables (column sources, power tables) and sizes the buffers.
    fn new(
        gpu: &Gpu,
        state: &mut GpuState,
        plan: &Plan<'_>,
        share: &Share,
        passes: &Passes,
        coset_tables: &[u64],
    ) -> Result<Self> {
        let n = plan.shape.poly_len;
        let m = plan.sources[0].len();
        let sources = plan.sources_for(&share.cols);
        let cols = share.cols.len();
        let col_src: Vec<u32> = share
            .cols
            .clone()
            .flat_map(|c| plan.col_src(c, sources.start))
            .collect();
        let polys_tables = tables::power_tables(&plan.scales, &[plan.polys_base], plan.log_n);
        gpu.twiddles(state, plan.log_src, true)?;
        gpu.twiddles(state, plan.log_n, false)?;
        let bufs = &mut state.buffers;
        let col_src_ptr = bufs.col_src.get(&gpu.ctx, col_src.len() * 4)?;
        gpu.upload_into(col_src_ptr, &col_src)?;
        let polys_tables_ptr = bufs.polys_tables.get(&gpu.ctx, polys_tables.len() * 8)?;
        gpu.upload_into(polys_tables_ptr, &polys_tables)?;
        let lde_tables_ptr = bufs.lde_tables.get(&gpu.ctx, coset_tables.len() * 8)?;
        gpu.upload_into(lde_tables_ptr, coset_tables)?;
        bufs.source.get(&gpu.ctx, sources.len() * m * 8)?;
        bufs.polys.get(&gpu.ctx, cols * n * 8)?;
        bufs.lde
            .get(&gpu.ctx, (cols << passes.log_cosets) * n * 8)?;
        let groups = match plan.composition_components {
            Some(_) => vec![(0..cols, 0..sources.len())],
            None => (0..cols)
                .step_by(UPLOAD_GROUP_COLS)
                .map(|g| {
                    let group = g..(g + UPLOAD_GROUP_COLS).min(cols);
                    (group.clone(), group)
                })
                .collect(),
        };
        Ok(Self {
            groups,
            first_source: sources.start,
            polys_ready: Event::new(&gpu.ctx)?,
        })
    }

    /// Uploads group `index` (if this GPU has it), interpolates it and extends it over the
    /// first pass's cosets.
    fn enqueue_group(
        &self,
        gpu: &Gpu,
        state: &mut GpuState,
        plan: &Plan<'_>,
        passes: &Passes,
        index: usize,
        timeline: &mut Timeline,
    ) -> Result<()> {
        let Some((group, group_sources)) = self.groups.get(index).cloned() else {
            return Ok(());
        };
        let n = plan.shape.poly_len;
        let m = plan.sources[0].len();
        let source = state.buffers.source.get(&gpu.ctx, 0)?;
        let mut lane = Lane {
            ctx: &gpu.ctx,
            stream: &gpu.copy,
            ring: &mut state.ring,
        };
        for i in group_sources.clone() {
            let column = plan.sources[self.first_source + i];
            transfer::upload(
                &mut lane,
                source + (i * m * 8) as u64,
                Felt::elements_as_bytes(column),
            )?;
        }
        let uploaded = Event::new(&gpu.ctx)?;
        uploaded.record(&gpu.copy)?;
        gpu.compute.wait(&uploaded)?;
        timeline.mark(gpu, Stage::Wait)?;
        ntt(
            gpu,
            source + (group_sources.start * m * 8) as u64,
            group_sources.len(),
            plan.log_src,
            gpu.twiddles(state, plan.log_src, true)?,
            true,
        )?;
        let bufs = &mut state.buffers;
        scale(
            gpu,
            bufs.polys.get(&gpu.ctx, 0)? + (group.start * n * 8) as u64,
            source,
            bufs.col_src.get(&gpu.ctx, 0)? + (group.start * 12) as u64,
            bufs.polys_tables.get(&gpu.ctx, 0)?,
            plan.log_n,
            0,
            m,
            m / n,
            true,
            group.len(),
        )?;
        timeline.mark(gpu, Stage::Interpolate)?;
        self.polys_ready.record(&gpu.compute)?;
        coset_lde(gpu, state, plan, passes, 0, group)?;
        timeline.mark(gpu, Stage::Lde)?;
        Ok(())
    }
}

/// Enqueues the LDE of pass `pass` (every column of this GPU); returns its completion event.
fn enqueue_pass_lde(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    passes: &Passes,
    pass: usize,
    timeline: &mut Timeline,
) -> Result<Event> {
    timeline.mark(gpu, Stage::Wait)?;
    coset_lde(gpu, state, plan, passes, pass, 0..share.cols.len())?;
    timeline.mark(gpu, Stage::Lde)?;
    completion(gpu)
}

/// An event recorded now on `gpu`'s compute stream: what other streams wait on.
fn completion(gpu: &Gpu) -> DriverResult<Event> {
    let event = Event::new(&gpu.ctx)?;
    event.record(&gpu.compute)?;
    Ok(event)
}

/// Scales the bit-reversed coefficients of local columns `group` by the powers of pass `pass`'s
/// coset bases and runs their DITs: the LDE buffer then holds those columns over the pass's
/// cosets (column by column, coset by coset).
fn coset_lde(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    passes: &Passes,
    pass: usize,
    group: std::ops::Range<usize>,
) -> DriverResult<()> {
    let n = plan.shape.poly_len;
    let m = plan.sources[0].len();
    let table_len = tables::power_table_len(plan.log_n);
    let pass_tables = (pass * plan.scales.len() * passes.cosets * table_len * 8) as u64;
    let twiddles_fwd = gpu.twiddles(state, plan.log_n, false)?;
    let bufs = &mut state.buffers;
    let group_lde =
        bufs.lde.get(&gpu.ctx, 0)? + ((group.start << passes.log_cosets) * n * 8) as u64;
    scale(
        gpu,
        group_lde,
        bufs.source.get(&gpu.ctx, 0)?,
        bufs.col_src.get(&gpu.ctx, 0)? + (group.start * 12) as u64,
        bufs.lde_tables.get(&gpu.ctx, 0)? + pass_tables,
        plan.log_n,
        passes.log_cosets,
        m,
        m / n,
        false,
        group.len(),
    )?;
    ntt(
        gpu,
        group_lde,
        group.len() << passes.log_cosets,
        plan.log_n,
        twiddles_fwd,
        false,
    )
}

/// In-place batched NTT of `segments` contiguous segments of 2^log_n elements.
fn ntt(
    gpu: &Gpu,
    data: u64,
    segments: usize,
    log_n: u32,
    twiddles: u64,
    dif: bool,
) -> DriverResult<()> {
    let mut passes = tables::ntt_passes(log_n);
    if dif {
        passes.reverse();
    }
    for pass in passes {
        let tile_log = pass.t_bits + pass.c_bits;
        let grid = (segments << (log_n - tile_log)) as u32;
        let block = NTT_BLOCK.min(1 << (tile_log - 1));
        let (mut data, mut twiddles, mut log_n) = (data, twiddles, log_n);
        let (mut b0, mut t_bits, mut c_bits, mut dif) =
            (pass.b0, pass.t_bits, pass.c_bits, dif as u32);
        let mut args = kernel_args!(data, twiddles, log_n, b0, t_bits, c_bits, dif);
        // SAFETY: arguments match `ntt_pass`; data holds segments·2^log_n words, twiddles 2^(log_n-1).
        unsafe {
            gpu.kernels
                .ntt_pass
                .launch(&gpu.compute, grid, block, &mut args)?
        };
    }
    Ok(())
}

/// Enqueues `scale_coefficients` over `cols` output columns and 2^log_slots slots each.
#[allow(clippy::too_many_arguments)]
fn scale(
    gpu: &Gpu,
    out: u64,
    input: u64,
    col_src: u64,
    tables: u64,
    log_n: u32,
    log_slots: u32,
    src_len: usize,
    src_stride: usize,
    natural_out: bool,
    cols: usize,
) -> DriverResult<()> {
    let total = ((cols << log_slots) << log_n) as u64;
    let grid = total.div_ceil(256).min(132 * 64) as u32;
    let (mut out, mut input, mut col_src, mut tables) = (out, input, col_src, tables);
    let (mut log_n, mut log_slots, mut s_bits) = (log_n, log_slots, tables::split_bits(log_n));
    let (mut src_len, mut src_stride, mut natural, mut total) =
        (src_len as u64, src_stride as u32, natural_out as u32, total);
    let mut args = kernel_args!(
        out, input, col_src, tables, log_n, log_slots, s_bits, src_len, src_stride, natural, total
    );
    // SAFETY: arguments match `scale_coefficients`; buffers were sized for these shapes.
    unsafe {
        gpu.kernels
            .scale_coefficients
            .launch(&gpu.compute, grid, 256, &mut args)
    }
}

/// Copies every column of GPU `me`'s rows over the pass's cosets from every GPU's LDE into its
/// slab (several GPUs): for each source GPU, once its LDE is done, one peer copy per (column,
/// coset) of the rows' t-range, which is contiguous in the coset-major layout.
#[allow(clippy::too_many_arguments)]
fn gather(
    gpus: &[&Gpu],
    lde_ptrs: &[u64],
    slab: u64,
    me: usize,
    shares: &[Share],
    lde_done: &[Event],
    plan: &Plan<'_>,
    passes: &Passes,
) -> DriverResult<()> {
    let (n, cosets) = (plan.shape.poly_len, passes.cosets);
    let t = &shares[me].t;
    let gpu = gpus[me];
    for (h, (source, share)) in gpus.iter().zip(shares).enumerate() {
        gpu.compute.wait(&lde_done[h])?;
        for (local, c) in share.cols.clone().enumerate() {
            for k in 0..cosets {
                let src = lde_ptrs[h] + (((local * cosets + k) * n + t.start) * 8) as u64;
                let dst = slab + (((c * cosets + k) * t.len()) * 8) as u64;
                gpu.compute
                    .copy_peer(dst, &gpu.ctx, src, &source.ctx, t.len() * 8)?;
            }
        }
    }
    Ok(())
}

/// Enqueues the row hashes of this GPU's rows over pass `pass`'s cosets in chunks, into the
/// pass's half of the rows buffer.
fn enqueue_hash(
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
    let leaves = bufs.leaves.get(&gpu.ctx, shape.lde_len * 32)?;
    // Source addressing of element (k, t, c): the LDE itself with one GPU, else the slab.
    let (base, k_stride, c_stride) = if from_slab {
        (bufs.slab.get(&gpu.ctx, 0)?, t_len, t_len << log_c)
    } else {
        (bufs.lde.get(&gpu.ctx, 0)?, n, n << log_c)
    };
    let kernel = gpu.kernels.hash_rows(plan.hash, plan.part != 0);
    let chunk_t = (HASH_CHUNK_ROWS >> log_c).max(1);
    let mut chunks = Vec::new();
    let mut t0 = share.t.start;
    while t0 < share.t.end {
        // the rows of the last chunks download after the hashing ends: keep them short
        let size = if share.t.end - t0 <= chunk_t {
            (chunk_t / LAST_CHUNK_SPLIT).max(1)
        } else {
            chunk_t
        };
        let t1 = (t0 + size).min(share.t.end);
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
        .launch(gpu, kernel)?;
        let event = Event::new(&gpu.ctx)?;
        event.record(&gpu.compute)?;
        chunks.push((t0..t1, event));
        t0 = t1;
    }
    Ok(HashedChunks { pass, chunks })
}

/// The `hash_rows_*` kernels' parameters (cuda/hash.cu), in their order.
struct HashRowsArgs {
    src: u64,
    k_stride: u64,
    t_stride: u64,
    c_stride: u64,
    num_cols: u32,
    part: u32,
    log_blowup: u32,
    k0: u32,
    log_cosets: u32,
    t0: u64,
    t_count: u64,
    leaves: u64,
    rows_out: u64,
    t_base: u64,
    row_width: u32,
}

impl HashRowsArgs {
    /// Launches `kernel` on `gpu`'s compute stream, one thread per row (`t_count` rows of each of
    /// the `2^log_cosets` cosets).
    fn launch(self, gpu: &Gpu, kernel: &Kernel) -> DriverResult<()> {
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
        let threads = (t_count as usize) << log_cosets;
        let mut args = kernel_args!(
            src, k_stride, t_stride, c_stride, num_cols, part, log_blowup, k0, log_cosets, t0,
            t_count, leaves, rows_out, t_base, row_width
        );
        // SAFETY: the arguments are the kernels' parameters in order; callers size the buffers
        // for the addressed rows.
        unsafe {
            kernel.launch(
                &gpu.compute,
                threads.div_ceil(HASH_BLOCK as usize) as u32,
                HASH_BLOCK,
                &mut args,
            )
        }
    }
}

/// The kernels' `part`: 0 for whole rows, else the partition size in base elements.
fn partition_size(row_hashing: RowHashing) -> u32 {
    match row_hashing {
        RowHashing::WholeRow => 0,
        RowHashing::Partitioned(size) => size.min(u32::MAX as usize) as u32,
    }
}

/// Enqueues the Merkle levels of this GPU's blocks, from the leaves up to the block roots.
fn enqueue_tree(
    gpu: &Gpu,
    state: &mut GpuState,
    plan: &Plan<'_>,
    share: &Share,
    blocks: usize,
) -> DriverResult<()> {
    let lde_len = plan.shape.lde_len;
    let bufs = &mut state.buffers;
    let leaves = bufs.leaves.get(&gpu.ctx, lde_len * 32)?;
    let nodes = bufs.nodes.get(&gpu.ctx, lde_len * 32)?;
    merkle_levels(
        gpu,
        plan.hash,
        leaves,
        nodes,
        lde_len,
        blocks,
        &share.blocks,
    )
}

/// Merkle levels over `leaves` (device) into `nodes` (device, Winterfell's layout) for blocks
/// `mine` of `blocks`.
pub(crate) fn merkle_levels(
    gpu: &Gpu,
    hash: HashFunction,
    leaves: u64,
    nodes: u64,
    num_leaves: usize,
    blocks: usize,
    mine: &std::ops::Range<usize>,
) -> DriverResult<()> {
    let kernel = gpu.kernels.merkle_level(hash);
    let mut count = num_leaves / 2;
    while count >= blocks && count >= 1 {
        let per_block = count / blocks;
        let first = mine.start * per_block;
        let (mut children, mut parents, mut n) = (
            if count == num_leaves / 2 {
                leaves + (2 * first * 32) as u64
            } else {
                nodes + ((2 * count + 2 * first) * 32) as u64
            },
            nodes + ((count + first) * 32) as u64,
            (mine.len() * per_block) as u64,
        );
        let mut args = kernel_args!(children, parents, n);
        // SAFETY: arguments match the Merkle kernels; children and parents lie in the buffers.
        unsafe {
            kernel.launch(
                &gpu.compute,
                (n as usize).div_ceil(HASH_BLOCK as usize) as u32,
                HASH_BLOCK,
                &mut args,
            )?
        };
        count /= 2;
    }
    Ok(())
}

// SINGLE STAGES (the trait's `hash_rows` and `build_tree`, on the first GPU)
// ================================================================================================

/// Hashes host rows on `gpu`.
pub(crate) fn hash_rows(
    gpu: &Gpu,
    state: &mut GpuState,
    lde: &LdeRows,
    row_hashing: RowHashing,
    hash: HashFunction,
) -> Result<Vec<Digest>> {
    let num_rows = lde.num_rows();
    if num_rows == 0 {
        return Ok(Vec::new());
    }
    let bufs = &mut state.buffers;
    let src = bufs.source.get(&gpu.ctx, lde.data.len() * 8)?;
    let leaves = bufs.leaves.get(&gpu.ctx, num_rows * 32)?;
    {
        let mut lane = Lane {
            ctx: &gpu.ctx,
            stream: &gpu.copy,
            ring: &mut state.ring,
        };
        transfer::upload(&mut lane, src, Felt::elements_as_bytes(&lde.data))?;
    }
    let uploaded = Event::new(&gpu.ctx)?;
    uploaded.record(&gpu.copy)?;
    gpu.compute.wait(&uploaded)?;
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
    .launch(gpu, gpu.kernels.hash_rows(hash, part != 0))?;
    let done = Event::new(&gpu.ctx)?;
    done.record(&gpu.compute)?;
    download_digests(gpu, state, leaves, num_rows, &done, |_| {})
}

/// Builds the Merkle nodes over host leaves on `gpu`.
pub(crate) fn build_tree(
    gpu: &Gpu,
    state: &mut GpuState,
    leaves: &[Digest],
    hash: HashFunction,
) -> Result<Vec<Digest>> {
    let n = leaves.len();
    let bufs = &mut state.buffers;
    let leaves_ptr = bufs.leaves.get(&gpu.ctx, n * 32)?;
    let nodes_ptr = bufs.nodes.get(&gpu.ctx, n * 32)?;
    {
        let words: &[Felt] = leaves.as_flattened();
        let mut lane = Lane {
            ctx: &gpu.ctx,
            stream: &gpu.copy,
            ring: &mut state.ring,
        };
        transfer::upload(&mut lane, leaves_ptr, Felt::elements_as_bytes(words))?;
    }
    let uploaded = Event::new(&gpu.ctx)?;
    uploaded.record(&gpu.copy)?;
    gpu.compute.wait(&uploaded)?;
    merkle_levels(gpu, hash, leaves_ptr, nodes_ptr, n, 1, &(0..1))?;
    let done = Event::new(&gpu.ctx)?;
    done.record(&gpu.compute)?;
    download_digests(gpu, state, nodes_ptr, n, &done, |nodes| {
        nodes[0] = [Felt::ZERO; 4]
    })
}

/// Downloads `count` digests from `src` once `ready` fires; `fix` adjusts the result (node 0).
fn download_digests(
    gpu: &Gpu,
    state: &mut GpuState,
    src: u64,
    count: usize,
    ready: &Event,
    fix: impl FnOnce(&mut [Digest]),
) -> Result<Vec<Digest>> {
    let mut out: Vec<Digest> = reserve_host(count)?;
    let job = Download {
        src,
        dst: spare(&mut out, 0, count),
        ready: Some(ready),
    };
    download(&[gpu], &mut [state], vec![vec![job]])?;
    // SAFETY: the download wrote all `count` digests.
    unsafe { out.set_len(count) };
    fix(&mut out);
    Ok(out)
}
