//! Resident polynomials and the DEEP composition over them (`deep.wgsl`).
//!
//! A commitment's coefficient array stays on the device when the prover asks for it: it is the
//! array the LDE was computed from, so keeping it costs no copy. The out-of-domain evaluation
//! computes blocks of each column at both points (the host joins them); the combination adds
//! one column per dispatch into `S`, in column order, and downloads `S` alone.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use miden_crypto::Felt;
use tracing::info_span;

use super::kernels::DeepParams;
use super::{
    buffers::Chunked,
    download::{download_array, DownloadQueue, RecordSink, Sinks, Store, Target},
    kernels::{deep_combine, deep_evaluate},
    sizes::FELT_BYTES,
    Engine,
};
use crate::{
    committer::deep::{
        join_blocks, CombineRequest, DeepSegment, EvaluateRequest, EVALUATION_BLOCK,
    },
    error::{to_u32, DeepError, GpuError, Result},
    host::zeroed_host,
};

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(DeepParams {
        count,
        first,
        src,
        col_degree,
        degree,
        init,
        k,
        x1,
        block_len,
        _pad,
    })]
}

// RESIDENT POLYNOMIALS
// ================================================================================================

/// A segment's coefficient array kept on one committer's device (the storage of a
/// [`crate::ResidentPolys`] held by the wgpu backend): base column `c` is records
/// `c·poly_len ..` of the array.
pub(super) struct WgpuResident {
    /// Identifies the committer whose device holds the array.
    pub committer: u64,
    pub array: Chunked,
    held: Arc<AtomicU64>,
}

impl WgpuResident {
    /// Keeps `array`, counting its bytes in `held`.
    pub fn new(committer: u64, array: Chunked, held: Arc<AtomicU64>) -> Self {
        held.fetch_add(array.len * FELT_BYTES, Ordering::SeqCst);
        Self { committer, array, held }
    }
}

impl Drop for WgpuResident {
    fn drop(&mut self) {
        self.held.fetch_sub(self.array.len * FELT_BYTES, Ordering::SeqCst);
    }
}

/// The segment's storage, if committer `committer` holds it.
fn resident<'a>(segment: &DeepSegment<'a>, committer: u64) -> Result<&'a WgpuResident> {
    let resident = segment.polys.storage::<WgpuResident>();
    resident
        .filter(|r| r.committer == committer)
        .ok_or(GpuError::InvalidDeep(DeepError::NotResident))
}

/// The Montgomery words of an element's components as (low, high), zero past its degree.
fn element_words(components: &[Felt]) -> [[u32; 2]; 3] {
    let mut words = [[0; 2]; 3];
    for (w, value) in words.iter_mut().zip(components) {
        let word = value.inner();
        *w = [word as u32, (word >> 32) as u32];
    }
    words
}

/// The elements of component `c` (0, 1, 2; past the column's degree, component 0 again) of
/// column `col` of a segment of `degree`, from coefficient `first` on: their index and part.
fn component_sources(
    array: &Chunked,
    n: u64,
    col: u64,
    degree: u64,
    first: u64,
) -> ([u32; 3], [&::wgpu::Buffer; 3]) {
    let located = [0, 1, 2].map(|c| array.locate((col * degree + c % degree) * n + first));
    (located.map(|(_, index)| index), located.map(|(buffer, _)| buffer))
}

// EVALUATION
// ================================================================================================

/// Every column of `request`'s segments, held by committer `committer`, at the request's two
/// points: for column `c` and point `p`, the components at `(c·2 + p)·degree`.
pub(super) fn evaluate(
    engine: &Engine<'_>,
    committer: u64,
    request: &EvaluateRequest<'_>,
    poly_len: usize,
) -> Result<Vec<Felt>> {
    let d = request.ext_degree as u64;
    let n = poly_len as u64;
    let device = &engine.ctx.device;
    let mut columns = Vec::with_capacity(request.segments.len());
    for segment in request.segments {
        let resident = resident(segment, committer)?;
        columns.push((resident, segment.degree as u64));
    }
    let part_len = columns.iter().map(|(r, _)| r.array.part_len).min().unwrap_or(n);
    let block_len = n.min(EVALUATION_BLOCK as u64).min(part_len);
    let blocks = n / block_len;
    let total_cols: u64 = columns.iter().map(|(r, degree)| r.array.len / n / degree).sum();
    // block values in parts of whole blocks (2 values of d components each)
    let out_part = 1u64 << (engine.sizes.felts() / (2 * d)).ilog2();
    let out = Chunked::new(engine.pool, device, total_cols * blocks, 2 * d * FELT_BYTES, out_part);
    let values = (total_cols * blocks * 2 * d) as usize;
    let mut sinks = Sinks::default();
    sinks.felts.push(zeroed_host(values, &engine.host)?);
    sinks.records.push(RecordSink {
        store: Store::Felts(0),
        start: 0,
        record_len: 2 * d as usize,
        groups: 1,
        group_len: (total_cols * blocks) as usize,
    });
    let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));
    let x0 = element_words(&request.points[..d as usize]);
    let x1 = element_words(&request.points[d as usize..]);
    info_span!("wgpu.deep_evaluate", rows = poly_len).in_scope(|| {
        let mut block0 = 0;
        for (resident, degree) in columns {
            let array = &resident.array;
            // runs of blocks inside one part of the array and one part of the output
            let run_blocks = blocks.min(array.part_len / block_len).min(out_part).max(1);
            for col in 0..array.len / n / degree {
                for first_block in (0..blocks).step_by(run_blocks as usize) {
                    let (src, [c0, c1, c2]) =
                        component_sources(array, n, col, degree, first_block * block_len);
                    let (out_buffer, out_first) = out.locate(block0 + first_block);
                    let buffers = [c0, c1, c2, out_buffer];
                    let first = u64::from(out_first) * 2 * d;
                    let params = DeepParams {
                        count: to_u32(run_blocks, "blocks of a DEEP evaluation")?,
                        first: to_u32(first, "the first value of a DEEP evaluation")?,
                        src,
                        col_degree: to_u32(degree, "the degree of a DEEP segment")?,
                        degree: to_u32(d, "the degree of a DEEP element")?,
                        k: x0,
                        x1,
                        block_len: to_u32(block_len, "the block of a DEEP evaluation")?,
                        ..DeepParams::default()
                    };
                    downloads.batch().dispatch_items(
                        deep_evaluate(),
                        &params,
                        buffers,
                        run_blocks,
                    )?;
                }
                block0 += blocks;
            }
        }
        Ok::<_, GpuError>(())
    })?;
    download_array(&mut downloads, &out, 2 * d * FELT_BYTES, |first| Target::Records {
        sink: 0,
        first,
    })?;
    let mut sinks = downloads.finish()?;
    let partials = sinks.felts.pop().unwrap_or_default();
    Ok(join_blocks(&partials, request.points, poly_len, block_len as usize, d as usize))
}

// COMBINATION
// ================================================================================================

/// `S = Σ kᵢ·Tᵢ` over `request`'s segments, held by committer `committer`: `poly_len` elements
/// of the request's degree, components interleaved.
pub(super) fn combine(
    engine: &Engine<'_>,
    committer: u64,
    request: &CombineRequest<'_>,
    poly_len: usize,
) -> Result<Vec<Felt>> {
    let d = request.ext_degree as u64;
    let n = poly_len as u64;
    let device = &engine.ctx.device;
    // S in parts of whole elements
    let sum_part = 1u64 << (engine.sizes.felts() / d).ilog2();
    let sum = Chunked::new(engine.pool, device, n, d * FELT_BYTES, sum_part);
    let mut sinks = Sinks::default();
    sinks.felts.push(zeroed_host(poly_len * d as usize, &engine.host)?);
    sinks.records.push(RecordSink {
        store: Store::Felts(0),
        start: 0,
        record_len: d as usize,
        groups: 1,
        group_len: poly_len,
    });
    let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));

    let mut coefficients = request.coefficients.chunks_exact(d as usize);
    let mut init = 1;
    info_span!("wgpu.deep_combine", rows = poly_len).in_scope(|| {
        for segment in request.segments {
            let array = &resident(segment, committer)?.array;
            let degree = segment.degree as u64;
            // runs of coefficients that stay in one part of the array for every component, and
            // in one part of S
            let run = n.min(array.part_len).min(sum_part);
            for col in 0..segment.polys.num_cols() as u64 / degree {
                let k = coefficients.next().expect("validated: one coefficient per column");
                let k_words = element_words(k);
                for first in (0..n).step_by(run as usize) {
                    let (src, [c0, c1, c2]) = component_sources(array, n, col, degree, first);
                    let (sum_buffer, sum_first) = sum.locate(first);
                    let buffers = [c0, c1, c2, sum_buffer];
                    let params = DeepParams {
                        count: to_u32(run, "elements of a DEEP sum")?,
                        first: sum_first,
                        src,
                        col_degree: to_u32(degree, "the degree of a DEEP segment")?,
                        degree: to_u32(d, "the degree of a DEEP element")?,
                        init,
                        k: k_words,
                        ..DeepParams::default()
                    };
                    downloads.batch().dispatch_items(deep_combine(), &params, buffers, run)?;
                }
                init = 0;
            }
        }
        Ok::<_, GpuError>(())
    })?;
    download_array(&mut downloads, &sum, d * FELT_BYTES, |first| Target::Records {
        sink: 0,
        first,
    })?;
    let mut sinks = downloads.finish()?;
    Ok(sinks.felts.pop().unwrap_or_default())
}
