//! The composition over the constraint-evaluation domain on a GPU (`cuda/composition.cu`), its
//! program generated from the recorded graph.
//!
//! The trace commitment kept its LDE columns on the GPUs ([`CudaKeptRows`]); the kernel reads
//! them there through a table of column addresses (a column on another GPU through peer access),
//! so no row of the LDE comes to the host. The program is the graph's functions over the field
//! code and the fixed kernel; it depends on the AIR's shape alone (every per-proof value is in
//! the parameters), so it is compiled once per process and shape and loaded once per GPU.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use miden_crypto::Felt;

use super::{
    buffer::DeviceBuffer,
    gpu::Gpu,
    kept_rows::CudaKeptRows,
    kernels::{self, sig, Grid},
    launch::{Kernel, Module, Signature},
    program::{compile_source_for_arch, composition_source, CompositionSizes},
    recovery::recover,
};
use crate::{
    backend::Backend,
    committer::{
        composition::{interleave, CompositionRequest, KeptEvaluations},
        KeptRows,
    },
    constraints::{cuda_source, Composition},
    error::{to_u32, EvaluationError, GpuError, Result},
};

/// The kernels of the composition programs (the rest of [`super::KERNELS`] are in the
/// backend's main program).
pub const COMPOSITION_KERNELS: &[&str] = <sig::Composition as Signature>::KERNELS;

/// Operations per generated function: small enough for NVRTC to compile quickly and without
/// spills, large enough that few values cross between functions.
const CHUNK_OPERATIONS: usize = 256;

/// Threads per block of the composition kernel.
const COMPOSITION_BLOCK: u32 = 128;

// PROGRAMS
// ================================================================================================

/// A composition program loaded on one GPU.
struct Loaded {
    kernel: Kernel<sig::Composition>,
    _module: Module,
}

/// The composition programs this committer loaded, by GPU and source.
#[derive(Default)]
pub(super) struct CompositionPrograms {
    loaded: Mutex<HashMap<(usize, String), Arc<Loaded>>>,
}

impl CompositionPrograms {
    /// The kernel of `source` on GPU `g`, compiled (once per process) and loaded (once per
    /// GPU) at first use, which is logged with its time.
    fn kernel(&self, gpus: &[Gpu], g: usize, source: String, sync: bool) -> Result<Arc<Loaded>> {
        let key = (g, source);
        if let Some(loaded) = self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(loaded.clone());
        }
        let started = Instant::now();
        let gpu = &gpus[g];
        let cubin = compile_source_for_arch(&gpu.arch, key.1.clone())?;
        let module = Module::load(&gpu.ctx, &cubin)?;
        let kernel = module.function::<sig::Composition>("composition", sync)?;
        let loaded = Arc::new(Loaded { kernel, _module: module });
        tracing::info!(
            gpu = gpu.ordinal,
            ms = started.elapsed().as_millis() as u64,
            source_bytes = key.1.len(),
            "cuda: compiled and loaded the composition kernel"
        );
        self.loaded.lock().unwrap_or_else(|p| p.into_inner()).insert(key, loaded.clone());
        Ok(loaded)
    }
}

// EVALUATION
// ================================================================================================

/// The composition of `request` (over `ce_size` steps, checked) on the GPU holding the first main
/// columns, reading the rows `gpus` kept, left there.
pub(super) fn evaluate(
    gpus: &Arc<Vec<Gpu>>,
    programs: &CompositionPrograms,
    request: &CompositionRequest<'_>,
    ce_size: usize,
    sync_each_launch: bool,
) -> Result<CudaKeptEvaluations> {
    let lde_len = request.trace_len * request.lde_blowup;
    let main = held(request.main, gpus, request)?;
    let aux = request.aux.map(|rows| held(rows, gpus, request)).transpose()?;
    let home = main.shares.first().map_or(0, |share| share.gpu);
    let gpu = &gpus[home];

    // one address per base column, main then auxiliary, each readable from the home GPU
    let mut columns: Vec<u64> = Vec::with_capacity(request.main_width + request.aux_width);
    for (rows, width) in [(Some(main), request.main_width), (aux, request.aux_width)] {
        let Some(rows) = rows else { continue };
        let held_cols: usize = rows.shares.iter().map(|share| share.cols.len()).sum();
        if held_cols != width {
            return Err(GpuError::InvalidEvaluation(EvaluationError::RowsNotHere));
        }
        for share in &rows.shares {
            for c in 0..share.cols.len() {
                let column = share.buffer.slice(c * lde_len..(c + 1) * lde_len)?;
                let readable = gpu.readable(column).ok_or(GpuError::Unsupported {
                    backend: Backend::Cuda,
                    operation: "composition over columns on GPUs without peer access",
                })?;
                columns.push(readable.device_ptr());
            }
        }
    }

    let composition = request.composition;
    let degree = composition.graph().extension_degree();
    let source = composition_program(composition, request.main_width);
    let loaded = programs.kernel(gpus, home, source, sync_each_launch)?;

    let columns = gpu.upload_table(&columns)?;
    let params = gpu.upload_table(&request.parameter_words())?;
    let mut out = DeviceBuffer::<Felt>::new(&gpu.alloc, ce_size * degree)?;
    let grid = Grid {
        blocks: to_u32(ce_size.div_ceil(COMPOSITION_BLOCK as usize), "blocks of a composition")?,
        threads_per_block: COMPOSITION_BLOCK,
    };
    // SAFETY: `out` holds ce_size·degree words; the column table holds main_width + aux_width
    // addresses of columns of trace_len·lde_blowup words, each readable from this GPU, and the
    // graph reads no column past them (`validate`); `params` is laid out as composition.cu
    // reads it, its header pointing inside it.
    unsafe {
        kernels::composition(
            &loaded.kernel,
            &gpu.compute,
            grid,
            out.as_slice_mut(),
            columns.as_slice(),
            params.as_slice(),
            ce_size as u64,
            request.trace_len.ilog2(),
            request.lde_blowup.ilog2(),
            request.ce_blowup.ilog2(),
        )?;
    }
    // the commitment reads the evaluations from its own streams (and other GPUs)
    gpu.compute.synchronize()?;
    drop((columns, params));
    Ok(CudaKeptEvaluations {
        gpus: gpus.clone(),
        gpu: home,
        buffer: out,
        components: degree,
        ce_size,
    })
}

// KEPT EVALUATIONS
// ================================================================================================

/// A composition's evaluations on one GPU of a committer, component after component (word
/// `c·ce_size + s`: component `c` at CE step `s`).
pub(super) struct CudaKeptEvaluations {
    pub gpus: Arc<Vec<Gpu>>,
    /// The GPU holding them.
    pub gpu: usize,
    pub buffer: DeviceBuffer<Felt>,
    pub components: usize,
    pub ce_size: usize,
}

impl std::fmt::Debug for CudaKeptEvaluations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKeptEvaluations")
            .field("gpu", &self.gpu)
            .field("components", &self.components)
            .field("ce_size", &self.ce_size)
            .finish_non_exhaustive()
    }
}

impl KeptEvaluations for CudaKeptEvaluations {
    fn components(&self) -> usize {
        self.components
    }

    fn ce_size(&self) -> usize {
        self.ce_size
    }

    /// Downloaded (refused at once where the GPUs are lost; after an error the GPU is drained as
    /// after a failed call of the committer) and interleaved.
    fn read(&self) -> Result<Vec<Felt>> {
        let health = &self.gpus[0].health;
        health.usable()?;
        let gpu = &self.gpus[self.gpu];
        let _span =
            tracing::info_span!("cuda.read_composition", words = self.buffer.len()).entered();
        let _turn = gpu.device.turn();
        let words = gpu.download_table(self.buffer.as_slice().as_words()).inspect_err(|error| {
            recover(std::slice::from_ref(gpu), health, error);
        })?;
        let words: Vec<Felt> = words.into_iter().map(Felt::from_mont).collect();
        Ok(interleave(&words, self.components))
    }
}

/// `kept` as evaluations on `gpus`, if they are.
pub(super) fn held_evaluations<'a>(
    kept: &'a dyn KeptEvaluations,
    gpus: &Arc<Vec<Gpu>>,
) -> Option<&'a CudaKeptEvaluations> {
    let kept = (kept as &dyn std::any::Any).downcast_ref::<CudaKeptEvaluations>()?;
    Arc::ptr_eq(&kept.gpus, gpus).then_some(kept)
}

/// The CUDA program that evaluates `composition` over a trace of `main_width` main base columns
/// (`cuda/composition.cu` and the graph's functions over the field code), as the backend compiles
/// it with NVRTC: the same for every proof of the AIR's shape.
pub fn composition_program(composition: &Composition, main_width: usize) -> String {
    let sizes = CompositionSizes {
        outputs: composition.graph().extension_degree(),
        main_width,
        x_slots: composition.x_exponents().len(),
        table_words: composition.tables().iter().map(|table| table.width()).sum(),
    };
    let functions =
        cuda_source(composition.graph(), "composition_row", "ce_frame", CHUNK_OPERATIONS);
    composition_source(&sizes, &functions)
}

/// The rows as this committer's, of the request's shape.
fn held<'a>(
    rows: &'a dyn KeptRows,
    gpus: &Arc<Vec<Gpu>>,
    request: &CompositionRequest<'_>,
) -> Result<&'a CudaKeptRows> {
    let kept = (rows as &dyn std::any::Any).downcast_ref::<CudaKeptRows>();
    kept.filter(|kept| {
        Arc::ptr_eq(&kept.gpus, gpus)
            && kept.poly_len == request.trace_len
            && 1usize << kept.log_blowup == request.lde_blowup
    })
    .ok_or(GpuError::InvalidEvaluation(EvaluationError::RowsNotHere))
}
