//! A prover fleet on NATS JetStream (feature `service`): workers on any number of GPU hosts
//! prove the jobs clients put on one queue, and file each result once.
//!
//! - **Jobs** ([`Job`], a versioned JSON format) go to a work-queue stream: each job is
//!   delivered to one worker at a time, through the workers' shared durable pull consumer
//!   ([`Fleet`]).
//! - **Workers** ([`Worker`]) pull a job whenever a worker of their [`crate::ProverPool`] is
//!   free, report progress while proving (in-progress acknowledgements), and acknowledge a job
//!   once its result is written. A worker that ends without acknowledging (killed, its host
//!   lost) loses nothing: the server delivers the job again once its delivery's ack wait has
//!   passed ([`FleetOptions::ack_wait`], then [`FleetOptions::backoff`]). A job delivered
//!   again is proved alone, and a job whose solo attempts each ended with their worker
//!   ([`WorkerOptions::solo_attempts`]) is abandoned: a job that crashes its worker takes no
//!   other job down with it.
//! - **Results** ([`JobResult`]: the proof and stack outputs, or a typed [`JobFailure`]) go to
//!   a key-value bucket under the job's id, created only if absent: a job never has two
//!   results, and a redelivered job that has one is acknowledged without a proof. The server
//!   deletes a result after the fleet's result TTL ([`FleetOptions::result_ttl`], 7 days).
//! - **Security**: the client's credentials (a `.creds` file's, an NKey, a user and password,
//!   a token) and TLS ([`FleetSecurity`], in [`FleetOptions::security`]); submitters named
//!   ([`FleetOptions::submitter`]) so that the server's permissions keep each to its own jobs
//!   and results; streams replicated over a cluster ([`FleetOptions::replicas`]), several
//!   servers listed for failover.
//! - **Operations**: [`Metrics`] and [`MetricsServer`] (`/metrics` for Prometheus, `/health`;
//!   the GPUs' utilization and temperature through NVML where present: [`GpuMonitor`]), and a
//!   `service.job` tracing span per job (program hash, hash function), exported to an
//!   OpenTelemetry collector with feature `otlp` (`OtlpExport`).
//!
//! The `miden-gpu` command line's `serve`, `submit` and `fetch` are built on this module.

mod error;
mod fleet;
mod gpus;
mod job;
mod metrics;
#[cfg(feature = "otlp")]
mod otlp;
mod result;
mod security;
mod streams;
mod wire;
mod worker;

pub use error::{RefusalCause, ServiceError};
pub use fleet::{
    Fleet, FleetOptions, QueueDepth, ATTEMPTS_TTL, DEFAULT_BACKOFF, DEFAULT_RESULT_TTL,
};
pub use gpus::{GpuMonitor, GpuSample};
pub use job::{Job, JobProgram, RejectedJob};
pub use metrics::{Metrics, MetricsServer};
#[cfg(feature = "otlp")]
pub use otlp::{OtlpExport, OTLP_ENDPOINT_ENV};
pub use result::{Attempt, AttemptEnd, FailureKind, JobFailure, JobResult, Outcome, ProvedJob};
pub use security::{ClientCertificate, FleetAuth, FleetSecurity, FleetTls, Secret};
pub use wire::{check_job_id, check_submitter, new_job_id, FORMAT_VERSION, MAX_ID_BYTES};
pub use worker::{
    Prepare, PreparedJob, Worker, WorkerOptions, DEFAULT_MAX_JOB_BYTES, DEFAULT_SOLO_ATTEMPTS,
};
