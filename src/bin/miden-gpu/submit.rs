//! `miden-gpu submit`: `miden-gpu prove` on a fleet. The program and inputs are checked here
//! (assembled, parsed), sent as a job to the fleet's NATS queue, and the proof a worker files is
//! verified against the program assembled here before the files `prove` writes are written.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use clap::Args;
use miden_gpu::service::{Fleet, FleetOptions, Job, JobProgram, JobResult, Outcome};
use miden_processor::{ExecutionOptions, StackInputs, Word};
use miden_prover::HashFunction;

use crate::{
    connection::ConnectionArgs,
    data::{
        decode_proof, parse_program_hash, program_hash_hex, read_file, stage_proof, Inputs,
        OutputFile,
    },
    error::{CliError, FileKind},
    fetch::parse_submitter,
    paths::ProgramPaths,
    progress::Progress,
    prove::{check_output_paths, parse_hasher, parse_security},
    report::{ms, Report},
    serve::load_job_program,
    verify::verify_proof,
};
use miden_gpu::service::ServiceError;

// ARGUMENTS
// ================================================================================================

/// Put a proof job on a fleet's NATS queue, wait for its proof and write it as `prove` does.
#[derive(Debug, Clone, Args)]
pub struct SubmitCmd {
    /// Path to a .masm assembly file or a .masp package file
    program_file: PathBuf,

    #[command(flatten)]
    paths: ProgramPaths,

    /// Hash function: rpo, rpx, poseidon2, blake3-192 or blake3-256
    #[arg(long = "hasher", visible_alias = "hash", default_value = "rpo", value_parser = parse_hasher)]
    hasher: HashFunction,

    /// Security level: 96 or 128 bits (96bits and 128bits are accepted too)
    #[arg(short = 's', long = "security", default_value = "96", value_parser = parse_security)]
    security: u32,

    /// Maximum number of cycles the program may consume [default: the worker's limit]
    #[arg(short = 'm', long = "max-cycles")]
    max_cycles: Option<u32>,

    #[command(flatten)]
    connection: ConnectionArgs,

    /// Submit as this submitter: the job goes to the fleet's subject for it, and its result is
    /// read under its name (what the server's permissions of a submitter allow)
    #[arg(long = "submitter", env = "MIDEN_GPU_SUBMITTER", value_parser = parse_submitter)]
    submitter: Option<String>,

    /// Print the job id and return without waiting (`miden-gpu fetch` gets the proof later)
    #[arg(long = "no-wait")]
    no_wait: bool,

    /// Seconds to wait for the proof [default: no limit]
    #[arg(long = "timeout")]
    timeout: Option<u64>,

    /// Seconds to reach the NATS server and have the job queued, trying again while the server
    /// is away; past it, submit fails. The same bound holds when the job is published again
    /// after the connection to the server was lost (the server drops the copy of a job it has)
    #[arg(long = "submit-timeout", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    submit_timeout: u64,
}

// SUBMIT
// ================================================================================================

impl SubmitCmd {
    /// Checks the program, inputs and options, submits the job, and (unless `--no-wait`) waits
    /// for its result, verifies the proof and writes the proof and outputs files.
    pub fn execute(&self, progress: &Progress) -> Result<(), CliError> {
        let start = Instant::now();
        let default = |extension| self.program_file.with_extension(extension);
        let proof_path = self.paths.proof_file.clone().unwrap_or_else(|| default("proof"));
        let output_path = self.paths.output_file.clone().unwrap_or_else(|| default("outputs"));
        let input_path = Inputs::path(self.paths.input_file.as_deref(), &self.program_file);
        if !self.no_wait {
            let mut read = vec![(FileKind::Program, self.program_file.clone())];
            read.extend(input_path.clone().map(|path| (FileKind::Inputs, path)));
            check_output_paths(&proof_path, &output_path, &read)?;
        }

        progress.stage("assembling the program");
        let program = read_job_program(&self.program_file)?;
        let program_hash = load_job_program(&program, &self.program_file)?.program.hash();
        let (inputs, stack_inputs) = read_inputs(input_path.as_deref())?;
        let mut job = Job::new(program, self.hasher, self.security);
        job.inputs = inputs;
        job.max_cycles = self.max_cycles;
        job.proving_options(ExecutionOptions::MAX_CYCLES)
            .map_err(|failure| CliError::ProofOptions(failure.message))?;

        progress.stage("submitting the job");
        let submit_limit = Duration::from_secs(self.submit_timeout);
        let options = FleetOptions {
            connect_timeout: submit_limit,
            submitter: self.submitter.clone(),
            ..self.connection.fleet_options()?
        };
        let result = block_on(async {
            let fleet = Fleet::connect(&options, "miden-gpu-submit").await?;
            if self.no_wait {
                return fleet.submit_within(&job, submit_limit).await.map(|()| None);
            }
            progress.stage(format!("waiting for job {}", job.id));
            let timeout = self.timeout.map(Duration::from_secs);
            fleet.submit_and_wait(&job, submit_limit, timeout).await.map(Some)
        })?;
        let Some(result) = result else {
            progress.finish();
            Report::new().line("job id", &job.id).print();
            return Ok(());
        };

        progress.stage("verifying and writing the proof");
        let expected = ExpectedProof {
            program_hash,
            stack_inputs,
            hasher: self.hasher,
            security: self.security,
        };
        let mut report = write_result(result, &proof_path, &output_path, Some(expected))?;
        progress.finish();
        report.line("time", format!("total {}", ms(start.elapsed()))).print();
        Ok(())
    }
}

/// The program file as a job's program: `.masm` source or `.masp` package bytes.
fn read_job_program(path: &Path) -> Result<JobProgram, CliError> {
    let bytes = read_file(FileKind::Program, path)?;
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("masm") => String::from_utf8(bytes).map(JobProgram::Masm).map_err(|e| {
            CliError::invalid(FileKind::Program, path, format!("not UTF-8 text ({e})"))
        }),
        Some("masp") => Ok(JobProgram::Masp(bytes)),
        _ => Err(CliError::invalid(
            FileKind::Program,
            path,
            "expected a .masm assembly file or a .masp package",
        )),
    }
}

/// The inputs file at `path` (if any) as a job's inputs, checked, and its stack inputs.
fn read_inputs(path: Option<&Path>) -> Result<(Option<serde_json::Value>, StackInputs), CliError> {
    let Some(path) = path else {
        return Ok((None, StackInputs::default()));
    };
    let bytes = read_file(FileKind::Inputs, path)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| CliError::invalid(FileKind::Inputs, path, e))?;
    let inputs = Inputs::from_json(value.clone(), path)?;
    inputs.advice_inputs()?;
    Ok((Some(value), inputs.stack_inputs()?))
}

// RESULTS
// ================================================================================================

/// Runs `future` on a runtime of its own (the client's connection lives as long as it does).
pub fn block_on<T>(
    future: impl std::future::Future<Output = Result<T, ServiceError>>,
) -> Result<T, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServiceError::Runtime)?;
    Ok(runtime.block_on(future)?)
}

/// What the proof of a job submitted here must be: any result that is not (one written by
/// someone other than a worker, or for another job) is refused.
pub struct ExpectedProof {
    /// The program assembled here.
    pub program_hash: Word,
    /// The job's stack inputs (the proof must verify with them).
    pub stack_inputs: StackInputs,
    /// The job's hash function.
    pub hasher: HashFunction,
    /// The job's security level: the proof's must be no lower.
    pub security: u32,
}

/// Writes a job's proof and outputs files as `prove` does (both whole, or neither), after
/// checking the proof against `expected` where given (its program, hash function and
/// security, and that it verifies with the job's inputs); returns the report of the job.
pub fn write_result(
    result: JobResult,
    proof_path: &Path,
    output_path: &Path,
    expected: Option<ExpectedProof>,
) -> Result<Report, CliError> {
    let proved = match result.outcome {
        Outcome::Proved(proved) => proved,
        Outcome::Failed(failure) => return Err(CliError::Job { id: result.id, failure }),
    };
    let proof = decode_proof(&proved.proof, proof_path)?;
    let outputs =
        proved.stack_outputs().map_err(|e| CliError::invalid(FileKind::Outputs, output_path, e))?;
    let program_hash = parse_program_hash(&proved.program_hash)?;
    let mut verified = "no (verify it with `miden-gpu verify`)".to_string();
    if let Some(expected) = expected {
        let refused = |why: String| {
            CliError::Verification(format!("the result of job {} is refused: {why}", result.id))
        };
        if program_hash != expected.program_hash {
            return Err(refused(format!(
                "the proof is of program {}, not of {}",
                program_hash_hex(&program_hash),
                program_hash_hex(&expected.program_hash)
            )));
        }
        if proof.hash_fn() != expected.hasher {
            return Err(refused(format!(
                "the proof is of hash function {:?}, not {:?}",
                proof.hash_fn(),
                expected.hasher
            )));
        }
        let stack_inputs = expected.stack_inputs;
        let security =
            verify_proof(program_hash, stack_inputs, outputs.clone(), proof.clone(), proof_path)
                .map_err(|error| match error {
                    CliError::Verification(why) => {
                        refused(format!("{why} (with the job's inputs)"))
                    },
                    error => error,
                })?;
        if security < expected.security {
            return Err(refused(format!(
                "the proof has {security}-bit security, not the {} asked for",
                expected.security
            )));
        }
        verified = format!("{security}-bit security");
    }
    let (proof_file, proof_size) = stage_proof(&proof, proof_path)?;
    let outputs_file = OutputFile::stage(&outputs, output_path)?;
    proof_file.commit()?;
    outputs_file.commit()?;

    let mut report = Report::new();
    report
        .line("job id", &result.id)
        .line("program hash", program_hash_hex(&program_hash))
        .line(
            "worker",
            format!("{} ({}, delivery {})", result.worker, proved.backend, proved.delivery),
        )
        .line("stack outputs", format!("[{}]", proved.stack_outputs.join(", ")))
        .line("outputs file", output_path.display())
        .line(
            "proof file",
            format!(
                "{} ({:.1} KB, {:?})",
                proof_path.display(),
                proof_size as f64 / 1024.0,
                proof.hash_fn()
            ),
        )
        .line("verified", verified)
        .line(
            "job time",
            format!(
                "queued {}, proving {}",
                ms(Duration::from_secs_f64(proved.queued_ms / 1e3)),
                ms(Duration::from_secs_f64(proved.proving_ms / 1e3))
            ),
        );
    Ok(report)
}
