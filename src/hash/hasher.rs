//! [`GpuHasher`]: the Winterfell hasher types whose commitments a backend can compute.

use miden_crypto::utils::Deserializable;
use miden_crypto::{
    hash::{
        blake::{Blake3Digest, Blake3_192, Blake3_256},
        poseidon2::Poseidon2,
        rpo::Rpo256,
        rpx::Rpx256,
    },
    Felt, Word,
};
use winter_crypto::{hashers, Digest as _, ElementHasher};

use super::{Digest, HashFunction};

// GPU HASHER
// ================================================================================================

/// A Winterfell hasher whose row hashing and Merkle tree a backend can compute.
///
/// Implemented for miden-crypto's `Rpo256`, `Rpx256`, `Poseidon2`, `Blake3_192` and
/// `Blake3_256`, and for winter-crypto's `Blake3_192<Felt>` and `Blake3_256<Felt>`. A prover with
/// a `HashFn` that does not implement this trait does not type-check with [`crate::GpuProver`].
pub trait GpuHasher: ElementHasher<BaseField = Felt> + Send + Sync + 'static {
    /// The function backends compute for this hasher.
    const FUNCTION: HashFunction;

    /// This hasher's digest of a backend's [`Digest`].
    fn from_digest(digest: Digest) -> Self::Digest;

    /// The backend form of one of this hasher's digests.
    fn to_digest(digest: &Self::Digest) -> Digest;
}

/// Implements [`GpuHasher`] for hashers whose digest converts to and from [`Digest`] directly.
macro_rules! gpu_hasher {
    ($hasher:ty, $function:ident, $digest:ty) => {
        impl GpuHasher for $hasher {
            const FUNCTION: HashFunction = HashFunction::$function;

            fn from_digest(digest: Digest) -> Self::Digest {
                <$digest>::from(digest)
            }

            fn to_digest(digest: &Self::Digest) -> Digest {
                Digest::from(*digest)
            }
        }
    };
}

gpu_hasher!(Rpo256, Rpo256, Word);
gpu_hasher!(Rpx256, Rpx256, Word);
gpu_hasher!(Poseidon2, Poseidon2, Word);
gpu_hasher!(Blake3_192, Blake3_192, Blake3Digest<24>);
gpu_hasher!(Blake3_256, Blake3_256, Blake3Digest<32>);

/// Implements [`GpuHasher`] for winter-crypto's byte-digest hashers, whose digest type is not
/// nameable outside winter-crypto: it is built from its serialized bytes.
macro_rules! gpu_hasher_bytes {
    ($hasher:ty, $function:ident) => {
        impl GpuHasher for $hasher {
            const FUNCTION: HashFunction = HashFunction::$function;

            fn from_digest(digest: Digest) -> Self::Digest {
                let bytes = digest.to_bytes();
                Self::Digest::read_from_bytes(&bytes[..HashFunction::$function.digest_bytes()])
                    .expect("a byte digest deserializes from exactly its length in bytes")
            }

            fn to_digest(digest: &Self::Digest) -> Digest {
                Digest::from_bytes(&digest.as_bytes()[..HashFunction::$function.digest_bytes()])
            }
        }
    };
}

gpu_hasher_bytes!(hashers::Blake3_192<Felt>, Blake3_192);
gpu_hasher_bytes!(hashers::Blake3_256<Felt>, Blake3_256);
