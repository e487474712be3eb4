//! The CUDA backend: kernels compiled at run time by NVRTC, driver loaded dynamically (feature
//! `cuda`).
//!
//! [`CudaCommitter`] runs the whole commitment on the GPU(s): upload of the columns through
//! pinned staging buffers, interpolation and low-degree extension (batched NTTs with fused
//! shared-memory stages), row hashing straight from the LDE buffer (RPO/RPX with the state in
//! registers), the Merkle tree, and the download of polynomials, LDE rows and nodes, which
//! overlaps the hashing. It uses every visible GPU by default, or the set given by
//! [`CudaOptions::devices`] (which [`CudaOptions::from_env`] reads from [`DEVICES_ENV`], e.g.
//! `0,1`); results are identical for any number of GPUs. Its configuration is a value,
//! [`CudaOptions`]: the backend reads no environment variable of its own.
//!
//! Module layout, one job each (the CUDA sources live in `cuda/` at the crate root):
//! - `options`: [`CudaOptions`], and the one place the environment is read
//!   ([`CudaOptions::from_env`]);
//! - `status`: driver statuses as typed errors (device failure, or device lost);
//! - `driver`: RAII over the driver API (pinned memory, streams, events, copies);
//! - `health`: what the driver wrappers of one committer share: the lost flag, the wait
//!   deadline (bounded waits), the fault injector (feature `fault-injection`);
//! - `buffer`: typed device memory (buffers of a known element type, length and GPU, and their
//!   bounds-checked slices);
//! - `launch`: loaded modules and kernel handles, typed by signature;
//! - `kernels`: one typed launch function per kernel signature, the only place kernel arguments
//!   are packed and kernels are named ([`KERNELS`] is generated from its lists; checked against
//!   `cuda/*.cu` by its test);
//! - `program`: the kernel sources, the constants generated for them, NVRTC compilation;
//! - `tables`: power tables, the keys and sizes of the twiddle tables, and the split of an NTT
//!   into passes;
//! - `devices`: which GPUs (the driver's count, the options' list checked against it);
//! - `gpu`: one open GPU (streams, kernels, buffers, cached tables);
//! - `transfer`: host transfers through rings of pinned buffers;
//! - `plan`: the shape of a commitment's work (per request, per GPU, per pass) and the buffers
//!   it needs (its footprint);
//! - `shared_device`: what the committers of the process share on one GPU (its memory gauge, the
//!   turn of their calls);
//! - `memory`: the device memory budget (cosets per pass);
//! - `lde`, `hashing`: the stages enqueued on one GPU (upload, interpolation and LDE; row
//!   hashing and Merkle levels);
//! - `lane`: one GPU's lane through a commitment (its state, share, timeline and events), and
//!   the exchange of LDE rows between lanes;
//! - `commit`: one commitment over the GPUs' lanes, in its four steps;
//! - `assemble`: the results on the host (their memory, downloads and assembly);
//! - `result_pool`: host memory registered once and lent for the LDE rows and Merkle trees,
//!   which the GPUs write directly, and for the sources, which they read directly
//!   (`staged_sources`: copied there before a call takes its turn);
//! - `resident`: polynomials kept on the GPUs after a commitment;
//! - `kept_rows`: LDE rows kept on the GPUs after a commitment, read at the query positions;
//! - `kept_tree`: Merkle trees kept on the GPUs after a commitment, read at the queried paths;
//! - `deep`: the DEEP evaluations and combination over resident polynomials;
//! - `fri`: the FRI commit phase (DEEP evaluation, layer commitments and folding) on the first GPU;
//! - `standalone`: the trait's single stages (`hash_rows`, `build_tree`, `grind`) on the first
//!   GPU;
//! - `timeline`: stage times from events;
//! - `recovery`: the GPUs drained, or marked lost, after a failed call.

mod assemble;
mod buffer;
mod commit;
mod composition;
mod deep;
mod devices;
mod driver;
mod fri;
mod gpu;
mod hashing;
mod health;
mod kept_rows;
mod kept_tree;
mod kernels;
mod lane;
mod launch;
mod lde;
mod memory;
mod options;
mod plan;
mod program;
mod recovery;
mod resident;
mod result_pool;
mod shared_device;
mod staged_sources;
mod standalone;
mod status;
mod tables;
mod timeline;
mod transfer;

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex,
};

#[cfg(feature = "fault-injection")]
use crate::health::inject::Injector;

pub use composition::{composition_program, COMPOSITION_KERNELS};
pub use devices::{device_count, pci_addresses, PciAddress};
pub use kernels::KERNELS;
pub use options::{CudaOptions, DEVICES_ENV, MEMORY_LIMIT_ENV};
pub use program::{compile_for_arch, compile_source_for_arch, kernel_source, kernel_source_with};

use self::{
    commit::HostWork,
    driver::{bind, refused},
    gpu::{Gpu, GpuState},
    health::Health,
    kept_rows::CudaKeptRows,
    kept_tree::{CudaKeptTree, TreeShare},
    plan::{Plan, Sources},
    recovery::recover,
    resident::{CudaResident, ResidentShare},
    result_pool::ResultPool,
    staged_sources::StagedSources,
    status::unavailable,
};
use crate::{
    backend::Backend,
    committer::{
        commit_from_host,
        composition::{CompositionRequest, KeptEvaluations},
        deep::{CombineRequest, EvaluateRequest},
        fri::{FoldingChannel, FriLayers, FriRequest},
        grind::GrindRequest,
        CommitRequest, Commitment, GpuCommitter, GpuRequestChecks, Keep, KeptTree, LdeRows,
        PolyInput, ResidentPolys, RowHashing, Shape, StageTimes,
    },
    error::Result,
    hash::{Digest, HashFunction},
    host::{default_prefault_threads, DeviceHold, TurnGuard},
};
use program::HASHES;

/// The checks every request passes first, against the hash functions of [`HASHES`].
const CHECKS: GpuRequestChecks = GpuRequestChecks::new(&HASHES);

// Host `Felt` memory is copied to and from the device byte for byte.
const _: () = assert!(
    std::mem::size_of::<miden_crypto::Felt>() == 8
        && std::mem::align_of::<miden_crypto::Felt>() == 8
);

// COMMITTER
// ================================================================================================

/// Commits on one or more NVIDIA GPUs.
///
/// A failed call leaves no work of its own running: every stream of every GPU is drained (within
/// the wait deadline) before the call returns and its buffers are reused. An error after which
/// the GPUs cannot be used (a sticky driver error, a wait past its deadline, a drain that fails)
/// marks the committer lost: every later call is [`crate::GpuError::DeviceLost`] at once.
pub struct CudaCommitter {
    gpus: Arc<Vec<Gpu>>,
    /// The GPUs' health, shared by their driver wrappers.
    health: Arc<Health>,
    /// The options it was built with.
    options: CudaOptions,
    /// The host's part in commitments, from the options.
    host_work: HostWork,
    states: Mutex<Vec<GpuState>>,
    last_times: Mutex<Vec<StageTimes>>,
    /// Tells this committer's resident polynomials from another's.
    id: u64,
    /// Bytes of resident polynomials on each GPU.
    resident_bytes: Vec<Arc<AtomicU64>>,
    /// The most memory in use at the end of a call.
    peak: AtomicU64,
    /// The composition programs loaded on the GPUs.
    compositions: composition::CompositionPrograms,
}

/// Source of [`CudaCommitter`] identities.
static NEXT_COMMITTER_ID: AtomicU64 = AtomicU64::new(0);

/// The share of a GPU's memory budget that resident polynomials may take: the rest stays for
/// the commitments' pipelines.
const RESIDENT_SHARE_OF_BUDGET: u64 = 4;

impl CudaCommitter {
    /// Uses every visible GPU with the default options ([`CudaOptions::default`]; no
    /// environment variable is read: see [`CudaOptions::from_env`]).
    ///
    /// Errors as [`Self::with_options`].
    pub fn new() -> Result<Self> {
        Self::with_options(CudaOptions::default())
    }

    /// Opens the GPUs `options` name (every visible GPU by default) and compiles the kernels for
    /// each architecture and these options (once per process).
    ///
    /// Without a CUDA driver, a GPU or the NVRTC library this is
    /// [`GpuError::BackendUnavailable`] (so `Backend::Auto` falls back), as it is for an option
    /// out of range ([`CudaOptions::check`]); a device list that names a missing device, none or
    /// one twice is [`GpuError::InvalidDeviceList`].
    ///
    /// [`GpuError::BackendUnavailable`]: crate::GpuError::BackendUnavailable
    /// [`GpuError::InvalidDeviceList`]: crate::GpuError::InvalidDeviceList
    pub fn with_options(options: CudaOptions) -> Result<Self> {
        options.check()?;
        let ordinals = devices::select(options.devices.as_deref())?;
        if !program::nvrtc_present() {
            return Err(unavailable("the NVRTC library (libnvrtc) was not found"));
        }
        let health = Arc::new(Health::new(Backend::Cuda, options.wait_timeout));
        let mut gpus = Vec::with_capacity(ordinals.len());
        let mut states = Vec::with_capacity(ordinals.len());
        for ordinal in ordinals {
            let _span = tracing::info_span!("cuda.open", gpu = ordinal).entered();
            let (gpu, state) = Gpu::open(ordinal, &options, &health)?;
            gpus.push(gpu);
            states.push(state);
        }
        Gpu::connect_peers(&mut gpus)?;
        let resident_bytes = gpus.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        let host_work = HostWork {
            options: options.host,
            prefault_threads: options.prefault_threads.unwrap_or_else(default_prefault_threads),
            result_pool: ResultPool::new(gpus[0].ctx.clone(), options.pinned_rows_bytes),
        };
        Ok(CudaCommitter {
            gpus: Arc::new(gpus),
            health,
            options,
            host_work,
            states: Mutex::new(states),
            last_times: Mutex::new(Vec::new()),
            id: NEXT_COMMITTER_ID.fetch_add(1, Ordering::Relaxed),
            resident_bytes,
            peak: AtomicU64::new(0),
            compositions: Default::default(),
        })
    }

    /// The options this committer was built with.
    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    /// The CUDA ordinals of the GPUs in use.
    pub fn devices(&self) -> Vec<usize> {
        self.gpus.iter().map(|g| g.ordinal).collect()
    }

    /// Device memory this committer's buffers hold now, per GPU in the order of
    /// [`Self::devices`]: between calls, its reusable buffers, cached twiddle tables and resident
    /// polynomials. With a memory limit ([`CudaOptions::memory_limit`]) none exceeds it.
    pub fn device_bytes_held(&self) -> Vec<u64> {
        self.gpus.iter().map(|gpu| gpu.alloc.gauge.held()).collect()
    }

    /// The most device memory this committer's buffers have held at once on each GPU since it
    /// was built (in the order of [`Self::devices`]), every call's working buffers included:
    /// commitments, DEEP, FRI and the single stages. With a memory limit
    /// ([`CudaOptions::memory_limit`]) none exceeds it.
    pub fn device_bytes_peak(&self) -> Vec<u64> {
        self.gpus.iter().map(|gpu| gpu.alloc.gauge.peak()).collect()
    }

    /// The fault injector every device operation of this committer passes through (feature
    /// `fault-injection`, for tests).
    #[cfg(feature = "fault-injection")]
    pub fn fault_injector(&self) -> Arc<Injector> {
        self.health.injector().clone()
    }
    /// Device memory that every committer of this process holds now on each of this
    /// committer's GPUs (in the order of [`Self::devices`]), the polynomials and FRI layers
    /// kept for proofs included.
    pub fn shared_device_bytes_held(&self) -> Vec<u64> {
        self.gpus.iter().map(|gpu| gpu.device.gauge.held()).collect()
    }

    /// The most device memory that the committers of this process have held together on each
    /// of this committer's GPUs since the first of them opened it, or since the last
    /// [`Self::reset_shared_device_peak`] (in the order of [`Self::devices`]). Where they all
    /// have the same memory limit, none exceeds it: the committers of one GPU budget against
    /// what the others hold.
    pub fn shared_device_bytes_peak(&self) -> Vec<u64> {
        self.gpus.iter().map(|gpu| gpu.device.gauge.peak()).collect()
    }

    /// Starts [`Self::shared_device_bytes_peak`] again, on each of this committer's GPUs, from
    /// the memory held now (for a peak over a window of work: one job, one test).
    pub fn reset_shared_device_peak(&self) {
        self.gpus.iter().for_each(|gpu| gpu.device.gauge.reset_peak());
    }

    /// The turns of this committer's GPUs, taken in ordinal order.
    fn turns(&self) -> Vec<TurnGuard<'_>> {
        let mut by_ordinal: Vec<&Gpu> = self.gpus.iter().collect();
        by_ordinal.sort_by_key(|gpu| gpu.ordinal);
        by_ordinal.iter().map(|gpu| gpu.device.turn()).collect()
    }

    /// Runs one call on the GPUs' states during the GPUs' turns (taken in ordinal order, before
    /// the states: see `memory`): [`GpuError::DeviceLost`] at once if the GPUs are lost; after an
    /// error, [`recover`]s before the states are used again. A committer that shares a GPU with
    /// another committer of the process frees its reusable buffers and tables after each call,
    /// so that while it is idle they do not shrink the other's budget. Notes the memory in use
    /// for [`GpuCommitter::peak_memory_in_use`].
    fn call<T>(&self, work: impl FnOnce(&mut Vec<GpuState>) -> Result<T>) -> Result<T> {
        self.health.usable()?;
        let turns = self.turns();
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        let result = tracing::debug_span!("cuda.turn_held").in_scope(|| work(&mut states));
        if let Err(error) = &result {
            recover(&self.gpus, &self.health, error);
        }
        if self.gpus.iter().any(|gpu| Arc::strong_count(&gpu.device) > 1) {
            states.iter_mut().for_each(|state| state.release_all_but(&[]));
        }
        drop((states, turns));
        if let Some(bytes) = self.memory_in_use() {
            self.peak.fetch_max(bytes, Ordering::SeqCst);
        }
        result
    }

    /// Commits, keeping on each GPU what `keep` asks for where the budget allows instead of
    /// downloading it: its polynomials, its LDE columns.
    fn commit_on_gpus(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        let shape = CHECKS.commit(request)?;
        let kept = match request.input {
            PolyInput::KeptComposition { evaluations, .. } => {
                match composition::held_evaluations(evaluations, &self.gpus) {
                    Some(kept) => Some(kept),
                    // another committer's: read to the host and uploaded
                    None => return commit_from_host(request, |r| self.commit_on_gpus(r, keep)),
                }
            },
            _ => None,
        };
        let _span = tracing::info_span!("cuda.commit", cols = shape.num_cols, rows = shape.poly_len, blowup = request.blowup, hash = %request.hash).entered();
        let columns = commit::column_shares(self.gpus.len(), &shape);
        // bytes each GPU keeps: words per column of polynomials and rows, and the tree's
        // leaves and nodes (each GPU's buffers are indexed as the whole tree's)
        let kept_bytes = |polys: bool, rows: bool, tree: bool| {
            let words = shape.poly_len * usize::from(polys) + shape.lde_len * usize::from(rows);
            move |cols: usize| (cols * words * 8 + usize::from(tree) * shape.lde_len * 64) as u64
        };
        let keep_polys =
            keep.polys && self.resident_fits(&columns, kept_bytes(true, false, false))?;
        let keep_rows =
            keep.rows && self.resident_fits(&columns, kept_bytes(keep_polys, true, false))?;
        let keep_tree =
            keep.tree && self.resident_fits(&columns, kept_bytes(keep_polys, keep_rows, true))?;
        // the sources copied into registered memory before the turn, where the committer keeps
        // some (the upload in the turn is then DMA alone)
        let staged = StagedSources::copy(&self.host_work.result_pool, &request.input);
        let staged_slices = staged.as_ref().map(StagedSources::slices);
        let staged_request = staged_slices
            .as_deref()
            .map(|slices| CommitRequest { input: request.input.with_sources(slices), ..*request });
        let (request, sources_registered) = match &staged_request {
            Some(staged) => (staged, true),
            None => (request, false),
        };
        let result = self.call(|states| {
            let gpus: Vec<&Gpu> = self.gpus.iter().collect();
            let mut state_refs: Vec<&mut GpuState> = states.iter_mut().collect();
            let limit = self.options.memory_limit;
            let sources = match kept {
                Some(kept) => Sources::Device(kept),
                None => Sources::Host {
                    columns: request.input.sources(),
                    registered: sources_registered,
                },
            };
            let plan = Plan::new(request, shape, sources);
            let (mut commitment, times, rows_kept) = commit::commit(
                &gpus,
                &mut state_refs,
                plan,
                limit,
                Keep { polys: keep_polys, rows: keep_rows, tree: keep_tree },
                &self.host_work,
            )?;
            times.iter().for_each(StageTimes::log);
            *self.last_times.lock().unwrap_or_else(|p| p.into_inner()) = times;
            if keep_polys {
                let shares = self.take_shares(states, &columns, |b| b.polys.take())?;
                let storage = CudaResident { committer: self.id, shares };
                let resident =
                    ResidentPolys::new(Backend::Cuda, shape.num_cols, shape.poly_len, storage);
                commitment.resident = Some(resident);
            }
            if rows_kept {
                let shares = self.take_shares(states, &columns, |b| b.lde.take())?;
                commitment.kept_rows = Some(Arc::new(CudaKeptRows {
                    gpus: self.gpus.clone(),
                    shares,
                    poly_len: shape.poly_len,
                    log_blowup: request.blowup.ilog2(),
                }));
            }
            if keep_tree {
                commitment.kept_tree = Some(self.take_tree(states, &shape, &mut commitment)?);
            }
            Ok(commitment)
        });
        if result.is_err() && self.health.is_lost() {
            // the lost GPUs' work was not waited for: their DMA may still read the block
            std::mem::forget(staged);
        }
        result
    }

    /// Whether `bytes(columns)` on each GPU (given the columns it holds) fit beside what is
    /// already kept, within [`RESIDENT_SHARE_OF_BUDGET`] of each GPU's budget (the committer's
    /// limit, else its total memory).
    fn resident_fits(
        &self,
        columns: &[std::ops::Range<usize>],
        bytes: impl Fn(usize) -> u64,
    ) -> Result<bool> {
        for (g, cols) in columns.iter().enumerate() {
            bind(&self.gpus[g].ctx)?;
            let budget = match self.options.memory_limit {
                Some(limit) => limit,
                None => cudarc::driver::result::mem_get_info().map_or(0, |(_, total)| total as u64),
            };
            let after = self.resident_bytes[g].load(Ordering::SeqCst) + bytes(cols.len());
            if after > budget / RESIDENT_SHARE_OF_BUDGET {
                tracing::debug!(gpu = g, after, budget, "cuda: results not kept on the device");
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes the `leaves` and `nodes` buffers from the state of each GPU that took part in the
    /// commitment of `shape`, as its share of the kept tree, and the nodes above the GPUs'
    /// subtrees from `commitment` (which keeps nodes 0 and 1).
    fn take_tree(
        &self,
        states: &mut [GpuState],
        shape: &Shape,
        commitment: &mut Commitment,
    ) -> Result<Arc<dyn KeptTree>> {
        let g_count = self.gpus.len().min(shape.num_cols).max(1);
        let log_b = plan::log_blocks(g_count, shape.poly_len.ilog2());
        let mut shares = Vec::with_capacity(g_count);
        for (g, share) in plan::Share::for_gpus(shape, g_count, log_b).into_iter().enumerate() {
            let buffers = &mut states[g].buffers;
            let (Some(leaves), Some(nodes)) = (buffers.leaves.take(), buffers.nodes.take()) else {
                return Err(refused("keeping the tree", "the commitment left no buffer to keep"));
            };
            shares.push(TreeShare::new(
                g,
                share.blocks,
                leaves,
                nodes,
                self.resident_bytes[g].clone(),
            ));
        }
        let root = vec![Digest::ZERO, commitment.nodes[1]];
        let top = std::mem::replace(&mut commitment.nodes, root.into());
        Ok(Arc::new(CudaKeptTree {
            gpus: self.gpus.clone(),
            shares,
            top,
            blocks: 1 << log_b,
            num_leaves: shape.lde_len,
        }))
    }

    /// Takes the buffer `take` names from the state of each GPU that interpolated `columns`, as
    /// its kept share.
    fn take_shares(
        &self,
        states: &mut [GpuState],
        columns: &[std::ops::Range<usize>],
        take: impl Fn(&mut gpu::Buffers) -> Option<buffer::DeviceBuffer<miden_crypto::Felt>>,
    ) -> Result<Vec<ResidentShare>> {
        let mut shares = Vec::with_capacity(columns.len());
        for (g, cols) in columns.iter().enumerate() {
            let buffer = take(&mut states[g].buffers).ok_or_else(|| {
                refused("keeping the polynomials", "the commitment left no buffer to keep")
            })?;
            shares.push(ResidentShare::new(
                g,
                cols.clone(),
                buffer,
                self.resident_bytes[g].clone(),
            ));
        }
        Ok(shares)
    }
}

impl GpuCommitter for CudaCommitter {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }

    fn device_name(&self) -> String {
        match self.gpus.as_slice() {
            [one] => format!("{} (cuda:{})", one.name, one.ordinal),
            many => {
                let list: Vec<String> =
                    many.iter().map(|g| format!("{} (cuda:{})", g.name, g.ordinal)).collect();
                format!("{} GPUs: {}", many.len(), list.join(", "))
            },
        }
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        self.commit_on_gpus(request, Keep::default())
    }

    /// Keeps the polynomials, and the LDE rows where the LDE takes one pass, within a quarter
    /// of each GPU's budget.
    fn commit_keeping(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        self.commit_on_gpus(request, keep)
    }

    fn evaluate_polys(&self, request: &EvaluateRequest<'_>) -> Result<Vec<miden_crypto::Felt>> {
        let poly_len = request.validate(Backend::Cuda)?;
        let _span = tracing::info_span!("cuda.deep_evaluate", rows = poly_len).entered();
        let limit = self.options.memory_limit;
        self.call(|states| deep::evaluate(&self.gpus, states, self.id, request, poly_len, limit))
    }

    /// One GPU's committer reads its kept rows where they are; across several, where the GPUs
    /// reach each other's memory (else [`crate::GpuError::Unsupported`] and the CPU evaluates).
    fn evaluates_compositions(&self) -> bool {
        true
    }

    fn evaluate_composition(
        &self,
        request: &CompositionRequest<'_>,
    ) -> Result<Arc<dyn KeptEvaluations>> {
        let ce_size = request.validate()?;
        let _span = tracing::info_span!("cuda.composition", rows = ce_size).entered();
        let sync = self.options.sync_each_launch;
        let kept = self.call(|_| {
            composition::evaluate(&self.gpus, &self.compositions, request, ce_size, sync)
        })?;
        Ok(Arc::new(kept))
    }

    fn combine_polys(&self, request: &CombineRequest<'_>) -> Result<Vec<miden_crypto::Felt>> {
        let poly_len = request.validate(Backend::Cuda)?;
        let _span = tracing::info_span!("cuda.deep_combine", rows = poly_len).entered();
        let limit = self.options.memory_limit;
        self.call(|states| deep::combine(&self.gpus, states, self.id, request, poly_len, limit))
    }

    /// Device memory in use on this committer's GPUs (total minus free, as the driver reports
    /// it): device-wide, so it also counts other processes on the same GPUs. `None` once the GPUs
    /// are lost (the driver may not answer).
    fn memory_in_use(&self) -> Option<u64> {
        if self.health.is_lost() {
            return None;
        }
        let mut used = 0;
        for gpu in self.gpus.iter() {
            bind(&gpu.ctx).ok()?;
            let (free, total) = cudarc::driver::result::mem_get_info().ok()?;
            used += (total - free) as u64;
        }
        Some(used)
    }

    fn peak_memory_in_use(&self) -> Option<u64> {
        Some(self.peak.load(Ordering::SeqCst))
    }

    /// One entry per GPU that worked on the last commitment, `device` `cuda:<ordinal>`: the
    /// upload and first LDE's wall time, and the exchange of rows where several GPUs split it;
    /// the hash time includes the row-major copy of the LDE (no `rows_ms`).
    fn last_stage_times(&self) -> Vec<StageTimes> {
        self.last_times.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every GPU's turn, in ordinal order (as a call takes them).
    fn hold_devices(&self) -> DeviceHold<'_> {
        DeviceHold::new(self.turns())
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>> {
        CHECKS.hash_rows(lde, row_hashing, hash)?;
        let _span = tracing::info_span!("cuda.hash_rows", rows = lde.num_rows()).entered();
        let limit = self.options.memory_limit;
        self.call(|states| {
            standalone::hash_rows(&self.gpus[0], &mut states[0], lde, row_hashing, hash, limit)
        })
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>> {
        CHECKS.build_tree(leaves, hash)?;
        let _span = tracing::info_span!("cuda.build_tree", leaves = leaves.len()).entered();
        let limit = self.options.memory_limit;
        self.call(|states| {
            standalone::build_tree(&self.gpus[0], &mut states[0], leaves, hash, limit)
        })
    }

    /// On the first GPU, in launches of twice the expected count of nonces (at most 2^24).
    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        request.validate()?;
        let _span = tracing::info_span!("cuda.grind", factor = request.grinding_factor).entered();
        self.call(|_| standalone::grind(&self.gpus[0], request))
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        let shape = request.validate()?;
        let _span =
            tracing::info_span!("cuda.fri", layers = request.num_layers, rows = shape.domain_len)
                .entered();
        self.call(|states| {
            memory::fit(
                &self.gpus[0],
                &mut states[0],
                fri::device_bytes(request, shape),
                &[fri::twiddles(shape)],
                self.options.memory_limit,
            )?;
            fri::commit_fri(&self.gpus, &mut states[0], request, shape, channel)
        })
    }
}
