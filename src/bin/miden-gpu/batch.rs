//! `miden-gpu prove` with several programs: each is loaded and queued on a [`ProverPool`] (one
//! committer per GPU of the backend, `--jobs` proofs in flight), proved with its proof checked,
//! and written beside its program. A program that fails is reported alone; the others are still
//! proved and written.

use std::time::Instant;

use miden_gpu::{
    pool::{JobHandle, PoolOptions},
    BackendOptions, ProverPool,
};
use miden_processor::StackOutputs;
use miden_prover::{ExecutionProof, ProvingOptions};

use crate::{
    data::{program_hash_hex, Inputs},
    error::CliError,
    program::LoadedProgram,
    progress::Progress,
    prove::{write_files, ProgramFiles, ProveCmd},
    report::{ms, Report},
};

/// Proves the programs of `files` concurrently and writes each one's files; prints a report per
/// program proved, an `error:` line per program that failed, and a summary.
///
/// # Errors
/// A pool that cannot start ends the command; [`CliError::Failed`] if any program failed.
pub fn prove_all(
    command: &ProveCmd,
    files: &[ProgramFiles],
    options: ProvingOptions,
    backend: BackendOptions,
    progress: &Progress,
) -> Result<(), CliError> {
    let start = Instant::now();
    progress.stage(format!("starting the {} backend", backend.backend));
    let pool =
        ProverPool::new(&PoolOptions { workers: command.jobs(), ..PoolOptions::new(backend) })?;

    progress.stage(format!("proving {} programs", files.len()));
    let queued: Vec<_> =
        files.iter().map(|f| Queued::submit(&pool, command, f, &options)).collect();
    let results: Vec<_> = files
        .iter()
        .zip(queued)
        .map(|(f, queued)| queued.and_then(|queued| queued.finish(command, f)))
        .collect();
    let total = start.elapsed();
    progress.finish();

    let mut failed = 0;
    for (f, result) in files.iter().zip(results) {
        match result {
            Ok(report) => {
                report.print();
                println!();
            },
            Err(error) => {
                failed += 1;
                eprintln!("error: {}: {error}", f.program.display());
            },
        }
    }
    let committers = pool.committers();
    let devices: Vec<String> = committers.iter().map(|c| c.device_name()).collect();
    let peak = match pool.peak_resident_bytes() {
        Some(bytes) => format!("{:.1} MiB resident", bytes as f64 / f64::from(1 << 20)),
        None => "not reported by this system".into(),
    };
    Report::new()
        .line("programs", format!("{} proved, {failed} failed", files.len() - failed))
        .line(
            "backend",
            format!(
                "{} on {}; {} proofs in flight",
                pool.backend(),
                devices.join(", "),
                pool.workers()
            ),
        )
        .line("time", format!("total {}", ms(total)))
        .line("peak memory", peak)
        .print();
    match failed {
        0 => Ok(()),
        failed => Err(CliError::Failed { failed, total: files.len() }),
    }
}

/// A program queued on the pool: what its report needs, and its job.
struct Queued {
    hash: String,
    inputs: Inputs,
    job: JobHandle<(StackOutputs, ExecutionProof)>,
}

impl Queued {
    /// Loads the program of `files` and its inputs and queues its proof (waiting while the
    /// pool's queue is full).
    fn submit(
        pool: &ProverPool,
        command: &ProveCmd,
        files: &ProgramFiles,
        options: &ProvingOptions,
    ) -> Result<Self, CliError> {
        let loaded = LoadedProgram::load(&files.program, command.library_paths())?;
        let inputs = command.inputs(&files.program)?;
        let (stack_inputs, advice_inputs) = (inputs.stack_inputs()?, inputs.advice_inputs()?);
        let host = loaded.host()?;
        let hash = program_hash_hex(&loaded.program.hash());
        let job =
            pool.prove_miden(loaded.program, stack_inputs, advice_inputs, host, options.clone());
        Ok(Self { hash, inputs, job })
    }

    /// Waits for the proof, writes the files and returns the program's report.
    fn finish(self, command: &ProveCmd, files: &ProgramFiles) -> Result<Report, CliError> {
        let (outputs, proof) = self.job.wait()?;
        let proof_size = write_files(files, &outputs, &proof)?;
        let mut report = Report::new();
        report.line("program", files.program.display()).line("program hash", self.hash);
        command.result_lines(&mut report, files, &self.inputs, &outputs, &proof, proof_size);
        Ok(report)
    }
}
