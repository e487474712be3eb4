//! The row hashes a backend computes: RPO256, RPX256 and Poseidon2 from miden-crypto, and
//! BLAKE3 with 192- and 256-bit digests over field elements.
//!
//! Backends see only [`HashFunction`]; the prover integration is generic over [`GpuHasher`],
//! which ties a Winterfell hasher type to the function a backend must compute for it. Every
//! backend stores digests as [`Digest`].

#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod blake3_tables;
mod digest;
mod hasher;

use core::{fmt, str::FromStr};

#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) use digest::canonical_mont;
pub use digest::{Digest, DIGEST_BYTES};
pub use hasher::GpuHasher;
use miden_crypto::{
    hash::{
        blake::{Blake3_192, Blake3_256},
        poseidon2::Poseidon2,
        rpo::Rpo256,
        rpx::Rpx256,
    },
    Felt,
};
use winter_crypto::Hasher;

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
    /// Poseidon2 over Goldilocks, width 12 (`miden_crypto::hash::poseidon2::Poseidon2`).
    Poseidon2,
    /// BLAKE3 of the elements' canonical little-endian bytes, truncated to 24 bytes
    /// (`Blake3_192` of miden-crypto and winter-crypto).
    Blake3_192,
    /// BLAKE3 of the elements' canonical little-endian bytes (`Blake3_256` of miden-crypto and
    /// winter-crypto).
    Blake3_256,
}

/// Runs `$body` with `$h` naming the miden-crypto hasher of `$function`.
macro_rules! with_hasher {
    ($function:expr, $h:ident => $body:expr) => {
        match $function {
            HashFunction::Rpo256 => {
                type $h = Rpo256;
                $body
            },
            HashFunction::Rpx256 => {
                type $h = Rpx256;
                $body
            },
            HashFunction::Poseidon2 => {
                type $h = Poseidon2;
                $body
            },
            HashFunction::Blake3_192 => {
                type $h = Blake3_192;
                $body
            },
            HashFunction::Blake3_256 => {
                type $h = Blake3_256;
                $body
            },
        }
    };
}

impl HashFunction {
    /// Every hash function, in a fixed order.
    pub const ALL: [HashFunction; 5] = [
        HashFunction::Rpo256,
        HashFunction::Rpx256,
        HashFunction::Poseidon2,
        HashFunction::Blake3_192,
        HashFunction::Blake3_256,
    ];

    /// Hashes base field elements as `hash_elements` does (the oracle for every backend).
    pub fn hash_elements(self, elements: &[Felt]) -> Digest {
        with_hasher!(self, H => H::to_digest(&H::hash_elements(elements)))
    }

    /// Merges two digests into their parent, as a Merkle tree node.
    pub fn merge(self, pair: &[Digest; 2]) -> Digest {
        with_hasher!(self, H => {
            H::to_digest(&H::merge(&[H::from_digest(pair[0]), H::from_digest(pair[1])]))
        })
    }

    /// Hashes several digests into one, as `Hasher::merge_many` does (the leaf of a partitioned
    /// row): `hash_elements` of their elements for the algebraic hashes, BLAKE3 of their
    /// concatenated bytes ([`Self::digest_bytes`] each) for BLAKE3.
    pub fn merge_many(self, digests: &[Digest]) -> Digest {
        with_hasher!(self, H => {
            let digests: Vec<_> = digests.iter().map(|&d| H::from_digest(d)).collect();
            H::to_digest(&H::merge_many(&digests))
        })
    }

    /// The name as an identifier (`rpo`, `rpx`, `poseidon2`, `blake3_192`, `blake3_256`), for
    /// kernel and module names.
    pub fn ident(self) -> &'static str {
        match self {
            Self::Rpo256 => "rpo",
            Self::Rpx256 => "rpx",
            Self::Poseidon2 => "poseidon2",
            Self::Blake3_192 => "blake3_192",
            Self::Blake3_256 => "blake3_256",
        }
    }

    /// Whether the digest is four field elements (RPO, RPX, Poseidon2) rather than bytes.
    pub fn is_algebraic(self) -> bool {
        matches!(self, Self::Rpo256 | Self::Rpx256 | Self::Poseidon2)
    }

    /// Meaningful bytes of a digest: 24 for BLAKE3-192, 32 otherwise.
    pub fn digest_bytes(self) -> usize {
        match self {
            Self::Blake3_192 => 24,
            _ => DIGEST_BYTES,
        }
    }
}

impl fmt::Display for HashFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rpo256 => "rpo",
            Self::Rpx256 => "rpx",
            Self::Poseidon2 => "poseidon2",
            Self::Blake3_192 => "blake3-192",
            Self::Blake3_256 => "blake3-256",
        })
    }
}

impl FromStr for HashFunction {
    type Err = GpuError;

    /// Parses `rpo`/`rpo256`, `rpx`/`rpx256`, `poseidon2`, `blake3-192`/`blake3_192` or
    /// `blake3-256`/`blake3_256` (any case); any other name is unsupported.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "rpo" | "rpo256" => Ok(Self::Rpo256),
            "rpx" | "rpx256" => Ok(Self::Rpx256),
            "poseidon2" => Ok(Self::Poseidon2),
            "blake3-192" => Ok(Self::Blake3_192),
            "blake3-256" => Ok(Self::Blake3_256),
            _ => Err(GpuError::UnsupportedHasher(s.to_string())),
        }
    }
}

// RESCUE LANES
// ================================================================================================

/// How many GPU threads share one RPO/RPX permutation in whole-row hashing and Merkle trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RescueLanes {
    /// Four threads (a quad of a warp or subgroup), each holding a triple of the state.
    Quad,
    /// The whole state in one thread.
    Single,
}

impl RescueLanes {
    /// Threads per permutation: 4 or 1.
    pub const fn count(self) -> u32 {
        match self {
            Self::Quad => 4,
            Self::Single => 1,
        }
    }
}
