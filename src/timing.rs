//! Per-stage wall-clock times read from `tracing` spans.
//!
//! Winterfell wraps each proof step in a span (`commit_to_main_trace_segment`,
//! `commit_to_aux_trace_segment`, `commit_to_constraint_evaluations`, ...) and every backend of
//! this crate wraps its stages in spans too. [`StageTimes`] is a `tracing-subscriber` layer that
//! adds up how long each span name was entered, so one run can report a breakdown of a plain
//! Winterfell proof and of a GPU proof side by side.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tracing::{span, Subscriber};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

/// Span names of Winterfell's commitment steps.
pub mod stages {
    /// Main trace segment: interpolate, extend, hash, tree.
    pub const MAIN_TRACE: &str = "commit_to_main_trace_segment";
    /// Auxiliary trace segment (includes building the aux trace).
    pub const AUX_TRACE: &str = "commit_to_aux_trace_segment";
    /// Constraint commitment: composition polynomial, extend, hash, tree.
    pub const CONSTRAINTS: &str = "commit_to_constraint_evaluations";
}

/// Accumulated time per span name; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct StageTimes {
    totals: Arc<Mutex<BTreeMap<&'static str, Duration>>>,
}

impl StageTimes {
    /// A new, empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The total time spans named `name` were entered.
    pub fn get(&self, name: &str) -> Duration {
        self.lock().get(name).copied().unwrap_or_default()
    }

    /// Returns all totals and starts again from zero.
    pub fn take(&self) -> BTreeMap<&'static str, Duration> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Duration>> {
        self.totals.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// When a span was last entered (kept in the span's extensions).
struct EnteredAt(Instant);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for StageTimes {
    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(EnteredAt(Instant::now()));
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(EnteredAt(start)) = span.extensions_mut().remove::<EnteredAt>() {
                *self.lock().entry(span.name()).or_default() += start.elapsed();
            }
        }
    }
}
