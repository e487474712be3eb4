//! A GPU committer's device health, and the fault injection that tests it.
//!
//! - The device's health (both GPU backends): bounded waits, and a device marked lost after a
//!   timeout or a fatal error, so that a committer refuses every later call at once.
//! - [`inject`] (feature `fault-injection`, tests only): fails or hangs a chosen device
//!   operation inside a backend.
//! - [`faults`] (feature `tools`): a [`crate::GpuCommitter`] wrapper that fails chosen calls
//!   from outside.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod device;
#[cfg(feature = "tools")]
pub mod faults;
#[cfg(feature = "fault-injection")]
pub mod inject;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use device::{parse_wait_timeout, DeviceHealth};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub use device::{DEFAULT_WAIT_TIMEOUT, WAIT_TIMEOUT_ENV};
