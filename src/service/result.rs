//! The result format, version 1: one JSON object per job in the results bucket, under the job's
//! id, written once.
//!
//! ```json
//! { "version": 1, "id": "<job id>", "worker": "<worker name>",
//!   "proved": { "program_hash": "<64 hex digits>", "stack_outputs": ["16", "3", ...],
//!               "proof": "<base64 of ExecutionProof::to_bytes>", "backend": "cuda",
//!               "delivery": 1, "queued_ms": 12.5, "proving_ms": 240.1 } }
//! { "version": 1, "id": "<job id>", "worker": "<worker name>",
//!   "failed": { "kind": "execution", "message": "..." } }
//! { "version": 1, "id": "<job id>", "worker": "<worker name>",
//!   "failed": { "kind": "abandoned", "message": "...",
//!               "attempts": [{ "delivery": 2, "worker": "<worker name>",
//!                              "ended": "worker_lost" }] } }
//! ```
//!
//! `attempts` is there only for an abandoned job: the solo attempts at it (see
//! [`super::Worker`]) and how each ended.

use std::fmt;

use miden_processor::StackOutputs;
use serde::{Deserialize, Serialize};

use super::{
    error::ServiceError,
    wire::{base64_bytes, FORMAT_VERSION},
};
use crate::{miden::ProveError, pool::PoolError};

// RESULT
// ================================================================================================

/// The result of one job: its proof or its error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    /// The format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// The job's id.
    pub id: String,
    /// The name of the worker that wrote it.
    pub worker: String,
    /// The proof or the error.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A job's proof or its error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The job was proved; the proof passed the prover's self-check.
    Proved(ProvedJob),
    /// The job failed; it will not be tried again.
    Failed(JobFailure),
}

/// A proved job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvedJob {
    /// The program's MAST root, 64 hex digits (as `miden-gpu prove` prints it).
    pub program_hash: String,
    /// The 16 stack outputs as decimal strings, the top first (an outputs file's `stack`).
    pub stack_outputs: Vec<String>,
    /// The proof: `ExecutionProof::to_bytes` (base64 in JSON).
    #[serde(with = "base64_bytes")]
    pub proof: Vec<u8>,
    /// The backend of the worker's pool: `cpu`, `wgpu` or `cuda`.
    pub backend: String,
    /// Which delivery of the job's message this was (1 for the first).
    pub delivery: u64,
    /// Milliseconds from the job's publication to the start of its proof.
    pub queued_ms: f64,
    /// Milliseconds of execution, proof and self-check.
    pub proving_ms: f64,
}

/// Why a job has no proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFailure {
    /// The kind of failure.
    pub kind: FailureKind,
    /// What went wrong, for people.
    pub message: String,
    /// The solo attempts at an [`FailureKind::Abandoned`] job, in order, and how each ended;
    /// empty for other failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
}

/// One solo attempt at a job: a redelivery proved by a worker that held no other job (see
/// [`super::Worker`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Which delivery of the job's message it was (2 or more).
    pub delivery: u64,
    /// The worker that made it.
    pub worker: String,
    /// How it ended without a result.
    pub ended: AttemptEnd,
}

/// How a solo [`Attempt`] ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptEnd {
    /// The worker ended (killed, out of memory, its host lost) or lost the server before it
    /// wrote a result: what the job itself may have caused. Counted towards abandoning it.
    WorkerLost,
    /// The worker gave the job back, for this reason (its result could not be written): not
    /// the job's fault, and not counted.
    GivenBack(String),
}

/// The kinds of [`JobFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The message is larger than the worker's job size limit.
    TooLarge,
    /// The message is not a job of its format version.
    Malformed,
    /// The message is a job of a format version the worker does not read.
    UnsupportedVersion,
    /// The hash function, security level or cycle limit is refused.
    Options,
    /// The program does not assemble, or the package holds no program.
    Program,
    /// The inputs are invalid.
    Inputs,
    /// The program failed to execute (a cycle limit included).
    Execution,
    /// The proof could not be made (a prover or backend error, a failed self-check).
    Proving,
    /// The job got no result in as many solo attempts as its workers allow, each worker ending
    /// (or losing the server) while proving it alone, or in as many deliveries as the fleet
    /// allows; [`JobFailure::attempts`] says how each attempt ended.
    Abandoned,
    /// The proof is larger than the largest message the server takes.
    ResultTooLarge,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = serde_json::to_value(self).ok();
        f.write_str(name.as_ref().and_then(|name| name.as_str()).unwrap_or("failure"))
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delivery {} on worker {}: ", self.delivery, self.worker)?;
        match &self.ended {
            AttemptEnd::WorkerLost => f.write_str("the worker ended or lost the server"),
            AttemptEnd::GivenBack(reason) => write!(f, "given back ({reason})"),
        }
    }
}

impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl JobFailure {
    /// A failure of `kind` with no attempts.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), attempts: Vec::new() }
    }
}

impl JobResult {
    /// The result of job `id`, written by `worker`.
    pub fn new(id: impl Into<String>, worker: impl Into<String>, outcome: Outcome) -> Self {
        Self { version: FORMAT_VERSION, id: id.into(), worker: worker.into(), outcome }
    }

    /// The result as the bytes of a value in the results bucket.
    pub fn encode(&self) -> Result<Vec<u8>, ServiceError> {
        serde_json::to_vec(self).map_err(ServiceError::Encode)
    }

    /// Reads a result from the results bucket's value for `id`.
    ///
    /// # Errors
    /// [`ServiceError::MalformedResult`] for a value that is not a result of this format version.
    pub fn decode(id: &str, bytes: &[u8]) -> Result<Self, ServiceError> {
        let malformed =
            |message: String| ServiceError::MalformedResult { id: id.to_string(), message };
        let result: Self = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
        if result.version != FORMAT_VERSION {
            return Err(malformed(format!(
                "result format version {} is not supported; this build reads version {FORMAT_VERSION}",
                result.version
            )));
        }
        if result.id != id {
            return Err(malformed(format!("it names job {}", result.id.escape_default())));
        }
        Ok(result)
    }
}

impl ProvedJob {
    /// The stack outputs as [`StackOutputs`].
    ///
    /// # Errors
    /// The reason for a value that is not a field element, or more than 16 values.
    pub fn stack_outputs(&self) -> Result<StackOutputs, String> {
        let values = self
            .stack_outputs
            .iter()
            .map(|text| text.parse::<u64>().map_err(|e| format!("stack output `{text}`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        StackOutputs::try_from_ints(values).map_err(|e| format!("stack outputs: {e}"))
    }
}

// FAILURES OF PROOFS
// ================================================================================================

impl From<&ProveError> for JobFailure {
    fn from(error: &ProveError) -> Self {
        let kind = match error {
            ProveError::Execution(_) => FailureKind::Execution,
            ProveError::UnacceptableOptions { .. } => FailureKind::Options,
            ProveError::Gpu(_)
            | ProveError::Prover(_)
            | ProveError::SelfCheck { .. }
            | ProveError::NondeterministicExecution => FailureKind::Proving,
        };
        Self::new(kind, error.to_string())
    }
}

impl From<&PoolError> for JobFailure {
    fn from(error: &PoolError) -> Self {
        match error {
            PoolError::Miden(error) => error.into(),
            _ => Self::new(FailureKind::Proving, error.to_string()),
        }
    }
}
