//! What a failed device call reports: the call, the kernel or operation it served, and the
//! status the driver, the compiler or wgpu gave, kept as values rather than text.

use std::fmt;

// FAILURE
// ================================================================================================

/// One failed call on a device: what was called, what it served, and what was reported.
///
/// The foreign error types (cudarc's, NVRTC's, wgpu's) are neither `Clone` nor `Eq`; their codes
/// and names are kept instead, so that [`crate::GpuError`] stays both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFailure {
    /// The call that failed: a driver entry point (`cuLaunchKernel`, `cuMemAllocAsync`), an
    /// NVRTC step (`nvrtcCompileProgram`), a wgpu operation (a buffer map, a queue submit), or
    /// the step of this crate that refused to go on.
    pub call: &'static str,
    /// The kernel or operation the call served, where there is one (the kernel a launch ran).
    pub operation: Option<String>,
    /// What was reported.
    pub status: DeviceStatus,
}

impl DeviceFailure {
    /// A failure of `call` with `status`, serving nothing named.
    pub fn new(call: &'static str, status: DeviceStatus) -> Self {
        Self { call, operation: None, status }
    }

    /// This failure, naming the kernel or operation `operation` the call served.
    pub fn serving(self, operation: impl Into<String>) -> Self {
        Self { operation: Some(operation.into()), ..self }
    }
}

impl fmt::Display for DeviceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.operation {
            Some(operation) => write!(f, "{} for `{operation}`: {}", self.call, self.status),
            None => write!(f, "{}: {}", self.call, self.status),
        }
    }
}

// STATUS
// ================================================================================================

/// The status a failed device call reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceStatus {
    /// A CUDA driver status (`CUresult`).
    Cuda {
        /// The status code.
        code: u32,
        /// Its name, `CUDA_ERROR_ILLEGAL_ADDRESS` for instance.
        name: String,
        /// The driver's description of it.
        description: String,
    },
    /// A failure of the NVRTC kernel compiler.
    Nvrtc {
        /// The `nvrtcResult` code (0 where NVRTC succeeded but reported diagnostics).
        code: u32,
        /// What NVRTC reported, `NVRTC_ERROR_COMPILATION` for instance.
        name: String,
        /// The compiler's log (empty where there is none).
        log: String,
    },
    /// An error wgpu reported, as its text.
    Wgpu(String),
    /// A condition this crate checks before or after a call: a range out of bounds, a result
    /// of the wrong size, an injected fault.
    Internal(String),
}

impl fmt::Display for DeviceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cuda { code, name, description } => {
                write!(f, "{name} ({description}; status {code})")
            },
            Self::Nvrtc { name, log, .. } if log.trim().is_empty() => {
                write!(f, "kernel compilation failed: {name}")
            },
            Self::Nvrtc { name, log, .. } => write!(f, "kernel compilation failed: {name}\n{log}"),
            Self::Wgpu(error) => f.write_str(error),
            Self::Internal(condition) => f.write_str(condition),
        }
    }
}

// LOSS
// ================================================================================================

/// Why a device was given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossCause {
    /// This call failed in a way that leaves the device unusable.
    Failure(DeviceFailure),
    /// An earlier call lost the device; this one was refused at once.
    Earlier {
        /// What the earlier call reported.
        reason: String,
    },
}

impl fmt::Display for LossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failure(failure) => failure.fmt(f),
            Self::Earlier { reason } => write!(f, "an earlier call failed: {reason}"),
        }
    }
}
