//! Driver statuses as typed errors: [`GpuError::Device`] naming the failed call, or
//! [`GpuError::DeviceLost`] for an error after which the context is unusable.

use cudarc::driver::{result::DriverError, sys};

use crate::{
    backend::Backend,
    error::{DeviceFailure, DeviceStatus, GpuError, LossCause},
};

/// Result of a driver call, with the failing call named.
pub(super) type DriverResult<T> = Result<T, GpuError>;

/// Converts a driver status into [`GpuError::Device`], naming the driver call that failed.
pub(super) fn check<T>(result: Result<T, DriverError>, call: &'static str) -> DriverResult<T> {
    result.map_err(|e| device_error(call, e))
}

/// [`GpuError::Device`] for a failed driver call, or [`GpuError::DeviceLost`] for an error after
/// which the context is unusable ([`is_sticky`]).
pub(super) fn device_error(call: &'static str, e: DriverError) -> GpuError {
    let name = e.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let description =
        e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let status = DeviceStatus::Cuda { code: e.0 as u32, name, description };
    let failure = DeviceFailure::new(call, status);
    if is_sticky(e.0) {
        GpuError::DeviceLost { backend: Backend::Cuda, cause: LossCause::Failure(failure) }
    } else {
        GpuError::Device { backend: Backend::Cuda, failure }
    }
}

/// [`GpuError::Device`] for `call`, refused by a condition this backend checks (`condition`).
pub(super) fn refused(call: &'static str, condition: impl Into<String>) -> GpuError {
    GpuError::internal(Backend::Cuda, call, condition)
}

/// Whether the driver keeps reporting `status` for every later call in the context (a fault in
/// a kernel, an uncorrectable memory error, a context torn down): the process must start anew
/// to use the device.
fn is_sticky(status: sys::CUresult) -> bool {
    use sys::CUresult::*;
    matches!(
        status,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUDA_ERROR_DEINITIALIZED
            | CUDA_ERROR_DEVICE_UNAVAILABLE
            | CUDA_ERROR_EXTERNAL_DEVICE
    )
}

/// [`GpuError::BackendUnavailable`] for the CUDA backend: no driver library, no device, no NVRTC.
pub(super) fn unavailable(reason: &str) -> GpuError {
    GpuError::BackendUnavailable { backend: Backend::Cuda, reason: reason.to_string() }
}
