//! Comparing a proof with a reference proof of the same statement.
//!
//! With a grinding factor above zero and Winterfell's `concurrent` feature, the prover searches
//! the proof-of-work nonce with rayon's `find_any`: the nonce is the first one *any* thread
//! finds, so two runs of the same prover on the same trace can pick different nonces, hence
//! different query positions and openings. Everything committed before grinding (trace and
//! constraint roots, FRI layer roots, the out-of-domain frame) does not depend on the nonce, so
//! those parts are what a GPU proof must share with the CPU proof when the nonces differ.

use winter_air::proof::Proof;

/// How a proof relates to a reference proof of the same statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofMatch {
    /// The two proofs are equal byte for byte.
    Identical,
    /// Context, every commitment (trace, constraint and FRI roots) and the out-of-domain frame
    /// are equal; the grinding nonces differ, and with them the queried positions. Both proofs
    /// are proofs of the same commitments, as two runs of Winterfell's concurrent prover can be.
    OtherGrindingNonce {
        /// The reference proof's nonce.
        expected: u64,
        /// This proof's nonce.
        actual: u64,
    },
    /// The proofs disagree in the named part: a wrong proof.
    Mismatch(&'static str),
}

impl ProofMatch {
    /// Whether the proof carries the same commitments as the reference.
    pub fn is_match(&self) -> bool {
        !matches!(self, Self::Mismatch(_))
    }
}

/// Compares `actual` with the reference proof `expected` of the same statement.
pub fn compare_proofs(expected: &Proof, actual: &Proof) -> ProofMatch {
    if expected == actual {
        return ProofMatch::Identical;
    }
    let first_difference = [
        (expected.context == actual.context, "context"),
        (expected.commitments == actual.commitments, "commitments"),
        (expected.ood_frame == actual.ood_frame, "out-of-domain frame"),
        (expected.pow_nonce != actual.pow_nonce, "query openings"),
    ];
    match first_difference.into_iter().find(|(same, _)| !same) {
        Some((_, part)) => ProofMatch::Mismatch(part),
        None => ProofMatch::OtherGrindingNonce {
            expected: expected.pow_nonce,
            actual: actual.pow_nonce,
        },
    }
}

impl std::fmt::Display for ProofMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Identical => write!(f, "byte-identical"),
            Self::OtherGrindingNonce { expected, actual } => write!(
                f,
                "same commitments and out-of-domain frame; grinding nonce {actual} instead of \
                 {expected} (Winterfell's concurrent grinding keeps the first nonce any thread finds)"
            ),
            Self::Mismatch(part) => write!(f, "DIFFERENT {part}"),
        }
    }
}
