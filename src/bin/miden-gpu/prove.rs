//! `miden-gpu prove`: miden-vm's `miden prove` with the commitments on a [`Backend`].

use std::{
    fs, io,
    path::{Path, PathBuf},
    time::Instant,
};

use clap::Args;
use miden_gpu::{
    miden::{check_proving_options, prove_with_committer},
    timing::SpanTimes,
    Backend, BackendOptions,
};
use miden_processor::ExecutionOptions;
use miden_prover::{HashFunction, ProvingOptions};

use crate::{
    data::{program_hash_hex, stage_proof, Inputs, OutputFile},
    error::{CliError, FileKind},
    program::LoadedProgram,
    progress::Progress,
    report::{ms, Report},
};

// ARGUMENTS
// ================================================================================================

/// Prove a Miden program, with the trace and constraint commitments on a GPU.
#[derive(Debug, Clone, Args)]
pub struct ProveCmd {
    /// Path to a .masm assembly file or a .masp package file
    program_file: PathBuf,

    /// Path to the inputs file [default: the program file with extension .inputs, if it exists]
    #[arg(short = 'i', long = "input")]
    input_file: Option<PathBuf>,

    /// Path to the outputs file [default: the program file with extension .outputs]
    #[arg(short = 'o', long = "output")]
    output_file: Option<PathBuf>,

    /// Path to the proof file [default: the program file with extension .proof]
    #[arg(short = 'p', long = "proof")]
    proof_file: Option<PathBuf>,

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

    /// Enable tracing to monitor execution of the VM
    #[arg(short = 't', long = "trace")]
    trace: bool,

    /// Disable debug instructions (release mode)
    #[arg(long = "release")]
    release: bool,
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

impl ProveCmd {
    /// Assembles, executes and proves the program, writes the proof and outputs files and prints
    /// the outputs, the program hash, the backend and the timings.
    ///
    /// Everything that can be checked before the proof is checked first: the options (a hash
    /// function and security level the verifier accepts), the environment's backend settings
    /// and the paths (no file written over another one the command reads or writes). The proof
    /// is verified before it is written (see [`prove_with_committer`]), and both files are
    /// written whole or not at all.
    pub fn execute(&self, progress: &Progress, times: &SpanTimes) -> Result<(), CliError> {
        let start = Instant::now();
        let options = self.proving_options()?;
        let (proof_path, output_path) = self.output_paths()?;
        let mut backend = BackendOptions::from_env()?;
        if let Some(name) = self.backend {
            backend.backend = name;
        }

        progress.stage("assembling the program");
        let loaded = LoadedProgram::load(&self.program_file, &self.library_paths)?;
        let inputs = Inputs::read(self.input_file.as_deref(), &self.program_file)?;
        let (stack_inputs, advice_inputs) = (inputs.stack_inputs()?, inputs.advice_inputs()?);
        let mut host = loaded.host()?;
        let assembled = start.elapsed();

        progress.stage(format!("starting the {} backend", backend.backend));
        let committer = backend.create()?;
        let started = start.elapsed();

        progress.stage("executing the program");
        let (outputs, proof) = prove_with_committer(
            &loaded.program,
            stack_inputs,
            advice_inputs,
            &mut host,
            options,
            committer.clone(),
        )?;
        let proved = start.elapsed();
        let (execution, self_check) = (times.get("execute_program"), times.get("self_check"));

        progress.stage("writing the proof");
        let (proof_file, proof_size) = stage_proof(&proof, &proof_path)?;
        let outputs_file = OutputFile::stage(&outputs, &output_path)?;
        proof_file.commit()?;
        outputs_file.commit()?;
        let total = start.elapsed();
        progress.finish();

        let stack = outputs.stack_truncated(self.num_outputs).iter();
        let mut report = Report::new();
        report
            .line("program", self.program_file.display())
            .line("program hash", program_hash_hex(&loaded.program.hash()))
            .line("backend", format!("{} on {}", committer.backend(), committer.device_name()));
        if let Some(path) = &inputs.path {
            report.line("inputs", path.display());
        }
        report
            .line(
                "stack outputs",
                format!("[{}]", stack.map(ToString::to_string).collect::<Vec<_>>().join(", ")),
            )
            .line("outputs file", output_path.display())
            .line(
                "proof file",
                format!(
                    "{} ({:.1} KB, {:?}, {}-bit security)",
                    proof_path.display(),
                    proof_size as f64 / 1024.0,
                    proof.hash_fn(),
                    proof.security_level()
                ),
            )
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

    /// The proof and outputs paths, refused if either names a file the command reads (the
    /// program, inputs or a library), if they name the same file, or if either is a directory
    /// or in a directory that does not exist.
    fn output_paths(&self) -> Result<(PathBuf, PathBuf), CliError> {
        let proof = self.proof_file.clone().unwrap_or_else(|| self.default_path("proof"));
        let outputs = self.output_file.clone().unwrap_or_else(|| self.default_path("outputs"));
        let mut read = vec![(FileKind::Program, self.program_file.clone())];
        read.extend(
            Inputs::path(self.input_file.as_deref(), &self.program_file)
                .map(|path| (FileKind::Inputs, path)),
        );
        read.extend(self.library_paths.iter().map(|path| (FileKind::Library, path.clone())));
        check_output_paths(&proof, &outputs, &read)?;
        Ok((proof, outputs))
    }

    /// `<program>.<extension>`, miden-vm's default for the proof and outputs files.
    fn default_path(&self, extension: &str) -> PathBuf {
        self.program_file.with_extension(extension)
    }
}

// PATHS
// ================================================================================================

/// Refuses `proof` and `outputs` paths that name one file, a file of `read` (those the command
/// reads), a directory, or a file in a directory that does not exist.
pub fn check_output_paths(
    proof: &Path,
    outputs: &Path,
    read: &[(FileKind, PathBuf)],
) -> Result<(), CliError> {
    if same_file(proof, outputs) {
        let (first, second) = (FileKind::Proof, FileKind::Outputs);
        return Err(CliError::SameFile { first, second, path: proof.to_path_buf() });
    }
    for (first, path) in [(FileKind::Proof, proof), (FileKind::Outputs, outputs)] {
        let unwritable = |kind, reason| {
            let source = io::Error::new(kind, reason);
            Err(CliError::Write { kind: first, path: path.to_path_buf(), source })
        };
        if path.is_dir() {
            return unwritable(io::ErrorKind::IsADirectory, "it is a directory");
        }
        if !resolved(path).parent().is_some_and(Path::is_dir) {
            return unwritable(io::ErrorKind::NotFound, "its directory does not exist");
        }
        if let Some((second, _)) = read.iter().find(|(_, other)| same_file(path, other)) {
            return Err(CliError::SameFile { first, second: *second, path: path.to_path_buf() });
        }
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
