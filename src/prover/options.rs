//! The prover's own options, as a value: [`ProverOptions`].

use super::{ConstraintPlacement, FallbackPolicy, FriPlacement};
use crate::{error::Result, select::BackendOptions};

/// How a [`super::GpuProver`] proves: the backend it commits on and what it does around it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProverOptions {
    /// The backend and its options.
    pub backend: BackendOptions,
    /// Whether a backend failure mid-proof is recomputed on the CPU (default `true`;
    /// [`FallbackPolicy::cpu_fallback`]).
    pub cpu_fallback: bool,
    /// Where the DEEP composition and the FRI commit phase run (default on the backend).
    pub fri_placement: FriPlacement,
    /// Where the constraints are evaluated (default on the backend, where it can).
    pub constraint_placement: ConstraintPlacement,
    /// Whether every proof is verified before it is returned (default `true`;
    /// [`FallbackPolicy::self_check`]).
    pub self_check: bool,
}

impl Default for ProverOptions {
    fn default() -> Self {
        Self {
            backend: BackendOptions::default(),
            cpu_fallback: true,
            fri_placement: FriPlacement::Backend,
            constraint_placement: ConstraintPlacement::Backend,
            self_check: true,
        }
    }
}

impl ProverOptions {
    /// The defaults, with the backend options the environment sets
    /// ([`BackendOptions::from_env`]).
    pub fn from_env() -> Result<Self> {
        Ok(Self { backend: BackendOptions::from_env()?, ..Self::default() })
    }

    /// The fallback policy these options give: theirs for the CPU fallback and the self-check,
    /// the default for the rest.
    pub fn policy(&self) -> FallbackPolicy {
        let (cpu_fallback, self_check) = (self.cpu_fallback, self.self_check);
        FallbackPolicy { cpu_fallback, self_check, ..FallbackPolicy::default() }
    }
}
