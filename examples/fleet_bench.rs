//! The throughput of a prover fleet: from one process, submits N proof jobs of the Fibonacci
//! program (`miden_gpu::miden::programs::FIBONACCI`, its trace 2^`--cycles-log` rows) to the
//! fleet's NATS queue, waits for every result, verifies every proof, and prints the proofs per
//! minute and each job's queue latency: its time from submission to result, less the proving
//! time its worker reports (`ProvedJob::proving_ms`), i.e. the time spent waiting for a free
//! slot, in NATS and in the result's delivery.
//!
//! ```text
//! nats-server -js -sd /tmp/js &
//! miden-gpu serve --nats nats://127.0.0.1:4222 &                  # one or more workers
//! cargo run --release --features service --example fleet_bench -- \
//!     --nats nats://127.0.0.1:4222 --jobs 16 --cycles-log 20
//! ```
//!
//! `--warm-up K` jobs of the timed jobs' size go first, untimed, so the workers' kernels are
//! compiled, their devices opened and their registered row memory grown, as in a fleet that has
//! served before. The last line is a summary for scripts (`fleet_bench: jobs=...`).
//! The exit status is 1 when a job fails, a proof does not verify or a result does not come
//! within `--timeout`.

use std::{
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use miden_assembly::Assembler;
use miden_gpu::{
    miden::programs,
    service::{
        Fleet, FleetOptions, FleetSecurity, FleetTls, Job, JobProgram, JobResult, Outcome,
        ServiceError,
    },
};
use miden_processor::Program;
use miden_prover::{ExecutionProof, HashFunction};
use miden_verifier::ProgramInfo;
use serde_json::json;

// ARGUMENTS
// ================================================================================================

#[derive(Parser)]
#[command(about = "Submit N proof jobs to a prover fleet and measure its throughput")]
struct Args {
    /// The fleet's NATS servers, comma-separated.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats: String,
    /// Connect over TLS, trusting the certificate authorities of this PEM file for the servers.
    #[arg(long)]
    tlsca: Option<PathBuf>,
    /// Timed jobs.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// log2 of each job's trace length (20: the 2^20-row workload of BENCHMARKS.md).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(10..=26))]
    cycles_log: u32,
    /// Hash function: rpo, rpx, poseidon2, blake3-192 or blake3-256.
    #[arg(long, default_value = "rpo", value_parser = parse_hash)]
    hash: HashFunction,
    /// Security level: 96 or 128.
    #[arg(long, default_value = "96", value_parser = parse_security)]
    security: u32,
    /// Untimed jobs of the same size before the timed ones.
    #[arg(long, default_value_t = 4)]
    warm_up: u32,
    /// Seconds to wait for all the results of one round (warm-up or timed).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// A name for this run in the summary line.
    #[arg(long, default_value = "fleet")]
    label: String,
}

fn parse_hash(name: &str) -> Result<HashFunction, String> {
    HashFunction::try_from(name).map_err(|e| e.to_string())
}

fn parse_security(bits: &str) -> Result<u32, String> {
    match bits {
        "96" => Ok(96),
        "128" => Ok(128),
        _ => Err(format!("`{bits}`: expected 96 or 128")),
    }
}

// MAIN
// ================================================================================================

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        },
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        },
    }
}

/// One job's result as the client saw it.
struct Finished {
    result: JobResult,
    /// Submission to result, as seen here.
    latency: Duration,
}

async fn run(args: &Args) -> Result<(), String> {
    let program = Assembler::default()
        .assemble_program(programs::FIBONACCI)
        .map_err(|e| format!("assembly failed: {e}"))?;
    let timed = programs::iterations_for_rows(&program, args.cycles_log)
        .map_err(|e| format!("execution failed: {e}"))?;
    let mut options = FleetOptions::new(&args.nats);
    if let Some(ca) = &args.tlsca {
        let tls = FleetTls { required: true, ca: Some(ca.clone()), ..FleetTls::default() };
        options.security = FleetSecurity { tls, ..FleetSecurity::default() };
    }
    let fleet = Fleet::connect(&options, "fleet-bench").await.map_err(|e| e.to_string())?;
    let fleet = Arc::new(fleet);
    println!(
        "fleet {}: {} jobs of 2^{} rows ({timed} Fibonacci iterations), hash {:?}, {}-bit",
        args.nats, args.jobs, args.cycles_log, args.hash, args.security
    );

    if args.warm_up > 0 {
        let start = Instant::now();
        let warm = submit_and_wait(args, &fleet, args.warm_up, timed).await?;
        check(&program, timed, &warm)?;
        println!("warm-up: {} jobs in {:.1?}", args.warm_up, start.elapsed());
    }

    let start = Instant::now();
    let finished = submit_and_wait(args, &fleet, args.jobs, timed).await?;
    let wall = start.elapsed();
    check(&program, timed, &finished)?;
    report(args, &finished, wall);
    Ok(())
}

/// Submits `count` jobs of `iterations`, each waited for from its submission on; returns them
/// in submission order.
async fn submit_and_wait(
    args: &Args,
    fleet: &Arc<Fleet>,
    count: u32,
    iterations: u64,
) -> Result<Vec<Finished>, String> {
    let timeout = Duration::from_secs(args.timeout);
    let mut waits = Vec::new();
    for _ in 0..count {
        let mut job =
            Job::new(JobProgram::Masm(programs::FIBONACCI.into()), args.hash, args.security);
        job.inputs = Some(json!({ "operand_stack": [iterations.to_string()] }));
        let submitted = Instant::now();
        fleet.submit(&job).await.map_err(|e| e.to_string())?;
        let fleet = fleet.clone();
        waits.push(tokio::spawn(async move {
            let result = fleet.wait_for_result(&job.id, Some(timeout)).await?;
            Ok::<_, ServiceError>(Finished { result, latency: submitted.elapsed() })
        }));
    }
    let mut finished = Vec::new();
    for wait in waits {
        let done = wait.await.map_err(|e| format!("a wait ended: {e}"))?;
        finished.push(done.map_err(|e| e.to_string())?);
    }
    Ok(finished)
}

/// Checks that every job was proved, with F(n+1) on top of its stack, and that every proof
/// verifies.
fn check(program: &Program, iterations: u64, finished: &[Finished]) -> Result<(), String> {
    let expected = programs::fibonacci_outputs(iterations)[0];
    let mut failures = Vec::new();
    for Finished { result, .. } in finished {
        let id = &result.id;
        let proved = match &result.outcome {
            Outcome::Proved(proved) => proved,
            Outcome::Failed(failure) => {
                failures.push(format!("job {id} failed: {failure}"));
                continue;
            },
        };
        let checked = (|| {
            let proof = ExecutionProof::from_bytes(&proved.proof).map_err(|e| e.to_string())?;
            let outputs = proved.stack_outputs()?;
            if outputs.get_stack_item(0) != Some(expected) {
                return Err(format!("F({}) is not {expected}", iterations + 1));
            }
            let inputs = programs::iteration_inputs(iterations);
            miden_verifier::verify(ProgramInfo::from(program.clone()), inputs, outputs, proof)
                .map(drop)
                .map_err(|e| format!("the proof does not verify: {e}"))
        })();
        if let Err(message) = checked {
            failures.push(format!("job {id}: {message}"));
        }
    }
    match failures.is_empty() {
        true => Ok(()),
        false => Err(failures.join("; ")),
    }
}

// REPORT
// ================================================================================================

/// Each job's times, then the throughput and the queue latency's mean, median and maximum.
fn report(args: &Args, finished: &[Finished], wall: Duration) {
    println!(
        "\n{:>4}  {:<24}{:>9}{:>11}{:>11}{:>11}",
        "job", "worker", "delivery", "latency s", "proving s", "queue s"
    );
    let mut queue = Vec::new();
    let mut proving = Vec::new();
    for (index, Finished { result, latency }) in finished.iter().enumerate() {
        let Outcome::Proved(proved) = &result.outcome else { continue };
        let proof_s = proved.proving_ms / 1e3;
        let queue_s = (latency.as_secs_f64() - proof_s).max(0.0);
        println!(
            "{index:>4}  {:<24}{:>9}{:>11.2}{:>11.2}{:>11.2}",
            result.worker,
            proved.delivery,
            latency.as_secs_f64(),
            proof_s,
            queue_s
        );
        queue.push(queue_s);
        proving.push(proof_s);
    }
    let per_minute = finished.len() as f64 * 60.0 / wall.as_secs_f64();
    let (mean, median, max) = stats(&mut queue);
    let (proving_mean, _, _) = stats(&mut proving);
    let mut workers: Vec<&str> = finished.iter().map(|f| f.result.worker.as_str()).collect();
    workers.sort_unstable();
    workers.dedup();
    println!(
        "\n{} jobs in {:.2} s: {per_minute:.2} proofs/min; proving {proving_mean:.2} s a job on \
         average; queue latency mean {mean:.2} s, median {median:.2} s, max {max:.2} s",
        finished.len(),
        wall.as_secs_f64()
    );
    println!(
        "fleet_bench: label={} jobs={} cycles_log={} wall_s={:.3} proofs_per_min={per_minute:.3} \
         proving_mean_s={proving_mean:.3} queue_mean_s={mean:.4} queue_median_s={median:.4} \
         queue_max_s={max:.3} workers={}",
        args.label,
        finished.len(),
        args.cycles_log,
        wall.as_secs_f64(),
        workers.join(",")
    );
}

/// Mean, median and maximum of `values` (zeros for none).
fn stats(values: &mut [f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let median = match n % 2 {
        1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    };
    (mean, median, values[n - 1])
}
