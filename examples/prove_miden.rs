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
//! [`Backend`], which it creates for the one proof. `--execution reference,parallel` proves
//! once after each of Miden's processors (`miden_gpu::miden::Execution`; default parallel). A program that proves more than once creates
//! the backend once and calls `prove_with_committer`, as here: each backend first proves a small
//! program untimed, so the timings are of a warm prover (kernel compilation and device buffers
//! are start-up costs). With `--compare-cpu`, `miden_prover::prove` (Winterfell on the CPU) runs
//! too, every timing gets its ratio to it, and the proofs are compared. `RUST_LOG=miden_gpu=info`
//! adds the crate's log lines (the trace's size among them).
//!
//! With `--pool-jobs N` it measures throughput instead: N copies of the program are proved
//! through a `ProverPool` for each device set of `--pool-devices` (default: the first GPU, the
//! first two, ... up to every CUDA GPU; on the CPU backend a set's size is its number of CPU
//! slots), each slot of a pool first proving one job untimed (a pool that has served before),
//! and proofs per minute are printed side by side, with the process's peak resident
//! memory after each set (a high-water mark: it never falls):
//!
//! ```text
//! cargo run --release --features cuda,miden --example prove_miden -- \
//!     --program fib --cycles-log 20 --backend cuda --pool-jobs 8 --pool-devices '0;0,1'
//! ```
//!
//! `--span-events` logs each span's opening and closing with its time and fields: with
//! `RUST_LOG=info,miden_gpu=debug`, a timeline of every job's stages (`pool.job{job slot}`) and
//! of each CUDA committer call's hold on its device (`cuda.turn_held`), which
//! `scripts/pool_timeline.py` tabulates.

miden_gpu::use_jemalloc!();

use std::{process::ExitCode, sync::Arc, time::Instant};

use clap::{Parser, ValueEnum};
use miden_assembly::Assembler;
use miden_gpu::{
    compare_proofs,
    miden::{self as gpu_miden, programs, Execution, MidenProveOptions},
    timing::{self, RunTimes, SpanTimes},
    Backend, BackendOptions, ConstraintPlacement, GpuCommitter, PoolOptions, ProofMatch,
    ProverPool,
};
use miden_processor::{AdviceInputs, DefaultHost, Program, StackInputs, StackOutputs};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
use miden_verifier::ProgramInfo;
use tracing_subscriber::{
    fmt::format::FmtSpan, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer,
};

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
    /// Also print the host CPU time of each stage (core-seconds, and the cores it kept busy)
    /// and the total of every span (the backends' stages included).
    #[arg(long)]
    breakdown: bool,
    /// Measure throughput instead: prove N copies of the program through a `ProverPool` for
    /// each device set and print proofs per minute (one backend only).
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["compare_cpu", "breakdown"],
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pool_jobs: Option<u32>,
    /// The pool's device sets, `;` between sets, `,` between CUDA ordinals (`0;0,1`: GPU 0
    /// alone, then GPUs 0 and 1); on the CPU backend a set's size is its number of CPU slots
    /// [default: the first GPU, the first two, ... every CUDA GPU; else one slot].
    #[arg(long, value_parser = parse_device_sets, requires = "pool_jobs")]
    pool_devices: Option<DeviceSets>,
    /// Workers per slot: proofs in flight on each GPU [default: the pool's, 4].
    #[arg(long, value_name = "K", requires = "pool_jobs", value_parser = clap::value_parser!(u16).range(1..))]
    pool_workers_per_slot: Option<u16>,
    /// Each slot's own host threads: `split` (the host's cores divided between the slots) or a
    /// count [default: none, every slot's proofs share the process's rayon pool].
    #[arg(long, value_name = "THREADS", requires = "pool_jobs", value_parser = parse_slot_threads)]
    pool_threads_per_slot: Option<SlotThreads>,
    /// How the program is executed before each proof, comma-separated (`reference,parallel`:
    /// each backend proves once with each); a pool runs every device set with each.
    #[arg(long, value_delimiter = ',', default_value = "parallel")]
    execution: Vec<Execution>,
    /// Host memory, in GiB, that CUDA committers keep registered for LDE rows and trees, written
    /// by the GPUs directly from the second proof of a size on (`CudaOptions::pinned_rows_bytes`;
    /// a pool's `PoolOptions::pinned_rows_bytes`) [default: none for single proofs, the pool's
    /// default for a pool].
    #[arg(long, value_name = "GIB")]
    pinned_rows_gib: Option<u64>,
    /// Where the constraints are evaluated: `backend` (on the GPU where it can) or `cpu` (the
    /// wrapped prover's evaluator, for comparison).
    #[arg(long, default_value = "backend", value_parser = ["backend", "cpu"])]
    constraints: String,
    /// Log a line when each span RUST_LOG lets through opens and closes, with its time and
    /// fields (a timeline of the proofs' stages: `RUST_LOG=miden_gpu=debug`).
    #[arg(long)]
    span_events: bool,
}

impl Args {
    /// Where `--constraints` evaluates the constraints.
    fn placement(&self) -> ConstraintPlacement {
        match self.constraints.as_str() {
            "cpu" => ConstraintPlacement::Cpu,
            _ => ConstraintPlacement::Backend,
        }
    }
}

/// Device sets of `--pool-devices`, each a list of CUDA ordinals.
#[derive(Clone)]
struct DeviceSets(Vec<Vec<usize>>);

fn parse_device_sets(text: &str) -> Result<DeviceSets, String> {
    let parse_set = |set: &str| -> Result<Vec<usize>, String> {
        set.split(',')
            .map(|item| {
                let item = item.trim();
                item.parse().map_err(|_| format!("`{item}` is not a device number"))
            })
            .collect()
    };
    Ok(DeviceSets(text.split(';').map(parse_set).collect::<Result<_, _>>()?))
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

/// `--pool-threads-per-slot`.
#[derive(Debug, Clone, Copy)]
enum SlotThreads {
    Split,
    Count(usize),
}

fn parse_slot_threads(text: &str) -> Result<SlotThreads, String> {
    match text {
        "split" => Ok(SlotThreads::Split),
        count => match count.parse() {
            Ok(0) | Err(_) => Err(format!("`{text}` is not `split` or a thread count")),
            Ok(count) => Ok(SlotThreads::Count(count)),
        },
    }
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
    let span_events = match args.span_events {
        true => FmtSpan::NEW | FmtSpan::CLOSE,
        false => FmtSpan::NONE,
    };
    tracing_subscriber::registry()
        .with(times.clone())
        .with(
            tracing_subscriber::fmt::layer().with_span_events(span_events).with_filter(log_filter),
        )
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

    #[allow(unused_mut)]
    let mut from_env = BackendOptions::from_env().map_err(|e| e.to_string())?;
    #[cfg(feature = "cuda")]
    if let Some(gib) = args.pinned_rows_gib {
        from_env.cuda.pinned_rows_bytes = gib << 30;
    }
    if let Some(jobs) = args.pool_jobs {
        return run_pool(args, jobs as usize, &program, iterations, &options, from_env);
    }

    // the backends, created once and warmed up on a small program
    let backends = match &args.backend {
        Some(list) => list.clone(),
        None => vec![from_env.backend],
    };
    let mut committers = Vec::new();
    for backend in backends {
        let start = Instant::now();
        let backend_options = BackendOptions { backend, ..from_env.clone() };
        let committer = backend_options.create().map_err(|e| e.to_string())?;
        let small = iterations_for(&program, 12)?;
        prove(
            &program,
            small,
            &options,
            committer.clone(),
            (Execution::default(), args.placement()),
        )?;
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
    let proofs =
        committers.iter().flat_map(|c| args.execution.iter().map(move |&e| (c.clone(), e)));
    for (committer, execution) in proofs {
        let label = match args.execution.len() {
            1 => format!("miden_gpu {}", committer.backend()),
            _ => format!("miden_gpu {} {execution}", committer.backend()),
        };
        let memory = committer.clone();
        let (proved, gpu_times) = times.time(&label, || {
            prove(&program, iterations, &options, committer, (execution, args.placement()))
        });
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

// POOL THROUGHPUT
// ================================================================================================

/// The throughput of one device set: `jobs` proofs in `wall`.
struct PoolRun {
    devices: String,
    slots: usize,
    workers: usize,
    wall: std::time::Duration,
    /// The process's CPU time over the run, where the platform reports it.
    cpu: Option<timing::CpuTime>,
}

/// Proves `jobs` copies of `program` through a pool on each device set, verifies every proof
/// and prints the proofs per minute of each set side by side.
fn run_pool(
    args: &Args,
    jobs: usize,
    program: &Program,
    iterations: u64,
    options: &ProvingOptions,
    from_env: BackendOptions,
) -> Result<(), String> {
    let backend = match args.backend.as_deref() {
        None => from_env.backend,
        Some([backend]) => *backend,
        Some(_) => return Err("--pool-jobs takes one backend".into()),
    };
    let sets = match &args.pool_devices {
        Some(DeviceSets(sets)) => sets.clone(),
        None => default_device_sets(backend),
    };
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let runs_of_sets = sets.iter().flat_map(|set| args.execution.iter().map(move |&e| (set, e)));
    for (set, execution) in runs_of_sets {
        let mut pool_options = PoolOptions::new(BackendOptions { backend, ..from_env.clone() });
        pool_options.cpu_slots = set.len();
        pool_options.pinned_rows_bytes = args.pinned_rows_gib.map(|gib| gib << 30);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        pool_options.threads_per_slot = args.pool_threads_per_slot.map(|threads| match threads {
            SlotThreads::Split => (cores / set.len()).max(1),
            SlotThreads::Count(count) => count,
        });
        #[cfg(feature = "cuda")]
        {
            pool_options.backend.cuda.devices = Some(set.clone());
        }
        // wgpu has one slot, its adapter, whatever the set
        let slots = if backend == Backend::Wgpu { 1 } else { set.len() };
        pool_options.workers =
            args.pool_workers_per_slot.map(|per_slot| usize::from(per_slot) * slots);
        let pool = ProverPool::new(&pool_options).map_err(|e| e.to_string())?;
        let devices = match pool.backend() {
            Backend::Cuda => format!("cuda {}", list(set)),
            backend => format!("{backend} x{}", pool.slots()),
        };
        let devices = match args.execution.len() {
            1 => devices,
            _ => format!("{devices} {execution}"),
        };
        let submit = || {
            pool.prove_miden_with(
                program.clone(),
                (stack_inputs(iterations), AdviceInputs::default()),
                DefaultHost::default(),
                options.clone(),
                MidenProveOptions {
                    execution,
                    constraints: args.placement(),
                    ..MidenProveOptions::default()
                },
            )
        };
        // one job per worker untimed, at the jobs' size: kernels compiled, device buffers, row
        // memory and the allocator's host memory grown, as in a pool that has served before
        let warm_up: Vec<_> = (0..pool.workers()).map(|_| submit()).collect();
        for handle in warm_up {
            handle.wait().map_err(|e| format!("{devices}: warm-up: {e}"))?;
        }

        let start = Instant::now();
        let cpu_start = timing::process_cpu_time();
        let handles: Vec<_> = (0..jobs).map(|_| submit()).collect();
        let proofs: Vec<_> = handles.into_iter().map(|handle| handle.wait()).collect();
        let wall = start.elapsed();
        let cpu = cpu_start.zip(timing::process_cpu_time()).map(|(start, end)| end.since(start));
        let run = PoolRun { devices, slots: pool.slots(), workers: pool.workers(), wall, cpu };
        let peak = match pool.peak_resident_bytes() {
            Some(bytes) => format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20)),
            None => "not reported".into(),
        };
        // the same proof alone on the first slot's committer, outside the pool
        let alone = match pool.committers().first() {
            Some(committer) => Some(prove(
                program,
                iterations,
                options,
                committer.clone(),
                (execution, args.placement()),
            )?),
            None => None,
        };
        pool.shutdown();

        let (mut identical, mut renonced) = (0, 0);
        for (job, proved) in proofs.into_iter().enumerate() {
            let label = format!("{} job {job}", run.devices);
            match proved {
                Ok((outputs, proof)) => {
                    if let Some((alone_outputs, alone)) = &alone {
                        let agreement = compare_proofs(alone.stark_proof(), proof.stark_proof());
                        if outputs != *alone_outputs || !agreement.is_match() {
                            failures.push(format!(
                                "{label}: differs from the proof alone: {agreement}"
                            ));
                        } else if agreement == ProofMatch::Identical {
                            identical += 1;
                        } else {
                            renonced += 1;
                        }
                    }
                    if let Err(e) = miden_verifier::verify(
                        ProgramInfo::from(program.clone()),
                        stack_inputs(iterations),
                        outputs,
                        proof,
                    ) {
                        failures.push(format!("{label}: verification failed: {e}"));
                    }
                },
                Err(e) => failures.push(format!("{label}: {e}")),
            }
        }
        println!(
            "{}: {jobs} proofs in {:.1?} ({} slots, {} workers; peak resident memory {peak}); \
             {identical} identical to the proof alone, {renonced} with another grinding nonce",
            run.devices, run.wall, run.slots, run.workers
        );
        runs.push(run);
    }

    print_pool_table(&runs, jobs);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The first GPU, the first two, ... every CUDA GPU; one slot where there is no CUDA GPU.
#[cfg(feature = "cuda")]
fn default_device_sets(backend: Backend) -> Vec<Vec<usize>> {
    let gpus = match backend {
        Backend::Cuda | Backend::Auto => miden_gpu::cuda::device_count().unwrap_or(1),
        Backend::Cpu | Backend::Wgpu => 1,
    };
    (1..=gpus).map(|n| (0..n).collect()).collect()
}

/// One slot: without the `cuda` feature no backend has more than one device to count.
#[cfg(not(feature = "cuda"))]
fn default_device_sets(_: Backend) -> Vec<Vec<usize>> {
    vec![vec![0]]
}

fn list(set: &[usize]) -> String {
    set.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
}

/// Proofs per minute of each device set, with the ratio to the first set's, and the host CPU
/// each proof cost (core-seconds) with the share of the host's cores kept busy.
fn print_pool_table(runs: &[PoolRun], jobs: usize) {
    let per_minute = |run: &PoolRun| jobs as f64 * 60.0 / run.wall.as_secs_f64();
    let Some(first) = runs.first().map(per_minute) else { return };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!(
        "\n{:<16}{:>7}{:>9}{:>10}{:>12}{:>9}{:>14}{:>11}",
        "devices", "slots", "workers", "wall", "proofs/min", "ratio", "CPU a proof", "host busy"
    );
    for run in runs {
        let (per_proof, busy) = match run.cpu {
            Some(cpu) => (
                format!("{:.1} s", cpu.total().as_secs_f64() / jobs as f64),
                format!(
                    "{:.0} %",
                    100.0 * cpu.total().as_secs_f64() / run.wall.as_secs_f64() / cores
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:<16}{:>7}{:>9}{:>9.1}s{:>12.2}{:>8.2}x{per_proof:>14}{busy:>11}",
            run.devices,
            run.slots,
            run.workers,
            run.wall.as_secs_f64(),
            per_minute(run),
            per_minute(run) / first
        );
    }
}

// PROVING
// ================================================================================================

fn stack_inputs(iterations: u64) -> StackInputs {
    programs::iteration_inputs(iterations)
}

/// Proves `iterations` of `program` with `miden_gpu` on `committer`, executed as `execution`
/// says.
fn prove(
    program: &Program,
    iterations: u64,
    options: &ProvingOptions,
    committer: Arc<dyn GpuCommitter>,
    (execution, constraints): (Execution, ConstraintPlacement),
) -> Result<(StackOutputs, ExecutionProof), String> {
    gpu_miden::prove_with_options(
        program,
        stack_inputs(iterations),
        AdviceInputs::default(),
        &mut DefaultHost::default(),
        options.clone(),
        committer,
        &MidenProveOptions { execution, constraints, ..MidenProveOptions::default() },
    )
    .map_err(|e| format!("miden_gpu::miden::prove failed: {e}"))
}

/// The iteration count whose trace fills 2^`log` rows.
fn iterations_for(program: &Program, log: u32) -> Result<u64, String> {
    programs::iterations_for_rows(program, log).map_err(|e| format!("execution failed: {e}"))
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
        println!("\n{}", timing::cpu_table(runs, &timing::PROOF_ROWS));
        println!("\n{}", timing::span_table(runs));
    }
}
