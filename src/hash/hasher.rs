//! [`GpuHasher`]: the Winterfell hasher types whose commitments a backend can compute.

use miden_crypto::{
    hash::{rpo::Rpo256, rpx::Rpx256},
    Felt, Word,
};
use winter_crypto::ElementHasher;

use super::{Digest, HashFunction};

// GPU HASHER
// ================================================================================================

/// A Winterfell hasher whose row hashing and Merkle tree a backend can compute.
///
/// A prover with a `HashFn` that does not implement this trait does not type-check with
/// [`crate::GpuProver`].
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
