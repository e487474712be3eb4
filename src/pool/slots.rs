//! The pool's slots: one committer each (one per CUDA GPU, one wgpu adapter, or CPU
//! committers), the count of jobs bound to each, so a job is bound to the least loaded, and
//! the pool's start turns (one holder per slot), which jobs take in the order they ask.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tracing::info;

use super::{PoolError, PoolOptions};
use crate::{
    backend::Backend, committer::GpuCommitter, cpu::CpuCommitter, error::Result,
    select::BackendOptions,
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
    start_turns: Arc<TurnQueue>,
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
            .collect::<std::result::Result<Vec<_>, PoolError>>()?;
        let start_turns = Arc::new(TurnQueue::new(slots.len()));
        Ok(Self { slots, running, start_turns })
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

    /// Whether the slots have host threads of their own.
    pub(super) fn have_threads(&self) -> bool {
        self.slots.iter().any(|slot| slot.threads.is_some())
    }

    /// The start turns: as many at once as there are slots.
    pub(super) fn start_turns(&self) -> &Arc<TurnQueue> {
        &self.start_turns
    }

    /// The slot with the fewest jobs bound to it (the first of those on a tie), counted with
    /// one more until the lease is dropped.
    pub(super) fn lease(self: &Arc<Self>) -> Lease {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let index = (0..running.len()).min_by_key(|&i| running[i]).unwrap_or(0);
        running[index] += 1;
        Lease { slots: self.clone(), index }
    }
}

/// One job's use of a slot.
pub(super) struct Lease {
    slots: Arc<Slots>,
    index: usize,
}

impl Lease {
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

impl Drop for Lease {
    fn drop(&mut self) {
        let mut running = self.slots.running.lock().unwrap_or_else(PoisonError::into_inner);
        running[self.index] -= 1;
    }
}

// TURNS
// ================================================================================================

/// Turns that up to `holders` threads hold at once, given in the order they were asked for (a
/// ticket lock of several holders).
pub(super) struct TurnQueue {
    holders: u64,
    /// The next ticket to give out and the number of turns given back.
    tickets: Mutex<(u64, u64)>,
    next: Condvar,
}

impl TurnQueue {
    /// Turns for up to `holders` at once (at least 1).
    pub(super) fn new(holders: usize) -> Self {
        Self { holders: holders.max(1) as u64, tickets: Mutex::new((0, 0)), next: Condvar::new() }
    }

    /// Waits for a turn, after everyone who asked before; it ends when the guard drops.
    pub(super) fn take(self: &Arc<Self>) -> Turn {
        let mut tickets = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = tickets.0;
        tickets.0 += 1;
        while ticket >= tickets.1 + self.holders {
            tickets = self.next.wait(tickets).unwrap_or_else(PoisonError::into_inner);
        }
        Turn { queue: self.clone() }
    }
}

/// A held start turn ([`crate::pool::JobContext::start_turn`]), passed on to the next in line
/// when dropped.
#[must_use = "the turn ends when this is dropped"]
pub struct Turn {
    queue: Arc<TurnQueue>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut tickets = self.queue.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        tickets.1 += 1;
        drop(tickets);
        self.queue.next.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::mpsc, thread, time::Duration};

    use super::*;

    #[test]
    fn turns_are_held_one_at_a_time_in_the_order_asked() {
        let queue = Arc::new(TurnQueue::new(1));
        let first = queue.take();
        let (order, seen) = mpsc::channel();
        let tickets_given = |queue: &TurnQueue| queue.tickets.lock().unwrap().0;
        let waiters: Vec<_> = (0..4u64)
            .map(|i| {
                let (queue, order) = (queue.clone(), order.clone());
                let waiter = thread::spawn({
                    let queue = queue.clone();
                    move || {
                        let _turn = queue.take();
                        order.send(i).unwrap();
                    }
                });
                // the next asks only once this one holds its ticket
                while tickets_given(&queue) < i + 2 {
                    thread::sleep(Duration::from_millis(1));
                }
                waiter
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        assert!(seen.try_recv().is_err(), "a turn was given while the first was held");
        drop(first);
        waiters.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(seen.try_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }
}
