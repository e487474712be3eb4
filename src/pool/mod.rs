//! [`ProverPool`]: independent proofs proved concurrently on a host's GPUs, one committer per
//! GPU.
//!
//! One proof gains little from a second GPU: its columns are split between them, but the host's
//! share of the proof does not shrink. Separate proofs on separate GPUs do scale, so the pool
//! owns one committer per **slot** (one per CUDA GPU, the one wgpu adapter, or
//! [`PoolOptions::cpu_slots`] CPU committers) and proves the jobs submitted to it concurrently.
//!
//! ## Scheduling policy
//! - **Workers.** [`PoolOptions::workers`] threads (default [`WORKERS_PER_SLOT`] per slot) each
//!   take the oldest queued job and run it to its end. A job is bound to a slot when it first
//!   asks for its committer ([`JobContext::committer`]), a Miden job once its program has
//!   executed: to the slot with the fewest jobs bound at that moment (the first such slot on a
//!   tie), so the slots share the work evenly and a slot that finishes sooner takes more.
//! - **Four proofs per GPU, started one execution apart.** A committer serializes its calls (one
//!   commitment on its device at a time), and a proof alternates between commitments and host
//!   phases (trace generation or execution, the auxiliary trace, constraint evaluation, DEEP and
//!   FRI queries). With two proofs per slot the device idles whenever both are in host phases;
//!   a third fills most of those gaps and a fourth the rest, once the host phases of many
//!   proofs slow each other on a host shared by several GPUs. Jobs that start together would
//!   still meet at the devices together, so Miden jobs execute as many at a time as there are
//!   slots, in the order they started ([`JobContext::start_turn`]): the next executes while the
//!   one before it commits its trace.
//! - **Oldest job first at the GPU.** When several calls wait for a GPU, the call of the job
//!   submitted first goes first (`host::turn`). Served in arrival order, the proofs on a GPU
//!   would interleave stage by stage and end together, and the jobs taking their workers would
//!   then execute while the GPU idles; served oldest first (and holding the GPU for their
//!   queries, [`GpuCommitter::hold_devices`]), proofs end one by one while the others keep the
//!   GPU busy, and the next job executes under them.
//! - **Backpressure.** Jobs wait in a bounded FIFO queue ([`PoolOptions::queue_capacity`],
//!   default one per worker): [`ProverPool::submit`] waits for room, [`ProverPool::try_submit`]
//!   refuses at once and gives the job back ([`QueueFull`]).
//! - **Host memory.** A proof job reserves its estimated host memory before its proof starts
//!   (after execution, for a Miden job; [`JobContext::reserve_host`]) against the pool's host
//!   budget ([`PoolOptions::host_memory_limit`], by default the memory available when the pool
//!   starts): a job that does not fit beside the running jobs waits for them to end, and one
//!   that could not fit even alone is [`PoolError::OutOfMemory`] (see [`proof_host_bytes`]).
//! - **Row memory.** CUDA slots keep host memory registered with the driver for the LDE rows
//!   and Merkle trees ([`PoolOptions::pinned_rows_bytes`], by default a quarter of the host
//!   budget, which the jobs' reservations no longer get): from the second proof of a size on,
//!   the GPUs write them into it directly, and a proof's GPU turns hold no host copy and no
//!   page fault.
//! - **Isolation.** Each job's result or error is its own ([`JobHandle::wait`]): an error ends
//!   that job only, and a panic is caught and becomes [`PoolError::Panicked`]. The committers
//!   tolerate a panic mid-call (their locks ignore poisoning), so the slot keeps serving.
//! - **Shutdown.** [`ProverPool::shutdown`] (or dropping the pool) takes no new job (both need
//!   the pool itself, which `submit` borrows), lets the workers finish every queued job, and
//!   joins them.
//!
//! A job must not wait for another job of the same pool, nor submit one while the queue may be
//! full: with every worker waiting, nothing would run.

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Arc, OnceLock,
    },
    thread::{self, JoinHandle},
    time::Instant,
};

use miden_crypto::Felt;
use tracing::{debug, field::Empty, info, info_span, warn, Span};
use winter_air::Air;
use winter_prover::{Proof, Prover, Trace};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    hash::GpuHasher,
    host::{available_host_memory, peak_resident_bytes, with_turn_priority},
    prover::GpuProver,
    select::BackendOptions,
};

mod error;
mod memory;
#[cfg(feature = "miden")]
mod miden;
mod queue;
mod slots;

pub use error::PoolError;
#[cfg(feature = "miden")]
use memory::main_segment_bytes;
use memory::HostBudget;
pub use memory::{proof_host_bytes, HostReservation};
use queue::JobQueue;
pub use slots::Turn;
use slots::{open_committers, Lease, Slots};

// OPTIONS
// ================================================================================================

/// The default number of workers per slot: proofs in host phases beside the one committing on
/// the device (see the module's scheduling policy).
pub const WORKERS_PER_SLOT: usize = 4;

/// How a [`ProverPool`] is built: its backend, its slots and how many jobs it takes at once.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolOptions {
    /// The backend and its options. CUDA gets one slot per GPU, each committer opened on one
    /// device (`cuda.devices`, else every visible GPU); wgpu one slot (its adapter); the CPU
    /// [`Self::cpu_slots`] slots. `Auto` picks the backend as [`BackendOptions::create`] does.
    pub backend: BackendOptions,
    /// Jobs in flight at once, one worker thread each (at least 1); `None` (the default) is
    /// [`WORKERS_PER_SLOT`] per slot.
    pub workers: Option<usize>,
    /// Jobs that may wait for a worker (at least 1); `None` (the default) is one per worker.
    pub queue_capacity: Option<usize>,
    /// Slots of the CPU backend, one `CpuCommitter` each (at least 1; default 1). Their proofs
    /// share the host's rayon threads.
    pub cpu_slots: usize,
    /// The host memory, in bytes, that the jobs running may reserve together (see the module's
    /// scheduling policy); `None` (the default) is the memory available when the pool starts
    /// (`MemAvailable`, or less where a control group's limit leaves less), or no limit where
    /// the system reports neither (outside Linux). The row memory of CUDA slots
    /// ([`Self::pinned_rows_bytes`]) comes out of it.
    pub host_memory_limit: Option<u64>,
    /// Host memory that the CUDA slots keep registered with the driver for LDE rows, Merkle
    /// trees and sources, together (each committer's `CudaOptions::pinned_rows_bytes`, which
    /// this replaces for the pool). The GPUs write a commitment's rows and tree into it and read
    /// its sources from it directly, with no host copy through pinned staging in their turn and
    /// no page faults: a pool proves the same sizes again and again, so the cost of registering
    /// a block (faulting its pages in and pinning them) is paid once per block. `None`
    /// (the default) is [`PINNED_ROWS_SHARE`] of the host memory limit (none without a limit);
    /// `Some(0)`: everything goes through pinned staging and ordinary memory.
    /// No effect on other backends.
    pub pinned_rows_bytes: Option<u64>,
    /// Host threads of each slot's proofs: `None` (the default), they share the process's rayon
    /// thread pool; `Some(n)`, each slot proves on a rayon pool of `n` threads of its own (at
    /// least 1), so that one slot's host phases do not take the cores another slot's proofs
    /// are waiting for.
    pub threads_per_slot: Option<usize>,
}

/// The default share of the pool's host memory limit that CUDA slots keep registered for LDE
/// rows ([`PoolOptions::pinned_rows_bytes`]): a quarter.
pub const PINNED_ROWS_SHARE: f64 = 0.25;

impl Default for PoolOptions {
    fn default() -> Self {
        Self::new(BackendOptions::default())
    }
}

impl PoolOptions {
    /// The options of a pool on `backend`, with the default workers, queue and CPU slots.
    pub fn new(backend: BackendOptions) -> Self {
        Self {
            backend,
            workers: None,
            queue_capacity: None,
            cpu_slots: 1,
            host_memory_limit: None,
            pinned_rows_bytes: None,
            threads_per_slot: None,
        }
    }

    /// Every count that is set must be at least 1.
    fn check(&self) -> Result<(), PoolError> {
        let counts = [
            ("workers", self.workers),
            ("queue_capacity", self.queue_capacity),
            ("cpu_slots", Some(self.cpu_slots)),
            ("threads_per_slot", self.threads_per_slot),
        ];
        match counts.into_iter().find(|(_, value)| *value == Some(0)) {
            Some((option, _)) => {
                Err(PoolError::InvalidOption { option, value: 0, expected: "at least 1" })
            },
            None => Ok(()),
        }
    }
}

// POOL
// ================================================================================================

/// Proves independent jobs concurrently, one committer per GPU; see the module documentation
/// for its scheduling policy.
///
/// ```ignore
/// let pool = ProverPool::new(&PoolOptions::new(BackendOptions::new(Backend::Cuda)))?;
/// let handles: Vec<_> = traces.into_iter().map(|t| pool.prove_winterfell(prover(), t)).collect();
/// for handle in handles {
///     let proof = handle.wait()?;
/// }
/// ```
pub struct ProverPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    next_job: AtomicU64,
}

/// What the workers share with the pool.
struct Shared {
    queue: JobQueue<Task>,
    slots: Arc<Slots>,
    host: Arc<HostBudget>,
}

/// A queued job, with the sending of its result.
type Task = Box<dyn FnOnce(&Shared) + Send>;

impl ProverPool {
    /// Opens the committers of `options` (one per slot) and starts the workers.
    ///
    /// # Errors
    /// [`PoolError::InvalidOption`] for a count of 0; [`PoolError::Backend`] when a committer
    /// cannot be created (an explicit backend that is unavailable, a malformed device list);
    /// [`PoolError::Spawn`] when a thread cannot be started.
    pub fn new(options: &PoolOptions) -> Result<Self, PoolError> {
        options.check()?;
        let host_limit = || options.host_memory_limit.or_else(available_host_memory);
        let pinned_rows = options.pinned_rows_bytes.unwrap_or_else(|| {
            host_limit().map_or(0, |limit| (limit as f64 * PINNED_ROWS_SHARE) as u64)
        });
        let slots = Slots::new(open_committers(options, pinned_rows)?, options.threads_per_slot)?;
        let slots = Arc::new(slots);
        let workers = options.workers.unwrap_or(WORKERS_PER_SLOT * slots.len());
        let queue = JobQueue::new(options.queue_capacity.unwrap_or(workers));
        // taken once the committers hold what they hold from the start, less the row memory
        // the CUDA slots may register as they prove
        let pinned_rows = if slots.backend() == Backend::Cuda { pinned_rows } else { 0 };
        let host_limit = host_limit().map(|limit| limit.saturating_sub(pinned_rows));
        let host = Arc::new(HostBudget::new(host_limit));
        let mut pool = Self {
            shared: Arc::new(Shared { queue, slots, host }),
            workers: Vec::with_capacity(workers),
            next_job: AtomicU64::new(0),
        };
        for index in 0..workers {
            let shared = pool.shared.clone();
            let worker = thread::Builder::new()
                .name(format!("prover-pool-{index}"))
                .spawn(move || work(&shared))
                // dropping the pool joins the workers already started
                .map_err(PoolError::Spawn)?;
            pool.workers.push(worker);
        }
        info!(
            backend = %pool.backend(),
            slots = pool.slots(),
            workers,
            queue_capacity = pool.queue_capacity(),
            host_memory_limit = pool.host_memory_limit(),
            "prover pool started"
        );
        Ok(pool)
    }

    /// Queues `job`, first waiting while the queue is full. The job runs on a worker with the
    /// [`JobContext`] of its slot; its result comes back through the handle.
    pub fn submit<T, F>(&self, job: F) -> JobHandle<T>
    where
        F: FnOnce(&JobContext) -> Result<T, PoolError> + Send + 'static,
        T: Send + 'static,
    {
        let (task, handle) = self.task(job);
        self.shared.queue.push(task);
        handle
    }

    /// Queues `job` if the queue has room now, as [`Self::submit`]; otherwise returns it in
    /// [`QueueFull`] without waiting.
    pub fn try_submit<T, F>(&self, job: F) -> Result<JobHandle<T>, QueueFull<F>>
    where
        F: FnOnce(&JobContext) -> Result<T, PoolError> + Send + 'static,
        T: Send + 'static,
    {
        let capacity = self.queue_capacity();
        self.shared
            .queue
            .try_push(job, |job| self.task(job))
            .map_err(|job| QueueFull { job, capacity })
    }

    /// Queues the proof of `trace` by `prover` with [`GpuProver`] on the job's committer
    /// (the default [`crate::FallbackPolicy`], FRI on the backend: [`GpuProver::with_committer`]'s
    /// defaults; a job closure given to [`Self::submit`] can set others), once its estimated
    /// host memory ([`proof_host_bytes`]) is reserved.
    pub fn prove_winterfell<P>(&self, prover: P, trace: P::Trace) -> JobHandle<Proof>
    where
        P: Prover<BaseField = Felt> + Send + 'static,
        P::HashFn: GpuHasher,
        P::RandomCoin: 'static,
        P::Trace: Send + 'static,
        <P::Air as Air>::PublicInputs: Send,
    {
        self.submit(move |job| {
            let _host = job.reserve_host(proof_host_bytes(trace.info(), prover.options()))?;
            Ok(GpuProver::with_committer(prover, job.committer().clone()).prove(trace)?)
        })
    }

    /// Stops taking jobs, waits until the workers have finished every queued job, and joins
    /// them (dropping the pool does the same).
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// The backend of the slots.
    pub fn backend(&self) -> Backend {
        self.shared.slots.backend()
    }

    /// The number of slots (committers).
    pub fn slots(&self) -> usize {
        self.shared.slots.len()
    }

    /// The committer of each slot, in slot order.
    pub fn committers(&self) -> Vec<Arc<dyn GpuCommitter>> {
        self.shared.slots.committers().cloned().collect()
    }

    /// The number of workers: the most jobs running at once.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The most jobs that may wait for a worker.
    pub fn queue_capacity(&self) -> usize {
        self.shared.queue.capacity()
    }

    /// The jobs waiting for a worker now.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// The host memory the running jobs may reserve together ([`PoolOptions::host_memory_limit`],
    /// or what was available when the pool started, less the CUDA slots' row memory,
    /// [`PoolOptions::pinned_rows_bytes`]); `None`: no limit.
    pub fn host_memory_limit(&self) -> Option<u64> {
        self.shared.host.limit()
    }

    /// The most host memory the running jobs have reserved at once ([`JobContext::reserve_host`]).
    pub fn host_memory_reserved_peak(&self) -> u64 {
        self.shared.host.peak()
    }

    /// The most memory this process has held resident at once since it started, the pool's
    /// jobs included (Linux: `VmHWM`); `None` where the system does not report it.
    pub fn peak_resident_bytes(&self) -> Option<u64> {
        peak_resident_bytes()
    }

    /// `job` as a queue entry that runs it and sends its result, and the handle receiving it.
    fn task<T, F>(&self, job: F) -> (Task, JobHandle<T>)
    where
        F: FnOnce(&JobContext) -> Result<T, PoolError> + Send + 'static,
        T: Send + 'static,
    {
        let id = self.next_job.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel();
        // the job's span is a child of the submitter's (a fleet's `service.job`, say)
        let parent = Span::current();
        let task: Task = Box::new(move |shared: &Shared| {
            if sender.send(run_job(id, job, &parent, shared)).is_err() {
                debug!(job = id, "result dropped: nobody holds the job's handle");
            }
        });
        debug!(job = id, "job queued");
        (task, JobHandle { id, result: receiver })
    }

    /// Closes the queue and joins the workers once it is empty.
    fn stop(&mut self) {
        self.shared.queue.close();
        // a job that drops the last handle on the pool runs on a worker, which cannot join itself
        let current = thread::current().id();
        for worker in self.workers.drain(..) {
            if worker.thread().id() != current && worker.join().is_err() {
                warn!("a prover pool worker panicked outside its jobs");
            }
        }
    }
}

impl Drop for ProverPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A worker: runs queued jobs until the queue is closed and empty.
fn work(shared: &Shared) {
    while let Some(task) = shared.queue.pop() {
        task(shared);
    }
}

/// Runs `job` in its span (a child of `parent`), catching a panic; it is bound to a slot when
/// it first asks for one, or at once where the slots have threads of their own (it runs on them).
fn run_job<T, F>(id: u64, job: F, parent: &Span, shared: &Shared) -> Result<T, PoolError>
where
    F: FnOnce(&JobContext) -> Result<T, PoolError> + Send,
    T: Send,
{
    let span = info_span!(parent: parent, "pool.job", job = id, slot = Empty, device = Empty);
    let context = JobContext {
        id,
        slots: shared.slots.clone(),
        lease: OnceLock::new(),
        host: shared.host.clone(),
        span: span.clone(),
    };
    let run = || {
        let _span = span.entered();
        let start = Instant::now();
        // the job owns its state, and the committer's locks ignore poisoning: nothing a panic
        // leaves half-done is seen again
        // the oldest job's device calls go first, so jobs end one by one (`host::turn`)
        let proved = || with_turn_priority(id, || job(&context));
        let result = catch_unwind(AssertUnwindSafe(proved)).unwrap_or_else(|payload| {
            Err(PoolError::Panicked { job: id, message: panic_message(payload.as_ref()) })
        });
        let elapsed_ms = start.elapsed().as_millis() as u64;
        match &result {
            Ok(_) => info!(elapsed_ms, "job done"),
            Err(error) => warn!(elapsed_ms, %error, "job failed"),
        }
        result
    };
    let threads = shared.slots.have_threads().then(|| context.lease()).and_then(Lease::threads);
    match threads {
        Some(threads) => threads.install(run),
        None => run(),
    }
}

/// The message of a panic: its payload when that is a string.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => text.to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic payload that is not a string".to_string(),
    }
}

// JOBS
// ================================================================================================

/// What a job is given: its id, its slot and the slot's committer (chosen when first asked
/// for), the pool's host memory and its start turns.
pub struct JobContext {
    id: u64,
    slots: Arc<Slots>,
    /// The job's slot, once it has asked for one.
    lease: OnceLock<Lease>,
    host: Arc<HostBudget>,
    span: Span,
}

impl JobContext {
    /// The job's id, unique in its pool, in order of submission ([`JobHandle::id`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The index of the job's slot ([`ProverPool::committers`]). A job is bound to its slot when
    /// it first asks for it or for its committer, to the slot with the fewest jobs bound at that
    /// moment (see the module's scheduling policy).
    pub fn slot(&self) -> usize {
        self.lease().index()
    }

    /// The slot's committer, to give to [`GpuProver::with_committer`] or
    /// `miden::prove_with_committer` (binding the job to its slot, as [`Self::slot`]). Other jobs
    /// may use it at the same time: it serializes their calls.
    pub fn committer(&self) -> &Arc<dyn GpuCommitter> {
        self.lease().committer()
    }

    /// The job's slot, chosen at the first call.
    fn lease(&self) -> &Lease {
        self.lease.get_or_init(|| {
            let lease = self.slots.lease();
            self.span.record("slot", lease.index());
            self.span.record("device", lease.device());
            debug!(job = self.id, slot = lease.index(), "job bound to its slot");
            lease
        })
    }

    /// Reserves `bytes` of the pool's host memory for this job until the reservation is
    /// dropped, first waiting while the running jobs' reservations leave too little room (see
    /// the module's scheduling policy). A job reserves once, before the work that holds the
    /// memory: [`ProverPool::prove_winterfell`] and `prove_miden` reserve [`proof_host_bytes`].
    ///
    /// # Errors
    /// [`PoolError::OutOfMemory`] if `bytes` is more than the pool's whole host memory limit.
    pub fn reserve_host(&self, bytes: u64) -> Result<HostReservation, PoolError> {
        self.host.reserve(self.id, bytes)
    }

    /// Waits for a start turn, until the returned [`Turn`] drops: as many jobs hold one at once
    /// as the pool has slots, in the order they ask. A job holds it while it prepares its proof,
    /// before it asks for its slot (`prove_miden` while the program executes), so that jobs
    /// reach the devices one preparation apart instead of together (see the module's
    /// scheduling policy).
    pub fn start_turn(&self) -> Turn {
        self.slots.start_turns().take()
    }
}

/// The result of a submitted job, once it has run. Dropping the handle does not cancel the job.
#[must_use = "a job's result, error included, is only seen through its handle"]
pub struct JobHandle<T> {
    id: u64,
    result: mpsc::Receiver<Result<T, PoolError>>,
}

impl<T> JobHandle<T> {
    /// The job's id ([`JobContext::id`]; also in its `pool.job` span).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits until the job has run and returns its result, or its own error.
    pub fn wait(self) -> Result<T, PoolError> {
        self.result.recv().unwrap_or(Err(PoolError::WorkerLost { job: self.id }))
    }
}

/// A job [`ProverPool::try_submit`] refused because the queue was full, given back.
pub struct QueueFull<F> {
    /// The job, not run.
    pub job: F,
    /// The queue's capacity.
    pub capacity: usize,
}

impl<F> std::fmt::Debug for QueueFull<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueFull").field("capacity", &self.capacity).finish_non_exhaustive()
    }
}

impl<F> std::fmt::Display for QueueFull<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the pool's queue is full ({} jobs waiting)", self.capacity)
    }
}

impl<F> std::error::Error for QueueFull<F> {}
