//! Host-side helpers that every backend shares: polynomial interpolation on the CPU (for inputs
//! a device cannot transform, and for the CPU backend itself) and host memory for results, with
//! its options ([`HostOptions`]): reserved fallibly, within the machine's memory and the memory
//! limits of the process's control groups (a container's).
//!
//! Nothing here knows of the committer trait or any backend.

mod buffer;
mod cgroup;
mod copy;
mod interpolate;
mod memory;
mod options;
#[cfg(feature = "cuda")]
mod prefault;
mod turn;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod twiddles;

pub use buffer::HostBuffer;
#[cfg(feature = "cuda")]
pub(crate) use buffer::LentBlock;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use copy::copy_slices;
pub(crate) use copy::on_copy_pool;
#[cfg(feature = "cuda")]
pub(crate) use copy::{par_copy, par_scatter};
pub(crate) use interpolate::{interpolate_columns, interpolate_composition};
#[cfg(feature = "wgpu")]
pub(crate) use memory::zeroed_host;
#[cfg(feature = "cuda")]
pub(crate) use memory::{advise_range as advise_huge_pages_range, check_host_room};
pub use memory::{available_host_memory, peak_resident_bytes, reserve_host};
pub use options::HostOptions;
#[cfg(feature = "cuda")]
pub use prefault::default_prefault_threads;
#[cfg(feature = "cuda")]
pub(crate) use prefault::{prefault, spare_bytes};
pub use turn::DeviceHold;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use turn::PriorityTurn;
#[cfg(feature = "cuda")]
pub(crate) use turn::TurnGuard;
pub(crate) use turn::{turn_priority, with_turn_priority};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use twiddles::stage_twiddles;
