//! Per-stage wall-clock times read from `tracing` spans.
//!
//! Winterfell wraps each proof step in a span (`commit_to_main_trace_segment`,
//! `commit_to_aux_trace_segment`, `commit_to_constraint_evaluations`, ...) and every backend of
//! this crate wraps its stages in spans too. [`SpanTimes`] is a `tracing-subscriber` layer that
//! adds up how long each span name was entered, so one run can report a breakdown of a plain
//! Winterfell proof and of a GPU proof side by side.
//!
//! [`SpanTimes::time`] times one run (a proof) into [`RunTimes`]; [`stage_table`] prints runs
//! side by side, one line per [`Row`] of stages (such as [`PROOF_ROWS`]), and [`span_table`]
//! every span's total.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tracing::{span, Subscriber};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

use crate::prover::spans;

/// Accumulated time per span name; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct SpanTimes {
    totals: Arc<Mutex<BTreeMap<&'static str, Duration>>>,
}

impl SpanTimes {
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

    /// Runs `run` and returns its output with its times: the wall-clock time it took and the
    /// totals of the spans entered meanwhile (counted from zero: earlier totals are dropped).
    pub fn time<T>(&self, label: impl Into<String>, run: impl FnOnce() -> T) -> (T, RunTimes) {
        self.take();
        let start = Instant::now();
        let output = run();
        let total = start.elapsed();
        (output, RunTimes { label: label.into(), total, spans: self.take() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Duration>> {
        self.totals.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// When a span was last entered (kept in the span's extensions).
struct EnteredAt(Instant);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanTimes {
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

// RUNS
// ================================================================================================

/// The times of one run (a proof): its wall-clock total and the time spent in each span.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTimes {
    /// The run's name in tables (`winterfell`, `miden-gpu cuda`).
    pub label: String,
    /// Wall-clock time of the whole run.
    pub total: Duration,
    /// Total time per span name.
    pub spans: BTreeMap<&'static str, Duration>,
}

impl RunTimes {
    /// The total time of the spans named `name` (zero if none was entered).
    pub fn span(&self, name: &str) -> Duration {
        self.spans.get(name).copied().unwrap_or_default()
    }

    /// The time of `row` in a table of `rows`: the sum of its spans, or for the remainder row
    /// (no spans) the total less every other row.
    pub fn row(&self, row: &Row, rows: &[Row]) -> Duration {
        let sum = |row: &Row| row.spans.iter().map(|name| self.span(name)).sum::<Duration>();
        if row.spans.is_empty() {
            self.total.saturating_sub(rows.iter().map(sum).sum())
        } else {
            sum(row)
        }
    }
}

// TABLES
// ================================================================================================

/// A line of a [`stage_table`]: a label and the span names whose times it adds up. A row
/// without spans is the remainder: the total less every other row, so the rows add up to the
/// total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The line's label.
    pub label: &'static str,
    /// The spans it adds up (none: the remainder).
    pub spans: &'static [&'static str],
}

/// The stages of a proof, adding up to its total: Miden's execution and bus columns (zero in
/// other Winterfell proofs), Winterfell's commitments and constraint evaluation, the DEEP
/// composition, the FRI commit phase (which, on a GPU backend, includes evaluating the DEEP
/// polynomial over the LDE domain), grinding, queries and the proof object, and the rest.
pub const PROOF_ROWS: [Row; 9] = [
    Row { label: "execution", spans: &[spans::EXECUTION] },
    Row { label: "trace commitment", spans: &[spans::MAIN_TRACE, spans::AUX_TRACE] },
    Row { label: "aux trace build", spans: &[spans::AUX_TRACE_BUILD] },
    Row { label: "constraint evaluation", spans: &[spans::CONSTRAINT_EVALUATION] },
    Row { label: "constraint commitment", spans: &[spans::CONSTRAINTS] },
    Row { label: "DEEP composition", spans: &[spans::DEEP_BUILD, spans::DEEP_EVALUATION] },
    Row { label: "FRI commit phase", spans: &[spans::FRI_LAYERS] },
    Row {
        label: "grinding, queries, proof",
        spans: &[spans::QUERY_POSITIONS, spans::PROOF_OBJECT],
    },
    Row { label: "rest", spans: &[] },
];

/// A table of `runs` side by side: one line per row of `rows`, then the total; one column per
/// run, in milliseconds. Every run after the first also has a ratio column: the first run's
/// time divided by its own (how many times faster it is than the first).
pub fn stage_table(runs: &[RunTimes], rows: &[Row]) -> String {
    let label_width = rows.iter().map(|row| row.label.len()).max().unwrap_or(0).max(5) + 2;
    let widths: Vec<usize> = runs.iter().map(|run| run.label.len().max(10) + 2).collect();
    let mut table = format!("{:<label_width$}", "stage");
    for (i, (run, width)) in runs.iter().zip(&widths).enumerate() {
        let _ = write!(table, "{:>width$}", run.label);
        if i > 0 {
            let _ = write!(table, "{:>8}", "ratio");
        }
    }
    let mut line = |label: &str, time: &dyn Fn(&RunTimes) -> Duration| {
        let _ = write!(table, "\n{label:<label_width$}");
        for (i, (run, width)) in runs.iter().zip(&widths).enumerate() {
            let _ = write!(table, "{:>width$}", ms(time(run)));
            if i > 0 {
                let ratio = time(&runs[0]).as_secs_f64() / time(run).as_secs_f64().max(1e-9);
                let _ = write!(table, "{ratio:>7.2}x");
            }
        }
    };
    for row in rows {
        line(row.label, &|run| run.row(row, rows));
    }
    line("total", &|run| run.total);
    table
}

/// Every span any of `runs` entered, one line per span name (sorted), with its total in each
/// run: one column per run, in milliseconds.
pub fn span_table(runs: &[RunTimes]) -> String {
    let names: BTreeSet<&str> = runs.iter().flat_map(|run| run.spans.keys().copied()).collect();
    let name_width = names.iter().map(|name| name.len()).max().unwrap_or(0).max(4) + 2;
    let widths: Vec<usize> = runs.iter().map(|run| run.label.len().max(10) + 2).collect();
    let mut table = format!("{:<name_width$}", "span");
    for (run, width) in runs.iter().zip(&widths) {
        let _ = write!(table, "{:>width$}", run.label);
    }
    for name in names {
        let _ = write!(table, "\n{name:<name_width$}");
        for (run, width) in runs.iter().zip(&widths) {
            let _ = write!(table, "{:>width$}", ms(run.span(name)));
        }
    }
    table
}

/// `duration` in milliseconds, one decimal.
fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, total_ms: u64, spans: &[(&'static str, u64)]) -> RunTimes {
        RunTimes {
            label: label.into(),
            total: Duration::from_millis(total_ms),
            spans: spans.iter().map(|&(name, ms)| (name, Duration::from_millis(ms))).collect(),
        }
    }

    #[test]
    fn rows_add_up_to_the_total() {
        let run = run(
            "cpu",
            100,
            &[(spans::MAIN_TRACE, 30), (spans::AUX_TRACE, 10), (spans::CONSTRAINTS, 20)],
        );
        let times: Vec<Duration> = PROOF_ROWS.iter().map(|row| run.row(row, &PROOF_ROWS)).collect();
        assert_eq!(times[1], Duration::from_millis(40));
        assert_eq!(times[8], Duration::from_millis(40));
        assert_eq!(times.iter().sum::<Duration>(), run.total);
    }

    #[test]
    fn tables_show_every_run_and_the_ratios_to_the_first() {
        let runs = [
            run("winterfell", 100, &[(spans::CONSTRAINTS, 40)]),
            run("miden-gpu", 50, &[(spans::CONSTRAINTS, 10), ("cuda.commit", 8)]),
        ];
        let rows = [Row { label: "constraint commitment", spans: &[spans::CONSTRAINTS] }];
        let table = stage_table(&runs, &rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("winterfell") && lines[0].contains("miden-gpu"));
        assert!(lines[1].contains("40.0 ms") && lines[1].ends_with("4.00x"));
        assert!(lines[2].starts_with("total") && lines[2].ends_with("2.00x"));

        let spans = span_table(&runs);
        assert!(spans.lines().any(|l| l.starts_with("cuda.commit") && l.ends_with("8.0 ms")));
        assert_eq!(spans.lines().count(), 3);
    }
}
