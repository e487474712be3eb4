//! The terminal spinner: the current stage of a command, including the prover's own steps (from
//! [`ProofProgress`]). Hidden unless both stdout and stderr are terminals.

use std::{
    borrow::Cow,
    io::{self, IsTerminal, Write},
    time::Duration,
};

use indicatif::{ProgressBar, ProgressStyle};
use miden_gpu::progress::ProofProgress;
use tracing_subscriber::fmt::MakeWriter;

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

impl Progress {
    /// A `tracing` layer that shows each step of a proof as it starts.
    pub fn proof_steps(&self) -> ProofProgress {
        let bar = self.bar.clone();
        ProofProgress::new(move |step| bar.set_message(format!("proving: {step}")))
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
