//! The prover fleet (feature `service`): real `miden-gpu serve` workers on the CPU backend and a
//! real `nats-server` with JetStream on loopback, each test with its own server, store and
//! ports. Every job must end with exactly one result (the results bucket is written once per
//! job) and every proof must verify with `miden_verifier` against the program assembled here:
//! with two workers, when a worker is killed while proving, across a server restart, for
//! malformed jobs, and when a worker is stopped with SIGTERM; under worker churn (workers killed
//! and restarted every few seconds, the server restarted), beside a job that crashes its worker,
//! and for `submit`s started while the server is down or restarting.
//!
//! Where `nats-server` is not installed (`scripts/test.sh` installs it), the tests are reported as
//! ignored with the reason; `MIDEN_GPU_REQUIRE=nats-server` makes that a failure.

#[path = "cli_support/mod.rs"]
mod cli_support;
#[allow(dead_code)] // the device tests' other parts
#[path = "common/device.rs"]
mod device;
#[allow(dead_code)] // the security tests' parts
#[path = "common/fleet.rs"]
mod fleet;

use std::{
    fs::{self, File},
    io::{Read, Write},
    net::TcpStream,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use cli_support::TempDir;
use device::{tests, DeviceTests};
use fleet::*;
use miden_air::HashFunction;
use miden_gpu::service::{
    AttemptEnd, FailureKind, Fleet, FleetOptions, Job, JobProgram, JobResult, Outcome,
};
use serde_json::json;

fn main() {
    let tests = DeviceTests::new("nats-server", nats_server_missing())
        .on_device(tests![
            two_workers_prove_mixed_jobs,
            killed_worker_jobs_are_delivered_again,
            server_restart_loses_no_job,
            malformed_jobs_get_error_results,
            sigterm_drains_a_worker,
            a_load_of_small_jobs_loses_and_repeats_none,
            results_expire_after_their_ttl,
            jobs_survive_worker_churn,
            a_poison_job_is_abandoned_alone,
            submits_across_server_restarts_end_within_their_bound,
        ])
        .on_host(tests![invalid_serve_options_are_refused, invalid_churn_options_are_refused]);
    #[cfg(feature = "otlp")]
    let tests = tests.on_device(tests![job_spans_reach_an_otlp_collector]);
    tests.run_one_at_a_time()
}

// NATS SERVER
// ================================================================================================

/// A `nats-server` with JetStream on 127.0.0.1, its store in a directory of its own; killed when
/// dropped.
struct NatsServer {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl NatsServer {
    fn start() -> Self {
        let dir = TempDir::new("nats");
        let port = free_port();
        let child = Self::spawn(&dir, port);
        Self { child, port, dir }
    }

    fn spawn(dir: &TempDir, port: u16) -> Child {
        let log = File::options().create(true).append(true).open(dir.path("server.log"));
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
            .arg("-sd")
            .arg(dir.path("store"))
            .stdout(Stdio::null())
            .stderr(log.expect("a server log file"))
            .spawn()
            .expect("start nats-server");
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < WAIT, "nats-server did not listen on port {port}");
            thread::sleep(Duration::from_millis(50));
        }
        child
    }

    /// Stops the server (SIGTERM); [`Self::start_again`] starts it again.
    fn stop(&mut self) {
        terminate(&self.child);
        let _ = self.child.wait();
    }

    /// Starts the stopped server again on the same port and store.
    fn start_again(&mut self) {
        self.child = Self::spawn(&self.dir, self.port);
    }

    /// Stops the server (SIGTERM) and starts it again on the same port and store.
    fn restart(&mut self) {
        terminate(&self.child);
        let _ = self.child.wait();
        self.child = Self::spawn(&self.dir, self.port);
    }

    /// A client of the fleet, once JetStream answers.
    fn fleet(&self) -> Fleet {
        let start = Instant::now();
        loop {
            match block_on(Fleet::connect(&FleetOptions::new(self.url()), "test")) {
                Ok(fleet) => return fleet,
                Err(error) if start.elapsed() > WAIT => panic!("cannot open the fleet: {error}"),
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// How many results the bucket has ever been written: one per job when no job has two.
    fn results_written(&self) -> u64 {
        block_on(async {
            let client = async_nats::connect(self.url()).await.expect("connect");
            let jetstream = async_nats::jetstream::new(client);
            let mut stream = jetstream.get_stream("KV_miden-gpu-results").await.expect("bucket");
            stream.info().await.expect("bucket info").state.last_sequence
        })
    }
}

impl FleetServer for NatsServer {
    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn dir(&self) -> &TempDir {
        &self.dir
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on `port`: the status code and the body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the endpoint");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send a request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string();
    (status, body)
}

/// The value of the metric line starting with `name` in a Prometheus text body.
fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{name}` in:\n{body}"))
}

// TESTS
// ================================================================================================

/// Two workers take 24 jobs of two programs and every hash function: every job gets one
/// result, every proof verifies, and each worker's metrics count its share.
fn two_workers_prove_mixed_jobs() {
    let server = NatsServer::start();
    let ports = [free_port(), free_port()];
    let metrics = ports.map(|port| format!("127.0.0.1:{port}"));
    let _first = Worker::start(&server, "first", &["--metrics", &metrics[0]]);
    let _second = Worker::start(&server, "second", &["--metrics", &metrics[1]]);
    let fleet = server.fleet();
    let jobs = submit(&fleet, &mixed_cases(24));
    let results = check_all(&fleet, &jobs);
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");

    let workers: Vec<&str> = results.iter().map(|result| result.worker.as_str()).collect();
    let mut proofs = 0.0;
    for port in ports {
        assert_eq!(http_get(port, "/health"), (200, "ok\n".into()));
        let (status, body) = http_get(port, "/metrics");
        assert_eq!(status, 200);
        proofs += metric(&body, "miden_gpu_jobs_total{outcome=\"proved\"}");
        assert!(metric(&body, "miden_gpu_proof_seconds_count") >= 1.0);
        assert_eq!(metric(&body, "miden_gpu_jobs_running"), 0.0);
        metric(&body, "miden_gpu_queue_waiting");
        assert!(body.contains("miden_gpu_committer_info{backend=\"cpu\""), "{body}");
        assert!(!body.contains("miden_gpu_gpu_"), "GPU gauges of a CPU pool:\n{body}");
    }
    assert_eq!(proofs, jobs.len() as f64, "the workers' proofs: {workers:?}");
    assert_eq!(http_get(ports[0], "/nothing").0, 404);
}

/// Jobs of the load test: a few hundred small proofs, about a minute on two cores.
const LOAD_JOBS: usize = 300;

/// [`LOAD_JOBS`] small jobs of every hash through two workers on loopback: every job ends with
/// exactly one result, proved at its first delivery (none lost, none proved twice), and both
/// workers take part.
fn a_load_of_small_jobs_loses_and_repeats_none() {
    let server = NatsServer::start();
    let _first = Worker::start(&server, "first", &[]);
    let _second = Worker::start(&server, "second", &[]);
    let fleet = server.fleet();
    let jobs = submit(&fleet, &mixed_cases(LOAD_JOBS));
    let results = check_all(&fleet, &jobs);
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");
    assert!(results.iter().all(|result| proved(result).delivery == 1), "a job was delivered again");
    let workers: std::collections::HashSet<&str> =
        results.iter().map(|result| result.worker.as_str()).collect();
    assert_eq!(workers.len(), 2, "the workers that proved: {workers:?}");
}

/// A worker killed (SIGKILL) while proving: the jobs it held are delivered again after the ack
/// wait, to a second worker, and every job gets one result.
fn killed_worker_jobs_are_delivered_again() {
    let server = NatsServer::start();
    let mut victim = Worker::start(&server, "victim", &[]);
    let fleet = server.fleet();
    let mut cases = vec![Case::new(SLOW, HashFunction::Rpo256, 96); 3];
    cases.extend(mixed_cases(3));
    let jobs = submit(&fleet, &cases);
    victim.wait_for_log("proving");
    victim.child.kill().expect("kill the worker");
    victim.wait_exit();
    let _survivor = Worker::start(&server, "survivor", &[]);

    let results = check_all(&fleet, &jobs);
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");
    assert!(
        results.iter().any(|result| proved(result).delivery >= 2),
        "no job was delivered again:\n{}",
        victim.log()
    );
}

/// The server is stopped and started again (same port and store) with jobs queued and being
/// proved: every job gets one result, and the workers go on taking new jobs.
fn server_restart_loses_no_job() {
    let mut server = NatsServer::start();
    let fleet = server.fleet();
    let mut cases = vec![Case::new(SLOW, HashFunction::Rpo256, 96); 4];
    cases.extend(mixed_cases(8));
    let mut jobs = submit(&fleet, &cases);
    let first = Worker::start(&server, "first", &[]);
    let _second = Worker::start(&server, "second", &[]);
    first.wait_for_log("proving");
    let depth = block_on(fleet.queue_depth()).expect("the queue depth");
    assert!(depth.waiting > 0, "no job is queued: {depth:?}");
    server.restart();

    let fleet = server.fleet();
    jobs.extend(submit(&fleet, &cases[4..6]));
    check_all(&fleet, &jobs);
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");
}

/// Jobs that cannot be proved get error results of their kind, and the worker goes on serving:
/// a later job is proved.
fn malformed_jobs_get_error_results() {
    let server = NatsServer::start();
    let mut worker =
        Worker::start(&server, "worker", &["--max-job-bytes", "4096", "--max-cycles", "512"]);
    let fleet = server.fleet();
    let arith = Case::new(ARITH, HashFunction::Rpo256, 96);
    let with = |change: &dyn Fn(&mut Job)| {
        let mut job = arith.job();
        change(&mut job);
        (job.id.clone(), job.encode().expect("a job encodes"))
    };
    let json_with = |change: &dyn Fn(&mut serde_json::Value)| {
        let job = arith.job();
        let mut value = serde_json::to_value(&job).expect("a job as JSON");
        change(&mut value);
        (job.id, serde_json::to_vec(&value).expect("JSON"))
    };
    let raw = |bytes: &[u8]| (miden_gpu::service::new_job_id(), bytes.to_vec());
    let cases = [
        (with(&|job| job.program = JobProgram::Masm("begin foo end".into())), FailureKind::Program),
        (with(&|job| job.program = JobProgram::Masp(vec![1, 2, 3])), FailureKind::Program),
        (with(&|job| job.inputs = Some(json!({ "operand_stack": ["x"] }))), FailureKind::Inputs),
        (with(&|job| job.inputs = Some(json!({ "operand_stack": 7 }))), FailureKind::Inputs),
        (
            with(&|job| job.program = JobProgram::Masm(format!("# {}\n{ARITH}", "-".repeat(5000)))),
            FailureKind::TooLarge,
        ),
        (json_with(&|value| value["version"] = json!(2)), FailureKind::UnsupportedVersion),
        (json_with(&|value| value["hasher"] = json!("sha256")), FailureKind::Malformed),
        (
            json_with(&|value| drop(value.as_object_mut().map(|o| o.remove("program")))),
            FailureKind::Malformed,
        ),
        (raw(b"not a job"), FailureKind::Malformed),
        (raw(&[0xff; 64]), FailureKind::Malformed),
        (with(&|job| job.security = 100), FailureKind::Options),
        (with(&|job| job.hasher = HashFunction::Blake3_256), FailureKind::Options),
        (
            with(&|job| job.program = JobProgram::Masm("begin push.1 push.2 assert_eq end".into())),
            FailureKind::Execution,
        ),
        (with(&|job| job.program = JobProgram::Masm(SLOW.into())), FailureKind::Execution),
        (with(&|job| job.max_cycles = Some(10)), FailureKind::Options),
    ];
    for ((id, bytes), _) in &cases {
        block_on(fleet.submit_raw(id, bytes.clone())).expect("submit a message");
    }
    for ((id, _), kind) in &cases {
        let result = result(&fleet, id);
        match &result.outcome {
            Outcome::Failed(failure) => assert_eq!(failure.kind, *kind, "job {id}: {failure}"),
            Outcome::Proved(_) => panic!("job {id} was proved; expected failure kind {kind}"),
        }
    }
    assert!(worker.is_running(), "the worker stopped:\n{}", worker.log());
    check_all(&fleet, &submit(&fleet, &[arith]));
    assert_eq!(server.results_written(), cases.len() as u64 + 1, "one result per job");
}

/// SIGTERM while a worker proves: it finishes and files the jobs it holds, exits with status 0,
/// and the jobs it had not taken are proved by another worker.
fn sigterm_drains_a_worker() {
    let server = NatsServer::start();
    let mut leaving = Worker::start(&server, "leaving", &[]);
    let fleet = server.fleet();
    let jobs = submit(&fleet, &vec![Case::new(SLOW, HashFunction::Rpo256, 96); 4]);
    leaving.wait_for_log("proving");
    terminate(&leaving.child);
    let status = leaving.wait_exit();
    assert!(status.success(), "the worker exited with {status}:\n{}", leaving.log());
    let log = leaving.log();
    let held = log.lines().filter(|line| line.ends_with(": proving")).count();
    let filed = log.lines().filter(|line| line.contains(": proved ")).count();
    assert!(held >= 1 && filed == held, "held {held} jobs, filed {filed}:\n{}", leaving.log());

    let _staying = Worker::start(&server, "staying", &[]);
    let results = check_all(&fleet, &jobs);
    let by_leaving = results.iter().filter(|result| result.worker == "leaving").count();
    assert_eq!(by_leaving, held, "results of the stopped worker");
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");
}

/// A worker started with `--result-ttl 2s` on a bucket created with the default age sets the
/// bucket's maximum age: a result is there at first, and `fetch` reports it absent once expired.
fn results_expire_after_their_ttl() {
    let server = NatsServer::start();
    let fleet = server.fleet();
    let _worker = Worker::start(&server, "worker", &["--result-ttl", "2s"]);
    let jobs = submit(&fleet, &[Case::new(ARITH, HashFunction::Rpo256, 96)]);
    check_all(&fleet, &jobs);
    let id = &jobs[0].1;

    let (proof, outputs) = (server.dir.path("job.proof"), server.dir.path("job.outputs"));
    let fetch = || {
        Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
            .args(["fetch", id, "--nats", &server.url()])
            .arg("-p")
            .arg(&proof)
            .arg("-o")
            .arg(&outputs)
            .output()
            .expect("run miden-gpu fetch")
    };
    let start = Instant::now();
    let expired = loop {
        let output = fetch();
        if !output.status.success() {
            break output;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the result of job {id} stays");
        thread::sleep(Duration::from_millis(250));
    };
    let stderr = String::from_utf8_lossy(&expired.stderr);
    assert_eq!(expired.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("job {id} has no result")), "{stderr}");
    assert!(start.elapsed() >= Duration::from_secs(1), "the result expired at once");
    assert!(block_on(fleet.result(id)).expect("read the bucket").is_none());
}

/// Options `serve` refuses before it starts anything: a malformed `--result-ttl`, and without
/// feature `otlp` an `--otlp-endpoint` (exit status 2, a message naming the feature).
fn invalid_serve_options_are_refused() {
    let serve = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
            .args(["serve", "--nats", "nats://127.0.0.1:1", "--backend", "cpu"])
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .output()
            .expect("run miden-gpu serve")
    };
    for ttl in ["7x", "h", "-1d"] {
        let output = serve(&["--result-ttl", ttl]);
        assert_eq!(output.status.code(), Some(2), "--result-ttl {ttl}");
    }
    #[cfg(not(feature = "otlp"))]
    {
        let output = serve(&["--otlp-endpoint", "http://127.0.0.1:4318"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("feature `otlp`"), "{stderr}");
    }
}

/// `serve` refuses malformed limits of redeliveries before it starts anything (exit status 2):
/// a `--backoff` with a zero or malformed ack wait, a negative `--solo-attempts`.
fn invalid_churn_options_are_refused() {
    let cases: [&[&str]; 5] = [
        &["--backoff", "0"],
        &["--backoff", "5s,0s"],
        &["--backoff", "5x"],
        &["--backoff", ""],
        &["--solo-attempts", "-1"],
    ];
    for args in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
            .args(["serve", "--nats", "nats://127.0.0.1:1", "--backend", "cpu"])
            .args(args)
            .output()
            .expect("run miden-gpu serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    }
}

/// A worker with `--otlp-endpoint` sends its spans to a collector (a listener on loopback that
/// answers every request with 200): the job's `service.job` span with its id and program hash,
/// and the pool's `pool.job` span, by the time the worker has stopped.
#[cfg(feature = "otlp")]
fn job_spans_reach_an_otlp_collector() {
    use std::{io::BufRead, net::TcpListener, sync::mpsc};

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = listener.local_addr().expect("its address").port();
    let (requests, received) = mpsc::channel::<(String, Vec<u8>)>();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = std::io::BufReader::new(stream);
            let mut line = String::new();
            let (mut length, mut header) = (0, String::new());
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                header.clear();
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                let _ = requests.send((line.trim().to_string(), body));
            }
        }
    });

    let server = NatsServer::start();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut worker = Worker::start(&server, "traced", &["--otlp-endpoint", &endpoint]);
    let fleet = server.fleet();
    let case = Case::new(ARITH, HashFunction::Rpo256, 96);
    let jobs = submit(&fleet, std::slice::from_ref(&case));
    check_all(&fleet, &jobs);
    terminate(&worker.child);
    assert!(worker.wait_exit().success(), "{}", worker.log());

    let mut bodies = Vec::new();
    while let Ok((line, body)) = received.recv_timeout(Duration::from_secs(5)) {
        assert_eq!(line, "POST /v1/traces HTTP/1.1");
        bodies.extend(body);
    }
    let has = |text: &str| bodies.windows(text.len()).any(|window| window == text.as_bytes());
    let hash = case.program_hash().to_hex();
    for text in ["service.job", "pool.job", &jobs[0].1, hash.trim_start_matches("0x"), "traced"] {
        assert!(has(text), "no `{text}` in the spans sent:\n{}", worker.log());
    }
}

// CHURN
// ================================================================================================

/// How long the churn test may take, all in all.
const CHURN_LIMIT: Duration = Duration::from_secs(240);

/// How often the churn test kills a worker (the first kill after one second, so that a fast
/// machine, whose 30 jobs take about ten seconds, still sees several).
const KILL_EVERY: Duration = Duration::from_secs(2);

/// The results of `ids` the fleet has now (none where the server does not answer).
fn results_now(fleet: &Fleet, ids: &[String]) -> Vec<Option<JobResult>> {
    ids.iter().map(|id| block_on(fleet.result(id)).ok().flatten()).collect()
}

/// Three workers take 30 jobs of three Fibonacci programs and every hash function while one
/// worker is killed (SIGKILL) and started again every [`KILL_EVERY`], and the server is restarted
/// once: every job ends with exactly one result, and at least 29 of them are proofs that verify.
fn jobs_survive_worker_churn() {
    let mut server = NatsServer::start();
    let options = ["--backoff", "3s,4s", "--workers", "2"];
    let mut generation = 0;
    let mut start_worker = |server: &NatsServer, slot: usize| {
        generation += 1;
        Worker::start(server, &format!("churn-{slot}-{generation}"), &options)
    };
    let mut workers: Vec<Worker> = (0..3).map(|slot| start_worker(&server, slot)).collect();
    let fleet = server.fleet();
    let programs = [FIB, MEDIUM, SLOW];
    let cases: Vec<Case> = mixed_cases(30)
        .into_iter()
        .enumerate()
        .map(|(i, case)| Case { source: programs[i % programs.len()], ..case })
        .map(|case| Case { operands: vec![0, 1], advice: Vec::new(), ..case })
        .collect();
    let jobs = submit(&fleet, &cases);
    let ids: Vec<String> = jobs.iter().map(|(_, id)| id.clone()).collect();

    let start = Instant::now();
    let (mut kills, mut restarted) = (0, false);
    let mut next_kill = start + Duration::from_secs(1);
    let results = loop {
        let results = results_now(&fleet, &ids);
        if results.iter().all(Option::is_some) {
            break results.into_iter().flatten().collect::<Vec<_>>();
        }
        let done = results.iter().filter(|result| result.is_some()).count();
        assert!(start.elapsed() < CHURN_LIMIT, "{done} of {} jobs have a result", ids.len());
        if Instant::now() >= next_kill {
            let slot = kills % workers.len();
            workers[slot].child.kill().expect("kill a worker");
            workers[slot].wait_exit();
            kills += 1;
            if kills == 2 && !restarted {
                server.restart();
                restarted = true;
            }
            workers[slot] = start_worker(&server, slot);
            next_kill = Instant::now() + KILL_EVERY;
        }
        thread::sleep(Duration::from_millis(200));
    };
    assert!(restarted && kills >= 3, "{kills} kills in {:?}", start.elapsed());
    assert_eq!(server.results_written(), jobs.len() as u64, "one result per job");
    let mut proofs = 0;
    for ((case, _), result) in jobs.iter().zip(&results) {
        match &result.outcome {
            Outcome::Proved(_) => {
                case.check(result);
                proofs += 1;
            },
            Outcome::Failed(failure) => eprintln!("job {}: {failure}", result.id),
        }
    }
    let redelivered = results
        .iter()
        .filter(|result| matches!(&result.outcome, Outcome::Proved(p) if p.delivery > 1))
        .count();
    eprintln!(
        "{proofs} of {} jobs proved ({redelivered} delivered again), {kills} kills, {:.1} s",
        jobs.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(proofs >= jobs.len() - 1, "{proofs} of {} jobs proved", jobs.len());
}

/// A program that overflows the stack of the worker that loads it: the worker aborts.
fn stack_overflowing_program() -> String {
    let depth = 20_000;
    let opened = "if.true ".repeat(depth);
    let closed = " else push.2 drop end".repeat(depth);
    format!("begin {opened}push.1 drop{closed} end")
}

/// One job that crashes its worker (a stack overflow) among eight good jobs on two workers,
/// each started again when it ends: the crashing job alone is abandoned, after its two solo
/// attempts (`--solo-attempts 2`), each ended with its worker, and every good job is proved.
fn a_poison_job_is_abandoned_alone() {
    let server = NatsServer::start();
    let options = ["--backoff", "2s", "--solo-attempts", "2", "--workers", "2"];
    let mut generation = 0;
    let mut start_worker = |server: &NatsServer| {
        generation += 1;
        Worker::start(server, &format!("poisoned-{generation}"), &options)
    };
    let mut workers = vec![start_worker(&server), start_worker(&server)];
    let fleet = server.fleet();
    let mut poison =
        Job::new(JobProgram::Masm(stack_overflowing_program()), HashFunction::Rpo256, 96);
    poison.inputs = Some(json!({ "operand_stack": ["1"] }));
    let cases: Vec<Case> = mixed_cases(8);
    let (first, rest) = cases.split_at(3);
    let mut jobs = submit(&fleet, first);
    block_on(fleet.submit(&poison)).expect("submit the poison job");
    jobs.extend(submit(&fleet, rest));

    let mut ids: Vec<String> = jobs.iter().map(|(_, id)| id.clone()).collect();
    ids.push(poison.id.clone());
    let start = Instant::now();
    let mut crashes = 0;
    let results = loop {
        let results = results_now(&fleet, &ids);
        if results.iter().all(Option::is_some) {
            break results.into_iter().flatten().collect::<Vec<_>>();
        }
        assert!(start.elapsed() < WAIT, "jobs without a result after {crashes} crashes");
        for worker in &mut workers {
            if !worker.is_running() {
                crashes += 1;
                *worker = start_worker(&server);
            }
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(server.results_written(), ids.len() as u64, "one result per job");
    for ((case, _), result) in jobs.iter().zip(&results) {
        case.check(result);
    }
    let Some(Outcome::Failed(failure)) = results.last().map(|result| &result.outcome) else {
        panic!("the poison job was proved");
    };
    assert_eq!(failure.kind, FailureKind::Abandoned, "{failure}");
    assert_eq!(failure.attempts.len(), 2, "{failure}");
    assert!(failure.attempts.iter().all(|a| a.ended == AttemptEnd::WorkerLost), "{failure}");
    assert!(failure.attempts.iter().all(|a| a.delivery >= 2), "{failure}");
    assert!(failure.message.contains("2 solo attempts"), "{failure}");
    assert!(crashes >= 3, "{crashes} workers crashed: one beside other jobs, two alone");
    eprintln!("{failure}; {crashes} workers crashed, in {:.1} s", start.elapsed().as_secs_f64());
}

/// `miden-gpu submit` of a program file in the server's directory, as `name`.
fn submit_command(server: &NatsServer, name: &str, extra: &[&str]) -> Command {
    let program = server.dir.path(&format!("{name}.masm"));
    fs::write(&program, FIB).expect("write a program");
    let mut command = Command::new(env!("CARGO_BIN_EXE_miden-gpu"));
    command.arg("submit").arg(&program).args(["--nats", &server.url()]).args(extra);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// `submit`s started while the server is down or restarting: those whose server comes back
/// within their `--submit-timeout` end with a verified proof, and one whose server stays away
/// fails with an error naming its bound, once that has passed.
fn submits_across_server_restarts_end_within_their_bound() {
    let mut server = NatsServer::start();
    let _worker = Worker::start(&server, "worker", &[]);
    let bound = Duration::from_secs(60);
    let patient = ["--submit-timeout", "30", "--timeout", "60"];

    server.stop();
    let start = Instant::now();
    let lost = submit_command(&server, "lost", &["--submit-timeout", "2"]).spawn().expect("submit");
    let (status, output) = wait_submit(lost, bound);
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(output.contains("tried for 2 s"), "{output}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}: {output}", start.elapsed());

    let early: Vec<Child> = (0..2)
        .map(|i| submit_command(&server, &format!("early-{i}"), &patient).spawn().expect("submit"))
        .collect();
    thread::sleep(Duration::from_secs(2));
    server.start_again();
    let restarting: Vec<Child> = (0..3)
        .map(|i| {
            let child = submit_command(&server, &format!("restart-{i}"), &patient).spawn();
            if i == 1 {
                server.restart();
            }
            child.expect("submit")
        })
        .collect();
    for child in early.into_iter().chain(restarting) {
        let (status, output) = wait_submit(child, bound);
        assert!(status.success(), "{status}: {output}");
        assert!(output.contains("96-bit security"), "{output}");
    }
}
