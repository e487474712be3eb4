//! The pool's slots: one committer each (one per CUDA GPU, one wgpu adapter, or CPU
//! committers), and the count of jobs running on each, so a job starts on the least loaded.

use std::sync::{Arc, Mutex, PoisonError};

use tracing::info;

use super::{PoolError, PoolOptions};
use crate::{
    backend::Backend, committer::GpuCommitter, cpu::CpuCommitter, error::Result,
    options::BackendOptions,
};

// OPENING
// ================================================================================================

/// The committers of `options`, one per slot: for CUDA one per GPU (every visible GPU, or
/// `cuda.devices`), together keeping up to `pinned_rows` bytes of host memory registered for
/// LDE rows; for wgpu the one adapter's, for the CPU `cpu_slots` of them. `Auto` decides as
/// [`BackendOptions::create`] does, CUDA first.
pub(super) fn open_committers(
    options: &PoolOptions,
    pinned_rows: u64,
) -> Result<Vec<Arc<dyn GpuCommitter>>> {
    let backend = &options.backend;
    match backend.backend {
        Backend::Cpu => Ok(cpu_committers(backend, options.cpu_slots)),
        Backend::Wgpu => Ok(vec![backend.create()?]),
        Backend::Cuda => cuda_committers(backend, pinned_rows),
        Backend::Auto => cuda_committers(backend, pinned_rows).or_else(|reason| {
            info!(%reason, "the pool has no CUDA slots");
            let committer = backend.create()?;
            Ok(match committer.backend() {
                Backend::Cpu => cpu_committers(backend, options.cpu_slots),
                _ => vec![committer],
            })
        }),
    }
}

fn cpu_committers(options: &BackendOptions, slots: usize) -> Vec<Arc<dyn GpuCommitter>> {
    (0..slots)
        .map(|_| Arc::new(CpuCommitter::with_options(options.cpu)) as Arc<dyn GpuCommitter>)
        .collect()
}

/// One single-GPU committer per CUDA ordinal, each opened with the options' other values and
/// `pinned_rows` (a limit the process's committers share).
#[cfg(feature = "cuda")]
fn cuda_committers(
    options: &BackendOptions,
    pinned_rows: u64,
) -> Result<Vec<Arc<dyn GpuCommitter>>> {
    let ordinals = match &options.cuda.devices {
        Some(list) => check_distinct(list)?,
        None => (0..crate::cuda::device_count()?).collect(),
    };
    ordinals
        .into_iter()
        .map(|ordinal| {
            let mut one_gpu = options.clone();
            one_gpu.backend = Backend::Cuda;
            one_gpu.cuda.devices = Some(vec![ordinal]);
            one_gpu.cuda.pinned_rows_bytes = pinned_rows;
            one_gpu.create()
        })
        .collect()
}

/// The CUDA backend is not compiled in: its error, as [`BackendOptions::create`] gives it.
#[cfg(not(feature = "cuda"))]
fn cuda_committers(options: &BackendOptions, _: u64) -> Result<Vec<Arc<dyn GpuCommitter>>> {
    let cuda = BackendOptions { backend: Backend::Cuda, ..options.clone() };
    Ok(vec![cuda.create()?])
}

/// `list`, unless it is empty or names a device twice (each single-GPU committer checks that
/// its device exists).
#[cfg(feature = "cuda")]
fn check_distinct(list: &[usize]) -> Result<Vec<usize>> {
    let invalid = |reason: String| crate::error::GpuError::InvalidDeviceList {
        list: list.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","),
        reason,
    };
    if list.is_empty() {
        return Err(invalid("no device given".into()));
    }
    if let Some((i, d)) = list.iter().enumerate().find(|(i, d)| list[..*i].contains(d)) {
        return Err(invalid(format!("device {d} is listed twice (position {i})")));
    }
    Ok(list.to_vec())
}

/// A rayon pool of `threads` threads for slot `index`.
fn slot_threads(index: usize, threads: usize) -> std::result::Result<rayon::ThreadPool, PoolError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("prover-slot-{index}-{i}"))
        .build()
        .map_err(|e| PoolError::Spawn(std::io::Error::other(e)))
}

// LEASES
// ================================================================================================

/// The pool's committers and how many jobs run on each.
pub(super) struct Slots {
    slots: Vec<Slot>,
    running: Mutex<Vec<usize>>,
}

struct Slot {
    committer: Arc<dyn GpuCommitter>,
    /// The device's name, for every job's span.
    device: String,
    /// The slot's own host threads, where it has them.
    threads: Option<rayon::ThreadPool>,
}

impl Slots {
    /// Slots over `committers` (at least one: [`open_committers`] of checked options gives
    /// one or more), none running a job; each with a rayon pool of `threads_per_slot` threads
    /// where that is set ([`PoolError::Spawn`] if one cannot start).
    pub(super) fn new(
        committers: Vec<Arc<dyn GpuCommitter>>,
        threads_per_slot: Option<usize>,
    ) -> std::result::Result<Self, PoolError> {
        let running = Mutex::new(vec![0; committers.len()]);
        let slots = (committers.into_iter().enumerate())
            .map(|(index, committer)| {
                let threads = threads_per_slot.map(|threads| slot_threads(index, threads));
                let threads = threads.transpose()?;
                Ok(Slot { device: committer.device_name(), committer, threads })
            })
            .collect::<std::result::Result<_, PoolError>>()?;
        Ok(Self { slots, running })
    }

    /// The backend of the committers (all of one backend).
    pub(super) fn backend(&self) -> Backend {
        self.slots[0].committer.backend()
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn committers(&self) -> impl Iterator<Item = &Arc<dyn GpuCommitter>> {
        self.slots.iter().map(|slot| &slot.committer)
    }

    /// The slot running the fewest jobs (the first of those on a tie), counted as running one
    /// more until the lease is dropped.
    pub(super) fn lease(&self) -> Lease<'_> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let index = (0..running.len()).min_by_key(|&i| running[i]).unwrap_or(0);
        running[index] += 1;
        Lease { slots: self, index }
    }
}

/// One job's use of a slot.
pub(super) struct Lease<'a> {
    slots: &'a Slots,
    index: usize,
}

impl Lease<'_> {
    pub(super) fn index(&self) -> usize {
        self.index
    }

    pub(super) fn committer(&self) -> &Arc<dyn GpuCommitter> {
        &self.slots.slots[self.index].committer
    }

    /// The slot's own host threads, where it has them.
    pub(super) fn threads(&self) -> Option<&rayon::ThreadPool> {
        self.slots.slots[self.index].threads.as_ref()
    }

    pub(super) fn device(&self) -> &str {
        &self.slots.slots[self.index].device
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut running = self.slots.running.lock().unwrap_or_else(PoisonError::into_inner);
        running[self.index] -= 1;
    }
}
