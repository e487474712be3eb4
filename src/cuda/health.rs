//! The CUDA side of a committer's [`Health`] (shared by every driver wrapper): waits that poll
//! `cuEventQuery`/`cuStreamQuery` within the deadline (blocking synchronization has none), and
//! fault injection as driver statuses (feature `fault-injection`).
//!
//! Once the GPUs are lost (a timeout, or an error after which the context is unusable:
//! `status::device_error` turns those into [`crate::GpuError::DeviceLost`]) their device memory
//! is no longer freed: a free waits for the device's work, which may never end; the memory
//! returns with the context.

use cudarc::driver::{result::DriverError, sys};

use super::status::{device_error, DriverResult};
#[cfg(feature = "fault-injection")]
use crate::health::inject::{Injection, Operation};

/// The health of one committer's GPUs.
pub(super) type Health = crate::health::DeviceHealth;

/// The status of the driver call `$call` (a `Result<_, DriverError>`), or, where `$health`'s
/// injector strikes this operation of kind `$operation` (an [`crate::health::inject::Operation`]), the
/// status it injects instead ([`injected`]), the call not made. Without feature
/// `fault-injection` it is `$call`.
macro_rules! driver_call {
    ($health:expr, $operation:ident, $call:expr) => {{
        #[cfg(feature = "fault-injection")]
        let status = match crate::cuda::health::injected(
            &$health,
            crate::health::inject::Operation::$operation,
        ) {
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

// WAITS
// ================================================================================================

/// Waits, within the deadline, until `query` (`cuEventQuery` or `cuStreamQuery` of what is
/// waited for) reports the work done; `operation` names the wait. The injector may fail the wait
/// or make the work never report done.
pub(super) fn wait(
    health: &Health,
    operation: &'static str,
    query: impl FnMut() -> sys::CUresult,
) -> DriverResult<()> {
    #[cfg(feature = "fault-injection")]
    let hang = match health.injected(Operation::Wait) {
        Some(Injection::Hang) => true,
        Some(injection) => {
            return Err(device_error(operation, injected_status(Operation::Wait, injection)))
        },
        None => false,
    };
    #[cfg(not(feature = "fault-injection"))]
    let hang = false;
    poll(health, operation, hang, query)
}

/// [`wait`], never struck by the injector: the recovery after a failed call.
pub(super) fn drain(
    health: &Health,
    operation: &'static str,
    query: impl FnMut() -> sys::CUresult,
) -> DriverResult<()> {
    poll(health, operation, false, query)
}

fn poll(
    health: &Health,
    operation: &'static str,
    hang: bool,
    mut query: impl FnMut() -> sys::CUresult,
) -> DriverResult<()> {
    health.wait(operation, hang, || match query() {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        status => Err(device_error(operation, DriverError(status))),
    })
}

// INJECTION
// ================================================================================================

/// Counts one operation of kind `operation`; the status its driver call gets instead, if the
/// injector strikes it.
#[cfg(feature = "fault-injection")]
pub(super) fn injected(health: &Health, operation: Operation) -> Option<DriverError> {
    health.injected(operation).map(|injection| injected_status(operation, injection))
}

/// The status an injected fault gives an operation: one after which the device stays usable
/// (out of memory for an allocation, out of resources for a launch, an invalid value
/// otherwise), or, sticky, an illegal address.
#[cfg(feature = "fault-injection")]
fn injected_status(operation: Operation, injection: Injection) -> DriverError {
    use sys::CUresult::*;
    DriverError(match (injection, operation) {
        (Injection::Sticky, _) => CUDA_ERROR_ILLEGAL_ADDRESS,
        (_, Operation::Allocation) => CUDA_ERROR_OUT_OF_MEMORY,
        (_, Operation::Launch) => CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        _ => CUDA_ERROR_INVALID_VALUE,
    })
}
