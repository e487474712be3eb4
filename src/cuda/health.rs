//! What every driver wrapper of one committer shares: whether its GPUs are lost, the deadline of
//! a wait, and (feature `fault-injection`) its fault injector.
//!
//! A wait ([`Health::wait`]) polls the event or stream with `cuEventQuery`/`cuStreamQuery`
//! until it completes or the deadline passes ([`crate::GpuError::Timeout`]); blocking
//! synchronization has no deadline. A timeout, or an error after which the context is unusable
//! (`driver::device_error` turns those into [`GpuError::DeviceLost`]), marks the committer lost:
//! every later call is refused at once, and device memory is no longer freed (a free waits for
//! the device's work, which may never end; the memory returns with the context).

use std::{sync::OnceLock, time::Duration};

use cudarc::driver::{result::DriverError, sys};

use super::driver::{device_error, DriverResult};
use crate::{backend::Backend, error::GpuError, waits::poll_until};
#[cfg(feature = "fault-injection")]
use {
    crate::inject::{Injection, Injector, Operation},
    std::sync::Arc,
};

/// The status of the driver call `$call` (a `Result<_, DriverError>`), or, where `$health`'s
/// injector strikes this operation of kind `$operation` (an [`crate::inject::Operation`]), the
/// status it injects instead, the call not made. Without feature `fault-injection` it is
/// `$call`.
macro_rules! driver_call {
    ($health:expr, $operation:ident, $call:expr) => {{
        #[cfg(feature = "fault-injection")]
        let status = match $health.injected(crate::inject::Operation::$operation) {
            Some(error) => Err(error),
            None => $call,
        };
        #[cfg(not(feature = "fault-injection"))]
        let status = {
            let _ = &$health;
            $call
        };
        status
    }};
}
pub(super) use driver_call;

// HEALTH
// ================================================================================================

/// The health of one committer's GPUs; see the module docs.
#[derive(Debug)]
pub(super) struct Health {
    /// Why the GPUs were given up, once they are.
    lost: OnceLock<String>,
    /// The deadline of every wait.
    wait_timeout: Duration,
    #[cfg(feature = "fault-injection")]
    injector: Arc<Injector>,
}

impl Health {
    /// Healthy GPUs whose waits end after `wait_timeout`.
    pub(super) fn new(wait_timeout: Duration) -> Self {
        Self {
            lost: OnceLock::new(),
            wait_timeout,
            #[cfg(feature = "fault-injection")]
            injector: Arc::new(Injector::new()),
        }
    }

    /// [`GpuError::DeviceLost`] once the GPUs are lost.
    pub(super) fn usable(&self) -> DriverResult<()> {
        match self.lost.get() {
            Some(reason) => Err(GpuError::DeviceLost {
                backend: Backend::Cuda,
                message: format!("an earlier call failed: {reason}"),
            }),
            None => Ok(()),
        }
    }

    /// Whether the GPUs are lost.
    pub(super) fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// Gives the GPUs up for `reason` (the first reason is kept).
    pub(super) fn mark_lost(&self, reason: &GpuError) {
        if self.lost.set(reason.to_string()).is_ok() {
            tracing::error!(%reason, "cuda: device lost; the committer refuses further work");
        }
    }

    /// Marks the GPUs lost if `error` says they are (a lost device, an exceeded deadline).
    pub(super) fn note(&self, error: &GpuError) {
        if matches!(error, GpuError::DeviceLost { .. } | GpuError::Timeout { .. }) {
            self.mark_lost(error);
        }
    }

    /// Waits, within the deadline, until `query` (`cuEventQuery` or `cuStreamQuery` of what is
    /// waited for) reports the work done; `operation` names the wait. An injected hang makes the
    /// work never report done.
    pub(super) fn wait(
        &self,
        operation: &'static str,
        mut query: impl FnMut() -> sys::CUresult,
    ) -> DriverResult<()> {
        #[cfg(feature = "fault-injection")]
        let hang = match self.injector.hit(Operation::Wait) {
            Some(Injection::Hang) => true,
            Some(injection) => {
                return Err(device_error(operation, injected_error(Operation::Wait, injection)))
            },
            None => false,
        };
        #[cfg(not(feature = "fault-injection"))]
        let hang = false;
        self.drain(operation, || if hang { sys::CUresult::CUDA_ERROR_NOT_READY } else { query() })
    }

    /// [`Self::wait`], never struck by the injector: the wait of the recovery after a failed
    /// call.
    pub(super) fn drain(
        &self,
        operation: &'static str,
        mut query: impl FnMut() -> sys::CUresult,
    ) -> DriverResult<()> {
        let waited = poll_until(Backend::Cuda, operation, self.wait_timeout, || match query() {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            status => Err(device_error(operation, DriverError(status))),
        });
        if let Err(error) = &waited {
            self.note(error);
        }
        waited
    }
}

// INJECTION
// ================================================================================================

#[cfg(feature = "fault-injection")]
impl Health {
    /// The committer's injector.
    pub(super) fn injector(&self) -> &Arc<Injector> {
        &self.injector
    }

    /// Counts one operation of kind `operation`; the status the driver call gets instead, if the
    /// injector strikes it.
    pub(super) fn injected(&self, operation: Operation) -> Option<DriverError> {
        self.injector.hit(operation).map(|injection| injected_error(operation, injection))
    }
}

/// The status an injected fault gives an operation: one after which the device stays usable
/// (out of memory for an allocation, out of resources for a launch, an invalid value
/// otherwise), or, sticky, an illegal address.
#[cfg(feature = "fault-injection")]
fn injected_error(operation: Operation, injection: Injection) -> DriverError {
    use sys::CUresult::*;
    DriverError(match (injection, operation) {
        (Injection::Sticky, _) => CUDA_ERROR_ILLEGAL_ADDRESS,
        (_, Operation::Allocation) => CUDA_ERROR_OUT_OF_MEMORY,
        (_, Operation::Launch) => CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        _ => CUDA_ERROR_INVALID_VALUE,
    })
}
