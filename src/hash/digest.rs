//! [`Digest`]: one hash output as backends store it, whatever the hash function.
//!
//! Algebraic hashes (RPO, RPX, Poseidon2) output four field elements; BLAKE3 outputs bytes. A
//! backend keeps every digest in the same 32 bytes, four little-endian `u64` words, so leaves,
//! Merkle levels and downloads are one code path for every hash function. Conversions to and
//! from each hasher's own digest type live here.

use miden_crypto::{hash::blake::Blake3Digest, Felt, Word};
use winter_math::StarkField;

/// Bytes of a [`Digest`].
pub const DIGEST_BYTES: usize = 32;

// DIGEST
// ================================================================================================

/// One digest as backends produce it: 32 bytes held as four little-endian `u64` words.
///
/// - Algebraic hashes: the four field elements' Montgomery words (the memory of `[Felt; 4]`),
///   always canonical (each word below the modulus), so two digests are equal exactly when their
///   field elements are.
/// - BLAKE3-256: the 32 output bytes. BLAKE3-192: the first 24 output bytes, then 8 zero bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Digest([u64; 4]);

impl Digest {
    /// The all-zero digest (Winterfell's unused node 0).
    pub const ZERO: Self = Self([0; 4]);

    /// A digest from its raw words, as a device writes them.
    pub const fn from_words(words: [u64; 4]) -> Self {
        Self(words)
    }

    /// The raw words.
    pub const fn words(&self) -> [u64; 4] {
        self.0
    }

    /// A digest of four field elements, stored in canonical Montgomery form.
    pub fn from_felts(elements: [Felt; 4]) -> Self {
        Self(elements.map(|x| canonical_mont(x.inner())))
    }

    /// The four field elements of an algebraic digest.
    pub fn to_felts(&self) -> [Felt; 4] {
        self.0.map(Felt::from_mont)
    }

    /// A digest of at most 32 bytes (a BLAKE3 output), zero-filled to 32.
    ///
    /// # Panics
    /// If `bytes` is longer than [`DIGEST_BYTES`]: every hash output the crate handles fits.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut padded = [0u8; DIGEST_BYTES];
        padded[..bytes.len()].copy_from_slice(bytes);
        Self(core::array::from_fn(|i| {
            u64::from_le_bytes(padded[8 * i..8 * i + 8].try_into().expect("8 bytes"))
        }))
    }

    /// The 32 bytes of the digest.
    pub fn to_bytes(&self) -> [u8; DIGEST_BYTES] {
        let mut bytes = [0u8; DIGEST_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// The bytes of consecutive digests (host memory handed to a device).
    pub fn slice_as_bytes(digests: &[Digest]) -> &[u8] {
        // SAFETY: `Digest` is `repr(transparent)` over `[u64; 4]`, which has no padding.
        unsafe {
            core::slice::from_raw_parts(digests.as_ptr().cast(), DIGEST_BYTES * digests.len())
        }
    }

    /// The words of consecutive digests, mutably (host memory a device's results land in).
    pub fn slice_as_words_mut(digests: &mut [Digest]) -> &mut [u64] {
        // SAFETY: `Digest` is `repr(transparent)` over `[u64; 4]`; every `u64` is a valid word.
        unsafe { core::slice::from_raw_parts_mut(digests.as_mut_ptr().cast(), 4 * digests.len()) }
    }
}

/// The canonical Montgomery word (below the modulus) of a possibly non-canonical one.
pub(crate) fn canonical_mont(word: u64) -> u64 {
    if word >= Felt::MODULUS {
        word - Felt::MODULUS
    } else {
        word
    }
}

// CONVERSIONS
// ================================================================================================

impl From<[Felt; 4]> for Digest {
    fn from(elements: [Felt; 4]) -> Self {
        Self::from_felts(elements)
    }
}

impl From<Digest> for [Felt; 4] {
    fn from(digest: Digest) -> Self {
        digest.to_felts()
    }
}

impl From<Word> for Digest {
    fn from(word: Word) -> Self {
        Self::from_felts(word.into())
    }
}

impl From<Digest> for Word {
    fn from(digest: Digest) -> Self {
        Word::new(digest.to_felts())
    }
}

impl<const N: usize> From<Blake3Digest<N>> for Digest {
    fn from(digest: Blake3Digest<N>) -> Self {
        Self::from_bytes(&digest)
    }
}

impl<const N: usize> From<Digest> for Blake3Digest<N> {
    fn from(digest: Digest) -> Self {
        let bytes: [u8; N] = digest.to_bytes()[..N].try_into().expect("N <= 32");
        bytes.into()
    }
}
