//! Decoding untrusted bytes (proof files, `.masp` packages, `.masl` libraries) without a panic
//! or an abort.
//!
//! - **Panics**: Winterfell asserts (rather than returns an error) on some malformed proof
//!   headers (a blowup factor that is not a power of two, a trace length below 8, ...);
//!   [`contain_panic`] turns a panic into an error message.
//! - **Allocations**: the decoders reserve memory for the lengths a file declares before they
//!   read the elements (`Vec::with_capacity(len)`), and a failed allocation aborts the process,
//!   which no panic handler can catch. [`decode`] reads through a [`BoundedReader`], which
//!   refuses a declared length the remaining bytes cannot hold, so every reservation is bounded
//!   by the file's size (itself capped by [`crate::data::MAX_FILE_BYTES`]).
//! - **Deferred parsing**: a proof's Merkle openings stay bytes until `miden_verifier` parses
//!   them with a reader of its own; [`check_openings`] parses each one through a
//!   [`BoundedReader`] first, so the verifier meets only lengths that passed the same bound.

use std::panic::{self, AssertUnwindSafe};

use miden_air::HashFunction;
use miden_processor::crypto::{Blake3_192, Blake3_256, Poseidon2, Rpo256, Rpx256};
use miden_prover::ExecutionProof;
use winter_crypto::{BatchMerkleProof, Hasher};
use winter_utils::{ByteReader, Deserializable, DeserializationError};

// PANICS
// ================================================================================================

/// Runs `f`; a panic inside is returned as its message, without the panic report on stderr.
pub fn contain_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(hook);
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|message| message.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "malformed input".to_string())
    })
}

// BOUNDED DECODING
// ================================================================================================

/// Decodes a `T` from untrusted `bytes` through a [`BoundedReader`], with panics contained.
pub fn decode<T: Deserializable>(bytes: &[u8]) -> Result<T, String> {
    contain_panic(|| T::read_from(&mut BoundedReader::new(bytes)))?.map_err(|e| e.to_string())
}

/// A [`ByteReader`] over a slice that refuses declared lengths the input cannot hold:
///
/// - a vector of `n` elements ([`ByteReader::read_many`]) needs `n` bytes left, as every element
///   of these formats takes at least one byte;
/// - a `usize` ([`ByteReader::read_usize`]) is at most the input's length: in these formats it
///   is a count or an index of things encoded in the same bytes, and decoders reserve memory for
///   it directly.
pub struct BoundedReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> BoundedReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }
}

impl ByteReader for BoundedReader<'_> {
    fn read_u8(&mut self) -> Result<u8, DeserializationError> {
        let byte = self.peek_u8()?;
        self.position += 1;
        Ok(byte)
    }

    fn peek_u8(&self) -> Result<u8, DeserializationError> {
        self.bytes.get(self.position).copied().ok_or(DeserializationError::UnexpectedEOF)
    }

    fn read_slice(&mut self, len: usize) -> Result<&[u8], DeserializationError> {
        self.check_eor(len)?;
        let slice = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(slice)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DeserializationError> {
        let mut array = [0; N];
        array.copy_from_slice(self.read_slice(N)?);
        Ok(array)
    }

    fn check_eor(&self, num_bytes: usize) -> Result<(), DeserializationError> {
        match num_bytes <= self.remaining() {
            true => Ok(()),
            false => Err(DeserializationError::UnexpectedEOF),
        }
    }

    fn has_more_bytes(&self) -> bool {
        self.remaining() > 0
    }

    fn read_usize(&mut self) -> Result<usize, DeserializationError> {
        let value = read_vint(self)?;
        match usize::try_from(value) {
            Ok(value) if value <= self.bytes.len() => Ok(value),
            _ => Err(DeserializationError::InvalidValue(format!(
                "declared size {value} exceeds the input's {} bytes",
                self.bytes.len()
            ))),
        }
    }

    fn read_many<D: Deserializable>(
        &mut self,
        num_elements: usize,
    ) -> Result<Vec<D>, DeserializationError> {
        if num_elements > self.remaining() {
            return Err(DeserializationError::InvalidValue(format!(
                "declared length {num_elements} exceeds the {} bytes left",
                self.remaining()
            )));
        }
        (0..num_elements).map(|_| D::read_from(self)).collect()
    }
}

/// Winterfell's variable-length `usize` encoding (the default [`ByteReader::read_usize`]): the
/// first byte's trailing zeros give the length, up to 9 bytes.
fn read_vint(reader: &mut BoundedReader<'_>) -> Result<u64, DeserializationError> {
    let length = reader.peek_u8()?.trailing_zeros() as usize + 1;
    if length == 9 {
        reader.read_u8()?;
        return Ok(u64::from_le_bytes(reader.read_array::<8>()?));
    }
    let mut encoded = [0; 8];
    encoded[..length].copy_from_slice(reader.read_slice(length)?);
    Ok(u64::from_le_bytes(encoded) >> length)
}

// PROOF OPENINGS
// ================================================================================================

/// Parses every Merkle opening of `proof` (trace and constraint queries, FRI layers) through a
/// [`BoundedReader`], as the verifier will parse them later with an unbounded one.
pub fn check_openings(proof: &ExecutionProof) -> Result<(), String> {
    match proof.hash_fn() {
        HashFunction::Rpo256 => check_openings_with::<Rpo256>(proof),
        HashFunction::Rpx256 => check_openings_with::<Rpx256>(proof),
        HashFunction::Poseidon2 => check_openings_with::<Poseidon2>(proof),
        HashFunction::Blake3_192 => check_openings_with::<Blake3_192>(proof),
        HashFunction::Blake3_256 => check_openings_with::<Blake3_256>(proof),
    }
    .map_err(|e| format!("malformed Merkle opening: {e}"))
}

/// [`check_openings`] for the hash function `H` of the proof.
///
/// The openings are private fields, so each part is serialized again and walked in its format
/// (winter-air and winter-fri 0.13, pinned exactly): a query set is two byte vectors (values,
/// then the opening), a FRI proof a `u8` layer count, then per layer a `u32`-prefixed value
/// block and a `u32`-prefixed opening.
fn check_openings_with<H: Hasher>(proof: &ExecutionProof) -> Result<(), String> {
    let stark = proof.stark_proof();
    for queries in stark.trace_queries.iter().chain([&stark.constraint_queries]) {
        let bytes = winter_utils::Serializable::to_bytes(queries);
        let mut reader = BoundedReader::new(&bytes);
        let _values: Vec<u8> = Vec::read_from(&mut reader).map_err(|e| e.to_string())?;
        let opening: Vec<u8> = Vec::read_from(&mut reader).map_err(|e| e.to_string())?;
        check_opening::<H>(&opening)?;
    }
    let bytes = winter_utils::Serializable::to_bytes(&stark.fri_proof);
    let mut reader = BoundedReader::new(&bytes);
    let num_layers = reader.read_u8().map_err(|e| e.to_string())?;
    for _ in 0..num_layers {
        let values = reader.read_u32().map_err(|e| e.to_string())? as usize;
        reader.read_slice(values).map_err(|e| e.to_string())?;
        let opening = reader.read_u32().map_err(|e| e.to_string())? as usize;
        check_opening::<H>(reader.read_slice(opening).map_err(|e| e.to_string())?)?;
    }
    Ok(())
}

/// Parses one batch Merkle opening through a [`BoundedReader`].
fn check_opening<H: Hasher>(bytes: &[u8]) -> Result<(), String> {
    BatchMerkleProof::<H>::read_from(&mut BoundedReader::new(bytes))
        .map(drop)
        .map_err(|e| e.to_string())
}
