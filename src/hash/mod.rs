//! The row hashes a backend computes: RPO256 and RPX256 from miden-crypto.
//!
//! Backends see only [`HashFunction`]; the prover integration is generic over [`GpuHasher`],
//! which ties a Winterfell hasher type to the function a backend must compute for it.

mod digest;
mod hasher;

use core::{fmt, str::FromStr};

pub use digest::{Digest, DIGEST_BYTES};
pub use hasher::GpuHasher;
use miden_crypto::{
    hash::{rpo::Rpo256, rpx::Rpx256},
    Felt, Word,
};

use crate::error::GpuError;

// HASH FUNCTION
// ================================================================================================

/// The hash functions a backend implements for row hashing and Merkle trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashFunction {
    /// Rescue Prime Optimized, 7 rounds (`miden_crypto::hash::rpo::Rpo256`).
    Rpo256,
    /// Rescue Prime eXtension (`miden_crypto::hash::rpx::Rpx256`).
    Rpx256,
}

impl HashFunction {
    /// Hashes base field elements as `hash_elements` does (the oracle for every backend).
    pub fn hash_elements(self, elements: &[Felt]) -> Digest {
        match self {
            Self::Rpo256 => Rpo256::hash_elements(elements).into(),
            Self::Rpx256 => Rpx256::hash_elements(elements).into(),
        }
    }

    /// Merges two digests into their parent, as a Merkle tree node.
    pub fn merge(self, pair: &[Digest; 2]) -> Digest {
        let words = [Word::from(pair[0]), Word::from(pair[1])];
        match self {
            Self::Rpo256 => Rpo256::merge(&words).into(),
            Self::Rpx256 => Rpx256::merge(&words).into(),
        }
    }
}

impl fmt::Display for HashFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rpo256 => "rpo",
            Self::Rpx256 => "rpx",
        })
    }
}

impl FromStr for HashFunction {
    type Err = GpuError;

    /// Parses `rpo`/`rpo256` or `rpx`/`rpx256` (any case); any other name is unsupported.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "rpo" | "rpo256" => Ok(Self::Rpo256),
            "rpx" | "rpx256" => Ok(Self::Rpx256),
            _ => Err(GpuError::UnsupportedHasher(s.to_string())),
        }
    }
}
