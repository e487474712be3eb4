//! Proves a Miden VM program with `miden_prover::prove` (Winterfell on the CPU) and with
//! `miden_gpu::miden::prove` (commitments on a backend), checks that the proofs are
//! byte-identical (or, where Winterfell's concurrent grinding picked another proof-of-work
//! nonce, that every commitment and the out-of-domain frame are), verifies with
//! `miden_verifier::verify`, and prints per-stage timings of both.
//!
//! ```text
//! cargo run --release --features miden --example prove_miden -- \
//!     --program fib --cycles-log 18 --hash rpo --security 96 --backend auto
//! ```
//!
//! Flags (all optional):
//! - `--program fib|hash-mem`: a Fibonacci loop, or `hperm`/`hmerge` with memory stores and
//!   loads in a loop (hasher and memory chiplets); default `fib`.
//! - `--cycles-log N`: pick the iteration count so the trace has 2^N rows (default 16; up to
//!   about 20 for a 24 GiB host); `--iterations N` sets the count directly instead.
//! - `--hash rpo|rpx` (also `blake3-192`, `blake3-256`, `poseidon2`, to see the typed error);
//!   default `rpo`.
//! - `--security 96|128`: `ProvingOptions::with_96_bit_security` / `with_128_bit_security`;
//!   default 96.
//! - `--backend auto|cpu|wgpu|cuda`, or a comma-separated list (`cuda,wgpu`): default `auto` (or
//!   `MIDEN_GPU_BACKEND`). With a list, the CPU prover runs once and every backend is timed
//!   against it in the same run. Without a GPU the example says so and runs the `miden_gpu` path
//!   on the CPU backend. Each backend first proves a small program (2^12 rows) untimed, so the
//!   table shows a warm prover (kernel compilation and device buffers are start-up costs).
//! - `--breakdown`: also print every span's total (backend stages included).
//!
//! `RUST_LOG=miden_gpu=info` adds the crate's log lines.

use std::{
    collections::BTreeMap,
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use miden_air::{ProcessorAir, PublicInputs};
use miden_assembly::Assembler;
use miden_gpu::{
    miden::{self as gpu_miden, programs},
    timing::{stages, StageTimes},
    compare_proofs, Backend, Felt, GpuCommitter,
};
use miden_processor::{
    AdviceInputs, DefaultHost, ExecutionTrace, Program, StackInputs, StackOutputs, NUM_RAND_ROWS,
};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
use miden_verifier::ProgramInfo;
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};
use winter_air::{Air, FieldExtension};
use winter_prover::Trace;

// ARGUMENTS
// ================================================================================================

const USAGE: &str =
    "usage: prove_miden [--program fib|hash-mem] [--cycles-log N | --iterations N] \
[--hash rpo|rpx] [--security 96|128] [--backend auto|cpu|wgpu|cuda[,...]] [--breakdown]";

/// The flags that take a value (`--flag value` or `--flag=value`).
const VALUED: [&str; 6] =
    ["--program", "--cycles-log", "--iterations", "--hash", "--security", "--backend"];

/// The workloads of `miden_gpu::miden::programs`.
#[derive(Clone, Copy)]
enum Workload {
    Fibonacci,
    HashMemory,
}

impl Workload {
    fn source(self) -> &'static str {
        match self {
            Self::Fibonacci => programs::FIBONACCI,
            Self::HashMemory => programs::HASH_MEMORY,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Fibonacci => "fib",
            Self::HashMemory => "hash-mem",
        }
    }
}

/// How many loop iterations to run.
enum Size {
    /// Enough for a trace of 2^N rows.
    CyclesLog(u32),
    /// Exactly this many.
    Iterations(u64),
}

struct Args {
    workload: Workload,
    size: Size,
    hash_fn: HashFunction,
    security: u32,
    backends: Vec<Backend>,
    breakdown: bool,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Self {
            workload: Workload::Fibonacci,
            size: Size::CyclesLog(16),
            hash_fn: HashFunction::Rpo256,
            security: 96,
            backends: vec![Backend::from_env().map_err(|e| e.to_string())?],
            breakdown: false,
        };
        let mut argv = std::env::args().skip(1);
        while let Some(flag) = argv.next() {
            let (flag, inline) = match flag.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (flag, None),
            };
            if flag == "--breakdown" {
                args.breakdown = true;
                continue;
            }
            if !VALUED.contains(&flag.as_str()) {
                return Err(format!("unknown flag {flag}"));
            }
            let value =
                inline.or_else(|| argv.next()).ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |what: &str| format!("invalid {flag} `{value}`: {what}");
            match flag.as_str() {
                "--program" => {
                    args.workload = match value.as_str() {
                        "fib" => Workload::Fibonacci,
                        "hash-mem" => Workload::HashMemory,
                        _ => return Err(bad("expected fib or hash-mem")),
                    }
                },
                "--cycles-log" => match value.parse() {
                    Ok(log) if (6..=26).contains(&log) => args.size = Size::CyclesLog(log),
                    _ => return Err(bad("expected 6..=26")),
                },
                "--iterations" => {
                    args.size = Size::Iterations(value.parse().map_err(|_| bad("not a count"))?)
                },
                "--hash" => {
                    args.hash_fn =
                        HashFunction::try_from(value.as_str()).map_err(|e| bad(&e.to_string()))?
                },
                "--security" => match value.as_str() {
                    "96" => args.security = 96,
                    "128" => args.security = 128,
                    _ => return Err(bad("expected 96 or 128")),
                },
                "--backend" => {
                    args.backends = value
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e: miden_gpu::GpuError| bad(&e.to_string()))?
                },
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        Ok(args)
    }

    fn options(&self) -> ProvingOptions {
        match self.security {
            96 => ProvingOptions::with_96_bit_security(self.hash_fn),
            _ => ProvingOptions::with_128_bit_security(self.hash_fn),
        }
    }
}

// MAIN
// ================================================================================================

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            return ExitCode::FAILURE;
        },
    };
    let times = StageTimes::new();
    let log_filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::registry()
        .with(times.clone())
        .with(tracing_subscriber::fmt::layer().with_filter(log_filter))
        .init();

    match run(&args, &times) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        },
    }
}

fn run(args: &Args, times: &StageTimes) -> Result<(), String> {
    // an unsupported hash function is the same typed error `miden_gpu::miden::prove` returns
    gpu_miden::gpu_hash_function(args.hash_fn).map_err(|e| e.to_string())?;
    let options = args.options();
    let program = Assembler::default()
        .assemble_program(args.workload.source())
        .map_err(|e| format!("assembly failed: {e}"))?;

    // workload size and trace shape (one untimed execution)
    let iterations = match args.size {
        Size::Iterations(n) => n,
        Size::CyclesLog(log) => iterations_for(&program, log)?,
    };
    let shape = TraceShape::of(&program, iterations, &options)?;
    println!(
        "program {} ({iterations} iterations), hash {:?}, {}-bit options",
        args.workload.name(),
        args.hash_fn,
        args.security
    );
    shape.print();

    // the backends, created once and warmed up (device start-up is not a proof stage)
    let mut committers = Vec::new();
    for &backend in &args.backends {
        let start = Instant::now();
        let committer = create_committer(backend);
        gpu_miden::prove_with_committer(
            &program,
            stack_inputs(iterations_for(&program, 12)?),
            AdviceInputs::default(),
            &mut DefaultHost::default(),
            options.clone(),
            committer.clone(),
        )
        .map_err(|e| format!("warm-up proof on {} failed: {e}", committer.backend()))?;
        println!(
            "backend {} on {} (created and warmed up in {})",
            committer.backend(),
            committer.device_name(),
            ms(start.elapsed())
        );
        committers.push(committer);
    }

    // CPU reference: miden_prover::prove
    times.take();
    let start = Instant::now();
    let (cpu_outputs, cpu_proof) = miden_prover::prove(
        &program,
        stack_inputs(iterations),
        AdviceInputs::default(),
        &mut DefaultHost::default(),
        options.clone(),
    )
    .map_err(|e| format!("miden_prover::prove failed: {e}"))?;
    let cpu = Timings::new("miden_prover".into(), start.elapsed(), times.take());
    let cpu_stark = cpu_proof.clone().into_parts().1;

    // miden_gpu::miden::prove on each backend: same proofs, expected outputs, verified
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for committer in committers {
        let label = format!("miden_gpu {}", committer.backend());
        let start = Instant::now();
        let (outputs, proof) = gpu_miden::prove_with_committer(
            &program,
            stack_inputs(iterations),
            AdviceInputs::default(),
            &mut DefaultHost::default(),
            options.clone(),
            committer,
        )
        .map_err(|e| format!("{label} failed: {e}"))?;
        runs.push(Timings::new(label.clone(), start.elapsed(), times.take()));

        let agreement = compare_proofs(&cpu_stark, &proof.clone().into_parts().1);
        println!("{label} vs miden_prover: {agreement} ({} bytes)", proof.to_bytes().len());
        if outputs != cpu_outputs || !agreement.is_match() {
            failures.push(format!("the proof of {label} differs from miden_prover's"));
        }
        if let Err(e) = verify(&program, iterations, outputs, proof) {
            failures.push(format!("{label}: {e}"));
        }
    }
    if let Workload::Fibonacci = args.workload {
        let expected = programs::fibonacci_outputs(iterations);
        if cpu_outputs.get_stack_item(0) != Some(expected[0]) {
            return Err(format!("unexpected output {:?}", cpu_outputs.get_stack_item(0)));
        }
        println!("output F({}) = {}", iterations + 1, expected[0]);
    }
    print_timings(&cpu, &runs, args.breakdown);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

// WORKLOAD SIZE AND TRACE SHAPE
// ================================================================================================

fn stack_inputs(iterations: u64) -> StackInputs {
    StackInputs::new(vec![Felt::new(iterations)]).expect("one input is a valid stack")
}

fn execute(
    program: &Program,
    iterations: u64,
    options: &ProvingOptions,
) -> Result<ExecutionTrace, String> {
    miden_processor::execute(
        program,
        stack_inputs(iterations),
        AdviceInputs::default(),
        &mut DefaultHost::default(),
        *options.execution_options(),
    )
    .map_err(|e| format!("execution failed: {e}"))
}

/// The iteration count whose trace fills 2^`log` rows: the step count is linear in the
/// iterations, so two small executions give its slope and intercept.
fn iterations_for(program: &Program, log: u32) -> Result<u64, String> {
    const PROBE: u64 = 64;
    let options = ProvingOptions::default();
    let steps = |n| execute(program, n, &options).map(|t| t.trace_len_summary().trace_len() as u64);
    let (short, long) = (steps(PROBE)?, steps(2 * PROBE)?);
    let per_iteration = (long - short).div_ceil(PROBE).max(1);
    let fixed = short.saturating_sub(PROBE * per_iteration);
    // room for the random rows, and 1/64 slack for the range checker's non-linear growth
    let rows = (1u64 << log) - NUM_RAND_ROWS as u64 - (1u64 << log) / 64;
    Ok((rows.saturating_sub(fixed) / per_iteration).max(1))
}

/// Widths and lengths of the trace and of the constraint composition polynomial.
struct TraceShape {
    steps: usize,
    core_steps: usize,
    hasher_rows: usize,
    memory_rows: usize,
    range_rows: usize,
    rows: usize,
    main_width: usize,
    aux_width: usize,
    composition_columns: usize,
    main_constraints: usize,
    aux_constraints: usize,
    extension: usize,
}

impl TraceShape {
    fn of(program: &Program, iterations: u64, options: &ProvingOptions) -> Result<Self, String> {
        let trace = execute(program, iterations, options)?;
        let pub_inputs = PublicInputs::new(
            ProgramInfo::from(program.clone()),
            stack_inputs(iterations),
            trace.stack_outputs().clone(),
            trace.final_precompile_transcript().state(),
        );
        let air = ProcessorAir::new(trace.info().clone(), pub_inputs, options.clone().into());
        let extension = match air.options().field_extension() {
            FieldExtension::None => 1,
            FieldExtension::Quadratic => 2,
            FieldExtension::Cubic => 3,
        };
        let lengths = trace.trace_len_summary();
        Ok(Self {
            steps: lengths.trace_len(),
            core_steps: lengths.main_trace_len(),
            hasher_rows: lengths.chiplets_trace_len().hash_chiplet_len(),
            memory_rows: lengths.chiplets_trace_len().memory_chiplet_len(),
            range_rows: lengths.range_trace_len(),
            rows: trace.length(),
            main_width: trace.info().main_trace_width(),
            aux_width: trace.info().aux_segment_width(),
            composition_columns: air.context().num_constraint_composition_columns(),
            main_constraints: air.context().num_main_transition_constraints(),
            aux_constraints: air.context().num_aux_transition_constraints(),
            extension,
        })
    }

    fn print(&self) {
        let k = self.extension;
        println!(
            "trace: {} steps (core {}, hasher {}, memory {}, range checker {}) -> 2^{} rows",
            self.steps,
            self.core_steps,
            self.hasher_rows,
            self.memory_rows,
            self.range_rows,
            self.rows.trailing_zeros()
        );
        println!(
            "columns: main {} base; aux {} extension ({} base); composition {} extension ({} base); \
             {} main + {} aux transition constraints",
            self.main_width,
            self.aux_width,
            self.aux_width * k,
            self.composition_columns,
            self.composition_columns * k,
            self.main_constraints,
            self.aux_constraints
        );
    }
}

// BACKEND
// ================================================================================================

/// The committer for `backend`; without a usable GPU, says so and uses the CPU backend.
fn create_committer(backend: Backend) -> Arc<dyn GpuCommitter> {
    let committer = backend.create().unwrap_or_else(|e| {
        println!("{e}; running on the CPU backend");
        Backend::Cpu.create().expect("the CPU backend is always available")
    });
    if committer.backend() == Backend::Cpu && backend != Backend::Cpu {
        println!("no GPU found: the miden_gpu path runs on the CPU backend");
    }
    committer
}

// TIMINGS
// ================================================================================================

/// Wall-clock total of one proof and its span totals.
struct Timings {
    label: String,
    total: Duration,
    spans: BTreeMap<&'static str, Duration>,
}

impl Timings {
    fn new(label: String, total: Duration, spans: BTreeMap<&'static str, Duration>) -> Self {
        Self { label, total, spans }
    }

    fn span(&self, name: &str) -> Duration {
        self.spans.get(name).copied().unwrap_or_default()
    }
}

/// The rows of the table: a label and the spans it adds up; the rows add up to the total.
/// Miden names execution `execute_program` (miden-processor) and the bus columns
/// `build_aux_trace` (miden-prover and `miden_gpu::miden`, outside Winterfell's aux commitment
/// span); the rest are Winterfell's.
const ROWS: [(&str, &[&str]); 6] = [
    ("execution", &["execute_program"]),
    ("trace commitment", &[stages::MAIN_TRACE, stages::AUX_TRACE]),
    ("aux trace build", &["build_aux_trace"]),
    ("constraint evaluation", &["evaluate_constraints"]),
    ("constraint commitment", &[stages::CONSTRAINTS]),
    ("rest (DEEP, FRI, queries)", &[]),
];

/// One line per stage: the CPU prover's time, then each backend's time and its ratio to the CPU.
fn print_timings(cpu: &Timings, runs: &[Timings], breakdown: bool) {
    let staged = |t: &Timings, spans: &[&str]| spans.iter().map(|s| t.span(s)).sum::<Duration>();
    let counted = |t: &Timings| ROWS.iter().map(|(_, spans)| staged(t, spans)).sum();
    let stage = |t: &Timings, spans: &[&str]| {
        if spans.is_empty() {
            t.total.saturating_sub(counted(t))
        } else {
            staged(t, spans)
        }
    };
    print!("\n{:<28}{:>14}", "stage", cpu.label);
    runs.iter().for_each(|r| print!("{:>22}{:>8}", r.label, "ratio"));
    println!();
    let row = |label: &str, of: &dyn Fn(&Timings) -> Duration| {
        print!("{label:<28}{:>14}", ms(of(cpu)));
        for run in runs {
            let ratio = of(cpu).as_secs_f64() / of(run).as_secs_f64().max(1e-9);
            print!("{:>22}{ratio:>7.2}x", ms(of(run)));
        }
        println!();
    };
    for (label, spans) in ROWS {
        row(label, &|t| stage(t, spans));
    }
    row("total", &|t| t.total);
    if breakdown {
        println!("\nall spans ({}):", [cpu].into_iter().chain(runs).map(|t| t.label.as_str()).collect::<Vec<_>>().join(" | "));
        let names: std::collections::BTreeSet<_> =
            [cpu].into_iter().chain(runs).flat_map(|t| t.spans.keys()).collect();
        for name in names {
            print!("  {name:<44}");
            [cpu].into_iter().chain(runs).for_each(|t| print!("{:>14}", ms(t.span(name))));
            println!();
        }
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

// VERIFICATION
// ================================================================================================

fn verify(
    program: &Program,
    iterations: u64,
    outputs: StackOutputs,
    proof: ExecutionProof,
) -> Result<(), String> {
    let start = Instant::now();
    let security = miden_verifier::verify(
        ProgramInfo::from(program.clone()),
        stack_inputs(iterations),
        outputs,
        proof,
    )
    .map_err(|e| format!("verification failed: {e}"))?;
    println!("verified: {security}-bit security ({})", ms(start.elapsed()));
    Ok(())
}
