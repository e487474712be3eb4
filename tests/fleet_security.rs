//! A fleet that faces a network (feature `service`): real `nats-server` processes on 127.0.0.1
//! with TLS, passwords, tokens and NKeys, the least-privilege account of `deploy/nats/`, and a
//! 3-server JetStream cluster; the certificates are made here.
//!
//! - A secured server refuses a client without credentials, with a wrong password or token,
//!   with a server certificate it does not trust and with a client certificate of another CA:
//!   each `miden-gpu` command exits with status 1 at once, its error naming the server and the
//!   cause and holding no secret; it accepts the right ones.
//! - With the roles of `deploy/nats/fleet-accounts.conf`, a worker proves the jobs of two
//!   submitters; a submitter cannot consume jobs, write a result or read another's result.
//! - A result planted by a client that is not a worker is refused by `submit`, which writes
//!   no file.
//! - An existing stream with other settings is refused and left as it was.
//! - In operator mode (`deploy/nats/fleet-operator.conf`: JWTs of an operator, its account and
//!   users, made here), a worker and a submitter with `.creds` files prove a job; a user of an
//!   unknown account, an expired user and a missing file are refused with status 1.
//! - A 3-server cluster (`deploy/nats/fleet-server.conf`, TLS and accounts) with R3 streams
//!   loses no job when the server leading the job stream is killed (SIGKILL) mid-run and
//!   started again; with one replica, jobs may be lost, and the test says how many.
//!
//! Where `nats-server` is not installed (`scripts/test.sh` installs it), the tests are reported as
//! ignored with the reason; `MIDEN_GPU_REQUIRE=nats-server` makes that a failure.

#[path = "cli_support/mod.rs"]
mod cli_support;
#[allow(dead_code)] // the device tests' other parts
#[path = "common/device.rs"]
mod device;
#[allow(dead_code)] // the other fleet tests' parts
#[path = "common/fleet.rs"]
mod fleet;
#[path = "common/nats_jwt.rs"]
mod nats_jwt;

use std::{
    fs::{self, File},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use async_nats::jetstream;
use cli_support::TempDir;
use device::{tests, DeviceTests};
use fleet::*;
use miden_air::HashFunction;
use miden_gpu::service::{
    Fleet, FleetAuth, FleetOptions, FleetSecurity, FleetTls, Job, JobResult, Secret, ServiceError,
};
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

fn main() {
    DeviceTests::new("nats-server", nats_server_missing())
        .on_device(tests![
            secured_servers_refuse_wrong_clients,
            submitters_are_kept_to_their_own_jobs_and_results,
            a_planted_result_is_refused,
            existing_streams_with_other_settings_are_refused,
            creds_users_prove_and_strangers_are_refused,
            an_r3_cluster_loses_no_job_when_its_stream_leader_dies,
            an_r1_cluster_may_lose_jobs_when_their_server_dies,
        ])
        .on_host(tests![secrets_stay_out_of_debug_output])
        .run_one_at_a_time()
}

/// How long a refused connection may take to be reported.
const REFUSAL_LIMIT: Duration = Duration::from_secs(10);

/// The passwords of the submitters of `deploy/nats/fleet-accounts.conf` in these tests.
const ALICE_PASSWORD: &str = "alice-password-1";
const BOB_PASSWORD: &str = "bob-password-2";

/// Alice's permissions in `deploy/nats/fleet-accounts.conf`, given to her user JWT in operator
/// mode.
const ALICE_PERMISSIONS: nats_jwt::Permissions = nats_jwt::Permissions {
    publish: &[
        "miden-gpu.jobs.alice",
        "$JS.API.STREAM.INFO.MIDEN_GPU_JOBS",
        "$JS.API.STREAM.INFO.KV_miden-gpu-results",
        "$JS.API.STREAM.INFO.KV_miden-gpu-attempts",
        "$JS.API.DIRECT.GET.KV_miden-gpu-results.$KV.miden-gpu-results.alice.>",
    ],
    subscribe: &["_INBOX_alice.>", "$KV.miden-gpu-results.alice.>"],
};

// CERTIFICATES
// ================================================================================================

/// A certificate authority of the tests, and the PEM files it signs.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// A new authority, its certificate written to `dir/<name>.pem`.
    fn new(dir: &TempDir, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a CA certificate");
        dir.file(&format!("{name}.pem"), cert.pem());
        Self { issuer: Issuer::new(params, key) }
    }

    /// A certificate for 127.0.0.1 and localhost for `usages`, and its key, written to
    /// `dir/<name>.pem` and `dir/<name>-key.pem`.
    fn sign(
        &self,
        dir: &TempDir,
        name: &str,
        usages: &[ExtendedKeyUsagePurpose],
    ) -> (PathBuf, PathBuf) {
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params.extended_key_usages = usages.to_vec();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        let cert_path = dir.file(&format!("{name}.pem"), cert.pem());
        let key_path = dir.file(&format!("{name}-key.pem"), key.serialize_pem());
        (cert_path, key_path)
    }
}

/// A directory with what the fleet's secured servers and clients need: the fleet's CA and a
/// server certificate (`ca.pem`, `server.pem`, `server-key.pem`, the names of
/// `deploy/nats/fleet-server.conf`), a client certificate of the CA, one of another CA, the
/// workers' NKey seed file, and `deploy/nats/`'s configuration files.
struct Secrets {
    dir: TempDir,
    client: (PathBuf, PathBuf),
    stranger: (PathBuf, PathBuf),
    /// The workers' NKey public key (`FLEET_WORKER_NKEY`).
    worker_public_key: String,
    /// The file holding its seed.
    worker_seed: PathBuf,
}

impl Secrets {
    fn new() -> Self {
        let dir = TempDir::new("fleet-secrets");
        let authority = Authority::new(&dir, "ca");
        // a server is a client of the others' routes too
        let both = [ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        authority.sign(&dir, "server", &both);
        let client = authority.sign(&dir, "client", &[ExtendedKeyUsagePurpose::ClientAuth]);
        let other = Authority::new(&dir, "other-ca");
        let stranger = other.sign(&dir, "stranger", &[ExtendedKeyUsagePurpose::ClientAuth]);
        let worker = nkeys::KeyPair::new_user();
        let worker_seed = dir.file("worker.nk", worker.seed().expect("an NKey seed"));
        for name in ["fleet-accounts.conf", "fleet-operator.conf", "fleet-server.conf"] {
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/nats").join(name);
            fs::copy(&source, dir.path(name)).expect("copy a configuration file");
        }
        Self { dir, client, stranger, worker_public_key: worker.public_key(), worker_seed }
    }

    fn ca(&self) -> PathBuf {
        self.dir.path("ca.pem")
    }

    /// The TLS arguments of a client of the fleet's CA.
    fn tls_args(&self) -> Vec<String> {
        let (cert, key) = &self.client;
        [("--tlsca", &self.ca()), ("--tlscert", cert), ("--tlskey", key)]
            .into_iter()
            .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
            .collect()
    }

    /// The arguments of a worker: its NKey and TLS.
    fn worker_args(&self) -> Vec<String> {
        let mut args = vec!["--nkey".to_string(), self.worker_seed.display().to_string()];
        args.extend(self.tls_args());
        args
    }

    /// The options of a library client of the fleet's CA as `auth`, on `url`.
    fn fleet_options(&self, url: &str, auth: FleetAuth) -> FleetOptions {
        let (cert, key) = self.client.clone();
        let tls = FleetTls {
            required: true,
            ca: Some(self.ca()),
            client_certificate: Some(miden_gpu::service::ClientCertificate { cert, key }),
        };
        FleetOptions { security: FleetSecurity { auth, tls }, ..FleetOptions::new(url) }
    }

    fn alice(&self, url: &str) -> FleetOptions {
        let password = Secret::new(ALICE_PASSWORD);
        let auth = FleetAuth::UserPassword { user: "alice".into(), password };
        FleetOptions { submitter: Some("alice".into()), ..self.fleet_options(url, auth) }
    }

    fn worker(&self, url: &str) -> FleetOptions {
        let seed = fs::read_to_string(&self.worker_seed).expect("the seed");
        self.fleet_options(url, FleetAuth::NKey(Secret::new(seed.trim())))
    }

    /// The environment of `deploy/nats/`'s configuration files.
    fn server_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("FLEET_WORKER_NKEY", self.worker_public_key.clone()),
            ("FLEET_ALICE_PASSWORD", ALICE_PASSWORD.into()),
            ("FLEET_BOB_PASSWORD", BOB_PASSWORD.into()),
        ]
    }
}

// SERVERS
// ================================================================================================

/// A `nats-server` run with a configuration file in the directory of the files it names (a
/// configuration's `include` is relative to it, its certificates to the server's working
/// directory); its store and log in a directory of its own; killed when dropped.
struct ConfiguredServer {
    child: Option<Child>,
    port: u16,
    scheme: &'static str,
    config: PathBuf,
    env: Vec<(&'static str, String)>,
    dir: TempDir,
}

impl ConfiguredServer {
    /// A server of `config` (its `port` and `store` in it), written to and run in `workdir`
    /// with `env`.
    fn start(
        workdir: &Path,
        scheme: &'static str,
        env: Vec<(&'static str, String)>,
        config: impl Fn(u16, &Path) -> String,
    ) -> Self {
        let dir = TempDir::new("nats-configured");
        let port = free_port();
        let config_path = workdir.join(format!("server-{port}.conf"));
        fs::write(&config_path, config(port, &dir.path("store"))).expect("write a configuration");
        let mut server = Self { child: None, port, scheme, config: config_path, env, dir };
        server.spawn(workdir);
        server
    }

    fn spawn(&mut self, workdir: &Path) {
        let log = File::options().create(true).append(true).open(self.dir.path("server.log"));
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&self.config)
            .current_dir(workdir)
            .envs(self.env.iter().map(|(name, value)| (*name, value)))
            .stdout(Stdio::null())
            .stderr(log.expect("a server log file"))
            .spawn()
            .expect("start nats-server");
        let child = self.child.insert(child);
        wait_for_port(child, self.port, &self.dir);
    }

    /// Kills the server (SIGKILL).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path("server.log")).unwrap_or_default()
    }
}

impl FleetServer for ConfiguredServer {
    fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    fn dir(&self) -> &TempDir {
        &self.dir
    }
}

impl Drop for ConfiguredServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the server `child` listens on `port` (its log in `dir`); panics with its log at
/// once if it exits first (a configuration it refuses).
fn wait_for_port(child: &mut Child, port: u16, dir: &TempDir) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        let log = || fs::read_to_string(dir.path("server.log")).unwrap_or_default();
        if let Some(status) = child.try_wait().expect("the server's status") {
            panic!("nats-server exited ({status}) before listening on port {port}:\n{}", log());
        }
        assert!(start.elapsed() < WAIT, "nats-server did not listen on port {port}:\n{}", log());
        thread::sleep(Duration::from_millis(50));
    }
}

/// The configuration of a server on 127.0.0.1:`port` with TLS (clients verified against the
/// fleet's CA), JetStream in `store` and the accounts of `accounts` (a file of `deploy/nats/`).
fn tls_server_config(port: u16, store: &Path, accounts: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\n\
         tls {{ cert_file: \"server.pem\", key_file: \"server-key.pem\", \
         ca_file: \"ca.pem\", verify: true, timeout: 2 }}\n\
         jetstream {{ store_dir: {store:?} }}\n\
         include {accounts}\n"
    )
}

/// A single server with TLS (clients verified against the fleet's CA) and the fleet's account.
fn secured_server(secrets: &Secrets) -> ConfiguredServer {
    let workdir = secrets.dir.path("");
    ConfiguredServer::start(&workdir, "tls", secrets.server_env(), |port, store| {
        tls_server_config(port, store, "fleet-accounts.conf")
    })
}

/// An open server with JetStream (no TLS, no authentication), or one asking for `token`.
fn plain_server(token: Option<&str>) -> PlainServer {
    let token = token.map(|token| format!("authorization {{ token: {token:?} }}\n"));
    let workdir = TempDir::new("nats-plain");
    let server = ConfiguredServer::start(&workdir.path(""), "nats", Vec::new(), |port, store| {
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {store:?} }}\n{}",
            token.clone().unwrap_or_default()
        )
    });
    PlainServer { server, _workdir: workdir }
}

/// A [`ConfiguredServer`] with the directory of its configuration.
struct PlainServer {
    server: ConfiguredServer,
    _workdir: TempDir,
}

impl std::ops::Deref for PlainServer {
    type Target = ConfiguredServer;

    fn deref(&self) -> &ConfiguredServer {
        &self.server
    }
}

/// A client of `server`'s JetStream as `options` give, whose requests wait at most two
/// seconds for an answer (a denied request has none).
fn raw_client(options: &FleetOptions) -> jetstream::Context {
    block_on(async {
        let client = raw_connect(options).await.expect("a raw client");
        jetstream::ContextBuilder::new().timeout(Duration::from_secs(2)).build(client)
    })
}

/// A client of the open server at `url`'s JetStream.
fn open_context(url: &str) -> jetstream::Context {
    block_on(async { jetstream::new(async_nats::connect(url).await.expect("connect")) })
}

/// A plain `async-nats` client as `options` give.
async fn raw_connect(
    options: &FleetOptions,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    let security = &options.security;
    let mut connect = async_nats::ConnectOptions::new();
    if let Some(submitter) = &options.submitter {
        connect = connect.custom_inbox_prefix(format!("_INBOX_{submitter}"));
    }
    connect = match &security.auth {
        FleetAuth::UserPassword { user, password } => {
            connect.user_and_password(user.clone(), password.expose().into())
        },
        FleetAuth::NKey(seed) => connect.nkey(seed.expose().into()),
        _ => connect,
    };
    if let Some(ca) = &security.tls.ca {
        connect = connect.add_root_certificates(ca.clone());
    }
    if let Some(certificate) = &security.tls.client_certificate {
        connect = connect.add_client_certificate(certificate.cert.clone(), certificate.key.clone());
    }
    let servers: Vec<async_nats::ServerAddr> =
        options.url.split(',').map(|url| url.parse().expect("a server URL")).collect();
    connect.require_tls(security.tls.required).connect(servers).await
}

// COMMANDS
// ================================================================================================

/// `miden-gpu <args>`, its output; it must end within [`REFUSAL_LIMIT`] plus the time given.
fn miden_gpu(args: &[String], limit: Duration) -> Output {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
        .args(args)
        .env_remove("NATS_URL")
        .output()
        .expect("run miden-gpu");
    assert!(start.elapsed() < limit + REFUSAL_LIMIT, "{args:?} took {:?}", start.elapsed());
    output
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}

/// `miden-gpu fetch` of a job no one submitted from `url` with `extra`: exit status 1, and
/// either the refusal or "has no result" (connected).
fn fetch_nothing(url: &str, extra: &[String]) -> (Option<i32>, String) {
    let mut args = strings(&["fetch", "nojob", "--nats", url, "--connect-timeout", "3"]);
    args.extend_from_slice(extra);
    let output = miden_gpu(&args, Duration::from_secs(3));
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

// TESTS
// ================================================================================================

/// A TLS server with the fleet's account refuses clients without credentials, with a wrong
/// password, without the CA of its certificate, and with a client certificate of another CA
/// (or none): each at once, with status 1 and an error naming the server and the cause, no
/// secret in it. The right NKey and password are accepted; a token server refuses a wrong
/// token and accepts the right one.
fn secured_servers_refuse_wrong_clients() {
    let secrets = Secrets::new();
    let server = secured_server(&secrets);
    let url = server.url();
    let _worker = Worker::start(
        &server,
        "worker",
        &secrets.worker_args().iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let tls = secrets.tls_args();
    let with = |extra: &[&str]| [strings(extra), tls.clone()].concat();
    let server_name = format!("tls://127.0.0.1:{}", server.port);

    let refusals: Vec<(&str, Vec<String>, &str)> = vec![
        ("no credentials", tls.clone(), "authorization violation"),
        (
            "a wrong password",
            with(&["--user", "alice", "--password", "wrong-horse"]),
            "authorization violation",
        ),
        (
            "a user of no password",
            with(&["--user", "mallory", "--password", ALICE_PASSWORD]),
            "authorization violation",
        ),
        (
            "no CA for the server's certificate",
            [
                strings(&["--user", "alice", "--password", ALICE_PASSWORD, "--tlscert"]),
                vec![secrets.client.0.display().to_string(), "--tlskey".into()],
                vec![secrets.client.1.display().to_string()],
            ]
            .concat(),
            "TLS",
        ),
    ];
    for (case, extra, cause) in &refusals {
        let (status, stderr) = fetch_nothing(&url, extra);
        assert_eq!(status, Some(1), "{case}: {stderr}");
        assert!(stderr.contains(cause), "{case}: no `{cause}` in: {stderr}");
        assert!(stderr.contains(&server_name), "{case}: the server is not named: {stderr}");
        for secret in [ALICE_PASSWORD, "wrong-horse"] {
            assert!(!stderr.contains(secret), "{case}: a secret in: {stderr}");
        }
        eprintln!("{case}: {}", stderr.trim());
    }
    // a client certificate of another CA, or none: the server ends the handshake
    let (cert, key) = &secrets.stranger;
    let stranger = [
        strings(&["--user", "alice", "--password", ALICE_PASSWORD, "--tlsca"]),
        vec![secrets.ca().display().to_string(), "--tlscert".into(), cert.display().to_string()],
        vec!["--tlskey".into(), key.display().to_string()],
    ]
    .concat();
    let no_certificate = [
        strings(&["--user", "alice", "--password", ALICE_PASSWORD, "--tlsca"]),
        vec![secrets.ca().display().to_string()],
    ]
    .concat();
    for (case, extra) in
        [("another CA's certificate", stranger), ("no client certificate", no_certificate)]
    {
        let (status, stderr) = fetch_nothing(&url, &extra);
        assert_eq!(status, Some(1), "{case}: {stderr}");
        assert!(stderr.contains("refused the connection: TLS"), "{case}: {stderr}");
        assert!(stderr.contains(&server_name), "{case}: the server is not named: {stderr}");
        assert!(!stderr.contains(ALICE_PASSWORD), "{case}: a secret in: {stderr}");
        eprintln!("{case}: {}", stderr.trim());
    }

    // the right password (the worker's NKey was accepted: it serves)
    let alice = with(&["--user", "alice", "--password", ALICE_PASSWORD, "--submitter", "alice"]);
    let (status, stderr) = fetch_nothing(&url, &alice);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(stderr.contains("job nojob has no result"), "alice was not accepted: {stderr}");
    // the password from the environment, as a container gives it
    let mut args = strings(&["fetch", "nojob", "--nats", &url, "--submitter", "alice"]);
    args.extend(tls.clone());
    let output = Command::new(env!("CARGO_BIN_EXE_miden-gpu"))
        .args(&args)
        .env("NATS_USER", "alice")
        .env("NATS_PASSWORD", ALICE_PASSWORD)
        .output()
        .expect("run miden-gpu fetch");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("job nojob has no result"), "NATS_PASSWORD: {stderr}");

    // a token server
    let token_server = plain_server(Some("the-right-token"));
    let token_url = token_server.url();
    let (status, stderr) = fetch_nothing(&token_url, &strings(&["--token", "a-wrong-token"]));
    assert_eq!(status, Some(1), "{stderr}");
    assert!(stderr.contains("authorization violation"), "{stderr}");
    assert!(!stderr.contains("a-wrong-token"), "{stderr}");
    let (_, stderr) = fetch_nothing(&token_url, &strings(&["--token", "the-right-token"]));
    assert!(stderr.contains("job nojob has no result"), "the token was not accepted: {stderr}");
}

/// The roles of `deploy/nats/fleet-accounts.conf`: a worker (NKey) proves the jobs of alice
/// and bob (passwords), each `submit` verifying its proof; alice cannot consume jobs, write a
/// result, read bob's result or see his jobs, and the server says so.
fn submitters_are_kept_to_their_own_jobs_and_results() {
    let secrets = Secrets::new();
    let server = secured_server(&secrets);
    let url = server.url();
    let worker_args = secrets.worker_args();
    let _worker = Worker::start(
        &server,
        "worker",
        &worker_args.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    // each submitter's job, proved
    let mut ids = Vec::new();
    for (user, password) in [("alice", ALICE_PASSWORD), ("bob", BOB_PASSWORD)] {
        let program = server.dir.file(&format!("{user}.masm"), FIB);
        let mut args = strings(&["submit", &program.display().to_string(), "--nats", &url]);
        args.extend(strings(&["--user", user, "--password", password, "--submitter", user]));
        args.extend(strings(&["--timeout", "60", "--submit-timeout", "10"]));
        args.extend(secrets.tls_args());
        let output = miden_gpu(&args, Duration::from_secs(60));
        let text =
            String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{user}'s submit: {text}");
        assert!(text.contains("96-bit security"), "{text}");
        let id = text
            .lines()
            .find_map(|line| line.strip_prefix("job id"))
            .map(|id| id.trim().to_string())
            .unwrap_or_else(|| panic!("no job id in: {text}"));
        ids.push(id);
    }
    let (alice_id, bob_id) = (&ids[0], &ids[1]);

    let alice = raw_client(&secrets.alice(&url));
    let worker = raw_client(&secrets.worker(&url));
    let results = |context: &jetstream::Context| {
        block_on(context.get_key_value("miden-gpu-results")).expect("the results bucket")
    };
    let (alice_results, worker_results) = (results(&alice), results(&worker));
    // alice reads her own result, not bob's
    let own = block_on(alice_results.get(format!("alice.{alice_id}"))).expect("alice's result");
    assert!(own.is_some(), "alice cannot read her own result");
    let others = block_on(alice_results.get(format!("bob.{bob_id}")));
    assert!(!matches!(others, Ok(Some(_))), "alice read bob's result");
    // alice writes no result, for herself or for another
    for key in [format!("alice.planted-{alice_id}"), format!("bob.planted-{bob_id}")] {
        let written = block_on(alice_results.create(&key, "forged".into()));
        assert!(written.is_err(), "alice wrote {key}");
        let stored = block_on(worker_results.get(&key)).expect("read as the worker");
        assert!(stored.is_none(), "alice's result {key} was stored");
    }
    // alice consumes no job: neither the workers' consumer nor one of her own
    let stream = block_on(alice.get_stream("MIDEN_GPU_JOBS")).expect("the job stream's info");
    let workers =
        block_on(stream.get_consumer::<jetstream::consumer::pull::Config>("miden-gpu-workers"));
    assert!(workers.is_err(), "alice opened the workers' consumer");
    let own_consumer = block_on(stream.create_consumer(jetstream::consumer::pull::Config {
        durable_name: Some("alice-reads-jobs".into()),
        ..Default::default()
    }));
    assert!(own_consumer.is_err(), "alice created a consumer of the jobs");
    // and the denials are the server's, none of them the worker's
    let log = server.log();
    let violations = log.lines().filter(|line| line.contains("Violation"));
    let of_worker = violations.filter(|line| line.contains(&secrets.worker_public_key)).count();
    assert_eq!(of_worker, 0, "the worker needed more than its permissions:\n{log}");
    for subject in [
        "CONSUMER.INFO.MIDEN_GPU_JOBS",
        "$KV.miden-gpu-results.bob",
        "DIRECT.GET.KV_miden-gpu-results.$KV.miden-gpu-results.bob",
    ] {
        assert!(
            log.lines().any(|line| line.contains("Violation") && line.contains(subject)),
            "no denial of {subject} in the server's log:\n{log}"
        );
    }
    // a submitter whose permissions are not those of its name is denied with the subject named
    let mut mallory = secrets.alice(&url);
    mallory.submitter = Some("bob".into());
    match block_on(Fleet::connect(&mallory, "mallory")) {
        Ok(fleet) => {
            let job = Case::new(FIB, HashFunction::Rpo256, 96).job();
            let submitted = block_on(fleet.submit_within(&job, Duration::from_secs(3)));
            assert!(submitted.is_err(), "alice submitted as bob");
        },
        Err(error) => eprintln!("alice as bob: {error}"),
    }
}

/// A job of [`a_planted_result_is_refused`]: its inputs file, the extra arguments of its `submit`,
/// the result planted for it and the reason it is refused.
type PlantedCase<'a> = (Option<&'a str>, &'a [&'a str], &'a JobResult, &'a str);

/// With no worker running, a client that is not a worker plants a result for the job a
/// `submit` waits for: a proof of another program, one of the same program with other inputs,
/// one with another hash function. Each `submit` refuses it (status 1, the reason named) and
/// writes no file. The submit lists a server that is down first: it fails over.
fn a_planted_result_is_refused() {
    let server = plain_server(None);
    let url = server.url();
    // genuine proofs to plant, made by a worker
    let fleet = block_on(Fleet::connect(&FleetOptions::new(&url), "planter")).expect("connect");
    let donor_cases =
        [Case::new(ARITH, HashFunction::Rpo256, 96), Case::new(FIB, HashFunction::Rpo256, 96)];
    let donors = {
        let _worker = Worker::start(&server.server, "worker", &[]);
        check_all(&fleet, &submit(&fleet, &donor_cases))
    };
    let context = open_context(&url);
    let stream = block_on(context.get_stream("MIDEN_GPU_JOBS")).expect("the job stream");
    let results = block_on(context.get_key_value("miden-gpu-results")).expect("the bucket");

    // jobs of FIB: their inputs, extra arguments, the result planted and the reason refused
    let fib_inputs = r#"{ "operand_stack": ["0", "2"] }"#;
    let cases: [PlantedCase; 3] = [
        (None, &[], &donors[0], "the proof is of program"),
        (Some(fib_inputs), &[], &donors[1], "with the job's inputs"),
        (None, &["--hasher", "blake3-256", "-s", "128"], &donors[1], "hash function"),
    ];
    let down = format!("nats://127.0.0.1:{}", free_port());
    for (i, (inputs, extra, planted, reason)) in cases.into_iter().enumerate() {
        let program = server.dir.file(&format!("planted-{i}.masm"), FIB);
        let proof = server.dir.path(&format!("planted-{i}.proof"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_miden-gpu"));
        command.arg("submit").arg(&program).args(["--nats", &format!("{down},{url}")]);
        if let Some(inputs) = inputs {
            command.arg("-i").arg(server.dir.file(&format!("planted-{i}.inputs"), inputs));
        }
        command.args(extra).args(["--timeout", "60"]);
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("submit");

        // the job, once queued: its id, and a result planted under it
        let start = Instant::now();
        let job = loop {
            let last = block_on(stream.get_last_raw_message_by_subject("miden-gpu.jobs"));
            if let Ok(message) = last {
                let job: Job = serde_json::from_slice(&message.payload).expect("a job");
                if job.program == miden_gpu::service::JobProgram::Masm(FIB.into())
                    && !donors.iter().any(|donor| donor.id == job.id)
                    && block_on(results.get(&job.id)).expect("read").is_none()
                {
                    break job;
                }
            }
            assert!(start.elapsed() < WAIT, "case {i}: no job queued");
            thread::sleep(Duration::from_millis(50));
        };
        let forged = JobResult { id: job.id.clone(), ..planted.clone() };
        block_on(results.create(&job.id, forged.encode().expect("encode").into())).expect("plant");

        let (status, output) = wait_submit(child, WAIT);
        assert_eq!(status.code(), Some(1), "case {i}: {output}");
        assert!(output.contains("is refused") && output.contains(reason), "case {i}: {output}");
        assert!(!proof.exists(), "case {i}: a proof file was written: {output}");
        eprintln!("case {i}: {}", output.trim());
    }
}

/// A job stream that exists with other settings (another retention, other replicas) is
/// refused by `serve` with status 1, naming the setting, and is left as it was.
fn existing_streams_with_other_settings_are_refused() {
    let server = plain_server(None);
    let url = server.url();
    let context = open_context(&url);
    let limits = jetstream::stream::Config {
        name: "MIDEN_GPU_JOBS".into(),
        subjects: vec!["miden-gpu.jobs".into()],
        ..Default::default()
    };
    block_on(context.create_stream(limits)).expect("a stream of limits retention");
    let serve = |extra: &[&str]| {
        let mut args =
            strings(&["serve", "--nats", &url, "--backend", "cpu", "--connect-timeout", "3"]);
        args.extend(strings(extra));
        miden_gpu(&args, Duration::from_secs(3))
    };
    let output = serve(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exists with retention limits, not workqueue"), "{stderr}");
    let mut stream = block_on(context.get_stream("MIDEN_GPU_JOBS")).expect("the stream");
    let config = block_on(stream.info()).expect("its info").config.clone();
    assert_eq!(config.retention, jetstream::stream::RetentionPolicy::Limits, "the stream changed");

    block_on(context.delete_stream("MIDEN_GPU_JOBS")).expect("delete the stream");
    block_on(Fleet::connect(&FleetOptions::new(&url), "creator")).expect("streams of one replica");
    let output = serve(&["--replicas", "3"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exists with replicas 1, not 3"), "{stderr}");
}

/// Operator mode (`deploy/nats/fleet-operator.conf` on a TLS server): an operator, the fleet's
/// account (JetStream enabled) and its users, their JWTs made here. A worker with its `.creds`
/// file proves the job of alice, whose `.creds` give her the permissions of
/// `deploy/nats/fleet-accounts.conf`; her `submit` verifies the proof. A user signed by an
/// account the server does not know, an expired user and a `.creds` file that is not there are
/// refused at once with status 1, the error naming the cause and holding no secret.
fn creds_users_prove_and_strangers_are_refused() {
    let secrets = Secrets::new();
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let system = nkeys::KeyPair::new_account();
    let preload = [(&account, "FLEET", true), (&system, "SYS", false)].map(|(keys, name, js)| {
        let jwt = nats_jwt::account_jwt(&operator, keys, name, js);
        format!("{}: {jwt:?}", keys.public_key())
    });
    let env = vec![
        ("FLEET_OPERATOR_JWT", nats_jwt::operator_jwt(&operator, "miden-gpu", &system)),
        ("FLEET_ACCOUNTS", format!("{{ {} }}", preload.join(", "))),
    ];
    // a user's `.creds` file, and the secrets it holds (its JWT and its seed)
    let user = |name: &str, issuer: &nkeys::KeyPair, permissions, expires| {
        let keys = nkeys::KeyPair::new_user();
        let jwt = nats_jwt::user_jwt(issuer, &keys, name, permissions, expires);
        let path = secrets.dir.file(&format!("{name}.creds"), nats_jwt::creds(&jwt, &keys));
        (path, [jwt, keys.seed().expect("a seed")])
    };
    let (worker_creds, _) = user("worker", &account, None, None);
    let (alice_creds, _) = user("alice", &account, Some(&ALICE_PERMISSIONS), None);
    let unknown_account = nkeys::KeyPair::new_account();
    let (stranger_creds, stranger_secrets) = user("stranger", &unknown_account, None, None);
    let (expired_creds, expired_secrets) =
        user("expired", &account, None, Some(nats_jwt::now() - 60));

    let workdir = secrets.dir.path("");
    let server = ConfiguredServer::start(&workdir, "tls", env, |port, store| {
        tls_server_config(port, store, "fleet-operator.conf")
    });
    let url = server.url();
    let tls = secrets.tls_args();
    let creds = |path: &Path| [strings(&["--creds", &path.display().to_string()]), tls.clone()];
    let worker_args = creds(&worker_creds).concat();
    let _worker = Worker::start(
        &server,
        "worker",
        &worker_args.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    // alice's job, proved by the worker and verified by her submit
    let program = server.dir.file("alice.masm", FIB);
    let mut args = strings(&["submit", &program.display().to_string(), "--nats", &url]);
    args.extend(strings(&["--submitter", "alice", "--timeout", "40", "--submit-timeout", "10"]));
    args.extend(creds(&alice_creds).concat());
    let output = miden_gpu(&args, Duration::from_secs(40));
    let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "alice's submit: {text}\n{}", server.log());
    assert!(text.contains("96-bit security"), "{text}");

    // the refused
    let server_name = format!("tls://127.0.0.1:{}", server.port);
    let missing = secrets.dir.path("missing.creds");
    let refusals = [
        ("a user of an unknown account", &stranger_creds, &stranger_secrets, "authorization"),
        ("an expired user", &expired_creds, &expired_secrets, "authorization"),
        ("a missing file", &missing, &stranger_secrets, "cannot read credentials file"),
    ];
    for (case, path, held, cause) in refusals {
        let (status, stderr) = fetch_nothing(&url, &creds(path).concat());
        assert_eq!(status, Some(1), "{case}: {stderr}");
        assert!(stderr.contains(cause), "{case}: no `{cause}` in: {stderr}");
        if path != &missing {
            assert!(stderr.contains(&server_name), "{case}: the server is not named: {stderr}");
        }
        for secret in held {
            assert!(!stderr.contains(secret.as_str()), "{case}: a secret in: {stderr}");
        }
        eprintln!("{case}: {}", stderr.trim());
    }
}

/// `FleetOptions` and the security values never show a secret in their `Debug` output.
fn secrets_stay_out_of_debug_output() {
    let secrets = [
        FleetAuth::Credentials(Secret::new("-----BEGIN NATS USER JWT----- eyJhbGc")),
        FleetAuth::NKey(Secret::new("SUAM4SEEDSEEDSEED")),
        FleetAuth::UserPassword { user: "alice".into(), password: Secret::new("hunter2") },
        FleetAuth::Token(Secret::new("t0ken-value")),
    ];
    for auth in secrets {
        let options = FleetOptions {
            security: FleetSecurity { auth, tls: FleetTls::default() },
            ..FleetOptions::new("nats://alice:hunter2@127.0.0.1:1")
        };
        let shown = format!("{options:?}");
        for secret in ["eyJhbGc", "SEEDSEED", "t0ken-value", "hunter2"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("<redacted>"), "{shown}");
        // an unreachable server's error names it, without the URL's password; unreadable
        // `.creds` are an error of their own, without their contents
        let options = FleetOptions { connect_timeout: Duration::ZERO, ..options };
        let error = block_on(Fleet::connect(&options, "test")).err().expect("no server there");
        let message = error.to_string();
        for secret in ["eyJhbGc", "SEEDSEED", "t0ken-value", "hunter2"] {
            assert!(!message.contains(secret), "{message}");
        }
        match error {
            ServiceError::Nats { .. } => {
                assert!(message.contains("nats://127.0.0.1:1"), "{message}")
            },
            ServiceError::Credentials { .. } => {},
            error => panic!("{error}"),
        }
    }
}

// CLUSTER
// ================================================================================================

/// The jobs of the cluster tests.
const CLUSTER_JOBS: usize = 24;

/// How long a cluster test may wait for its jobs' results after the restart.
const CLUSTER_LIMIT: Duration = Duration::from_secs(180);

/// Three servers of `deploy/nats/fleet-server.conf` (TLS, the fleet's account), routed to
/// each other, each with its own store.
struct Cluster {
    servers: Vec<ConfiguredServer>,
    workdir: PathBuf,
}

impl Cluster {
    fn start(secrets: &Secrets) -> Self {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let workdir = secrets.dir.path("");
        let servers = (0..3)
            .map(|i| {
                let routes: Vec<String> = (0..3)
                    .filter(|&j| j != i)
                    .map(|j| format!("\"nats-route://127.0.0.1:{}\"", ports[j].1))
                    .collect();
                let dir = TempDir::new("nats-cluster");
                let store = dir.path("store");
                let mut env = secrets.server_env();
                env.extend([
                    ("NATS_NAME", format!("n{i}")),
                    ("NATS_HOST", "127.0.0.1".into()),
                    ("NATS_PORT", ports[i].0.to_string()),
                    ("NATS_CLUSTER_PORT", ports[i].1.to_string()),
                    ("NATS_ROUTES", format!("[{}]", routes.join(", "))),
                    ("NATS_STORE", format!("{store:?}")),
                ]);
                let config = secrets.dir.path("fleet-server.conf");
                let mut server = ConfiguredServer {
                    child: None,
                    port: ports[i].0,
                    scheme: "tls",
                    config,
                    env,
                    dir,
                };
                server.spawn(&workdir);
                server
            })
            .collect();
        Self { servers, workdir }
    }

    /// Every server's URL, comma-separated.
    fn urls(&self) -> String {
        self.servers.iter().map(|server| server.url()).collect::<Vec<_>>().join(",")
    }

    /// The server that leads the stream `name`, by its index.
    fn leader(&self, context: &jetstream::Context, name: &str) -> usize {
        let start = Instant::now();
        loop {
            if let Ok(mut stream) = block_on(context.get_stream(name)) {
                let leader = block_on(stream.info())
                    .ok()
                    .and_then(|info| info.cluster.as_ref().and_then(|c| c.leader.clone()));
                if let Some(index) = leader.and_then(|name| name.strip_prefix('n')?.parse().ok()) {
                    return index;
                }
            }
            assert!(start.elapsed() < WAIT, "the stream {name} has no leader");
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn restart(&mut self, index: usize) {
        let workdir = self.workdir.clone();
        self.servers[index].spawn(&workdir);
    }
}

impl FleetServer for Cluster {
    fn url(&self) -> String {
        self.urls()
    }

    fn dir(&self) -> &TempDir {
        &self.servers[0].dir
    }
}

/// [`CLUSTER_JOBS`] jobs of alice on a 3-server cluster with the fleet's streams at `replicas`
/// (none: the default, checked to be the cluster's three),
/// two workers listing the three servers; the server leading the job stream is killed with
/// SIGKILL once a few jobs have results, and started again a few seconds later. Returns the
/// jobs that have a result within [`CLUSTER_LIMIT`] (each checked to verify) and the results
/// the bucket holds.
fn run_cluster(replicas: Option<usize>) -> (usize, u64) {
    let secrets = Secrets::new();
    let mut cluster = Cluster::start(&secrets);
    let urls = cluster.urls();
    let mut worker_args = secrets.worker_args();
    worker_args.extend(strings(&["--connect-timeout", "60"]));
    if let Some(replicas) = replicas {
        worker_args.extend(strings(&["--replicas", &replicas.to_string()]));
    }
    let worker_args: Vec<&str> = worker_args.iter().map(String::as_str).collect();
    let workers = [
        Worker::start(&cluster, "first", &worker_args),
        Worker::start(&cluster, "second", &worker_args),
    ];
    let alice_options = FleetOptions { connect_timeout: WAIT, ..secrets.alice(&urls) };
    let alice = block_on(Fleet::connect(&alice_options, "alice")).expect("alice connects");
    let worker_view = raw_client(&secrets.worker(&urls));

    let programs = [FIB, MEDIUM, SLOW];
    let cases: Vec<Case> = mixed_cases(CLUSTER_JOBS)
        .into_iter()
        .enumerate()
        .map(|(i, case)| Case { source: programs[i % programs.len()], ..case })
        .map(|case| Case { operands: vec![0, 1], advice: Vec::new(), ..case })
        .collect();
    let jobs = submit(&alice, &cases);
    let leader = cluster.leader(&worker_view, "MIDEN_GPU_JOBS");
    let stream = block_on(worker_view.get_stream("MIDEN_GPU_JOBS")).expect("the job stream");
    let created = stream.cached_info().config.num_replicas;
    assert_eq!(created, replicas.unwrap_or(3), "the job stream's replicas");
    let replicas = created;
    let ids: Vec<String> = jobs.iter().map(|(_, id)| id.clone()).collect();
    let results_now = |fleet: &Fleet| {
        ids.iter().map(|id| block_on(fleet.result(id)).ok().flatten()).collect::<Vec<_>>()
    };
    let start = Instant::now();
    while results_now(&alice).iter().flatten().count() < 3 {
        assert!(start.elapsed() < WAIT, "no results before the kill");
        thread::sleep(Duration::from_millis(100));
    }
    let killed_at = results_now(&alice).iter().flatten().count();
    cluster.servers[leader].kill();
    thread::sleep(Duration::from_secs(5));
    cluster.restart(leader);

    let start = Instant::now();
    let results = loop {
        let results = results_now(&alice);
        if results.iter().all(Option::is_some) || start.elapsed() > CLUSTER_LIMIT {
            break results;
        }
        thread::sleep(Duration::from_millis(250));
    };
    let done = results.iter().flatten().count();
    for ((case, _), result) in jobs.iter().zip(&results) {
        if let Some(result) = result {
            case.check(result);
        }
    }
    let written = {
        let mut bucket = block_on(worker_view.get_stream("KV_miden-gpu-results")).expect("bucket");
        block_on(bucket.info()).expect("its info").state.messages
    };
    let logs: String = workers.iter().map(Worker::log).collect::<Vec<_>>().join("\n");
    eprintln!(
        "replicas {replicas}: leader n{leader} killed with {killed_at} results; {done} of {} jobs \
         have a result {:.1} s after its restart; the bucket holds {written}",
        jobs.len(),
        start.elapsed().as_secs_f64()
    );
    if done < jobs.len() && replicas > 1 {
        eprintln!("{logs}");
    }
    (done, written)
}

/// R3 streams (the default on a cluster of three): every job ends with exactly one result, and
/// every proof verifies.
fn an_r3_cluster_loses_no_job_when_its_stream_leader_dies() {
    let (done, written) = run_cluster(None);
    assert_eq!(done, CLUSTER_JOBS, "jobs with a result");
    assert_eq!(written, CLUSTER_JOBS as u64, "one result per job");
}

/// R1 streams: the jobs live on one server; while it is down none is served, and jobs may be
/// lost. The test reports how many have a result and checks those.
fn an_r1_cluster_may_lose_jobs_when_their_server_dies() {
    let (done, written) = run_cluster(Some(1));
    assert!(written <= CLUSTER_JOBS as u64, "more results than jobs: {written}");
    eprintln!(
        "with --replicas 1, {} of {CLUSTER_JOBS} jobs were lost (allowed)",
        CLUSTER_JOBS - done
    );
}
