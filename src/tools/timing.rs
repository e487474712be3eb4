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
//!
//! Each span also records the CPU time the whole process used while it was entered
//! ([`process_cpu_time`]): for the stages of one proof, which follow one another, that is what
//! each stage costs the host in core-seconds ([`cpu_table`]), the measure of how many proofs a
//! host's cores can keep in flight.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tracing::{span, Subscriber};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};

use crate::prover::spans;

/// Accumulated wall-clock and process CPU time per span name; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct SpanTimes {
    totals: Arc<Mutex<Totals>>,
}

/// Wall-clock and process CPU time per span name.
#[derive(Default)]
struct Totals {
    wall: BTreeMap<&'static str, Duration>,
    cpu: BTreeMap<&'static str, CpuTime>,
}

impl SpanTimes {
    /// A new, empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The total time spans named `name` were entered.
    pub fn get(&self, name: &str) -> Duration {
        self.lock().wall.get(name).copied().unwrap_or_default()
    }

    /// Returns all wall-clock totals and starts again from zero.
    pub fn take(&self) -> BTreeMap<&'static str, Duration> {
        std::mem::take(&mut *self.lock()).wall
    }

    /// Runs `run` and returns its output with its times: the wall-clock and process CPU time it
    /// took and the totals of the spans entered meanwhile (counted from zero: earlier totals
    /// are dropped).
    pub fn time<T>(&self, label: impl Into<String>, run: impl FnOnce() -> T) -> (T, RunTimes) {
        std::mem::take(&mut *self.lock());
        let start = Instant::now();
        let cpu_start = process_cpu_time();
        let output = run();
        let total = start.elapsed();
        let cpu = cpu_start.zip(process_cpu_time()).map(|(start, end)| end.since(start));
        let Totals { wall, cpu: cpu_spans } = std::mem::take(&mut *self.lock());
        (output, RunTimes { label: label.into(), total, spans: wall, cpu, cpu_spans })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Totals> {
        self.totals.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// CPU time of a process: in user space and in the kernel (system calls, page faults).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time in user space.
    pub user: Duration,
    /// Time in the kernel on the process's behalf.
    pub system: Duration,
}

impl CpuTime {
    /// User and system time together.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// The time from `earlier` to `self` (zero where a clock went back).
    pub fn since(&self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

impl std::ops::Add for CpuTime {
    type Output = CpuTime;
    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime { user: self.user + other.user, system: self.system + other.system }
    }
}

impl std::iter::Sum for CpuTime {
    fn sum<I: Iterator<Item = CpuTime>>(iter: I) -> CpuTime {
        iter.fold(CpuTime::default(), |sum, time| sum + time)
    }
}

/// The CPU time all threads of this process have used so far, or `None` where the platform
/// does not report it.
pub fn process_cpu_time() -> Option<CpuTime> {
    #[cfg(unix)]
    {
        // SAFETY: an all-zero `rusage` is a valid value, and `usage` is writable for the call.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        let duration = |time: libc::timeval| {
            Duration::from_secs(time.tv_sec as u64) + Duration::from_micros(time.tv_usec as u64)
        };
        (status == 0)
            .then(|| CpuTime { user: duration(usage.ru_utime), system: duration(usage.ru_stime) })
    }
    #[cfg(not(unix))]
    None
}

/// When a span was last entered, by the clock and by the process's CPU time (kept in the
/// span's extensions).
struct EnteredAt(Instant, Option<CpuTime>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanTimes {
    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(EnteredAt(Instant::now(), process_cpu_time()));
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(EnteredAt(start, cpu_start)) = span.extensions_mut().remove::<EnteredAt>() {
                let wall = start.elapsed();
                let cpu = cpu_start.zip(process_cpu_time()).map(|(start, end)| end.since(start));
                let mut totals = self.lock();
                *totals.wall.entry(span.name()).or_default() += wall;
                if let Some(cpu) = cpu {
                    let total = totals.cpu.entry(span.name()).or_default();
                    *total = *total + cpu;
                }
            }
        }
    }
}

// RUNS
// ================================================================================================

/// The times of one run (a proof): its wall-clock total and the time spent in each span, with
/// the process CPU time of both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTimes {
    /// The run's name in tables (`winterfell`, `miden-gpu cuda`).
    pub label: String,
    /// Wall-clock time of the whole run.
    pub total: Duration,
    /// Total time per span name.
    pub spans: BTreeMap<&'static str, Duration>,
    /// CPU time of the whole process during the run (every thread, user and system); `None`
    /// where the platform has no process CPU clock.
    pub cpu: Option<CpuTime>,
    /// CPU time of the whole process while each span name was entered. Spans that overlap
    /// (the stages of concurrent proofs, or a stage and its inner spans) share it.
    pub cpu_spans: BTreeMap<&'static str, CpuTime>,
}

impl RunTimes {
    /// The total time of the spans named `name` (zero if none was entered).
    pub fn span(&self, name: &str) -> Duration {
        self.spans.get(name).copied().unwrap_or_default()
    }

    /// The time of `row` in a table of `rows`: the sum of its spans, or for the remainder row
    /// (no spans) the total less every other row.
    pub fn row(&self, row: &Row, rows: &[Row]) -> Duration {
        row_share(row, rows, self.total, |name| self.span(name), Duration::saturating_sub)
    }

    /// The process CPU time of `row` in a table of `rows`, as [`Self::row`] counts wall-clock
    /// time; `None` without a process CPU clock.
    pub fn cpu_row(&self, row: &Row, rows: &[Row]) -> Option<CpuTime> {
        let span = |name: &str| self.cpu_spans.get(name).copied().unwrap_or_default();
        Some(row_share(row, rows, self.cpu?, span, |total, rest| total.since(rest)))
    }
}

/// `row`'s part of a run's `total` in a table of `rows`: the sum of its spans' `time`s, or for
/// the remainder row (no spans) the total `less` every other row.
fn row_share<T: Copy + std::iter::Sum>(
    row: &Row,
    rows: &[Row],
    total: T,
    time: impl Fn(&str) -> T,
    less: impl Fn(T, T) -> T,
) -> T {
    let sum = |row: &Row| row.spans.iter().map(|name| time(name)).sum::<T>();
    if row.spans.is_empty() {
        less(total, rows.iter().map(sum).sum())
    } else {
        sum(row)
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

/// The host CPU cost of `runs` side by side: one line per row of `rows`, then the total; per run
/// the process CPU time in core-seconds, the share of it spent in the kernel, and the cores it
/// kept busy on average (CPU time over wall-clock time). Empty where the platform does not
/// report the process's CPU time.
pub fn cpu_table(runs: &[RunTimes], rows: &[Row]) -> String {
    if runs.iter().any(|run| run.cpu.is_none()) {
        return String::new();
    }
    let label_width = rows.iter().map(|row| row.label.len()).max().unwrap_or(0).max(8) + 2;
    let widths: Vec<usize> = runs.iter().map(|run| run.label.len().max(10) + 2).collect();
    let mut table = format!("{:<label_width$}", "host CPU");
    for (run, width) in runs.iter().zip(&widths) {
        let _ = write!(table, "{:>width$}{:>8}{:>7}", run.label, "kernel", "cores");
    }
    let mut line = |label: &str, time: &dyn Fn(&RunTimes) -> (CpuTime, Duration)| {
        let _ = write!(table, "\n{label:<label_width$}");
        for (run, width) in runs.iter().zip(&widths) {
            let (cpu, wall) = time(run);
            let total = cpu.total().as_secs_f64();
            let kernel = 100.0 * cpu.system.as_secs_f64() / total.max(1e-9);
            let cores = total / wall.as_secs_f64().max(1e-9);
            let _ =
                write!(table, "{:>width$}{:>7.0}%{cores:>7.1}", format!("{total:.2} s"), kernel);
        }
    };
    for row in rows {
        line(row.label, &|run| (run.cpu_row(row, rows).unwrap_or_default(), run.row(row, rows)));
    }
    line("total", &|run| (run.cpu.unwrap_or_default(), run.total));
    table
}

/// Every span any of `runs` entered, one line per span name (sorted), with its total in each
/// run: per run its wall-clock time in milliseconds and, where the platform reports it, the
/// process CPU time while it was entered, in core-seconds.
pub fn span_table(runs: &[RunTimes]) -> String {
    let names: BTreeSet<&str> = runs.iter().flat_map(|run| run.spans.keys().copied()).collect();
    let name_width = names.iter().map(|name| name.len()).max().unwrap_or(0).max(4) + 2;
    let widths: Vec<usize> = runs.iter().map(|run| run.label.len().max(10) + 2).collect();
    let with_cpu = runs.iter().all(|run| run.cpu.is_some());
    let mut table = format!("{:<name_width$}", "span");
    for (run, width) in runs.iter().zip(&widths) {
        let _ = write!(table, "{:>width$}", run.label);
        if with_cpu {
            let _ = write!(table, "{:>10}", "CPU");
        }
    }
    for name in names {
        let _ = write!(table, "\n{name:<name_width$}");
        for (run, width) in runs.iter().zip(&widths) {
            let _ = write!(table, "{:>width$}", ms(run.span(name)));
            if with_cpu {
                let cpu = run.cpu_spans.get(name).copied().unwrap_or_default().total();
                let _ = write!(table, "{:>10}", format!("{:.2} s", cpu.as_secs_f64()));
            }
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
        let spans: BTreeMap<_, _> =
            spans.iter().map(|&(name, ms)| (name, Duration::from_millis(ms))).collect();
        // every span kept 4 cores busy, one of them in the kernel; the rest of the run 1 core
        let busy = |wall: Duration| CpuTime { user: wall * 3, system: wall };
        let cpu_spans: BTreeMap<_, _> =
            spans.iter().map(|(&name, &wall)| (name, busy(wall))).collect();
        let in_spans: Duration = spans.values().sum();
        let total = Duration::from_millis(total_ms);
        let rest = CpuTime { user: total.saturating_sub(in_spans), system: Duration::ZERO };
        let cpu = Some(busy(in_spans) + rest);
        RunTimes { label: label.into(), total, spans, cpu, cpu_spans }
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

        let cpu: Vec<CpuTime> =
            PROOF_ROWS.iter().map(|row| run.cpu_row(row, &PROOF_ROWS).unwrap()).collect();
        assert_eq!(cpu[1].total(), Duration::from_millis(160));
        assert_eq!(cpu[1].system, Duration::from_millis(40));
        assert_eq!(cpu[4].total(), Duration::from_millis(80));
        assert_eq!(cpu[8], CpuTime { user: Duration::from_millis(40), system: Duration::ZERO });
        assert_eq!(cpu.iter().copied().sum::<CpuTime>(), run.cpu.unwrap());
    }

    #[test]
    fn the_cpu_table_gives_core_seconds_and_busy_cores() {
        let runs = [run("miden-gpu", 100, &[(spans::CONSTRAINTS, 40)])];
        let rows = [Row { label: "constraint commitment", spans: &[spans::CONSTRAINTS] }];
        let table = cpu_table(&runs, &rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].contains("0.16 s") && lines[1].ends_with("25%    4.0"), "{table}");
        assert!(lines[2].starts_with("total") && lines[2].contains("0.22 s"), "{table}");
        assert!(lines[2].ends_with("18%    2.2"), "{table}");
    }

    #[test]
    fn spans_record_the_process_cpu_time() {
        use tracing_subscriber::layer::SubscriberExt;
        let times = SpanTimes::new();
        let subscriber = tracing_subscriber::registry().with(times.clone());
        let ((), run) = tracing::subscriber::with_default(subscriber, || {
            times.time("busy", || {
                let _span = tracing::info_span!("spin").entered();
                let start = Instant::now();
                let cpu_start = process_cpu_time().unwrap_or_default().total();
                // at least 30 ms by the clock and of the process's CPU (a loaded machine may
                // give the thread less CPU than the clock runs)
                let cpu_used = || process_cpu_time().map(|t| t.total().saturating_sub(cpu_start));
                let busy = || cpu_used().is_some_and(|cpu| cpu < Duration::from_millis(30));
                let mut x = 1u64;
                while start.elapsed() < Duration::from_millis(30) || busy() {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        });
        assert!(run.span("spin") >= Duration::from_millis(30));
        if cfg!(unix) {
            let spin = run.cpu_spans.get("spin").copied().unwrap_or_default().total();
            assert!(spin >= Duration::from_millis(20), "{spin:?}");
            assert!(run.cpu.unwrap().total() >= spin);
        }
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
        assert!(spans
            .lines()
            .any(|l| l.starts_with("cuda.commit") && l.ends_with("8.0 ms    0.03 s")));
        assert_eq!(spans.lines().count(), 3);
    }
}
