//! # miden-gpu
//!
//! GPU trace and constraint commitments for [Winterfell](https://github.com/facebook/winterfell)
//! STARK provers and the Miden VM.
//!
//! Most of a Winterfell proof goes into two steps: the **trace commitment** and the
//! **constraint commitment**: a Goldilocks coset low-degree extension (LDE) of many columns,
//! then RPO256/RPX256 hashing of every LDE row and a Merkle tree over the row hashes. This crate
//! does those steps on a GPU and plugs into `winter-prover` as a drop-in `TraceLde` /
//! `ConstraintCommitment`, producing byte-identical proofs.
//!
//! ## Architecture
//! Imports run one way, from the foundations up:
//! - Foundations: errors ([`GpuError`]), the [`Backend`] names, hashing ([`HashFunction`]), and
//!   host interpolation and result memory shared by the backends ([`HostOptions`]).
//! - [`GpuCommitter`]: the one interface every backend implements, over base
//!   field columns: evaluations in, polynomials + LDE rows + leaves + Merkle nodes out.
//! - Backends, each with its options as a value: [`CpuCommitter`] ([`CpuOptions`]; rayon, the
//!   oracle), `wgpu::WgpuCommitter` (`WgpuOptions`; WGSL kernels, feature `wgpu`),
//!   `cuda::CudaCommitter` (`CudaOptions`; CUDA kernels through NVRTC, feature `cuda`).
//! - Selection: [`BackendOptions`] names the backend and holds every
//!   backend's options; [`BackendOptions::create`] makes the committer, and `Auto` decides
//!   before opening any device.
//! - Constraints ([`constraints`]): any Winterfell AIR's transition constraints captured as an
//!   expression graph, its CPU interpreter and the composition from it, equal to
//!   `DefaultConstraintEvaluator`'s; the base of device constraint evaluation (not wired yet).
//! - Prover integration ([`GpuProver`], [`ProverOptions`], [`GpuTraceLde`],
//!   [`GpuConstraintCommitment`]): knows nothing of any backend's internals.
//!
//! ## Configuration
//! Every option is a value. The library reads the environment only in the `from_env`
//! constructors ([`BackendOptions::from_env`], [`ProverOptions::from_env`] and those of the GPU
//! backends' options), which the command line and the examples call.
//!
//! ## Features
//! `wgpu` and `concurrent` (default), `cuda`, `miden` (the Miden VM prover and the `miden-gpu`
//! command line) and `tools` (default; stage timing, progress and fault-injection tooling over
//! `tracing-subscriber`, for the command line, examples, benchmarks and tests).

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod backend;
mod committer;
pub mod constraints;
mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
mod hash;
mod health;
mod host;
#[cfg(feature = "miden")]
pub mod miden;
pub mod pool;
mod prover;
mod select;
#[cfg(feature = "service")]
pub mod service;
#[cfg(feature = "tools")]
mod tools;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use backend::Backend;
pub use committer::{
    composition, deep, fri, grind, CommitRequest, Commitment, GpuCommitter, Keep, KeptRows,
    KeptTree, LdeRows, PolyInput, ResidentPolys, RowHashing, StageTimes,
};
pub use cpu::{CpuCommitter, CpuOptions};
pub use error::{
    DeepError, DeviceFailure, DeviceStatus, EvaluationError, FriError, GpuError, GrindError,
    LossCause, Result,
};
pub use hash::{Digest, GpuHasher, HashFunction, RescueLanes, DIGEST_BYTES};
#[cfg(feature = "tools")]
pub use health::faults;
#[cfg(feature = "fault-injection")]
pub use health::inject;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub use health::{DEFAULT_WAIT_TIMEOUT, WAIT_TIMEOUT_ENV};
pub use host::{DeviceHold, HostBuffer, HostOptions};
pub use miden_crypto::Felt;
pub use pool::{PoolOptions, ProverPool};
pub use prover::{
    commit_composition, commit_trace_segment, compare_proofs, spans, ConstraintPlacement,
    FallbackPolicy, FriPlacement, GpuConstraintCommitment, GpuProver, GpuTraceLde, ProofMatch,
    ProverOptions, SegmentCommitment, SegmentLde,
};
pub use select::{BackendOptions, BACKEND_ENV};
#[cfg(feature = "tools")]
pub use tools::{alloc, progress, timing};
