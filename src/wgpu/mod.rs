//! The wgpu backend: WGSL kernels on Metal, Vulkan or DX12.
//!
//! The kernels live in `wgsl/` (field arithmetic apart from the algorithms) and are composed
//! by concatenation when the committer is made ([`composed_shaders`] lists them). The host
//! side is split by job:
//! - `context`: adapter, device, error translation;
//! - `shaders`, `pipelines`, `constants`: modules, pipelines and constant tables, made once;
//! - `buffers`: the buffer pool and arrays split into binding-sized parts;
//! - `batch`, `upload`, `download`: recording submissions, uploads, pipelined downloads;
//! - `kernels`: every kernel typed by its parameter struct and its number of bindings, the only
//!   way to dispatch one;
//! - `ntt`, `lde`, `hash`, `merkle`, `fold`: the dispatches of each kernel family;
//! - `sizes`: how work is split to fit the device;
//! - `options`: [`WgpuOptions`], how a committer is made (the backend's only environment reads);
//! - `timestamps`: device times of a commitment's stages from timestamp queries;
//! - `commit`, `fri`, `standalone`: the orchestration of a whole commitment, of the FRI commit
//!   phase (and the openings of the layers it keeps), and of the per-stage calls;
//! - `deep`: polynomials kept after a commitment and the DEEP composition over them;
//! - `composition`: the LDE rows kept as those polynomials, read at the queried positions, and
//!   the constraint composition over them (its program generated from the AIR's graph);
//! - `grind`: the proof-of-work search;
//! - `params_layout` (tests only): each kernel's parameter struct checked against its WGSL twin.
//!
//! A commitment uploads the evaluations once and keeps everything on the device until the
//! polynomials, LDE rows (already in `RowMatrix` layout, unless they stay on the device), leaves
//! and nodes come back. Arrays
//! larger than one storage binding (`max_storage_buffer_binding_size`, often 128 MiB) are
//! split into parts, so any commitment that fits host memory runs.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex, MutexGuard,
};

use tracing::info_span;

use crate::{
    backend::Backend,
    committer::{
        commit_from_host,
        composition::{CompositionRequest, KeptEvaluations},
        deep::{CombineRequest, EvaluateRequest},
        fri::{FoldingChannel, FriLayers, FriRequest},
        grind::GrindRequest,
        CommitRequest, Commitment, GpuCommitter, GpuRequestChecks, Keep, LdeRows, PolyInput,
        ResidentPolys, RowHashing, StageTimes,
    },
    error::Result,
    hash::{Digest, HashFunction, RescueLanes},
    host::{DeviceHold, HostOptions, PriorityTurn},
};
use shaders::HASHES;

/// The checks every request passes first, against the hash functions of [`HASHES`].
const CHECKS: GpuRequestChecks = GpuRequestChecks::new(&HASHES);

mod batch;
mod buffers;
mod commit;
mod composition;
mod constants;
mod context;
mod deep;
mod download;
mod fold;
mod fri;
mod grind;
mod hash;
mod kernels;
mod lde;
mod merkle;
mod ntt;
mod options;
#[cfg(test)]
mod params_layout;
mod pipelines;
mod shaders;
mod sizes;
mod standalone;
mod timestamps;
mod upload;

use buffers::BufferPool;
pub use composition::composition_shader;
use composition::{CompositionPrograms, WgpuKeptEvaluations, WgpuKeptRows};
use constants::{HashConstants, Tables};
use context::Context;
pub use context::{find_adapter, AdapterSummary};
pub use options::{prepare_headless_vulkan, WgpuOptions};
use pipelines::Pipelines;
pub use shaders::{composed_shaders, field_source, Arithmetic, ComposedShader};
use sizes::Sizes;
use timestamps::Timer;

// COMMITTER
// ================================================================================================

/// The wgpu backend.
///
/// Made once (adapter, device, pipelines, constant tables); buffers are pooled and reused
/// across calls. Calls are serialized: a committer runs one commitment at a time.
pub struct WgpuCommitter {
    shared: Arc<Shared>,
}

/// A committer's device and everything made once, shared with the LDE rows it keeps (which
/// compute the rows they are asked for on it).
pub(super) struct Shared {
    ctx: Arc<Context>,
    pipelines: Pipelines,
    constants: HashConstants,
    programs: CompositionPrograms,
    pool: BufferPool,
    tables: Mutex<Tables>,
    sizes: Sizes,
    /// Timestamp queries, where the device has them.
    timer: Option<Timer>,
    /// How result vectors are reserved on the host.
    host: HostOptions,
    /// Stage times of the last commitment.
    last_times: Mutex<Option<StageTimes>>,
    /// Held for the whole of a call; the oldest job's call goes first.
    exclusive: PriorityTurn,
    /// Tells this committer's resident polynomials from another's.
    id: u64,
    /// Bytes of resident polynomials on the device.
    resident_bytes: Arc<AtomicU64>,
    /// The most memory in use at the end of a call.
    peak: AtomicU64,
}

/// Source of [`WgpuCommitter`] identities.
static NEXT_COMMITTER_ID: AtomicU64 = AtomicU64::new(0);

/// The most bytes of polynomials a committer keeps on its device for the DEEP combination
/// (wgpu does not tell a device's memory size); beyond it, the prover combines on the host.
const MAX_RESIDENT_BYTES: u64 = 8 << 30;

impl WgpuCommitter {
    /// [`Self::with_options`] with the default options (reads no environment variable):
    /// the high-performance adapter on Vulkan, Metal or DX12, 64-bit integer kernels where it has
    /// `SHADER_INT64`, RPO/RPX on quads where it has subgroups.
    pub fn new() -> Result<Self> {
        Self::with_options(WgpuOptions::default())
    }

    /// Opens the adapter `options` choose and builds every pipeline and constant table.
    /// [`crate::GpuError::BackendUnavailable`] if there is no usable adapter, or if the options
    /// ask for an arithmetic or rescue lanes the adapter cannot run.
    pub fn with_options(options: WgpuOptions) -> Result<Self> {
        let ctx = Context::new(&options)?;
        let arithmetic = if ctx.int64 { Arithmetic::U64 } else { Arithmetic::U32 };
        let (pipelines, constants) = ctx.checked(|| {
            let pipelines = info_span!("wgpu.pipelines")
                .in_scope(|| Pipelines::new(&ctx.device, arithmetic, ctx.quads));
            let constants = HashConstants::new(&ctx.device, &ctx.queue, &pipelines)?;
            Ok((pipelines, constants))
        })?;
        let sizes = Sizes::new(
            &ctx.limits,
            ctx.is_software(),
            options.max_chunk_bytes,
            ctx.kernel_downloads,
        );
        let timer = Timer::new(&ctx);
        let shared = Shared {
            ctx: Arc::new(ctx),
            pipelines,
            constants,
            programs: CompositionPrograms::default(),
            pool: BufferPool::default(),
            tables: Mutex::new(Tables::default()),
            sizes,
            timer,
            host: options.host,
            last_times: Mutex::new(None),
            exclusive: PriorityTurn::default(),
            id: NEXT_COMMITTER_ID.fetch_add(1, Ordering::Relaxed),
            resident_bytes: Arc::new(AtomicU64::new(0)),
            peak: AtomicU64::new(0),
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// Bytes of one part of a device array: the adapter's binding limit, or
    /// [`WgpuOptions::max_chunk_bytes`] where set (rounded down to a power of two, at least 256).
    pub fn max_chunk_bytes(&self) -> u64 {
        self.shared.sizes.chunk
    }

    /// The fault injector every submit, map and wait of this committer passes through (feature
    /// `fault-injection`, for tests).
    #[cfg(feature = "fault-injection")]
    pub fn fault_injector(&self) -> Arc<crate::health::inject::Injector> {
        self.shared.ctx.health().injector().clone()
    }

    /// Whether the adapter is a software rasterizer (lavapipe, llvmpipe, WARP): correct, but
    /// slower than the CPU backend.
    pub fn is_software(&self) -> bool {
        self.shared.ctx.is_software()
    }

    /// The arithmetic the kernels use: [`WgpuOptions::arithmetic`], or by default
    /// [`Arithmetic::U64`] where the adapter has `SHADER_INT64`, else [`Arithmetic::U32`].
    pub fn arithmetic(&self) -> Arithmetic {
        if self.shared.ctx.int64 {
            Arithmetic::U64
        } else {
            Arithmetic::U32
        }
    }

    /// Invocations per RPO/RPX permutation in whole-row hashing and Merkle trees:
    /// [`WgpuOptions::rescue_lanes`], or by default quads where the adapter has subgroup
    /// operations, else one. Partitioned rows and the other hash functions always take one
    /// invocation per permutation.
    pub fn rescue_lanes(&self) -> RescueLanes {
        self.shared.ctx.rescue_lanes
    }

    /// Whether commitments can be timed on this device: the adapter has `TIMESTAMP_QUERY` and
    /// [`WgpuOptions::timestamps`] is on.
    pub fn can_time_stages(&self) -> bool {
        self.shared.timer.is_some()
    }

    fn times(&self) -> MutexGuard<'_, Option<StageTimes>> {
        self.shared.last_times.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Commits, keeping the coefficient array on the device where asked and it fits
    /// [`MAX_RESIDENT_BYTES`]: as resident polynomials if `keep.polys`, and as the LDE rows
    /// computed again from it if `keep.rows` and a coset of the columns fits one binding (the
    /// rows then stay on the device: none is downloaded).
    fn commit_on_device(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        let shape = CHECKS.commit(request)?;
        let kept = match request.input {
            PolyInput::KeptComposition { evaluations, .. } => {
                let own = (evaluations as &dyn std::any::Any)
                    .downcast_ref::<WgpuKeptEvaluations>()
                    .and_then(|kept| kept.buffer(self.shared.id))
                    .filter(|_| evaluations.ce_size() as u64 <= self.shared.sizes.felts());
                if own.is_none() {
                    // another committer's, or too long to interpolate on the device
                    return commit_from_host(request, |r| self.commit_on_device(r, keep));
                }
                own
            },
            _ => None,
        };
        *self.times() = None;
        let bytes = (shape.num_cols * shape.poly_len) as u64 * sizes::FELT_BYTES;
        let fits = self.shared.resident_bytes.load(Ordering::SeqCst) + bytes <= MAX_RESIDENT_BYTES;
        let keep_polys = keep.polys && fits;
        let keep_rows = keep.rows && fits && composition::rows_recomputable(&self.shared, &shape);
        let (mut commitment, times, polys) = self
            .shared
            .run(|engine| commit::commit(engine, request, shape, !keep_polys, !keep_rows, kept))?;
        if let Some(t) = &times {
            t.log();
        }
        *self.times() = times;
        if keep_polys || keep_rows {
            let held = self.shared.resident_bytes.clone();
            let storage = deep::WgpuResident::new(self.shared.id, polys, held);
            let resident =
                ResidentPolys::new(Backend::Wgpu, shape.num_cols, shape.poly_len, storage);
            if keep_rows {
                let rows = WgpuKeptRows::new(self.shared.clone(), resident.clone(), &shape);
                commitment.kept_rows = Some(Arc::new(rows));
            }
            commitment.resident = keep_polys.then_some(resident);
        }
        Ok(commitment)
    }
}

impl Shared {
    /// Runs `work` alone on the device, with errors checked, noting the memory in use after it
    /// for [`GpuCommitter::peak_memory_in_use`].
    pub(super) fn run<T>(&self, work: impl FnOnce(&Engine<'_>) -> Result<T>) -> Result<T> {
        let result = self.run_alone(work);
        if let Some(bytes) = self.memory_in_use() {
            self.peak.fetch_max(bytes, Ordering::SeqCst);
        }
        result
    }

    fn run_alone<T>(&self, work: impl FnOnce(&Engine<'_>) -> Result<T>) -> Result<T> {
        let _exclusive = self.exclusive.take();
        let engine = Engine {
            ctx: &self.ctx,
            pipelines: &self.pipelines,
            constants: &self.constants,
            programs: &self.programs,
            pool: &self.pool,
            tables: &self.tables,
            sizes: self.sizes,
            timer: self.timer.as_ref(),
            host: self.host,
        };
        self.ctx.checked(|| work(&engine))
    }

    /// Buffer memory allocated on this device, as wgpu-hal counts it.
    fn memory_in_use(&self) -> Option<u64> {
        let bytes = self.ctx.device.get_internal_counters().hal.buffer_memory.read();
        u64::try_from(bytes).ok()
    }
}

impl GpuCommitter for WgpuCommitter {
    fn backend(&self) -> Backend {
        Backend::Wgpu
    }

    fn device_name(&self) -> String {
        self.shared.ctx.name()
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        self.commit_on_device(request, Keep::default())
    }

    /// Keeps the polynomials, and the rows as the polynomials they are computed from, where
    /// asked and they fit (see [`WgpuCommitter`]'s `commit_on_device`).
    fn commit_keeping(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        self.commit_on_device(request, keep)
    }

    fn evaluates_compositions(&self) -> bool {
        true
    }

    /// Over the rows it kept, each coset of the CE domain computed again from the kept
    /// polynomials and evaluated there.
    fn evaluate_composition(
        &self,
        request: &CompositionRequest<'_>,
    ) -> Result<Arc<dyn KeptEvaluations>> {
        let ce_size = request.validate()?;
        let _span = info_span!("wgpu.composition", steps = ce_size).entered();
        let kept = self
            .shared
            .run(|engine| composition::evaluate(engine, &self.shared, request, ce_size))?;
        Ok(Arc::new(kept))
    }

    fn evaluate_polys(&self, request: &EvaluateRequest<'_>) -> Result<Vec<miden_crypto::Felt>> {
        let poly_len = request.validate(Backend::Wgpu)?;
        self.shared.run(|engine| deep::evaluate(engine, self.shared.id, request, poly_len))
    }

    fn combine_polys(&self, request: &CombineRequest<'_>) -> Result<Vec<miden_crypto::Felt>> {
        let poly_len = request.validate(Backend::Wgpu)?;
        self.shared.run(|engine| deep::combine(engine, self.shared.id, request, poly_len))
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>> {
        CHECKS.hash_rows(lde, row_hashing, hash)?;
        self.shared.run(|engine| standalone::hash_rows(engine, lde, row_hashing, hash))
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>> {
        CHECKS.build_tree(leaves, hash)?;
        self.shared.run(|engine| standalone::build_tree(engine, leaves, hash))
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        let shape = request.validate()?;
        self.shared.run(|engine| fri::commit_fri(engine, request, shape, channel))
    }

    /// In dispatches of twice the expected count of nonces (at most 2^22).
    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        request.validate()?;
        let _span = info_span!("wgpu.grind", factor = request.grinding_factor).entered();
        self.shared.run(|engine| grind::grind(engine, request))
    }

    /// Buffer memory allocated on this device, as wgpu-hal counts it (its `counters` feature):
    /// every buffer this committer made, pooled or in use, and the constant tables.
    fn memory_in_use(&self) -> Option<u64> {
        self.shared.memory_in_use()
    }

    fn peak_memory_in_use(&self) -> Option<u64> {
        Some(self.shared.peak.load(Ordering::SeqCst))
    }

    /// Device times of the stages of the last [`GpuCommitter::commit`], from GPU timestamp
    /// queries (kernel time; also logged as the `info` event "stage times"): one entry
    /// (`device` "wgpu", one pass), or none if the device cannot time stages
    /// ([`WgpuCommitter::can_time_stages`]), before the first commitment, after a failed one,
    /// or if a commitment ran more compute passes than one query set holds (2048).
    fn last_stage_times(&self) -> Vec<StageTimes> {
        self.times().iter().cloned().collect()
    }

    /// The device's turn, as a call takes it.
    fn hold_devices(&self) -> DeviceHold<'_> {
        DeviceHold::new(vec![self.shared.exclusive.take()])
    }
}

// ENGINE
// ================================================================================================

/// What one call works with: the device and everything made once.
pub(super) struct Engine<'a> {
    ctx: &'a Arc<Context>,
    pipelines: &'a Pipelines,
    constants: &'a HashConstants,
    programs: &'a CompositionPrograms,
    pool: &'a BufferPool,
    tables: &'a Mutex<Tables>,
    sizes: Sizes,
    /// Timestamp queries, where the device has them.
    timer: Option<&'a Timer>,
    /// How result vectors are reserved on the host.
    host: HostOptions,
}

impl Engine<'_> {
    /// Submits a batch (`None` if it is empty).
    fn submit(&self, batch: batch::Batch) -> Result<Option<::wgpu::SubmissionIndex>> {
        batch.submit(self.ctx, self.pipelines, self.constants, self.pool, self.timer)
    }

    /// The table caches.
    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic while holding the lock leaves the caches intact: recover them.
        self.tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
