//! Resident polynomials and the DEEP combination over them (`deep.wgsl`).
//!
//! A commitment's coefficient array stays on the device when the prover asks for it: it is the
//! array the LDE was computed from, so keeping it costs no copy. The combination adds one
//! column per dispatch into `S`, in column order, and downloads `S` alone.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use bytemuck::{Pod, Zeroable};
use miden_crypto::Felt;
use tracing::info_span;

use super::{
    buffers::Chunked,
    download::{download_array, zeroed, RecordSink, Sinks, Store, Stream, Target},
    pipelines::Kernel,
    sizes::FELT_BYTES,
    Engine,
};
use crate::{
    deep::CombineRequest,
    error::{GpuError, Result},
};

/// `DeepParams` of deep.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct DeepParams {
    count: u32,
    first: u32,
    src: [u32; 3],
    col_degree: u32,
    degree: u32,
    init: u32,
    k: [[u32; 2]; 3],
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
    sinks.felts.push(zeroed(poly_len * d as usize));
    sinks.records.push(RecordSink {
        store: Store::Felts(0),
        start: 0,
        record_len: d as usize,
        groups: 1,
        group_len: poly_len,
    });
    let mut stream = Stream::new(engine, Box::new(move || Ok(sinks)));

    let mut coefficients = request.coefficients.chunks_exact(d as usize);
    let mut init = 1;
    info_span!("wgpu.deep_combine", rows = poly_len).in_scope(|| {
        for segment in request.segments {
            let resident = segment.polys.storage::<WgpuResident>();
            let resident = resident.filter(|r| r.committer == committer).ok_or_else(|| {
                GpuError::InvalidDeep(
                    "a segment's polynomials are not held by this committer".into(),
                )
            })?;
            let array = &resident.array;
            let degree = segment.degree as u64;
            // runs of coefficients that stay in one part of the array for every component, and
            // in one part of S
            let run = n.min(array.part_len).min(sum_part);
            for col in 0..segment.polys.num_cols() as u64 / degree {
                let k = coefficients.next().expect("validated: one coefficient per column");
                let mut k_words = [[0; 2]; 3];
                for (words, value) in k_words.iter_mut().zip(k) {
                    let word = value.inner();
                    *words = [word as u32, (word >> 32) as u32];
                }
                for first in (0..n).step_by(run as usize) {
                    let mut src = [0; 3];
                    let mut buffers = Vec::with_capacity(4);
                    for (c, offset) in src.iter_mut().enumerate() {
                        let component = col * degree + c as u64 % degree;
                        let (buffer, index) = array.locate(component * n + first);
                        *offset = index;
                        buffers.push(buffer);
                    }
                    let (sum_buffer, sum_first) = sum.locate(first);
                    buffers.push(sum_buffer);
                    let params = DeepParams {
                        count: run as u32,
                        first: sum_first,
                        src,
                        col_degree: degree as u32,
                        degree: d as u32,
                        init,
                        k: k_words,
                    };
                    stream.batch().dispatch_items(Kernel::DeepCombine, &params, &buffers, run);
                }
                init = 0;
            }
        }
        Ok::<_, GpuError>(())
    })?;
    download_array(&mut stream, &sum, d * FELT_BYTES, |first| Target::Records { sink: 0, first })?;
    let mut sinks = stream.finish()?;
    Ok(sinks.felts.pop().unwrap_or_default())
}
