//! The DEEP composition over resident polynomials (`cuda/deep.cu`): the out-of-domain
//! evaluations and the linear combination.
//!
//! Evaluations: each run of columns on one GPU (see below) is one launch writing its blocks'
//! values, which come back to be joined on the host. Combination: `S` accumulates on the GPU that holds the columns being added, in column order: each run of
//! columns on one GPU is one launch, and when the next run is on another GPU the accumulator
//! moves there (a peer copy of `S`, a few megabytes). A segment of extension columns whose
//! components are split between GPUs is first gathered on one of them. Only `S` comes back.

use miden_crypto::Felt;

use super::{
    assemble::download_vec,
    driver::DeviceBuffer,
    gpu::{Gpu, GpuState},
    launch::kernel_args,
    memory,
    resident::CudaResident,
};
use crate::{
    deep::{join_blocks, CombineRequest, DeepSegment, EvaluateRequest, EVALUATION_BLOCK},
    error::{GpuError, Result},
};

/// Threads per block of the DEEP kernels.
const DEEP_BLOCK: u32 = 256;

/// Columns of one segment on one GPU, ready for a launch.
struct Run {
    gpu: usize,
    /// The first base column's coefficients.
    polys: u64,
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
        let (runs, _gathered) =
            runs(gpus, resident(segment, committer)?, segment.degree, poly_len)?;
        for run in runs {
            let gpu = &gpus[run.gpu];
            let table = gpu.upload_table(&points)?;
            let words = run.num_cols * blocks * 2 * d;
            let out = DeviceBuffer::new(&gpu.alloc, words * 8)?;
            let (mut out_ptr, mut polys, mut x, mut n) =
                (out.ptr(), run.polys, table.ptr(), poly_len as u64);
            let (mut cols, mut degree, mut block) =
                (run.num_cols as u32, segment.degree as u32, block_len as u32);
            let mut args = kernel_args!(out_ptr, polys, x, n, cols, degree, block);
            let grid = (run.num_cols * blocks).div_ceil(DEEP_BLOCK as usize) as u32;
            // SAFETY: arguments match `deep_evaluate_*` of degree `d`: `out` holds
            // num_cols·blocks·2·d words, `polys` num_cols·degree columns of poly_len, `x` 2·d.
            unsafe {
                gpu.kernels.deep_evaluate(d).launch(&gpu.compute, grid, DEEP_BLOCK, &mut args)?
            };
            let done = gpu.completion()?;
            partials.extend(download_vec::<Felt>(
                gpu,
                &mut states[run.gpu],
                out.ptr(),
                words,
                &done,
            )?);
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
    let bytes = poly_len * d * 8;
    fit(gpus, states, committer, request.segments, poly_len, |_| bytes, limit)?;
    // kept until the end: gathered columns, coefficient tables, earlier accumulators
    let mut keep: Vec<DeviceBuffer> = Vec::new();
    let mut acc: Option<(usize, DeviceBuffer)> = None;
    let mut coefficients = request.coefficients;
    for segment in request.segments {
        let (runs, gathered) = runs(gpus, resident(segment, committer)?, segment.degree, poly_len)?;
        keep.extend(gathered);
        for run in runs {
            let gpu = &gpus[run.gpu];
            let (take, rest) = coefficients.split_at(run.num_cols * d);
            coefficients = rest;
            let table = gpu.upload_table(&take.iter().map(|k| k.inner()).collect::<Vec<_>>())?;
            let init = acc.is_none() as u32;
            let target = match acc.take() {
                Some((g, buffer)) if g == run.gpu => buffer,
                Some((g, buffer)) => {
                    let moved = DeviceBuffer::new(&gpu.alloc, bytes)?;
                    gpu.compute.wait(&gpus[g].completion()?)?;
                    gpu.compute.copy_peer(
                        moved.ptr(),
                        &gpu.ctx,
                        buffer.ptr(),
                        &gpus[g].ctx,
                        bytes,
                    )?;
                    keep.push(buffer);
                    moved
                },
                None => DeviceBuffer::new(&gpu.alloc, bytes)?,
            };
            let (mut out, mut polys, mut k, mut n) =
                (target.ptr(), run.polys, table.ptr(), poly_len as u64);
            let (mut cols, mut degree) = (run.num_cols as u32, segment.degree as u32);
            let mut init = init;
            let mut args = kernel_args!(out, polys, k, n, cols, degree, init);
            let grid = poly_len.div_ceil(DEEP_BLOCK as usize) as u32;
            // SAFETY: arguments match `deep_combine_*` of degree `d`: `out` holds poly_len·d
            // words, `polys` num_cols·degree columns of poly_len, `k` num_cols·d words.
            unsafe {
                gpu.kernels.deep_combine(d).launch(&gpu.compute, grid, DEEP_BLOCK, &mut args)?
            };
            keep.push(table);
            acc = Some((run.gpu, target));
        }
    }
    let (g, buffer) = acc.ok_or_else(|| GpuError::InvalidDeep("no columns".into()))?;
    let done = gpus[g].completion()?;
    let sum = download_vec(&gpus[g], &mut states[g], buffer.ptr(), poly_len * d, &done)?;
    drop(keep);
    Ok(sum)
}

/// The segment's storage, if `committer` holds it.
fn resident<'a>(segment: &DeepSegment<'a>, committer: u64) -> Result<&'a CudaResident> {
    let resident = segment.polys.storage::<CudaResident>().filter(|r| r.committer == committer);
    resident.ok_or_else(|| {
        GpuError::InvalidDeep("a segment's polynomials are not held by this committer".into())
    })
}

/// The launches of one segment: its shares where every share holds whole columns of `degree`,
/// else the whole segment gathered on the first share's GPU (returned to be kept alive).
fn runs(
    gpus: &[Gpu],
    resident: &CudaResident,
    degree: usize,
    poly_len: usize,
) -> Result<(Vec<Run>, Option<DeviceBuffer>)> {
    let column_bytes = poly_len * 8;
    let Some(home) = gather_home(resident, degree) else {
        let runs = resident
            .shares
            .iter()
            .map(|s| Run { gpu: s.gpu, polys: s.buffer.ptr(), num_cols: s.cols.len() / degree })
            .collect();
        return Ok((runs, None));
    };
    let total = resident.num_cols();
    let gathered = DeviceBuffer::new(&gpus[home].alloc, total * column_bytes)?;
    for share in &resident.shares {
        let source = &gpus[share.gpu];
        gpus[home].compute.wait(&source.completion()?)?;
        gpus[home].compute.copy_peer(
            gathered.ptr() + (share.cols.start * column_bytes) as u64,
            &gpus[home].ctx,
            share.buffer.ptr(),
            &source.ctx,
            share.cols.len() * column_bytes,
        )?;
    }
    let run = Run { gpu: home, polys: gathered.ptr(), num_cols: total / degree };
    Ok((vec![run], Some(gathered)))
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
