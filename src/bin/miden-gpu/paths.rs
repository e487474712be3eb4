//! The `-i`, `-o` and `-p` file arguments of the commands that prove a program and write its
//! proof and outputs (`prove`, `submit`).

use std::path::PathBuf;

use clap::Args;

/// The inputs file a proof reads, and the files its outputs and proof are written to.
#[derive(Debug, Clone, Args)]
pub struct ProgramPaths {
    /// Path to the inputs file [default: the program file with extension .inputs, if it exists]
    #[arg(short = 'i', long = "input")]
    pub input_file: Option<PathBuf>,

    /// Path to the outputs file [default: the program file with extension .outputs]
    #[arg(short = 'o', long = "output")]
    pub output_file: Option<PathBuf>,

    /// Path to the proof file [default: the program file with extension .proof]
    #[arg(short = 'p', long = "proof")]
    pub proof_file: Option<PathBuf>,
}
