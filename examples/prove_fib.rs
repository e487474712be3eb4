//! Proves a Fibonacci computation with Winterfell's own prover (the CPU baseline) and with
//! `GpuProver`, checks the two proofs are byte-identical (or, where Winterfell's concurrent
//! grinding picked another nonce, that every commitment is), verifies, and prints the timings.
//!
//! ```text
//! cargo run --release --example prove_fib -- --log-steps 12
//! cargo run --release --features cuda --example prove_fib -- --backend cuda
//! ```

miden_gpu::use_jemalloc!();

mod fib;

use std::{io::IsTerminal, sync::Arc, time::Instant};

use clap::{Parser, ValueEnum};
use fib::{FibAir, FibProver, FibTrace};
use indicatif::{ProgressBar, ProgressStyle};
use miden_crypto::hash::{
    blake::{Blake3_192, Blake3_256},
    poseidon2::Poseidon2,
    rpo::Rpo256,
    rpx::Rpx256,
};
use miden_gpu::{
    compare_proofs,
    progress::ProofProgress,
    spans,
    timing::{self, Row, SpanTimes},
    Backend, BackendOptions, GpuCommitter, GpuHasher, GpuProver,
};
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};
use winter_air::{BatchingMethod, FieldExtension, ProofOptions};
use winter_crypto::{DefaultRandomCoin, MerkleTree};
use winter_prover::{Prover, ProverError};
use winter_verifier::AcceptableOptions;

/// Trace length when a GPU backend is in use.
const GPU_LOG_STEPS: u32 = 20;
/// Trace length when only the CPU backend is available (keeps the run short).
const CPU_LOG_STEPS: u32 = 14;

/// The stages of the timing table (the rest of the proof is in its total).
const COMMITMENT_ROWS: [Row; 2] = [
    Row { label: "trace commitment", spans: &[spans::MAIN_TRACE, spans::AUX_TRACE] },
    Row { label: "constraint commitment", spans: &[spans::CONSTRAINTS] },
];

#[derive(Parser)]
#[command(about = "Prove Fibonacci with Winterfell and with miden-gpu, compare and verify")]
struct Args {
    /// log2 of the trace length [default: 20 on a GPU backend, 14 on the CPU backend]
    #[arg(long)]
    log_steps: Option<u32>,
    /// Row hash and Merkle hash.
    #[arg(long, value_enum, default_value = "rpo")]
    hash: HashArg,
    /// Field extension used by the proof.
    #[arg(long, value_enum, default_value = "quadratic")]
    field: FieldArg,
    /// LDE blowup factor.
    #[arg(long, default_value_t = 8)]
    blowup: usize,
    /// Fibonacci pairs (the main trace has two columns per pair).
    #[arg(long, default_value_t = 4)]
    pairs: usize,
    /// Backend: auto, cpu, wgpu or cuda [default: $MIDEN_GPU_BACKEND, else auto].
    #[arg(long)]
    backend: Option<String>,
    /// GPU proofs to time after Winterfell's (the table shows the first; the others' times are
    /// listed after it).
    #[arg(long, default_value_t = 1)]
    gpu_runs: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum HashArg {
    Rpo,
    Rpx,
    Poseidon2,
    #[value(name = "blake3-192")]
    Blake3_192,
    #[value(name = "blake3-256")]
    Blake3_256,
}

#[derive(Clone, Copy, ValueEnum)]
enum FieldArg {
    None,
    Quadratic,
    Cubic,
}

fn main() {
    #[cfg(feature = "wgpu")]
    miden_gpu::wgpu::prepare_headless_vulkan();
    let args = Args::parse();
    let times = SpanTimes::new();
    let spinner = spinner();
    let on_step = spinner.clone();
    // Tracing lines only where RUST_LOG asks for them; a spinner shows the proof step otherwise.
    let log = EnvFilter::try_from_default_env()
        .ok()
        .map(|filter| tracing_subscriber::fmt::layer().with_filter(filter));
    tracing_subscriber::registry()
        .with(times.clone())
        .with(ProofProgress::new(move |step| on_step.set_message(step)))
        .with(log)
        .init();
    let result = run(args, &times, &spinner);
    spinner.finish_and_clear();
    if let Err(message) = result {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

/// A spinner on stderr naming the running step, where stderr is a terminal.
fn spinner() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})")
            .expect("a valid template"),
    );
    spinner.enable_steady_tick(std::time::Duration::from_millis(100));
    spinner
}

fn run(args: Args, times: &SpanTimes, spinner: &ProgressBar) -> Result<(), String> {
    let mut options = BackendOptions::from_env().map_err(|e| format!("{e}"))?;
    if let Some(name) = &args.backend {
        options.backend = name.parse().map_err(|e| format!("{e}"))?;
    }
    spinner.set_prefix("set-up");
    spinner.set_message(format!("opening the {} backend", options.backend));
    let committer = options.create().map_err(|e| format!("{e}"))?;
    let on_gpu = committer.backend() != Backend::Cpu;
    let log_steps = args.log_steps.unwrap_or(if on_gpu { GPU_LOG_STEPS } else { CPU_LOG_STEPS });
    if !on_gpu {
        spinner.suspend(|| {
            println!("No GPU backend available: running on the CPU backend ({}).", committer.device_name());
            if args.log_steps.is_none() {
                println!("Using a smaller default trace of 2^{CPU_LOG_STEPS} steps (pass --log-steps to change it).");
            }
        });
    }
    let field = match args.field {
        FieldArg::None => FieldExtension::None,
        FieldArg::Quadratic => FieldExtension::Quadratic,
        FieldArg::Cubic => FieldExtension::Cubic,
    };
    let options = ProofOptions::new(
        27,
        args.blowup,
        16,
        field,
        8,
        127,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    );
    let trace = TraceShape { log_steps, pairs: args.pairs, gpu_runs: args.gpu_runs.max(1) };
    match args.hash {
        HashArg::Rpo => prove::<Rpo256>(committer, options, trace, times, spinner),
        HashArg::Rpx => prove::<Rpx256>(committer, options, trace, times, spinner),
        HashArg::Poseidon2 => prove::<Poseidon2>(committer, options, trace, times, spinner),
        HashArg::Blake3_192 => prove::<Blake3_192>(committer, options, trace, times, spinner),
        HashArg::Blake3_256 => prove::<Blake3_256>(committer, options, trace, times, spinner),
    }
}

/// The trace to prove and how many GPU proofs of it to time.
#[derive(Clone, Copy)]
struct TraceShape {
    log_steps: u32,
    pairs: usize,
    gpu_runs: usize,
}

fn prove<H: GpuHasher>(
    committer: Arc<dyn GpuCommitter>,
    options: ProofOptions,
    trace: TraceShape,
    times: &SpanTimes,
    spinner: &ProgressBar,
) -> Result<(), String> {
    let TraceShape { log_steps, pairs, gpu_runs } = trace;
    let steps = 1usize << log_steps;
    spinner.suspend(|| {
        println!(
        "Fibonacci: 2^{log_steps} steps x {} columns, {} blowup {}, {:?} field; backend {} on {}",
        2 * pairs,
        H::FUNCTION,
        options.blowup_factor(),
        options.field_extension(),
        committer.backend(),
        committer.device_name()
    )
    });
    let cpu = FibProver::<H>::new(options.clone());
    let gpu = GpuProver::with_committer(FibProver::<H>::new(options.clone()), committer);

    // Warm-up: kernel compilation, pipelines and device buffers stay out of the timings.
    spinner.set_prefix("warm-up proof");
    gpu.prove(FibTrace::new(pairs, 1 << 10)).map_err(|e| format!("warm-up proof: {e}"))?;

    let trace = FibTrace::new(pairs, steps);
    let inputs = trace.inputs();
    let failed = |e: ProverError| format!("proof failed: {e}");
    spinner.set_prefix("Winterfell's proof");
    let (cpu_proof, cpu_times) = times.time("winterfell", || cpu.prove(trace));
    let cpu_proof = cpu_proof.map_err(failed)?;
    spinner.set_prefix("GPU proof");
    let (gpu_proof, gpu_times) = times.time("miden-gpu", || gpu.prove(FibTrace::new(pairs, steps)));
    let gpu_proof = gpu_proof.map_err(failed)?;
    spinner.finish_and_clear();

    let agreement = compare_proofs(&cpu_proof, &gpu_proof);
    println!("GPU proof vs Winterfell's: {agreement} ({} bytes).", gpu_proof.to_bytes().len());
    if !agreement.is_match() {
        return Err("the GPU proof differs from Winterfell's".into());
    }
    winter_verifier::verify::<FibAir, H, DefaultRandomCoin<H>, MerkleTree<H>>(
        gpu_proof,
        inputs,
        &AcceptableOptions::OptionSet(vec![options]),
    )
    .map_err(|e| format!("verification failed: {e}"))?;
    println!("Proof verified by winter-verifier.\n");

    println!("{}", timing::stage_table(&[cpu_times, gpu_times], &COMMITMENT_ROWS));
    if gpu_runs > 1 {
        let mut totals = Vec::with_capacity(gpu_runs - 1);
        for _ in 1..gpu_runs {
            let start = Instant::now();
            gpu.prove(FibTrace::new(pairs, steps)).map_err(failed)?;
            totals.push(format!("{:.1} ms", start.elapsed().as_secs_f64() * 1e3));
        }
        println!("further GPU proofs: {}", totals.join(", "));
    }
    Ok(())
}
