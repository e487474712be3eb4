//! The options of the CUDA backend, as a value; [`CudaOptions::from_env`] is the one place the
//! backend reads the environment.

use std::time::Duration;

use crate::{
    backend::Backend,
    error::{GpuError, Result},
    hash::RescueLanes,
    health::{parse_wait_timeout, DEFAULT_WAIT_TIMEOUT, WAIT_TIMEOUT_ENV},
    host::HostOptions,
};

/// The environment variable that selects the GPUs, as a comma-separated list of CUDA ordinals
/// ([`CudaOptions::devices`]).
pub const DEVICES_ENV: &str = "MIDEN_GPU_DEVICES";

/// The environment variable capping the device memory of each GPU's buffers, in MiB
/// ([`CudaOptions::memory_limit`]).
pub const MEMORY_LIMIT_ENV: &str = "MIDEN_GPU_CUDA_MEMORY_LIMIT";

/// How a [`super::CudaCommitter`] uses its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaOptions {
    /// The CUDA ordinals to use, each once; `None` (the default) uses every visible GPU. Results
    /// are identical for any number of GPUs.
    pub devices: Option<Vec<usize>>,
    /// A cap on the device memory the committer's buffers may take on each GPU, in bytes, in
    /// every call (default: the device's free memory at each call). A commitment whose LDE does
    /// not fit is streamed in coset groups, as many passes as needed; one that does not fit even
    /// one coset at a time, or another call whose working buffers do not fit, is
    /// [`GpuError::OutOfMemory`]. Results are the same for any cap. The cap bounds what the
    /// process holds on the GPU while this committer allocates: other committers' buffers on it
    /// and the polynomials and FRI layers kept for proofs count too, so committers of one GPU
    /// with the same cap stay within it together.
    pub memory_limit: Option<u64>,
    /// Threads per RPO/RPX permutation in whole-row hashing and Merkle trees (default
    /// [`RescueLanes::Quad`]).
    pub rescue_lanes: RescueLanes,
    /// The hashing kernels' minimum resident blocks per SM (the second `__launch_bounds__`
    /// argument, 1 to 16), for every hashing and Merkle kernel; `None` (the default) asks for 8
    /// in the whole-row RPO/RPX kernels on quads (at most 64 registers) and 3 in the others.
    pub hash_min_blocks: Option<u32>,
    /// Host threads that fault in the result vectors while the GPUs compute (0: none); `None`
    /// (the default) takes a quarter of the host's cores, at most 4.
    pub prefault_threads: Option<usize>,
    /// Synchronize after every kernel launch, so that a fault names its kernel (for debugging;
    /// default `false`).
    pub sync_each_launch: bool,
    /// Host memory that the committers of the process may keep registered with the driver for
    /// the large results (LDE rows, Merkle leaves and nodes) and the sources, in bytes (default
    /// 0: none). The GPUs write those results into it directly, without the host copy out of
    /// pinned slots and the page faults of fresh memory, which bound a commitment split over
    /// several GPUs and lengthen each GPU turn of proofs sharing a GPU, and read the sources
    /// from it, copied there before the call takes its GPUs; a warm committer reuses it call
    /// after call (see [`crate::HostBuffer`]), but registering a block costs about as much as a
    /// few copies (its pages faulted in, then pinned), so it pays for a committer that commits the
    /// same sizes many times. Past the cap, results and sources take the pinned slots.
    pub pinned_rows_bytes: u64,
    /// How result vectors are reserved on the host.
    pub host: HostOptions,
    /// The deadline of every wait on a GPU (default [`DEFAULT_WAIT_TIMEOUT`], 120 s): a wait that
    /// exceeds it is [`GpuError::Timeout`], and the committer counts its GPUs as lost.
    pub wait_timeout: Duration,
}

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            devices: None,
            memory_limit: None,
            rescue_lanes: RescueLanes::Quad,
            hash_min_blocks: None,
            prefault_threads: None,
            sync_each_launch: false,
            pinned_rows_bytes: 0,
            host: HostOptions::default(),
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

impl CudaOptions {
    /// The defaults, with [`DEVICES_ENV`], [`MEMORY_LIMIT_ENV`] and [`WAIT_TIMEOUT_ENV`] where
    /// set (unset or empty leaves the default). A malformed device list is
    /// [`GpuError::InvalidDeviceList`], a memory limit that is not a positive number of MiB (or
    /// overflows 64 bits in bytes) or a wait deadline that is not a positive number of seconds
    /// [`GpuError::BackendUnavailable`].
    pub fn from_env() -> Result<Self> {
        let mut options = Self::default();
        if let Some(text) = non_empty_var(DEVICES_ENV) {
            options.devices = Some(super::devices::parse_ordinals(&text)?);
        }
        if let Some(text) = non_empty_var(MEMORY_LIMIT_ENV) {
            options.memory_limit = Some(parse_mib(&text)?);
        }
        if let Some(text) = non_empty_var(WAIT_TIMEOUT_ENV) {
            options.wait_timeout =
                parse_wait_timeout(&text).ok_or_else(|| GpuError::BackendUnavailable {
                    backend: Backend::Cuda,
                    reason: format!(
                        "{WAIT_TIMEOUT_ENV} must be a positive number of seconds, not `{text}`"
                    ),
                })?;
        }
        Ok(options)
    }
}

impl CudaOptions {
    /// Checks the values that have a range (the device list is checked against the GPUs present
    /// when they are opened): [`Self::hash_min_blocks`] must be 1 to 16 and
    /// [`Self::wait_timeout`] positive, else [`GpuError::BackendUnavailable`].
    pub fn check(&self) -> Result<()> {
        if self.wait_timeout.is_zero() {
            return Err(GpuError::BackendUnavailable {
                backend: Backend::Cuda,
                reason: "wait_timeout must be positive".into(),
            });
        }
        match self.hash_min_blocks {
            Some(blocks) if !(1..=16).contains(&blocks) => Err(GpuError::BackendUnavailable {
                backend: Backend::Cuda,
                reason: format!("hash_min_blocks must be 1 to 16, not {blocks}"),
            }),
            _ => Ok(()),
        }
    }
}

/// The variable's value, unless it is unset or blank.
fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

/// A positive number of MiB, in bytes.
fn parse_mib(text: &str) -> Result<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|&mib| mib > 0)
        .and_then(|mib| mib.checked_mul(1 << 20))
        .ok_or_else(|| GpuError::BackendUnavailable {
            backend: Backend::Cuda,
            reason: format!("{MEMORY_LIMIT_ENV} must be a positive number of MiB, not `{text}`"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_min_blocks_are_checked() {
        assert!(CudaOptions::default().check().is_ok());
        for blocks in [1, 8, 16] {
            let options = CudaOptions { hash_min_blocks: Some(blocks), ..Default::default() };
            assert!(options.check().is_ok(), "{blocks}");
        }
        for blocks in [0, 17, u32::MAX] {
            let options = CudaOptions { hash_min_blocks: Some(blocks), ..Default::default() };
            assert!(
                matches!(options.check(), Err(GpuError::BackendUnavailable { .. })),
                "{blocks}"
            );
        }
    }

    #[test]
    fn memory_limits_in_mib_are_checked() {
        assert_eq!(parse_mib(" 512 ").unwrap(), 512 << 20);
        for bad in ["0", "-1", "x", "17592186044416"] {
            assert!(parse_mib(bad).is_err(), "{bad}");
        }
    }
}
