//! LDE rows kept on the device as the polynomials they are computed from, and the composition
//! over the constraint-evaluation domain there (`composition.wgsl`, its program generated from
//! the recorded graph).
//!
//! A commitment that keeps its rows downloads none of them; it keeps its coefficient array
//! instead ([`WgpuKeptRows`]). Each step that needs rows evaluates the cosets it reads again,
//! with the commitment's own coset evaluation (so the words are the committed ones): a read of
//! queried rows evaluates the cosets they lie in and gathers their words; the composition
//! evaluates, for each coset of the CE domain, every segment's coset and runs the composition
//! program over it (a frame's next row lies in the same coset). Only the queried rows and the
//! composition come to the host. The program depends on the AIR's shape alone (every per-proof
//! value is in the parameter words), so it is made once per committer and shape.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Instant,
};

use miden_crypto::Felt;
use tracing::info_span;

use super::{
    batch::Batch,
    buffers::Chunked,
    constants::upload_table,
    deep::WgpuResident,
    download::{download_array, DownloadQueue, RecordSink, Sinks, Store, Target},
    kernels::{composition_program, CompositionParams, COMPOSITION_STORAGE},
    lde::{record_coset_evaluation, CosetArrays, CosetShape},
    pipelines::{entry_pipeline, shader_module, Pipeline},
    shaders::{composition_source, Arithmetic, CompositionSizes},
    sizes::FELT_BYTES,
    Engine, Shared,
};
use crate::{
    backend::Backend,
    committer::{
        composition::{interleave, CompositionRequest, KeptEvaluations},
        KeptRows, ResidentPolys, Shape,
    },
    constraints::{wgsl_source, Composition},
    error::{to_u32, EvaluationError, GpuError, Result},
    hash::canonical_mont,
    host::zeroed_host,
};

/// Operations per generated function: the CUDA programs' bound, which keeps any one function
/// small for the shader compilers too.
const CHUNK_OPERATIONS: usize = 256;

// KEPT ROWS
// ================================================================================================

/// Whether a commitment of `shape` can keep its rows as its polynomials: a coset's evaluations
/// of all its columns fit one binding (the part a composition program reads them from).
pub(super) fn rows_recomputable(shared: &Shared, shape: &Shape) -> bool {
    (shape.num_cols as u64).saturating_mul(shape.poly_len as u64) <= shared.sizes.felts()
}

/// A commitment's LDE rows on one committer's device, held as its coefficient array: row `p`
/// is element `p >> log_blowup` of the coset `p mod blowup`.
pub(super) struct WgpuKeptRows {
    shared: Arc<Shared>,
    polys: ResidentPolys,
    log_blowup: u32,
}

impl WgpuKeptRows {
    /// The rows of a commitment of `shape` whose coefficient array `polys` holds.
    pub fn new(shared: Arc<Shared>, polys: ResidentPolys, shape: &Shape) -> Self {
        let log_blowup = (shape.lde_len / shape.poly_len).ilog2();
        Self { shared, polys, log_blowup }
    }

    fn array(&self) -> Result<&Chunked> {
        let resident = self.polys.storage::<WgpuResident>();
        Ok(&resident.ok_or(GpuError::InvalidEvaluation(EvaluationError::RowsNotHere))?.array)
    }

    /// The coset evaluation of the columns: `num_cols` columns of `poly_len` elements over the
    /// LDE domain.
    fn cosets(&self) -> CosetShape {
        let n = self.polys.poly_len() as u64;
        CosetShape {
            num_cols: self.polys.num_cols() as u64,
            poly_len: n,
            unit: n,
            domain_len: n << self.log_blowup,
        }
    }
}

impl std::fmt::Debug for WgpuKeptRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuKeptRows")
            .field("rows", &(self.polys.poly_len() << self.log_blowup))
            .field("cols", &self.polys.num_cols())
            .finish_non_exhaustive()
    }
}

impl KeptRows for WgpuKeptRows {
    /// The cosets holding `positions` evaluated again, and the positions' words gathered there
    /// and downloaded (reduced below the modulus, as downloaded rows are).
    fn read(&self, positions: &[usize]) -> Result<Vec<Vec<Felt>>> {
        let shape = self.cosets();
        let lde_len = shape.domain_len as usize;
        if let Some(&p) = positions.iter().find(|&&p| p >= lde_len) {
            return Err(GpuError::RowOutOfRange { row: p, rows: lde_len });
        }
        let _span = info_span!("wgpu.read_rows", rows = positions.len()).entered();
        let words = self.shared.run(|engine| self.gather(engine, positions))?;
        let cols = shape.num_cols as usize;
        let canonical = |w: &Felt| Felt::from_mont(canonical_mont(w.inner()));
        Ok(words.chunks(cols.max(1)).map(|row| row.iter().map(canonical).collect()).collect())
    }
}

impl WgpuKeptRows {
    /// The words of every column at every position, position after position.
    fn gather(&self, engine: &Engine<'_>, positions: &[usize]) -> Result<Vec<Felt>> {
        let shape = self.cosets();
        let (n, cols) = (shape.poly_len, shape.num_cols);
        let device = &engine.ctx.device;
        let part = engine.sizes.felts();
        let work = Chunked::new(engine.pool, device, cols * n, FELT_BYTES, part);
        let len = positions.len() as u64 * cols;
        let gathered = Chunked::new(engine.pool, device, len.max(1), FELT_BYTES, part);
        let mut sinks = Sinks::default();
        sinks.felts.push(zeroed_host(len as usize, &engine.host)?);
        sinks.records.push(RecordSink {
            store: Store::Felts(0),
            start: 0,
            record_len: 1,
            groups: 1,
            group_len: len as usize,
        });
        let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));
        let mut cosets: Vec<usize> = positions.iter().map(|&p| p & self.blowup_mask()).collect();
        cosets.sort_unstable();
        cosets.dedup();
        let (powers, tables) = engine.tables().powers(device, &engine.ctx.queue, lde_log(&shape));
        let twiddles = engine.tables().twiddles(device, &engine.ctx.queue, n.ilog2(), false);
        for coset in cosets {
            let arrays = CosetArrays {
                coefficients: self.array()?,
                work: &work,
                powers: &powers,
                twiddles: &twiddles,
            };
            record_coset_evaluation(downloads.batch(), shape, coset as u64, arrays, tables)?;
            for (i, &p) in positions.iter().enumerate() {
                if p & self.blowup_mask() != coset {
                    continue;
                }
                // element t of the coset is at bitrev(t) of each column's evaluations
                let at = reverse_bits((p >> self.log_blowup) as u64, n.ilog2());
                for c in 0..cols {
                    let (src, src_at) = work.locate(c * n + at);
                    let (dst, dst_at) = gathered.locate(i as u64 * cols + c);
                    let (src_at, dst_at) = (u64::from(src_at), u64::from(dst_at));
                    downloads.batch().copy(
                        src,
                        src_at * FELT_BYTES,
                        dst,
                        dst_at * FELT_BYTES,
                        FELT_BYTES,
                    );
                }
            }
        }
        if len > 0 {
            download_array(&mut downloads, &gathered, FELT_BYTES, |first| Target::Records {
                sink: 0,
                first,
            })?;
        }
        let mut sinks = downloads.finish()?;
        Ok(sinks.felts.pop().unwrap_or_default())
    }

    fn blowup_mask(&self) -> usize {
        (1 << self.log_blowup) - 1
    }
}

/// log2 of the LDE domain of `shape`.
fn lde_log(shape: &CosetShape) -> u32 {
    shape.domain_len.ilog2()
}

/// `x` with its low `bits` bits reversed.
fn reverse_bits(x: u64, bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (64 - bits)
    }
}

// PROGRAMS
// ================================================================================================

/// The composition programs a committer made, by source.
#[derive(Default)]
pub(super) struct CompositionPrograms {
    made: Mutex<HashMap<String, Arc<Pipeline>>>,
}

impl CompositionPrograms {
    /// The pipeline of `source`, made at its first use, which is logged with its time.
    fn pipeline(&self, engine: &Engine<'_>, source: String) -> Arc<Pipeline> {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pipeline) = made.get(&source) {
            return pipeline.clone();
        }
        let started = Instant::now();
        let device = &engine.ctx.device;
        let bytes = source.len();
        let module = shader_module(device, "composition", source.clone());
        let pipeline =
            Arc::new(entry_pipeline(device, "composition", &COMPOSITION_STORAGE, &module, None));
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            source_bytes = bytes,
            "wgpu: made the composition pipeline"
        );
        made.insert(source, pipeline.clone());
        pipeline
    }
}

/// The WGSL program that evaluates `composition` (`composition.wgsl` and the graph's functions
/// over the field code of `arithmetic`), as the backend makes it: the same for every proof of
/// the AIR's shape.
pub fn composition_shader(composition: &Composition, arithmetic: Arithmetic) -> String {
    let sizes = CompositionSizes {
        outputs: composition.graph().extension_degree(),
        x_slots: composition.x_exponents().len(),
        table_words: composition.tables().iter().map(|table| table.width()).sum(),
    };
    let functions = wgsl_source(composition.graph(), "composition_row", CHUNK_OPERATIONS);
    composition_source(&sizes, &functions, arithmetic)
}

// EVALUATION
// ================================================================================================

/// The composition of `request` (over `ce_size` steps, checked) over the rows committer
/// `committer` (of `shared`) kept, left on the device.
pub(super) fn evaluate(
    engine: &Engine<'_>,
    shared: &Arc<Shared>,
    request: &CompositionRequest<'_>,
    ce_size: usize,
) -> Result<WgpuKeptEvaluations> {
    let committer = shared.id;
    let main = held(request.main, committer, request, request.main_width)?;
    let aux = request.aux.map(|rows| held(rows, committer, request, request.aux_width));
    let aux = aux.transpose()?;
    let composition = request.composition;
    let degree = composition.graph().extension_degree() as u64;
    let n = request.trace_len as u64;
    let (ce, lde) = (request.ce_blowup as u64, request.lde_blowup as u64);
    let words_out = (ce_size as u64).saturating_mul(degree);
    let device = &engine.ctx.device;
    let part = engine.sizes.felts();
    if words_out > part {
        return Err(GpuError::Unsupported {
            backend: Backend::Wgpu,
            operation: "a composition that does not fit one binding",
        });
    }

    let arithmetic = if engine.ctx.int64 { Arithmetic::U64 } else { Arithmetic::U32 };
    let program = engine.programs.pipeline(engine, composition_shader(composition, arithmetic));
    let program = composition_program(program);

    let words: Vec<Felt> = request.parameter_words().into_iter().map(Felt::from_mont).collect();
    let words = upload_table(device, &engine.ctx.queue, "composition parameters", &words);
    let out = Chunked::new(engine.pool, device, words_out, FELT_BYTES, part);
    let segments: Vec<(&WgpuKeptRows, Chunked)> = [Some(main), aux]
        .into_iter()
        .flatten()
        .map(|rows| {
            let len = rows.cosets().num_cols * n;
            (rows, Chunked::new(engine.pool, device, len.max(1), FELT_BYTES, part))
        })
        .collect();

    let mut batch = Batch::new(engine.ctx);
    let (powers, tables) = engine.tables().powers(device, &engine.ctx.queue, (n * lde).ilog2());
    let twiddles = engine.tables().twiddles(device, &engine.ctx.queue, n.ilog2(), false);
    for j in 0..ce {
        for (rows, work) in &segments {
            let arrays = CosetArrays {
                coefficients: rows.array()?,
                work,
                powers: &powers,
                twiddles: &twiddles,
            };
            let coset = j * (lde / ce);
            record_coset_evaluation(&mut batch, rows.cosets(), coset, arrays, tables)?;
        }
        let main_work = segments[0].1.part(0);
        let aux_work = segments.get(1).map_or(main_work, |(_, work)| work.part(0));
        let params = CompositionParams {
            count: to_u32(n, "the trace length of a composition")?,
            log_n: n.ilog2(),
            ce_blowup: to_u32(ce, "the CE blowup of a composition")?,
            coset: to_u32(j, "a coset of the CE domain")?,
            out_stride: to_u32(ce_size as u64, "the steps of a composition")?,
        };
        let buffers = [main_work, aux_work, &words, out.part(0)];
        batch.dispatch_program(&program, &params, buffers, n)?;
    }
    engine.submit(batch)?;
    let held = shared.resident_bytes.clone();
    held.fetch_add(words_out * FELT_BYTES, Ordering::SeqCst);
    Ok(WgpuKeptEvaluations {
        shared: shared.clone(),
        out,
        components: degree as usize,
        ce_size,
        held,
    })
}

// KEPT EVALUATIONS
// ================================================================================================

/// A composition's evaluations on one committer's device, in one binding, component after
/// component (word `c·ce_size + s`: component `c` at CE step `s`).
pub(super) struct WgpuKeptEvaluations {
    shared: Arc<Shared>,
    out: Chunked,
    components: usize,
    ce_size: usize,
    /// The committer's count of kept bytes, which these are counted in.
    held: Arc<AtomicU64>,
}

impl WgpuKeptEvaluations {
    /// The buffer holding them, if committer `committer` holds it.
    pub(super) fn buffer(&self, committer: u64) -> Option<&::wgpu::Buffer> {
        (self.shared.id == committer).then(|| self.out.part(0))
    }
}

impl Drop for WgpuKeptEvaluations {
    fn drop(&mut self) {
        self.held.fetch_sub(self.out.len * FELT_BYTES, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for WgpuKeptEvaluations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuKeptEvaluations")
            .field("components", &self.components)
            .field("ce_size", &self.ce_size)
            .finish_non_exhaustive()
    }
}

impl KeptEvaluations for WgpuKeptEvaluations {
    fn components(&self) -> usize {
        self.components
    }

    fn ce_size(&self) -> usize {
        self.ce_size
    }

    /// Downloaded and interleaved.
    fn read(&self) -> Result<Vec<Felt>> {
        let _span = info_span!("wgpu.read_composition", words = self.out.len).entered();
        let len = self.out.len as usize;
        let words = self.shared.run(|engine| {
            let mut sinks = Sinks::default();
            sinks.felts.push(zeroed_host(len, &engine.host)?);
            sinks.records.push(RecordSink {
                store: Store::Felts(0),
                start: 0,
                record_len: 1,
                groups: 1,
                group_len: len,
            });
            let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));
            download_array(&mut downloads, &self.out, FELT_BYTES, |first| Target::Records {
                sink: 0,
                first,
            })?;
            let mut sinks = downloads.finish()?;
            Ok(sinks.felts.pop().unwrap_or_default())
        })?;
        Ok(interleave(&words, self.components))
    }
}

/// The rows as this committer's, of the request's shape and `width` columns.
fn held<'a>(
    rows: &'a dyn KeptRows,
    committer: u64,
    request: &CompositionRequest<'_>,
    width: usize,
) -> Result<&'a WgpuKeptRows> {
    let kept = (rows as &dyn std::any::Any).downcast_ref::<WgpuKeptRows>();
    kept.filter(|kept| {
        let resident = kept.polys.storage::<WgpuResident>();
        resident.is_some_and(|resident| resident.committer == committer)
            && kept.polys.poly_len() == request.trace_len
            && 1usize << kept.log_blowup == request.lde_blowup
            && kept.polys.num_cols() == width
    })
    .ok_or(GpuError::InvalidEvaluation(EvaluationError::RowsNotHere))
}
