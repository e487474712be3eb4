//! What a proof does when its backend fails or cannot do a step: [`FallbackPolicy`], and the one
//! place it is applied to a step ([`FallbackPolicy::run_step`]).

use std::sync::Arc;

use tracing::{debug, warn};

use crate::{
    committer::GpuCommitter,
    cpu::CpuCommitter,
    error::{GpuError, Result},
};

// FALLBACK POLICY
// ================================================================================================

/// How a proof answers a backend that fails, cannot do a step, or returns wrong data without an
/// error: whether the CPU recomputes what failed, whether the backend keeps the polynomials for
/// the DEEP composition, and whether the finished proof is verified before it is returned.
///
/// Every path that proves reads its decisions from this value: [`crate::GpuProver`]
/// ([`crate::GpuProver::with_policy`], or [`crate::ProverOptions::policy`]), the Miden proofs
/// (`MidenProveOptions::policy`) and the pool's jobs (the default). The default turns
/// everything on, so a failing device costs time, never a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackPolicy {
    /// Whether a backend failure mid-proof is recomputed on the CPU, with a warning (default
    /// `true`), or panics with the typed error (Winterfell's prover methods cannot return
    /// errors). A step the backend does not implement is computed on the host either way.
    pub cpu_fallback: bool,
    /// Whether the commitments keep their polynomials (and the composition's LDE rows) in the
    /// backend's memory, for the DEEP composition on the backend (default `true`), rather than
    /// copying them to the host. They are kept only where the DEEP composition runs on the
    /// backend ([`crate::FriPlacement::Backend`]): for one on the CPU they would be kept for
    /// nothing.
    pub keep_polys: bool,
    /// Whether every proof is verified (with winter-verifier, accepting the prover's own
    /// options) before it is returned (default `true`). A proof that does not verify, which a
    /// backend returning wrong data without an error would give, is made again on the CPU with
    /// a warning when [`Self::cpu_fallback`] is on, and is a panic carrying
    /// [`GpuError::SelfCheckFailed`] when it is off. With it on, the trace is held until the
    /// proof is checked (a proof made again needs it) rather than freed once the DEEP
    /// composition polynomial is formed.
    pub self_check: bool,
}

impl Default for FallbackPolicy {
    fn default() -> Self {
        Self { cpu_fallback: true, keep_polys: true, self_check: true }
    }
}

/// What became of a step run on the backend under a [`FallbackPolicy`].
pub(crate) enum Step<T> {
    /// The backend computed it.
    Done(T),
    /// The host computes it instead: the backend does not implement it, or failed (the error
    /// says which) and the policy falls back.
    OnHost(GpuError),
}

impl FallbackPolicy {
    /// Nothing falls back, is kept or is checked: a commitment on its own
    /// ([`crate::GpuTraceLde::try_new`]), or the CPU's proof a failed self-check is answered with.
    pub(crate) const STRICT: Self =
        Self { cpu_fallback: false, keep_polys: false, self_check: false };

    /// The policy of the proof inside a caller that verifies the whole proof itself and makes
    /// it again on the CPU if it fails (the Miden proofs, checked with `miden_verifier`): no
    /// self-check here (it would only repeat the caller's), and a failed step recomputed on the
    /// CPU whatever the caller's fallback says (without, a step's failure would be a panic, not
    /// the caller's typed error).
    #[cfg(feature = "miden")]
    pub(crate) fn checked_by_caller(self) -> Self {
        Self { cpu_fallback: true, self_check: false, ..self }
    }

    /// Runs `job`, the step of a proof named `step`, on `committer`, and applies the policy to
    /// its error: [`GpuError::Unsupported`] means the host computes it ([`Step::OnHost`], logged
    /// at debug level); another error falls back the same way with a warning if
    /// [`Self::cpu_fallback`] is on, and is returned otherwise.
    pub(crate) fn run_step<T>(
        &self,
        committer: &dyn GpuCommitter,
        step: &str,
        job: impl FnOnce(&dyn GpuCommitter) -> Result<T>,
    ) -> Result<Step<T>> {
        match job(committer) {
            Ok(value) => Ok(Step::Done(value)),
            Err(error @ GpuError::Unsupported { .. }) => {
                debug!(%error, "{step} on the host");
                Ok(Step::OnHost(error))
            },
            Err(error) if self.cpu_fallback => {
                warn!(backend = %committer.backend(), %error,
                    "backend failed; computing {step} on the host");
                Ok(Step::OnHost(error))
            },
            Err(error) => Err(error),
        }
    }
}

// COMMITTER HANDLE
// ================================================================================================

/// The committer a proof runs on, with the policy its steps follow.
#[derive(Clone)]
pub(crate) struct CommitterHandle {
    committer: Arc<dyn GpuCommitter>,
    policy: FallbackPolicy,
}

impl CommitterHandle {
    /// `committer` under `policy`.
    pub fn new(committer: Arc<dyn GpuCommitter>, policy: FallbackPolicy) -> Self {
        Self { committer, policy }
    }

    /// The committer.
    pub fn committer(&self) -> &Arc<dyn GpuCommitter> {
        &self.committer
    }

    /// The policy.
    pub fn policy(&self) -> FallbackPolicy {
        self.policy
    }

    /// The policy, for changing it.
    pub fn policy_mut(&mut self) -> &mut FallbackPolicy {
        &mut self.policy
    }

    /// The same committer and policy, keeping no polynomials on the device (a caller that wants
    /// them on the host).
    pub fn returning_polys(&self) -> Self {
        let policy = FallbackPolicy { keep_polys: false, ..self.policy };
        Self { committer: self.committer.clone(), policy }
    }

    /// [`FallbackPolicy::run_step`] on this committer under this policy.
    pub fn run_step<T>(
        &self,
        step: &str,
        job: impl FnOnce(&dyn GpuCommitter) -> Result<T>,
    ) -> Result<Step<T>> {
        self.policy.run_step(self.committer.as_ref(), step, job)
    }

    /// Runs the commitment `job` on the backend; where the policy has the host compute it
    /// ([`FallbackPolicy::run_step`]), runs it on the CPU backend. A wrong commitment is never
    /// returned: every outcome is a result or a typed error.
    pub fn try_run<T>(&self, job: impl Fn(&dyn GpuCommitter) -> Result<T>) -> Result<T> {
        match self.run_step("this commitment", &job)? {
            Step::Done(value) => Ok(value),
            Step::OnHost(_) => job(&CpuCommitter::new()),
        }
    }

    /// [`Self::try_run`] for Winterfell's trait methods, which return no `Result`: an error that
    /// survives the fallback panics with the typed error's message.
    pub fn run<T>(&self, job: impl Fn(&dyn GpuCommitter) -> Result<T>) -> T {
        self.try_run(job).unwrap_or_else(|error| panic!("segment commitment failed: {error}"))
    }
}
