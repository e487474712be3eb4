//! `miden-gpu prove`: miden-vm's `miden prove` with the commitments on a [`Backend`].
//!
//! With several programs, each is loaded and queued on a [`ProverPool`] (one committer per GPU
//! of the backend, `--jobs` proofs in flight), proved with its proof checked, and written beside
//! its program. A program that fails is reported alone; the others are still proved and written.

use std::{
    fs, io,
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use clap::Args;
use miden_gpu::{
    miden::{check_proving_options, prove_with_options, Execution, MidenProveOptions},
    pool::{JobHandle, PoolOptions},
    timing::SpanTimes,
    Backend, BackendOptions, GpuCommitter, ProverPool,
};
use miden_processor::{ExecutionOptions, StackOutputs};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};

use crate::{
    data::{program_hash_hex, stage_proof, Inputs, OutputFile},
    error::{CliError, FileKind},
    paths::ProgramPaths,
    program::LoadedProgram,
    progress::Progress,
    report::{ms, Report},
};

// ARGUMENTS
// ================================================================================================

/// Prove Miden programs, with the trace and constraint commitments on a GPU.
#[derive(Debug, Clone, Args)]
pub struct ProveCmd {
    /// Paths to .masm assembly files or .masp package files; several are proved concurrently on
    /// the backend's GPUs, each with its default inputs, outputs and proof files
    #[arg(required = true, value_name = "PROGRAM_FILE")]
    program_files: Vec<PathBuf>,

    #[command(flatten)]
    paths: ProgramPaths,

    /// Proofs in flight at once when several programs are given [default: the pool's, 4 per GPU]
    #[arg(short = 'j', long = "jobs", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,

    /// Paths to .masl library files
    #[arg(short = 'l', long = "libraries")]
    library_paths: Vec<PathBuf>,

    /// Backend of the commitments: auto, cpu, wgpu or cuda [default: $MIDEN_GPU_BACKEND, else
    /// auto]
    #[arg(short = 'b', long = "backend")]
    backend: Option<Backend>,

    /// Hash function: rpo, rpx, poseidon2, blake3-192 or blake3-256
    #[arg(long = "hasher", visible_alias = "hash", default_value = "rpo", value_parser = parse_hasher)]
    hasher: HashFunction,

    /// Security level: 96 or 128 bits (96bits and 128bits are accepted too)
    #[arg(short = 's', long = "security", default_value = "96", value_parser = parse_security)]
    security: u32,

    /// Number of cycles the program is expected to consume
    #[arg(short = 'e', long = "exp-cycles", default_value_t = 64)]
    expected_cycles: u32,

    /// Maximum number of cycles a program is allowed to consume
    #[arg(short = 'm', long = "max-cycles", default_value_t = ExecutionOptions::MAX_CYCLES)]
    max_cycles: u32,

    /// Number of stack outputs to print
    #[arg(short = 'n', long = "num-outputs", default_value_t = 16)]
    num_outputs: usize,

    /// Which processor executes the program: parallel (Miden's fast processor, the trace built
    /// on every core; --max-cycles is checked once the program ends) or reference (the
    /// processor of `miden prove`, stopped at --max-cycles as it runs)
    #[arg(long = "execution", default_value_t = Execution::Parallel)]
    execution: Execution,

    /// Enable tracing to monitor execution of the VM
    #[arg(short = 't', long = "trace")]
    trace: bool,

    /// Disable debug instructions (release mode)
    #[arg(long = "release")]
    release: bool,

    /// Tests only (feature `fault-injection`): the backend returns every commitment with a
    /// wrong Merkle root, as a device bug would, for the self-check to catch (one program)
    #[cfg(feature = "fault-injection")]
    #[arg(long = "inject-wrong-root", hide = true)]
    inject_wrong_root: bool,
}

/// `--hasher`: a Miden hash function name.
pub fn parse_hasher(name: &str) -> Result<HashFunction, String> {
    HashFunction::try_from(name).map_err(|_| {
        format!("unknown hash function `{name}`; expected rpo, rpx, poseidon2, blake3-192 or blake3-256")
    })
}

/// `--security`: `96` or `128`, with or without miden-vm's `bits` suffix.
pub fn parse_security(level: &str) -> Result<u32, String> {
    match level.trim_end_matches("bits") {
        "96" => Ok(96),
        "128" => Ok(128),
        _ => Err("expected 96 or 128".into()),
    }
}

// PROVE
// ================================================================================================

/// The files of one program: the program, the proof and outputs files it writes.
pub struct ProgramFiles {
    /// The `.masm` or `.masp` file.
    pub program: PathBuf,
    /// Where its proof is written.
    pub proof: PathBuf,
    /// Where its stack outputs are written.
    pub outputs: PathBuf,
}

impl ProveCmd {
    /// Assembles, executes and proves the programs, writes each one's proof and outputs files
    /// and prints the outputs, the program hash, the backend and the timings; several programs
    /// are proved concurrently ([`prove_all`]).
    ///
    /// Everything that can be checked before the proof is checked first: the options (a hash
    /// function and security level the verifier accepts), the environment's backend settings
    /// and the paths (no file written over another one the command reads or writes). The proof
    /// is verified before it is written (see [`prove_with_options`]), and both files are
    /// written whole or not at all.
    pub fn execute(&self, progress: &Progress, times: &SpanTimes) -> Result<(), CliError> {
        let options = self.proving_options()?;
        let files = self.files()?;
        let mut backend = BackendOptions::from_env()?;
        if let Some(name) = self.backend {
            backend.backend = name;
        }
        match files.as_slice() {
            [one] => self.prove_one(one, options, &backend, progress, times),
            many => prove_all(self, many, options, backend, progress),
        }
    }

    /// Proves one program on a committer of its own, with the time of each step.
    fn prove_one(
        &self,
        files: &ProgramFiles,
        options: ProvingOptions,
        backend: &BackendOptions,
        progress: &Progress,
        times: &SpanTimes,
    ) -> Result<(), CliError> {
        let start = Instant::now();
        progress.stage("assembling the program");
        let loaded = LoadedProgram::load(&files.program, &self.library_paths)?;
        let inputs = self.inputs(&files.program)?;
        let (stack_inputs, advice_inputs) = (inputs.stack_inputs()?, inputs.advice_inputs()?);
        let mut host = loaded.host()?;
        let assembled = start.elapsed();

        progress.stage(format!("starting the {} backend", backend.backend));
        let committer = self.wrap_committer(backend.create()?);
        let started = start.elapsed();

        progress.stage("executing the program");
        let (outputs, proof) = prove_with_options(
            &loaded.program,
            stack_inputs,
            advice_inputs,
            &mut host,
            options,
            committer.clone(),
            &self.checks(),
        )?;
        let proved = start.elapsed();
        let (execution, self_check) = (times.get("execute_program"), times.get("self_check"));

        progress.stage("writing the proof");
        let proof_size = write_files(files, &outputs, &proof)?;
        let total = start.elapsed();
        progress.finish();

        let mut report = Report::new();
        report
            .line("program", files.program.display())
            .line("program hash", program_hash_hex(&loaded.program.hash()))
            .line("backend", format!("{} on {}", committer.backend(), committer.device_name()));
        self.result_lines(&mut report, files, &inputs, &outputs, &proof, proof_size);
        report
            .line(
                "time",
                format!(
                    "assembly {}, backend start {}, execution {}, proving {}, self-check {}, \
                     total {}",
                    ms(assembled),
                    ms(started - assembled),
                    ms(execution),
                    ms((proved - started).saturating_sub(execution + self_check)),
                    ms(self_check),
                    ms(total)
                ),
            )
            .print();
        Ok(())
    }

    /// The committer a single program is proved on: `committer`, or with `--inject-wrong-root`
    /// one that returns its commitments with wrong roots.
    fn wrap_committer(&self, committer: Arc<dyn GpuCommitter>) -> Arc<dyn GpuCommitter> {
        #[cfg(feature = "fault-injection")]
        if self.inject_wrong_root {
            return Arc::new(miden_gpu::faults::WrongRootCommitter::new(committer));
        }
        committer
    }

    /// The inputs of `program`: `-i`, else `<program>.inputs` if it exists, else none.
    pub(crate) fn inputs(&self, program: &Path) -> Result<Inputs, CliError> {
        Inputs::read(self.paths.input_file.as_deref(), program)
    }

    /// The `.masl` libraries linked.
    pub(crate) fn library_paths(&self) -> &[PathBuf] {
        &self.library_paths
    }

    /// `--jobs`: the proofs in flight at once, if given.
    pub(crate) fn jobs(&self) -> Option<usize> {
        self.jobs.map(|jobs| jobs as usize)
    }

    /// A proved program's report lines after its hash: inputs, stack outputs (`-n` of them),
    /// outputs and proof files.
    pub(crate) fn result_lines(
        &self,
        report: &mut Report,
        files: &ProgramFiles,
        inputs: &Inputs,
        outputs: &StackOutputs,
        proof: &ExecutionProof,
        proof_size: usize,
    ) {
        if let Some(path) = &inputs.path {
            report.line("inputs", path.display());
        }
        let stack = outputs.stack_truncated(self.num_outputs).iter();
        report
            .line(
                "stack outputs",
                format!("[{}]", stack.map(ToString::to_string).collect::<Vec<_>>().join(", ")),
            )
            .line("outputs file", files.outputs.display())
            .line(
                "proof file",
                format!(
                    "{} ({:.1} KB, {:?}, {}-bit security)",
                    files.proof.display(),
                    proof_size as f64 / 1024.0,
                    proof.hash_fn(),
                    proof.security_level()
                ),
            );
    }

    /// How the program is executed (`--execution`), the proof checked as by default.
    fn checks(&self) -> MidenProveOptions {
        MidenProveOptions { execution: self.execution, ..MidenProveOptions::default() }
    }

    /// The proving options of the `--hasher`, `--security` and execution flags.
    fn proving_options(&self) -> Result<ProvingOptions, CliError> {
        let execution = ExecutionOptions::new(
            Some(self.max_cycles),
            self.expected_cycles,
            self.trace,
            !self.release,
        )
        .map_err(|e| CliError::Options(e.to_string()))?;
        let options = match self.security {
            128 => ProvingOptions::with_128_bit_security(self.hasher),
            _ => ProvingOptions::with_96_bit_security(self.hasher),
        };
        check_proving_options(&options)?;
        Ok(options.with_execution_options(execution))
    }

    /// The files of each program: `-p` and `-o`, else miden-vm's defaults `<program>.proof` and
    /// `<program>.outputs`. Refused before anything runs: `-i`, `-p` or `-o` with several
    /// programs (they name one program's files); a file written that is a file the command
    /// reads (a program, inputs or library), another file written (of the same program or of
    /// another), a directory, or in a directory that does not exist.
    fn files(&self) -> Result<Vec<ProgramFiles>, CliError> {
        let count = self.program_files.len();
        let flags = [
            ("-i/--input", self.paths.input_file.is_some()),
            ("-p/--proof", self.paths.proof_file.is_some()),
            ("-o/--output", self.paths.output_file.is_some()),
        ];
        if let Some((flag, _)) = flags.iter().find(|(_, given)| *given && count > 1) {
            return Err(CliError::Usage(format!(
                "{flag} names a file of one program, but {count} programs were given (each \
                 then uses <program>.inputs, <program>.proof and <program>.outputs)"
            )));
        }
        let files: Vec<ProgramFiles> = self
            .program_files
            .iter()
            .map(|program| ProgramFiles {
                program: program.clone(),
                proof: self
                    .paths
                    .proof_file
                    .clone()
                    .unwrap_or_else(|| program.with_extension("proof")),
                outputs: self
                    .paths
                    .output_file
                    .clone()
                    .unwrap_or_else(|| program.with_extension("outputs")),
            })
            .collect();

        let mut read = Vec::new();
        for program in &self.program_files {
            read.push((FileKind::Program, program.clone()));
            let inputs = Inputs::path(self.paths.input_file.as_deref(), program);
            read.extend(inputs.map(|path| (FileKind::Inputs, path)));
        }
        read.extend(self.library_paths.iter().map(|path| (FileKind::Library, path.clone())));
        let written: Vec<(usize, FileKind, &PathBuf)> = files
            .iter()
            .enumerate()
            .flat_map(|(i, f)| [(i, FileKind::Proof, &f.proof), (i, FileKind::Outputs, &f.outputs)])
            .collect();
        for (n, &(owner, first, path)) in written.iter().enumerate() {
            if let Some(&(other, second, _)) =
                written[..n].iter().find(|(_, _, earlier)| same_file(path, earlier))
            {
                return Err(if other == owner {
                    CliError::SameFile { first: second, second: first, path: path.clone() }
                } else {
                    CliError::SharedOutput {
                        path: path.clone(),
                        first: files[other].program.clone(),
                        second: files[owner].program.clone(),
                    }
                });
            }
            check_writable(first, path, &read)?;
        }
        Ok(files)
    }
}

/// Writes a program's proof and outputs files (each staged whole and synced, then both renamed
/// into place) and returns the proof's size in bytes.
pub fn write_files(
    files: &ProgramFiles,
    outputs: &StackOutputs,
    proof: &ExecutionProof,
) -> Result<usize, CliError> {
    let (proof_file, proof_size) = stage_proof(proof, &files.proof)?;
    let outputs_file = OutputFile::stage(outputs, &files.outputs)?;
    proof_file.commit()?;
    outputs_file.commit()?;
    Ok(proof_size)
}

// PATHS
// ================================================================================================

/// Refuses `proof` and `outputs` paths that name one file, a file of `read` (those the command
/// reads), a directory, or a file in a directory that does not exist.
#[cfg(feature = "service")]
pub fn check_output_paths(
    proof: &Path,
    outputs: &Path,
    read: &[(FileKind, PathBuf)],
) -> Result<(), CliError> {
    if same_file(proof, outputs) {
        let (first, second) = (FileKind::Proof, FileKind::Outputs);
        return Err(CliError::SameFile { first, second, path: proof.to_path_buf() });
    }
    check_writable(FileKind::Proof, proof, read)?;
    check_writable(FileKind::Outputs, outputs, read)
}

/// Refuses a `kind` file to write at `path` that is a directory, in a directory that does not
/// exist, or a file of `read`.
fn check_writable(
    kind: FileKind,
    path: &Path,
    read: &[(FileKind, PathBuf)],
) -> Result<(), CliError> {
    let unwritable = |reason_kind, reason| {
        let source = io::Error::new(reason_kind, reason);
        Err(CliError::Write { kind, path: path.to_path_buf(), source })
    };
    if path.is_dir() {
        return unwritable(io::ErrorKind::IsADirectory, "it is a directory");
    }
    if !resolved(path).parent().is_some_and(Path::is_dir) {
        return unwritable(io::ErrorKind::NotFound, "its directory does not exist");
    }
    if let Some((second, _)) = read.iter().find(|(_, other)| same_file(path, other)) {
        return Err(CliError::SameFile { first: kind, second: *second, path: path.to_path_buf() });
    }
    Ok(())
}

/// Whether `a` and `b` name the same file: equal once resolved (links and `..` followed; a file
/// that does not exist yet by its resolved directory), or, on Unix, two links to one file.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    if let (Ok(a), Ok(b)) = (fs::metadata(a), fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
            return true;
        }
    }
    resolved(a) == resolved(b)
}

/// `path` with links and `..` resolved as far as it exists: the file itself, else its directory
/// joined with its name, else the path made absolute.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(path) = fs::canonicalize(path) {
        return path;
    }
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match (fs::canonicalize(directory), path.file_name()) {
        (Ok(directory), Some(name)) => directory.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

// SEVERAL PROGRAMS
// ================================================================================================

/// Proves the programs of `files` concurrently and writes each one's files; prints a report per
/// program proved, an `error:` line per program that failed, and a summary.
///
/// # Errors
/// A pool that cannot start ends the command; [`CliError::Failed`] if any program failed.
fn prove_all(
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
        let inputs_of_job = (stack_inputs, advice_inputs);
        let job = pool.prove_miden_with(
            loaded.program,
            inputs_of_job,
            host,
            options.clone(),
            command.checks(),
        );
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
