//! The terminal spinner: the current stage of a command, including the prover's own stages, which
//! it learns from their `tracing` spans. Hidden unless both stdout and stderr are terminals.

use std::{
    borrow::Cow,
    io::{self, IsTerminal, Write},
    time::Duration,
};

use indicatif::{ProgressBar, ProgressStyle};
use miden_gpu::timing::stages;
use tracing::{span, Subscriber};
use tracing_subscriber::{fmt::MakeWriter, layer::Context, registry::LookupSpan, Layer};

/// Span names of execution, proof and verification steps, and the stage each one shows.
const SPAN_STAGES: [(&str, &str); 11] = [
    ("execute_program", "executing the program"),
    (stages::MAIN_TRACE, "proving: main trace commitment"),
    ("build_aux_trace", "proving: auxiliary trace"),
    (stages::AUX_TRACE, "proving: auxiliary trace commitment"),
    ("evaluate_constraints", "proving: constraint evaluation"),
    (stages::CONSTRAINTS, "proving: constraint commitment"),
    ("build_deep_composition_poly", "proving: DEEP composition"),
    ("compute_fri_layers", "proving: FRI layers"),
    ("determine_query_positions", "proving: proof of work and queries"),
    ("build_proof_object", "proving: proof object"),
    ("verify_program", "verifying the proof"),
];

/// A spinner with the current stage and the elapsed time; cheap to clone (shared).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A spinner on stderr, or a hidden one where stdout or stderr is not a terminal.
    pub fn new() -> Self {
        if !(io::stdout().is_terminal() && io::stderr().is_terminal()) {
            return Self { bar: ProgressBar::hidden() };
        }
        let style = ProgressStyle::with_template("{spinner:.green} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar = ProgressBar::new_spinner().with_style(style);
        bar.enable_steady_tick(Duration::from_millis(100));
        Self { bar }
    }

    /// Shows `stage` as the current stage.
    pub fn stage(&self, stage: impl Into<Cow<'static, str>>) {
        self.bar.set_message(stage);
    }

    /// Removes the spinner (before the results are printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

// TRACING INTEGRATION
// ================================================================================================

/// Entering a known span shows its stage.
impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Progress {
    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        let Some(name) = ctx.metadata(id).map(|metadata| metadata.name()) else {
            return;
        };
        if let Some((_, stage)) = SPAN_STAGES.iter().find(|(span, _)| *span == name) {
            self.stage(*stage);
        }
    }
}

/// Log lines go to stderr with the spinner lifted, so the two do not overwrite each other.
impl<'a> MakeWriter<'a> for Progress {
    type Writer = SuspendedStderr;

    fn make_writer(&'a self) -> Self::Writer {
        SuspendedStderr(self.bar.clone())
    }
}

/// Stderr, written with the spinner lifted.
pub struct SuspendedStderr(ProgressBar);

impl Write for SuspendedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.suspend(|| io::stderr().write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}
