//! `miden-gpu verify`: miden-vm's `miden verify` (the verifier is Miden's own, on the CPU).

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use clap::Args;
use miden_core_lib::CoreLibrary;
use miden_processor::{StackInputs, StackOutputs, Word};
use miden_prover::ExecutionProof;
use miden_verifier::{verify_with_precompiles, Kernel, ProgramInfo};

use crate::{
    data::{parse_program_hash, program_hash_hex, read_proof, Inputs, OutputFile},
    error::{CliError, FileKind},
    progress::Progress,
    report::{ms, Report},
    untrusted::contain_panic,
};

// ARGUMENTS
// ================================================================================================

/// Verify a proof of a Miden program (made by `miden-gpu prove` or miden-vm's `miden prove`).
#[derive(Debug, Clone, Args)]
pub struct VerifyCmd {
    /// Path to the inputs file [default: the proof file with extension .inputs, if it exists]
    #[arg(short = 'i', long = "input")]
    input_file: Option<PathBuf>,

    /// Path to the outputs file [default: the proof file with extension .outputs]
    #[arg(short = 'o', long = "output")]
    output_file: Option<PathBuf>,

    /// Path to the proof file
    #[arg(short = 'p', long = "proof")]
    proof_file: PathBuf,

    /// Program hash (hex), as printed by `prove`
    #[arg(short = 'x', long = "program-hash")]
    program_hash: String,
}

// VERIFY
// ================================================================================================

impl VerifyCmd {
    /// Verifies the proof against the program hash, the stack inputs and the stack outputs, and
    /// prints the security level and the verification time.
    pub fn execute(&self, progress: &Progress) -> Result<(), CliError> {
        progress.stage("reading the proof");
        let program_hash = parse_program_hash(&self.program_hash)?;
        let proof = read_proof(&self.proof_file)?;
        let hash_fn = proof.hash_fn();
        let inputs = Inputs::read(self.input_file.as_deref(), &self.proof_file)?;
        let stack_inputs = inputs.stack_inputs()?;
        let output_path =
            self.output_file.clone().unwrap_or_else(|| self.proof_file.with_extension("outputs"));
        let stack_outputs = OutputFile::read(&output_path)?;

        progress.stage("verifying the proof");
        let start = Instant::now();
        let security =
            verify_proof(program_hash, stack_inputs, stack_outputs, proof, &self.proof_file)?;
        let elapsed = start.elapsed();
        progress.finish();

        Report::new()
            .line("program hash", program_hash_hex(&program_hash))
            .line("proof file", format!("{} ({hash_fn:?})", self.proof_file.display()))
            .line("outputs file", output_path.display())
            .line("verified", format!("{security}-bit security in {}", ms(elapsed)))
            .print();
        Ok(())
    }
}

/// Verifies `proof` (read from `proof_path`) against the program hash and the stack inputs and
/// outputs with Miden's verifier; returns its security level in bits.
pub fn verify_proof(
    program_hash: Word,
    stack_inputs: StackInputs,
    stack_outputs: StackOutputs,
    proof: ExecutionProof,
    proof_path: &Path,
) -> Result<u32, CliError> {
    let program = ProgramInfo::new(program_hash, Kernel::default());
    let registry = CoreLibrary::default().verifier_registry();
    let (security, _) = contain_panic(|| {
        verify_with_precompiles(program, stack_inputs, stack_outputs, proof, &registry)
    })
    .map_err(|e| CliError::invalid(FileKind::Proof, proof_path, format!("malformed proof ({e})")))?
    .map_err(|e| CliError::verification(&e))?;
    Ok(security)
}
