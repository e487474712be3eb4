//! Which step of a proof is running, as it starts: a `tracing` layer for progress displays.
//!
//! Winterfell wraps each step of `Prover::prove` in a span. [`ProofProgress`] calls a function
//! with a readable name of the step each time one begins, so a command line can keep a spinner
//! up to date without printing tracing lines.

use std::sync::Arc;

use tracing::{span, Subscriber};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

use crate::prover::spans;

/// Winterfell's proof steps, by span name, with what a progress display calls them.
pub const PROOF_STEPS: &[(&str, &str)] = &[
    (spans::MAIN_TRACE, "committing to the main trace"),
    (spans::AUX_TRACE_BUILD, "building the auxiliary trace"),
    (spans::AUX_TRACE, "committing to the auxiliary trace"),
    (spans::CONSTRAINT_EVALUATION, "evaluating the constraints"),
    (spans::CONSTRAINTS, "committing to the constraint evaluations"),
    (spans::DEEP_BUILD, "building the DEEP composition polynomial"),
    (spans::DEEP_EVALUATION, "evaluating the DEEP composition polynomial"),
    (spans::FRI_LAYERS, "computing the FRI layers"),
    (spans::QUERY_POSITIONS, "grinding and drawing the queries"),
    (spans::PROOF_OBJECT, "assembling the proof"),
];

/// A layer that reports each of [`PROOF_STEPS`] as it starts.
#[derive(Clone)]
pub struct ProofProgress {
    on_step: Arc<dyn Fn(&'static str) + Send + Sync>,
}

impl ProofProgress {
    /// Calls `on_step` with the readable name of every proof step as it starts.
    pub fn new(on_step: impl Fn(&'static str) + Send + Sync + 'static) -> Self {
        Self { on_step: Arc::new(on_step) }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for ProofProgress {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, _id: &span::Id, _ctx: Context<'_, S>) {
        let name = attrs.metadata().name();
        if let Some(&(_, step)) = PROOF_STEPS.iter().find(|(span, _)| *span == name) {
            (self.on_step)(step);
        }
    }
}
