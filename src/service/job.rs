//! The job format, version 1: one JSON object per message on the job stream.
//!
//! ```json
//! {
//!   "version": 1,
//!   "id": "<1 to 64 characters of [0-9A-Za-z_-]>",
//!   "program": { "masm": "<source>" }          (or { "masp": "<base64 of a .masp package>" }),
//!   "inputs": { "operand_stack": ["3"], ... }  (optional: an inputs file of `miden-gpu prove`),
//!   "hasher": "rpo",                           (rpo, rpx, poseidon2, blake3-192, blake3-256)
//!   "security": 96,                            (96 or 128)
//!   "max_cycles": 65536                        (optional; capped by the worker's limit)
//! }
//! ```
//!
//! A `.masm` program is assembled against the Miden core library. The message's `Nats-Msg-Id`
//! header is the job id too: JetStream drops a duplicate published within its window, and a
//! worker files the error result of a job it cannot parse under it.

use miden_air::{HashFunction, ProvingOptions};
use miden_processor::ExecutionOptions;
use serde::{Deserialize, Serialize};

use super::{
    error::ServiceError,
    result::{FailureKind, JobFailure},
    wire::{base64_bytes, check_job_id, hash_name, new_job_id, FORMAT_VERSION},
};
use crate::miden::check_proving_options;

/// The cycles an execution is expected to take (`miden prove`'s default): the trace length it
/// starts with.
const EXPECTED_CYCLES: u32 = 64;

// JOB
// ================================================================================================

/// One proof to make: a program, its inputs and the proof's hash function and security level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// The job's id, the key of its result.
    pub id: String,
    /// The program to execute and prove.
    pub program: JobProgram,
    /// The inputs, as the JSON object of an inputs file (`operand_stack`, `advice_stack`,
    /// `advice_map`, `merkle_store`); none for empty inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<serde_json::Value>,
    /// The proof's hash function.
    #[serde(with = "hash_name")]
    pub hasher: HashFunction,
    /// The proof's security level in bits: 96 or 128.
    pub security: u32,
    /// The most cycles the execution may take (at most the worker's own limit); none for the
    /// worker's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cycles: Option<u32>,
}

/// The program of a [`Job`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobProgram {
    /// Miden assembly source of an executable module.
    Masm(String),
    /// The bytes of a `.masp` package holding a program (base64 in JSON).
    Masp(#[serde(with = "base64_bytes")] Vec<u8>),
}

/// A job a worker could not read: the error result to file, and the id it names if any.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedJob {
    /// The job's id, where the message was JSON with a valid `id`.
    pub id: Option<String>,
    /// Why it was rejected.
    pub failure: JobFailure,
}

impl Job {
    /// A job with a new id ([`new_job_id`]), empty inputs and the worker's cycle limit.
    pub fn new(program: JobProgram, hasher: HashFunction, security: u32) -> Self {
        let id = new_job_id();
        Self {
            version: FORMAT_VERSION,
            id,
            program,
            inputs: None,
            hasher,
            security,
            max_cycles: None,
        }
    }

    /// The job as the bytes of a message.
    pub fn encode(&self) -> Result<Vec<u8>, ServiceError> {
        serde_json::to_vec(self).map_err(ServiceError::Encode)
    }

    /// Reads a job from the bytes of a message of at most `max_bytes`.
    ///
    /// # Errors
    /// A [`RejectedJob`] for a message that is too large, not JSON, of another format version,
    /// or not a valid job.
    pub fn decode(bytes: &[u8], max_bytes: usize) -> Result<Self, RejectedJob> {
        let reject = |id: Option<String>, kind, message: String| RejectedJob {
            id,
            failure: JobFailure::new(kind, message),
        };
        if bytes.len() > max_bytes {
            let message =
                format!("the job's {} bytes exceed the worker's limit of {max_bytes}", bytes.len());
            return Err(reject(None, FailureKind::TooLarge, message));
        }

        /// The fields every version has.
        #[derive(Deserialize)]
        struct Envelope {
            version: u32,
            id: String,
        }
        let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| {
            reject(
                None,
                FailureKind::Malformed,
                format!("not a job (JSON with `version`, `id`): {e}"),
            )
        })?;
        check_job_id(&envelope.id)
            .map_err(|message| reject(None, FailureKind::Malformed, message))?;
        let id = Some(envelope.id);
        if envelope.version != FORMAT_VERSION {
            let message = format!(
                "job format version {} is not supported; this worker reads version {FORMAT_VERSION}",
                envelope.version
            );
            return Err(reject(id, FailureKind::UnsupportedVersion, message));
        }
        serde_json::from_slice(bytes)
            .map_err(|e| reject(id, FailureKind::Malformed, format!("invalid job: {e}")))
    }

    /// The proving options of the job's hash function, security level and cycle limit (the
    /// smaller of the job's and `max_cycles`); debug instructions are off.
    ///
    /// # Errors
    /// A [`FailureKind::Options`] failure for a security level other than 96 or 128 and for a
    /// pair `miden_verifier` refuses.
    pub fn proving_options(&self, max_cycles: u32) -> Result<ProvingOptions, JobFailure> {
        let failure = |message: String| JobFailure::new(FailureKind::Options, message);
        let options = match self.security {
            96 => ProvingOptions::with_96_bit_security(self.hasher),
            128 => ProvingOptions::with_128_bit_security(self.hasher),
            bits => return Err(failure(format!("security {bits}: expected 96 or 128"))),
        };
        check_proving_options(&options).map_err(|e| failure(e.to_string()))?;
        let cycles = self.max_cycles.map_or(max_cycles, |cycles| cycles.min(max_cycles));
        let execution = ExecutionOptions::new(Some(cycles), EXPECTED_CYCLES, false, false)
            .map_err(|e| failure(format!("max_cycles {cycles}: {e}")))?;
        Ok(options.with_execution_options(execution))
    }
}
