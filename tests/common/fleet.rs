//! What the tests of the prover fleet share (`tests/service.rs`, `tests/fleet_security.rs`): the
//! programs of their jobs and the checks of their proofs, `miden-gpu serve` workers on the CPU
//! backend, and the clients' submissions, waits and checks.

use std::{
    fs::{self, File},
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::LazyLock,
    thread,
    time::{Duration, Instant},
};

use miden_air::HashFunction;
use miden_assembly::Assembler;
use miden_gpu::service::{Fleet, Job, JobProgram, JobResult, Outcome, ProvedJob};
use miden_processor::{StackInputs, Word};
use miden_prover::ExecutionProof;
use miden_verifier::{Kernel, ProgramInfo};
use serde_json::json;

use super::cli_support::TempDir;

/// How long any one wait of these tests may take.
pub const WAIT: Duration = Duration::from_secs(120);

// PROGRAMS
// ================================================================================================

/// `miden-gpu prove`'s test program: outputs `[16, 3]` on [`arith_inputs`].
pub const ARITH: &str = include_str!("../programs/arith.masm");

/// Fibonacci steps on the two top stack elements: 60 cycles.
pub const FIB: &str = "begin repeat.20 swap dup.1 add end end";

/// Fibonacci steps for about 900 cycles: a proof of about a second, long enough to kill or stop
/// a worker in the middle of it.
pub const SLOW: &str = "begin repeat.300 swap dup.1 add end end";

/// Fibonacci steps for about 300 cycles.
pub const MEDIUM: &str = "begin repeat.100 swap dup.1 add end end";

/// One job of a test: the program, its operand stack and advice stack, the hash and security.
#[derive(Clone)]
pub struct Case {
    pub source: &'static str,
    pub operands: Vec<u64>,
    pub advice: Vec<u64>,
    pub hasher: HashFunction,
    pub security: u32,
}

impl Case {
    pub fn new(source: &'static str, hasher: HashFunction, security: u32) -> Self {
        let (operands, advice) = match source {
            ARITH => (vec![5, 3], vec![7, 11, 13]),
            _ => (vec![0, 1], vec![]),
        };
        Self { source, operands, advice, hasher, security }
    }

    /// The job, with a new id.
    pub fn job(&self) -> Job {
        let mut job = Job::new(JobProgram::Masm(self.source.into()), self.hasher, self.security);
        let strings = |values: &[u64]| values.iter().map(u64::to_string).collect::<Vec<_>>();
        job.inputs = Some(json!({
            "operand_stack": strings(&self.operands),
            "advice_stack": strings(&self.advice),
        }));
        job
    }

    pub fn program_hash(&self) -> Word {
        Assembler::default().assemble_program(self.source).expect("the program assembles").hash()
    }

    /// Checks that `result` is this case's proof, and that it verifies.
    pub fn check(&self, result: &JobResult) {
        let Outcome::Proved(proved) = &result.outcome else {
            panic!("job {} did not prove: {:?}", result.id, result.outcome);
        };
        let hash = self.program_hash();
        assert_eq!(proved.program_hash, hash.to_hex().trim_start_matches("0x"), "program hash");
        let proof = ExecutionProof::from_bytes(&proved.proof).expect("the proof decodes");
        assert_eq!(proof.hash_fn(), self.hasher, "hash function of job {}", result.id);
        let outputs = proved.stack_outputs().expect("valid stack outputs");
        if self.source == ARITH {
            assert_eq!(&proved.stack_outputs[..2], ["16", "3"], "outputs of job {}", result.id);
        }
        let inputs = StackInputs::try_from_ints(self.operands.iter().copied()).expect("inputs");
        miden_verifier::verify(ProgramInfo::new(hash, Kernel::default()), inputs, outputs, proof)
            .unwrap_or_else(|e| panic!("the proof of job {} does not verify: {e}", result.id));
    }
}

/// `count` jobs of both quick programs with every hash function (BLAKE3-256 at 128 bits, the
/// others at 96: RPO and RPX at 128 grind for seconds on a CPU).
pub fn mixed_cases(count: usize) -> Vec<Case> {
    let hashes = [
        (HashFunction::Rpo256, 96),
        (HashFunction::Rpx256, 96),
        (HashFunction::Poseidon2, 96),
        (HashFunction::Blake3_192, 96),
        (HashFunction::Blake3_256, 128),
    ];
    let cases = [ARITH, FIB]
        .into_iter()
        .flat_map(|source| hashes.map(|(hasher, security)| Case::new(source, hasher, security)));
    cases.cycle().take(count).collect()
}

// NATS SERVERS
// ================================================================================================

/// Why this machine cannot run the tests, if it cannot.
pub fn nats_server_missing() -> Option<String> {
    match Command::new("nats-server").arg("--version").output() {
        Ok(output) if output.status.success() => None,
        _ => Some("nats-server is not installed; scripts/test.sh installs it".into()),
    }
}

/// A port no one listens on now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

/// Sends SIGTERM to `child`.
pub fn terminate(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(status.is_ok_and(|status| status.success()), "SIGTERM to process {}", child.id());
}

/// Runs `future` on the tests' runtime, where the clients' connections live.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(1).enable_all().build().expect("a runtime")
    });
    RUNTIME.block_on(future)
}

// WORKERS
// ================================================================================================

/// A `miden-gpu serve` process on the CPU backend (2 jobs at once, 2 s ack wait), its log in a
/// file; killed when dropped.
pub struct Worker {
    pub child: Child,
    pub log: PathBuf,
}

/// What a worker needs of the server it serves: its URLs and a directory for its log.
pub trait FleetServer {
    /// The URLs of `serve --nats`.
    fn url(&self) -> String;
    /// The server's directory, where the workers' logs go.
    fn dir(&self) -> &TempDir;
}

impl Worker {
    pub fn start(server: &impl FleetServer, name: &str, extra: &[&str]) -> Self {
        let log = server.dir().path(&format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
            .args(["serve", "--nats", &server.url(), "--backend", "cpu", "--ack-wait", "2"])
            .args(["--name", name])
            .args(extra)
            .env_remove("MIDEN_GPU_BACKEND")
            .env("RUST_LOG", "miden_gpu=info")
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("a worker log file"))
            .spawn()
            .expect("start miden-gpu serve");
        let worker = Self { child, log };
        worker.wait_for_log("serving jobs");
        worker
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the worker's log holds `text` (the worker must stay alive meanwhile).
    pub fn wait_for_log(&self, text: &str) {
        let start = Instant::now();
        while !self.log().contains(text) {
            assert!(start.elapsed() < WAIT, "no `{text}` in the worker's log:\n{}", self.log());
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("the worker's status").is_none()
    }

    /// Waits for the worker to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("the worker's status") {
                return status;
            }
            assert!(start.elapsed() < WAIT, "the worker did not exit:\n{}", self.log());
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// CLIENT
// ================================================================================================

/// Submits each case as a job; returns them with their ids.
pub fn submit(fleet: &Fleet, cases: &[Case]) -> Vec<(Case, String)> {
    cases
        .iter()
        .map(|case| {
            let job = case.job();
            block_on(fleet.submit(&job)).expect("submit a job");
            (case.clone(), job.id)
        })
        .collect()
}

/// The result of job `id`.
pub fn result(fleet: &Fleet, id: &str) -> JobResult {
    block_on(fleet.wait_for_result(id, Some(WAIT))).expect("the job's result")
}

/// Waits for every job's result and checks its proof; returns the results.
pub fn check_all(fleet: &Fleet, jobs: &[(Case, String)]) -> Vec<JobResult> {
    jobs.iter()
        .map(|(case, id)| {
            let result = result(fleet, id);
            assert_eq!(&result.id, id);
            case.check(&result);
            result
        })
        .collect()
}

pub fn proved(result: &JobResult) -> &ProvedJob {
    match &result.outcome {
        Outcome::Proved(proved) => proved,
        Outcome::Failed(failure) => panic!("job {} failed: {failure}", result.id),
    }
}

/// Waits for a `submit` process, at most `limit`; its status and its output.
pub fn wait_submit(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let start = Instant::now();
    while child.try_wait().expect("the submit's status").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().expect("the submit's output");
            panic!("a submit ran past {limit:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("the submit's output");
    let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    (output.status, text.into_owned())
}
