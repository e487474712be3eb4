//! What [`super::prove_with_options`] does around the proof ([`MidenProveOptions`]), and which
//! proving options Miden's verifier accepts ([`check_proving_options`]).

use std::fmt;

use miden_air::{HashFunction as MidenHashFunction, ProvingOptions};
use miden_core_lib::CoreLibrary;
use miden_verifier::PrecompileVerifierRegistry;
use winter_air::ProofOptions;

use super::{error::ProveError, gpu_hash_function, Execution};
use crate::prover::{ConstraintPlacement, FallbackPolicy};

// PROVE OPTIONS
// ================================================================================================

/// How [`super::prove_with_options`] executes the program and makes sure the proof it returns
/// verifies.
///
/// The default executes on Miden's fast processor, checks every proof and re-proves on the CPU
/// backend when the check fails, so a wrong commitment from a device (one that returned `Ok`)
/// costs time, never a bad proof.
#[derive(Clone)]
pub struct MidenProveOptions {
    /// Which of Miden's processors executes the program (default [`Execution::Parallel`]; use
    /// [`Execution::Reference`] for programs you do not trust).
    pub execution: Execution,
    /// Verify the finished proof with `miden_verifier` before returning it (default `true`;
    /// [`FallbackPolicy::self_check`], with Miden's verifier).
    pub self_check: bool,
    /// When the self-check fails, prove again on the CPU backend, with a warning (default
    /// `true`); otherwise return [`ProveError::SelfCheck`]. A backend failure inside the proof
    /// is recomputed on the CPU either way: without, it would be a panic, not a typed error.
    pub cpu_fallback: bool,
    /// The precompile verifiers of the self-check (default: the Miden core library's, as
    /// `miden verify` uses); a program that calls precompiles of other libraries needs theirs.
    pub precompile_verifiers: PrecompileVerifierRegistry,
    /// Where the constraints are evaluated (default on the backend, where it can; see
    /// [`ConstraintPlacement`]).
    pub constraints: ConstraintPlacement,
}

impl Default for MidenProveOptions {
    fn default() -> Self {
        Self {
            execution: Execution::default(),
            self_check: true,
            cpu_fallback: true,
            precompile_verifiers: CoreLibrary::default().verifier_registry(),
            constraints: ConstraintPlacement::Backend,
        }
    }
}

impl MidenProveOptions {
    /// The fallback policy of the whole proof: these options' self-check and CPU fallback, the
    /// default for the rest.
    pub fn policy(&self) -> FallbackPolicy {
        let (cpu_fallback, self_check) = (self.cpu_fallback, self.self_check);
        FallbackPolicy { cpu_fallback, self_check, ..FallbackPolicy::default() }
    }
}

impl fmt::Debug for MidenProveOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MidenProveOptions")
            .field("execution", &self.execution)
            .field("self_check", &self.self_check)
            .field("cpu_fallback", &self.cpu_fallback)
            .field("constraints", &self.constraints)
            .finish_non_exhaustive()
    }
}

// OPTIONS THE VERIFIER ACCEPTS
// ================================================================================================

/// Every Miden hash function, in the order the accepted pairs are listed.
const HASH_FUNCTIONS: [MidenHashFunction; 5] = [
    MidenHashFunction::Rpo256,
    MidenHashFunction::Rpx256,
    MidenHashFunction::Poseidon2,
    MidenHashFunction::Blake3_192,
    MidenHashFunction::Blake3_256,
];

/// The security levels of `ProvingOptions::with_96_bit_security` and `with_128_bit_security`.
const SECURITY_LEVELS: [u32; 2] = [96, 128];

/// The proof options `miden_verifier` 0.20 accepts for `hash_fn`: `verify_with_precompiles`
/// passes these sets of `ProvingOptions` (miden-air's own constants) to Winterfell as
/// `AcceptableOptions::OptionSet`. The verifier builds them inside the function, so its dispatch
/// is mirrored here; `tests/miden.rs` checks the mirror against the verifier for every pair.
fn verifier_option_set(hash_fn: MidenHashFunction) -> Vec<ProofOptions> {
    match hash_fn {
        MidenHashFunction::Blake3_192 => vec![ProvingOptions::REGULAR_96_BITS],
        MidenHashFunction::Blake3_256 => vec![ProvingOptions::REGULAR_128_BITS],
        MidenHashFunction::Rpo256 | MidenHashFunction::Rpx256 => {
            vec![ProvingOptions::RECURSIVE_96_BITS, ProvingOptions::RECURSIVE_128_BITS]
        },
        MidenHashFunction::Poseidon2 => {
            vec![ProvingOptions::RECURSIVE_96_BITS, ProvingOptions::REGULAR_128_BITS]
        },
    }
}

/// The proving options of `hash_fn` at `security` bits (96 or 128), as miden-vm's command line
/// makes them.
fn standard_options(hash_fn: MidenHashFunction, security: u32) -> ProvingOptions {
    match security {
        96 => ProvingOptions::with_96_bit_security(hash_fn),
        _ => ProvingOptions::with_128_bit_security(hash_fn),
    }
}

/// Whether `miden_verifier` accepts proofs made with `options`.
pub fn verifier_accepts(options: &ProvingOptions) -> bool {
    let proof_options = ProofOptions::from(options.clone());
    verifier_option_set(options.hash_fn()).contains(&proof_options)
}

/// The (hash function, security level) pairs of [`ProvingOptions::with_96_bit_security`] and
/// [`ProvingOptions::with_128_bit_security`] whose proofs `miden_verifier` accepts.
pub fn accepted_pairs() -> Vec<(MidenHashFunction, u32)> {
    HASH_FUNCTIONS
        .into_iter()
        .flat_map(|hash_fn| SECURITY_LEVELS.map(|security| (hash_fn, security)))
        .filter(|&(hash_fn, security)| verifier_accepts(&standard_options(hash_fn, security)))
        .collect()
}

/// Checks, before anything is executed or proven, that `miden_verifier` would accept a proof
/// made with `options`.
///
/// # Errors
/// [`ProveError::UnacceptableOptions`], naming the pairs the verifier accepts.
pub fn check_proving_options(options: &ProvingOptions) -> Result<(), ProveError> {
    if verifier_accepts(options) {
        return Ok(());
    }
    let hash_fn = options.hash_fn();
    let proof_options = ProofOptions::from(options.clone());
    let security = SECURITY_LEVELS
        .into_iter()
        .find(|&security| ProofOptions::from(standard_options(hash_fn, security)) == proof_options)
        .map_or_else(|| "custom proof options".to_string(), |bits| format!("{bits}-bit security"));
    Err(ProveError::UnacceptableOptions {
        hash: gpu_hash_function(hash_fn).to_string(),
        security,
        accepted: describe_pairs(&accepted_pairs()),
    })
}

/// `rpo at 96 or 128 bits, ..., blake3-256 at 128 bits`.
fn describe_pairs(pairs: &[(MidenHashFunction, u32)]) -> String {
    HASH_FUNCTIONS
        .into_iter()
        .filter_map(|hash_fn| {
            let levels: Vec<String> = pairs
                .iter()
                .filter(|(pair_hash, _)| *pair_hash == hash_fn)
                .map(|(_, security)| security.to_string())
                .collect();
            (!levels.is_empty())
                .then(|| format!("{} at {} bits", gpu_hash_function(hash_fn), levels.join(" or ")))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
