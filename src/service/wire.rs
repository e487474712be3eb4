//! What the job and result formats share: the format version, job ids, and byte strings as
//! base64 in JSON.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of the job and result formats this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The longest job id, in bytes.
pub const MAX_ID_BYTES: usize = 64;

/// A new job id: a NUID (22 characters of `[0-9A-Za-z]`, unique without coordination).
pub fn new_job_id() -> String {
    nuid::next().to_string()
}

/// Checks that `id` can name a job and its result: 1 to [`MAX_ID_BYTES`] characters of
/// `[0-9A-Za-z_-]` (a key of the results bucket and a `Nats-Msg-Id`).
pub fn check_job_id(id: &str) -> Result<(), String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.is_empty() || id.len() > MAX_ID_BYTES || !id.chars().all(valid) {
        return Err(format!(
            "job id `{}` must be 1 to {MAX_ID_BYTES} characters of [0-9A-Za-z_-]",
            id.escape_default()
        ));
    }
    Ok(())
}

/// Checks that `name` can name a submitter ([`super::FleetOptions::submitter`]): 1 to
/// [`MAX_ID_BYTES`] characters of `[0-9A-Za-z_-]` (a token of a subject and of a key).
pub fn check_submitter(name: &str) -> Result<(), String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > MAX_ID_BYTES || !name.chars().all(valid) {
        return Err(format!(
            "submitter `{}` must be 1 to {MAX_ID_BYTES} characters of [0-9A-Za-z_-]",
            name.escape_default()
        ));
    }
    Ok(())
}

/// `#[serde(with = "base64_bytes")]`: bytes as a standard base64 string (with padding).
pub(crate) mod base64_bytes {
    use base64::{engine::general_purpose::STANDARD, Engine};

    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        STANDARD.encode(bytes).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "hash_name")]`: a Miden hash function by its command-line name (`rpo`, `rpx`,
/// `poseidon2`, `blake3-192`, `blake3-256`).
pub(crate) mod hash_name {
    use miden_air::HashFunction;

    use super::*;
    use crate::miden::gpu_hash_function;

    pub fn serialize<S: Serializer>(hash: &HashFunction, serializer: S) -> Result<S::Ok, S::Error> {
        gpu_hash_function(*hash).to_string().serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<HashFunction, D::Error> {
        let name = String::deserialize(deserializer)?;
        HashFunction::try_from(name.as_str()).map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown hash function `{}`; expected rpo, rpx, poseidon2, blake3-192 or \
                 blake3-256",
                name.escape_default()
            ))
        })
    }
}
