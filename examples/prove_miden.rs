//! Proves a Miden VM program with its trace and constraint commitments on a GPU, verifies the
//! proof with `miden_verifier`, and prints how long each stage of the proof took.
//!
//! ```text
//! cargo run --release --features miden --example prove_miden -- --program fib --cycles-log 16
//! cargo run --release --features cuda,miden --example prove_miden -- \
//!     --program fib --cycles-log 20 --hash rpo --security 96 --backend cuda,wgpu --compare-cpu
//! ```
//!
//! `miden_gpu::miden::prove` takes the same arguments as `miden_prover::prove` and a
//! [`Backend`], which it creates for the one proof. A program that proves more than once creates
//! the backend once and calls `prove_with_committer`, as here: each backend first proves a small
//! program untimed, so the timings are of a warm prover (kernel compilation and device buffers
//! are start-up costs). With `--compare-cpu`, `miden_prover::prove` (Winterfell on the CPU) runs
//! too, every timing gets its ratio to it, and the proofs are compared. `RUST_LOG=miden_gpu=info`
//! adds the crate's log lines (the trace's size among them).

use std::{process::ExitCode, sync::Arc, time::Instant};

use clap::{Parser, ValueEnum};
use miden_assembly::Assembler;
use miden_gpu::{
    compare_proofs,
    miden::{self as gpu_miden, programs},
    timing::{self, RunTimes, SpanTimes},
    Backend, BackendOptions, Felt, GpuCommitter,
};
use miden_processor::{
    AdviceInputs, DefaultHost, ExecutionOptions, Program, StackInputs, StackOutputs, NUM_RAND_ROWS,
};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
use miden_verifier::ProgramInfo;
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};

// ARGUMENTS
// ================================================================================================

#[derive(Parser)]
#[command(about = "Prove a Miden VM program on a GPU backend, verify it and time its stages")]
struct Args {
    /// The program (from `miden_gpu::miden::programs`).
    #[arg(long, value_enum, default_value = "fib")]
    program: Workload,
    /// log2 of the trace length: the loop runs long enough to fill 2^N rows.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(6..=26))]
    cycles_log: u32,
    /// Hash function: rpo, rpx, poseidon2, blake3-192 or blake3-256.
    #[arg(long, default_value = "rpo", value_parser = parse_hash)]
    hash: HashFunction,
    /// Security level of the proving options.
    #[arg(long, default_value = "96", value_parser = ["96", "128"])]
    security: String,
    /// Backends, comma-separated (`cuda,wgpu`: each proves in turn): auto, cpu, wgpu or cuda
    /// [default: $MIDEN_GPU_BACKEND, else auto].
    #[arg(long, value_delimiter = ',')]
    backend: Option<Vec<Backend>>,
    /// Also prove with `miden_prover::prove` (Winterfell on the CPU), compare the proofs and
    /// give every timing its ratio to the CPU's.
    #[arg(long)]
    compare_cpu: bool,
    /// Also print the total of every span (the backends' stages included).
    #[arg(long)]
    breakdown: bool,
}

/// The workloads of `miden_gpu::miden::programs`.
#[derive(Clone, Copy, ValueEnum)]
enum Workload {
    /// A Fibonacci loop (`FIBONACCI`).
    Fib,
    /// `hperm`, `hmerge`, memory stores and loads in a loop: hasher and memory chiplets
    /// (`HASH_MEMORY`).
    HashMem,
}

fn parse_hash(name: &str) -> Result<HashFunction, String> {
    HashFunction::try_from(name).map_err(|e| e.to_string())
}

impl Args {
    fn options(&self) -> ProvingOptions {
        match self.security.as_str() {
            "96" => ProvingOptions::with_96_bit_security(self.hash),
            _ => ProvingOptions::with_128_bit_security(self.hash),
        }
    }
}

// MAIN
// ================================================================================================

fn main() -> ExitCode {
    let args = Args::parse();
    // span totals for the timing tables, and log lines as RUST_LOG says
    let times = SpanTimes::new();
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

fn run(args: &Args, times: &SpanTimes) -> Result<(), String> {
    let source = match args.program {
        Workload::Fib => programs::FIBONACCI,
        Workload::HashMem => programs::HASH_MEMORY,
    };
    let program = Assembler::default()
        .assemble_program(source)
        .map_err(|e| format!("assembly failed: {e}"))?;
    let iterations = iterations_for(&program, args.cycles_log)?;
    let options = args.options();
    println!(
        "{iterations} iterations (2^{} rows), hash {:?}, {}-bit options",
        args.cycles_log, args.hash, args.security
    );

    // the backends, created once and warmed up on a small program
    let from_env = BackendOptions::from_env().map_err(|e| e.to_string())?;
    let backends = match &args.backend {
        Some(list) => list.clone(),
        None => vec![from_env.backend],
    };
    let mut committers = Vec::new();
    for backend in backends {
        let start = Instant::now();
        let backend_options = BackendOptions { backend, ..from_env.clone() };
        let committer = backend_options.create().map_err(|e| e.to_string())?;
        prove(&program, iterations_for(&program, 12)?, &options, committer.clone())?;
        println!(
            "backend {} on {}: created and warmed up in {:.1?}",
            committer.backend(),
            committer.device_name(),
            start.elapsed()
        );
        committers.push(committer);
    }

    let mut runs = Vec::new();
    let mut cpu_proof = None;
    if args.compare_cpu {
        let (proved, cpu_times) = times.time("miden_prover", || {
            miden_prover::prove(
                &program,
                stack_inputs(iterations),
                AdviceInputs::default(),
                &mut DefaultHost::default(),
                options.clone(),
            )
        });
        cpu_proof = Some(proved.map_err(|e| format!("miden_prover::prove failed: {e}"))?);
        runs.push(cpu_times);
    }
    let mut failures = Vec::new();
    for committer in committers {
        let label = format!("miden_gpu {}", committer.backend());
        let memory = committer.clone();
        let (proved, gpu_times) =
            times.time(&label, || prove(&program, iterations, &options, committer));
        let (outputs, proof) = proved?;
        runs.push(gpu_times);
        print_proof(&label, &proof);
        let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
        if let (Some(peak), Some(now)) = (memory.peak_memory_in_use(), memory.memory_in_use()) {
            // CUDA counts the whole device (context included), wgpu this committer's buffers
            println!(
                "{label}: device memory in use: peak {:.2} GiB, {:.2} GiB after the proof",
                gib(peak),
                gib(now)
            );
        }
        if let Some((cpu_outputs, cpu_proof)) = &cpu_proof {
            let agreement = compare_proofs(cpu_proof.stark_proof(), proof.stark_proof());
            println!("{label} vs miden_prover: {agreement}");
            if outputs != *cpu_outputs || !agreement.is_match() {
                failures.push(format!("the proof of {label} differs from miden_prover's"));
            }
        }
        if let Workload::Fib = args.program {
            let expected = programs::fibonacci_outputs(iterations)[0];
            if outputs.get_stack_item(0) != Some(expected) {
                failures.push(format!("{label}: F({}) is not {expected}", iterations + 1));
            }
        }
        let start = Instant::now();
        match miden_verifier::verify(
            ProgramInfo::from(program.clone()),
            stack_inputs(iterations),
            outputs,
            proof,
        ) {
            Ok(security) => {
                println!("{label}: verified, {security}-bit security ({:.1?})", start.elapsed())
            },
            Err(e) => failures.push(format!("{label}: verification failed: {e}")),
        }
    }

    print_timings(&runs, args.breakdown);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

// PROVING
// ================================================================================================

fn stack_inputs(iterations: u64) -> StackInputs {
    StackInputs::new(vec![Felt::new(iterations)]).expect("one input is a valid stack")
}

/// Proves `iterations` of `program` with `miden_gpu` on `committer`.
fn prove(
    program: &Program,
    iterations: u64,
    options: &ProvingOptions,
    committer: Arc<dyn GpuCommitter>,
) -> Result<(StackOutputs, ExecutionProof), String> {
    gpu_miden::prove_with_committer(
        program,
        stack_inputs(iterations),
        AdviceInputs::default(),
        &mut DefaultHost::default(),
        options.clone(),
        committer,
    )
    .map_err(|e| format!("miden_gpu::miden::prove failed: {e}"))
}

/// The iteration count whose trace fills 2^`log` rows: the step count is linear in the
/// iterations, so two short executions give its slope and intercept.
fn iterations_for(program: &Program, log: u32) -> Result<u64, String> {
    const PROBE: u64 = 64;
    let steps = |iterations| {
        miden_processor::execute(
            program,
            stack_inputs(iterations),
            AdviceInputs::default(),
            &mut DefaultHost::default(),
            ExecutionOptions::default(),
        )
        .map(|trace| trace.trace_len_summary().trace_len() as u64)
        .map_err(|e| format!("execution failed: {e}"))
    };
    let (short, long) = (steps(PROBE)?, steps(2 * PROBE)?);
    let per_iteration = (long - short).div_ceil(PROBE).max(1);
    let fixed = short.saturating_sub(PROBE * per_iteration);
    // room for the random rows, and 1/64 slack for the range checker's non-linear growth
    let rows = (1u64 << log) - NUM_RAND_ROWS as u64 - (1u64 << log) / 64;
    Ok((rows.saturating_sub(fixed) / per_iteration).max(1))
}

// OUTPUT
// ================================================================================================

/// The proof's trace shape and size.
fn print_proof(label: &str, proof: &ExecutionProof) {
    let trace = proof.stark_proof().trace_info();
    println!(
        "{label}: 2^{} rows, {} main + {} aux columns; proof of {} bytes",
        trace.length().ilog2(),
        trace.main_trace_width(),
        trace.aux_segment_width(),
        proof.to_bytes().len()
    );
}

/// The stage table of the runs (ratios to the first: the CPU prover's with `--compare-cpu`),
/// and with `breakdown` every span's total.
fn print_timings(runs: &[RunTimes], breakdown: bool) {
    println!("\n{}", timing::stage_table(runs, &timing::PROOF_ROWS));
    if breakdown {
        println!("\n{}", timing::span_table(runs));
    }
}
