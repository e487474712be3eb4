//! `miden-gpu fetch`: the proof and outputs of a job submitted earlier (`submit --no-wait`).

use std::{path::PathBuf, time::Duration};

use clap::Args;
use miden_gpu::service::{check_job_id, check_submitter, Fleet, FleetOptions};

use crate::{
    connection::ConnectionArgs,
    error::CliError,
    prove::check_output_paths,
    submit::{block_on, write_result},
};

/// Write the proof and outputs of a job submitted earlier.
#[derive(Debug, Clone, Args)]
pub struct FetchCmd {
    /// The job id printed by `submit --no-wait`
    #[arg(value_parser = parse_job_id)]
    job_id: String,

    /// Path to the outputs file [default: <job id>.outputs]
    #[arg(short = 'o', long = "output")]
    output_file: Option<PathBuf>,

    /// Path to the proof file [default: <job id>.proof]
    #[arg(short = 'p', long = "proof")]
    proof_file: Option<PathBuf>,

    #[command(flatten)]
    connection: ConnectionArgs,

    /// The submitter the job was submitted as (submit --submitter)
    #[arg(long = "submitter", env = "MIDEN_GPU_SUBMITTER", value_parser = parse_submitter)]
    submitter: Option<String>,

    /// Wait for the result if there is none yet
    #[arg(long = "wait")]
    wait: bool,

    /// Seconds to wait with --wait [default: no limit]
    #[arg(long = "timeout")]
    timeout: Option<u64>,

    /// Seconds to keep trying to reach the NATS server
    #[arg(long = "connect-timeout", default_value_t = 60)]
    connect_timeout: u64,
}

/// A submitter argument.
pub fn parse_submitter(name: &str) -> Result<String, String> {
    check_submitter(name).map(|()| name.to_string())
}

/// A job id argument.
fn parse_job_id(id: &str) -> Result<String, String> {
    check_job_id(id).map(|()| id.to_string())
}

impl FetchCmd {
    /// Reads the job's result and writes its proof and outputs files (the proof is not
    /// verified here: this command knows neither the program nor the inputs).
    pub fn execute(&self) -> Result<(), CliError> {
        let proof_path = self.proof_file.clone().unwrap_or_else(|| self.default_path("proof"));
        let output_path = self.output_file.clone().unwrap_or_else(|| self.default_path("outputs"));
        check_output_paths(&proof_path, &output_path, &[])?;
        let options = FleetOptions {
            connect_timeout: Duration::from_secs(self.connect_timeout),
            submitter: self.submitter.clone(),
            ..self.connection.fleet_options()?
        };
        let result = block_on(async {
            let fleet = Fleet::connect(&options, "miden-gpu-fetch").await?;
            match self.wait {
                true => fleet
                    .wait_for_result(&self.job_id, self.timeout.map(Duration::from_secs))
                    .await
                    .map(Some),
                false => fleet.result(&self.job_id).await,
            }
        })?;
        let result = result.ok_or_else(|| CliError::NoResult(self.job_id.clone()))?;
        write_result(result, &proof_path, &output_path, None)?.print();
        Ok(())
    }

    /// `<job id>.<extension>` in the working directory.
    fn default_path(&self, extension: &str) -> PathBuf {
        PathBuf::from(&self.job_id).with_extension(extension)
    }
}
