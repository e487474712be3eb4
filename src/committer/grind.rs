//! The proof-of-work search before the query positions: what a backend is asked for, and the
//! host search every backend is checked against.
//!
//! miden-crypto's `RpoRandomCoin` and `RpxRandomCoin` accept a nonce when, after the nonce is
//! added to the first rate element of the coin's sponge state and the permutation is applied,
//! that element's canonical value has at least `grinding_factor` trailing zeros
//! (`RandomCoin::check_leading_zeros`). Winterfell takes the first such nonce from 1 on (with
//! its `concurrent` feature, whichever one a thread finds first). A backend returns the first:
//! the proof then equals Winterfell's sequential proof, and the same proof comes back however
//! many threads or GPUs made it.
//!
//! The search is a few ten thousand permutations for the usual factors (16 at 96 bits of
//! security): a millisecond or two on a GPU, most of a core-second on the host.

use miden_crypto::{
    hash::{rpo::Rpo256, rpx::Rpx256},
    rand::{RpoRandomCoin, RpxRandomCoin},
    Felt,
};
use rayon::prelude::*;
use winter_crypto::RandomCoin;

use crate::{
    error::{GpuError, GrindError, Result},
    hash::HashFunction,
};

// REQUEST
// ================================================================================================

/// Words of a coin's sponge state.
pub const STATE_WIDTH: usize = Rpo256::STATE_WIDTH;

/// The state index the nonce is added to and the accepted value is read from (the first rate
/// element of RPO and RPX).
pub const NONCE_INDEX: usize = Rpo256::RATE_RANGE.start;

// RPX's coin has the same state and rate as RPO's.
const _: () =
    assert!(Rpx256::STATE_WIDTH == STATE_WIDTH && Rpx256::RATE_RANGE.start == NONCE_INDEX);

/// The hash functions whose coins a backend grinds: those of miden-crypto's sponge coins.
pub const GRIND_HASHES: [HashFunction; 2] = [HashFunction::Rpo256, HashFunction::Rpx256];

/// The largest nonce a backend tries: far beyond any reachable search, and below the field's
/// modulus, so that a nonce is its own field element.
pub const MAX_NONCE: u64 = 1 << 62;

/// The proof-of-work search of one proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrindRequest {
    /// The coin's permutation: [`HashFunction::Rpo256`] or [`HashFunction::Rpx256`].
    pub hash: HashFunction,
    /// The coin's sponge state (`RpoRandomCoin::into_parts`).
    pub state: [Felt; STATE_WIDTH],
    /// Trailing zero bits the accepted value needs (winter-air's `grinding_factor`).
    pub grinding_factor: u32,
}

impl GrindRequest {
    /// [`GpuError::UnsupportedHasher`] for a hash function without a sponge coin,
    /// [`GpuError::InvalidGrinding`] for a factor above 64 (no value has more trailing zeros).
    pub fn validate(&self) -> Result<()> {
        if !GRIND_HASHES.contains(&self.hash) {
            return Err(GpuError::UnsupportedHasher(format!(
                "{}: no sponge coin to grind (only RPO and RPX)",
                self.hash
            )));
        }
        if self.grinding_factor > 64 {
            return Err(GpuError::InvalidGrinding(GrindError::FactorTooLarge(
                self.grinding_factor,
            )));
        }
        Ok(())
    }

    /// Whether `nonce` passes, as miden-crypto's coin decides it.
    pub fn accepts(&self, nonce: u64) -> bool {
        let zeros = match self.hash {
            HashFunction::Rpx256 => {
                RpxRandomCoin::from_parts(self.state, NONCE_INDEX).check_leading_zeros(nonce)
            },
            _ => RpoRandomCoin::from_parts(self.state, NONCE_INDEX).check_leading_zeros(nonce),
        };
        zeros >= self.grinding_factor
    }
}

/// Nonces a backend tries in one batch for `grinding_factor`, within `[min, max]`: twice the
/// expected count, so that a batch finds one with probability 1 - e^-2 and the search seldom
/// tries many more nonces than it needs.
pub fn batch_len(grinding_factor: u32, min: u64, max: u64) -> u64 {
    1u64.checked_shl(grinding_factor + 1).unwrap_or(u64::MAX).clamp(min, max)
}

/// The first accepted nonce of a search over the nonces from 1 on in batches of `batch`:
/// `try_batch(start, count)` gives the smallest accepted nonce of `start .. start + count`, if
/// any. Every backend searches this way; [`GpuError::InvalidGrinding`] past [`MAX_NONCE`].
pub(crate) fn first_in_batches(
    batch: u64,
    mut try_batch: impl FnMut(u64, u64) -> Result<Option<u64>>,
) -> Result<u64> {
    let mut start = 1;
    while start < MAX_NONCE {
        let count = batch.min(MAX_NONCE - start);
        if let Some(nonce) = try_batch(start, count)? {
            return Ok(nonce);
        }
        start += count;
    }
    Err(GpuError::InvalidGrinding(GrindError::NoNonce { below: MAX_NONCE }))
}

// HOST SEARCH
// ================================================================================================

/// Nonces the host tries per batch, spread over the cores.
const HOST_BATCH: u64 = 1 << 12;

/// The first accepted nonce from 1 on, searched on all cores batch by batch: the CPU backend's
/// search and the oracle of the GPU ones. The request's errors ([`GrindRequest::validate`]), or
/// [`GpuError::InvalidGrinding`] if no nonce below [`MAX_NONCE`] is accepted.
pub fn first_nonce_on_host(request: &GrindRequest) -> Result<u64> {
    request.validate()?;
    first_in_batches(HOST_BATCH, |start, count| {
        Ok((start..start + count).into_par_iter().find_first(|&n| request.accepts(n)))
    })
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use winter_math::FieldElement;

    use super::*;

    fn random_request(rng: &mut impl Rng, hash: HashFunction, factor: u32) -> GrindRequest {
        let state = std::array::from_fn(|_| Felt::new(rng.random::<u64>()));
        GrindRequest { hash, state, grinding_factor: factor }
    }

    #[test]
    fn the_host_finds_the_first_nonce_the_coin_accepts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for hash in GRIND_HASHES {
            for factor in [0, 1, 3, 6, 9] {
                let request = random_request(&mut rng, hash, factor);
                let first = (1..).find(|&n| request.accepts(n)).unwrap();
                assert_eq!(first_nonce_on_host(&request).unwrap(), first, "{hash} {factor}");
            }
        }
    }

    #[test]
    fn acceptance_is_the_coins_own() {
        // the state of a coin that has absorbed a seed, as a prover's coin holds it
        let seed = [Felt::ONE, Felt::new(2), Felt::new(3), Felt::new(4)];
        let coin = RpoRandomCoin::new(seed.into());
        let (state, _) = coin.into_parts();
        let request = GrindRequest { hash: HashFunction::Rpo256, state, grinding_factor: 8 };
        for nonce in 1..200 {
            assert_eq!(request.accepts(nonce), coin.check_leading_zeros(nonce) >= 8);
        }
    }

    #[test]
    fn other_hashes_and_factors_are_refused() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let blake = random_request(&mut rng, HashFunction::Blake3_256, 4);
        assert!(matches!(blake.validate(), Err(GpuError::UnsupportedHasher(_))));
        let huge = random_request(&mut rng, HashFunction::Rpo256, 65);
        assert!(matches!(first_nonce_on_host(&huge), Err(GpuError::InvalidGrinding(_))));
    }

    #[test]
    fn batches_are_twice_the_expected_count() {
        assert_eq!(batch_len(16, 1 << 12, 1 << 24), 1 << 17);
        assert_eq!(batch_len(0, 1 << 12, 1 << 24), 1 << 12);
        assert_eq!(batch_len(64, 1 << 12, 1 << 24), 1 << 24);
    }
}
