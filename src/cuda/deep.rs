//! The DEEP composition over resident polynomials (`cuda/deep.cu`): the out-of-domain
//! evaluations and the linear combination.
//!
//! Evaluations: each run of columns on one GPU (see below) is one launch writing its blocks'
//! values, which come back to be joined on the host. Combination: `S` accumulates on the GPU
//! that holds the columns being added, in column order: each run of columns on one GPU is one
//! launch, and when the next run is on another GPU the accumulator moves there (a peer copy of
//! `S`, a few megabytes). A segment of extension columns whose components are split between
//! GPUs is first gathered on one of them. Only `S` comes back.

use miden_crypto::Felt;

use super::{
    assemble::download_vec,
    buffer::{DeviceBuffer, DeviceSlice},
    gpu::{Gpu, GpuState},
    kernels::{self, Grid},
    memory,
    resident::CudaResident,
};
use crate::{
    committer::deep::{
        join_blocks, CombineRequest, DeepSegment, EvaluateRequest, EVALUATION_BLOCK,
    },
    error::{to_u32, DeepError, GpuError, Result},
};

/// Threads per block of the DEEP kernels.
const DEEP_BLOCK: u32 = 256;

/// Columns of one segment on one GPU, ready for a launch.
struct Run<'a> {
    gpu: usize,
    /// The base columns' coefficients, one column after another.
    polys: DeviceSlice<'a, Felt>,
    /// Columns of the segment's degree.
    num_cols: usize,
}

// EVALUATION
// ================================================================================================

/// Every column of `request`'s segments, held by `committer`'s `gpus`, at the request's two
/// points: for column `c` and point `p`, the components at `(c·2 + p)·degree`.
pub(super) fn evaluate(
    gpus: &[Gpu],
    states: &mut [GpuState],
    committer: u64,
    request: &EvaluateRequest<'_>,
    poly_len: usize,
    limit: Option<u64>,
) -> Result<Vec<Felt>> {
    let d = request.ext_degree;
    let block_len = poly_len.min(EVALUATION_BLOCK);
    let blocks = poly_len / block_len;
    let out_bytes = |cols: usize| cols * blocks * 2 * d * 8;
    fit(gpus, states, committer, request.segments, poly_len, out_bytes, limit)?;
    let points: Vec<u64> = request.points.iter().map(|x| x.inner()).collect();
    let mut partials = Vec::new();
    for segment in request.segments {
        let held = resident(segment, committer)?;
        let gathered = gather(gpus, held, segment.degree, poly_len)?;
        for run in runs(held, gathered.as_ref(), segment.degree) {
            let gpu = &gpus[run.gpu];
            let table = gpu.upload_table(&points)?;
            let words = run.num_cols * blocks * 2 * d;
            let mut out = DeviceBuffer::<Felt>::new(&gpu.alloc, words)?;
            let items = run.num_cols * blocks;
            let grid = Grid {
                blocks: to_u32(items.div_ceil(DEEP_BLOCK as usize), "blocks of a DEEP evaluation")?,
                threads_per_block: DEEP_BLOCK,
            };
            let (num_cols, col_degree, block_len) = (
                to_u32(run.num_cols, "columns of a DEEP evaluation")?,
                to_u32(segment.degree, "the degree of a DEEP segment")?,
                to_u32(block_len, "the block of a DEEP evaluation")?,
            );
            // SAFETY: `out` holds num_cols·blocks·2·d elements, `polys` num_cols·degree columns
            // of poly_len, the points table 2·d words.
            unsafe {
                kernels::deep_evaluate(
                    gpu.kernels.deep_evaluate(d),
                    &gpu.compute,
                    grid,
                    out.as_slice_mut(),
                    run.polys,
                    table.as_slice(),
                    poly_len as u64,
                    num_cols,
                    col_degree,
                    block_len,
                )?;
            }
            let done = gpu.completion()?;
            partials.extend(download_vec(gpu, &mut states[run.gpu].ring, out.as_slice(), &done)?);
        }
    }
    Ok(join_blocks(&partials, request.points, poly_len, block_len, d))
}

// COMBINATION
// ================================================================================================

/// `S = Σ kᵢ·Tᵢ` over `request`'s segments, held by `committer`'s `gpus`; `S` as `poly_len`
/// elements of the request's degree, components interleaved.
pub(super) fn combine(
    gpus: &[Gpu],
    states: &mut [GpuState],
    committer: u64,
    request: &CombineRequest<'_>,
    poly_len: usize,
    limit: Option<u64>,
) -> Result<Vec<Felt>> {
    let d = request.ext_degree;
    let acc_len = poly_len * d;
    fit(gpus, states, committer, request.segments, poly_len, |_| acc_len * 8, limit)?;
    // kept until the end: gathered columns, coefficient tables, earlier accumulators
    let mut keep_gathered: Vec<DeviceBuffer<Felt>> = Vec::new();
    let mut keep_tables: Vec<DeviceBuffer<u64>> = Vec::new();
    let mut keep_accumulators: Vec<DeviceBuffer<Felt>> = Vec::new();
    let mut acc: Option<(usize, DeviceBuffer<Felt>)> = None;
    let mut coefficients = request.coefficients;
    for segment in request.segments {
        let held = resident(segment, committer)?;
        let gathered = gather(gpus, held, segment.degree, poly_len)?;
        for run in runs(held, gathered.as_ref(), segment.degree) {
            let gpu = &gpus[run.gpu];
            let (take, rest) = coefficients.split_at(run.num_cols * d);
            coefficients = rest;
            let table = gpu.upload_table(&take.iter().map(|k| k.inner()).collect::<Vec<_>>())?;
            let init = acc.is_none() as u32;
            let mut target = match acc.take() {
                Some((g, buffer)) if g == run.gpu => buffer,
                Some((g, buffer)) => {
                    let mut moved = DeviceBuffer::<Felt>::new(&gpu.alloc, acc_len)?;
                    gpu.compute.wait(&gpus[g].completion()?)?;
                    gpu.compute.copy_peer(moved.as_slice_mut(), buffer.as_slice())?;
                    keep_accumulators.push(buffer);
                    moved
                },
                None => DeviceBuffer::<Felt>::new(&gpu.alloc, acc_len)?,
            };
            let grid = Grid {
                blocks: to_u32(poly_len.div_ceil(DEEP_BLOCK as usize), "blocks of a DEEP sum")?,
                threads_per_block: DEEP_BLOCK,
            };
            let num_cols = to_u32(run.num_cols, "columns of a DEEP sum")?;
            let col_degree = to_u32(segment.degree, "the degree of a DEEP segment")?;
            // SAFETY: the accumulator holds poly_len·d elements, `polys` num_cols·degree columns
            // of poly_len, the coefficient table num_cols·d words.
            unsafe {
                kernels::deep_combine(
                    gpu.kernels.deep_combine(d),
                    &gpu.compute,
                    grid,
                    target.as_slice_mut(),
                    run.polys,
                    table.as_slice(),
                    poly_len as u64,
                    num_cols,
                    col_degree,
                    init,
                )?;
            }
            keep_tables.push(table);
            acc = Some((run.gpu, target));
        }
        keep_gathered.extend(gathered.map(|(_, buffer)| buffer));
    }
    let (g, buffer) = acc.ok_or(GpuError::InvalidDeep(DeepError::NoColumns))?;
    let done = gpus[g].completion()?;
    let sum = download_vec(&gpus[g], &mut states[g].ring, buffer.as_slice(), &done)?;
    drop((keep_gathered, keep_tables, keep_accumulators));
    Ok(sum)
}

/// The segment's storage, if `committer` holds it.
fn resident<'a>(segment: &DeepSegment<'a>, committer: u64) -> Result<&'a CudaResident> {
    let resident = segment.polys.storage::<CudaResident>().filter(|r| r.committer == committer);
    resident.ok_or(GpuError::InvalidDeep(DeepError::NotResident))
}

/// A segment's columns gathered on one GPU (when a share splits a column of `degree`
/// components, see [`gather_home`]): that GPU and the buffer, kept alive until its launches are
/// done; `None` when every share holds whole columns.
fn gather(
    gpus: &[Gpu],
    resident: &CudaResident,
    degree: usize,
    poly_len: usize,
) -> Result<Option<(usize, DeviceBuffer<Felt>)>> {
    let Some(home) = gather_home(resident, degree) else {
        return Ok(None);
    };
    let mut gathered =
        DeviceBuffer::<Felt>::new(&gpus[home].alloc, resident.num_cols() * poly_len)?;
    for share in &resident.shares {
        let source = &gpus[share.gpu];
        gpus[home].compute.wait(&source.completion()?)?;
        let cols = share.cols.start * poly_len..share.cols.end * poly_len;
        gpus[home].compute.copy_peer(
            gathered.slice_mut(cols)?,
            share.buffer.slice(..share.cols.len() * poly_len)?,
        )?;
    }
    Ok(Some((home, gathered)))
}

/// The launches of one segment: its shares where every share holds whole columns of `degree`,
/// else the segment `gathered` on one GPU.
fn runs<'a>(
    resident: &'a CudaResident,
    gathered: Option<&'a (usize, DeviceBuffer<Felt>)>,
    degree: usize,
) -> Vec<Run<'a>> {
    match gathered {
        Some((home, buffer)) => {
            vec![Run {
                gpu: *home,
                polys: buffer.as_slice(),
                num_cols: resident.num_cols() / degree,
            }]
        },
        None => resident
            .shares
            .iter()
            .map(|s| Run {
                gpu: s.gpu,
                polys: s.buffer.as_slice(),
                num_cols: s.cols.len() / degree,
            })
            .collect(),
    }
}

/// The GPU a segment's columns are gathered on when a share splits a column of `degree`
/// components (the first share's); `None` when every share holds whole columns.
fn gather_home(resident: &CudaResident, degree: usize) -> Option<usize> {
    let aligned =
        resident.shares.iter().all(|s| s.cols.start % degree == 0 && s.cols.end % degree == 0);
    (!aligned).then(|| resident.shares[0].gpu)
}

// MEMORY
// ================================================================================================

/// Checks the working buffers of `segments` against each GPU's budget (`limit`, as
/// [`memory::fit`] counts it), freeing what the GPUs hold from earlier work where they would not
/// fit beside it: the gathered columns of each segment, and `run_bytes(columns)` per launch (its
/// output or accumulator), counted as if all were held at once (the combination keeps them to
/// the end; the evaluation frees them segment by segment).
fn fit(
    gpus: &[Gpu],
    states: &mut [GpuState],
    committer: u64,
    segments: &[DeepSegment<'_>],
    poly_len: usize,
    run_bytes: impl Fn(usize) -> usize,
    limit: Option<u64>,
) -> Result<()> {
    let mut needed = vec![0u64; gpus.len()];
    for segment in segments {
        let resident = resident(segment, committer)?;
        let degree = segment.degree;
        match gather_home(resident, degree) {
            Some(home) => {
                let cols = resident.num_cols();
                needed[home] += (cols * poly_len * 8 + run_bytes(cols / degree)) as u64;
            },
            None => {
                for share in &resident.shares {
                    needed[share.gpu] += run_bytes(share.cols.len() / degree) as u64;
                }
            },
        }
    }
    for ((gpu, state), &bytes) in gpus.iter().zip(states.iter_mut()).zip(&needed) {
        if bytes > 0 {
            memory::fit(gpu, state, bytes, &[], limit)?;
        }
    }
    Ok(())
}
