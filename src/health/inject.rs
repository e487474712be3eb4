//! Fault injection inside the GPU backends (feature `fault-injection`, for tests only).
//!
//! Each GPU committer owns an [`Injector`] (`fault_injector()` on `CudaCommitter` and
//! `WgpuCommitter`). The backends pass every device operation of the kinds in [`Operation`]
//! through it at the one place that wraps the driver call (CUDA: `cuda/driver.rs`,
//! `cuda/buffer.rs`, `cuda/launch.rs`; wgpu: the submit, map and wait helpers of
//! `wgpu/context.rs`). Disarmed, it only counts them; armed, it makes the `nth` operation of one
//! kind fail (as the driver would report it) or, for a wait, never complete. A test first counts
//! the operations a call performs, then fails each of them in turn.
//!
//! Without the feature none of this is compiled: the operations go straight to the driver.

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Mutex,
};

// OPERATIONS
// ================================================================================================

/// The device operations an [`Injector`] counts and can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A device allocation (CUDA `cuMemAlloc`).
    Allocation,
    /// A kernel launch (CUDA `cuLaunchKernel`).
    Launch,
    /// An event recorded on a stream (CUDA `cuEventRecord`).
    Record,
    /// A wait for the device (CUDA event and stream synchronization; wgpu waits for a mapping or
    /// for the queue).
    Wait,
    /// A host-to-device copy (CUDA `cuMemcpyHtoDAsync`).
    Upload,
    /// A device-to-host copy (CUDA `cuMemcpyDtoHAsync`).
    Download,
    /// A buffer mapped for the host (wgpu `map_async`).
    Map,
    /// A queue submission (wgpu `Queue::submit`).
    Submit,
}

impl Operation {
    /// Every kind, in the order of [`Injector::count`]'s table.
    pub const ALL: [Operation; 8] = [
        Self::Allocation,
        Self::Launch,
        Self::Record,
        Self::Wait,
        Self::Upload,
        Self::Download,
        Self::Map,
        Self::Submit,
    ];

    /// The kinds the CUDA backend passes through its injector.
    pub const CUDA: [Operation; 6] =
        [Self::Allocation, Self::Launch, Self::Record, Self::Wait, Self::Upload, Self::Download];

    /// The kinds the wgpu backend passes through its injector.
    pub const WGPU: [Operation; 3] = [Self::Submit, Self::Map, Self::Wait];

    fn index(self) -> usize {
        self as usize
    }
}

/// What an armed [`Injector`] does to its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// Fails it with an error after which the device stays usable (CUDA: out of memory for an
    /// allocation, out of resources for a launch, an invalid value otherwise; wgpu: a device
    /// error).
    Error,
    /// Fails it with an error after which the device is unusable (CUDA: an illegal address;
    /// wgpu: the device is destroyed).
    Sticky,
    /// A wait never sees its work complete, so it runs into its deadline; any other operation
    /// fails as with [`Injection::Error`].
    Hang,
}

// INJECTOR
// ================================================================================================

/// Counts a committer's device operations by kind and injects one fault; see the module docs.
#[derive(Debug, Default)]
pub struct Injector {
    counts: [AtomicUsize; 8],
    armed: Mutex<Option<Armed>>,
    fired: AtomicBool,
}

/// The operation an armed injector strikes, and how.
#[derive(Debug, Clone, Copy)]
struct Armed {
    operation: Operation,
    nth: usize,
    injection: Injection,
}

impl Injector {
    /// A disarmed injector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resets the counts and arms the injector: the `nth` (from 1) operation of kind `operation`
    /// from now on gets `injection`; every other operation runs.
    pub fn arm(&self, operation: Operation, nth: usize, injection: Injection) {
        *self.armed() = Some(Armed { operation, nth, injection });
        self.reset();
    }

    /// Resets the counts and disarms the injector: every operation runs, and is counted.
    pub fn disarm(&self) {
        *self.armed() = None;
        self.reset();
    }

    /// Operations of kind `operation` since the injector was last armed or disarmed.
    pub fn count(&self, operation: Operation) -> usize {
        self.counts[operation.index()].load(Ordering::SeqCst)
    }

    /// Whether the armed fault has been injected.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Counts one operation of kind `operation`; the injection it gets, if it is the armed one.
    pub(crate) fn hit(&self, operation: Operation) -> Option<Injection> {
        let nth = self.counts[operation.index()].fetch_add(1, Ordering::SeqCst) + 1;
        let armed = (*self.armed())?;
        if armed.operation != operation || armed.nth != nth {
            return None;
        }
        self.fired.store(true, Ordering::SeqCst);
        Some(armed.injection)
    }

    fn reset(&self) {
        for count in &self.counts {
            count.store(0, Ordering::SeqCst);
        }
        self.fired.store(false, Ordering::SeqCst);
    }

    fn armed(&self) -> std::sync::MutexGuard<'_, Option<Armed>> {
        self.armed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nth_operation_of_the_armed_kind_is_struck_once() {
        let injector = Injector::new();
        assert_eq!(injector.hit(Operation::Launch), None);
        assert_eq!(injector.count(Operation::Launch), 1);
        injector.arm(Operation::Launch, 2, Injection::Sticky);
        assert_eq!(injector.count(Operation::Launch), 0);
        assert_eq!(injector.hit(Operation::Wait), None);
        assert_eq!(injector.hit(Operation::Launch), None);
        assert!(!injector.fired());
        assert_eq!(injector.hit(Operation::Launch), Some(Injection::Sticky));
        assert_eq!(injector.hit(Operation::Launch), None);
        assert!(injector.fired());
        assert_eq!((injector.count(Operation::Launch), injector.count(Operation::Wait)), (3, 1));
        injector.disarm();
        assert!(!injector.fired());
        assert_eq!(injector.count(Operation::Launch), 0);
    }
}
