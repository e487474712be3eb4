//! [`Fleet`]: a connection to the NATS servers and the JetStream objects of a prover fleet: the
//! work-queue stream of jobs, the workers' durable pull consumer, the results bucket and the
//! bucket of the jobs' solo attempts.
//!
//! A fleet's client may name its submitter ([`FleetOptions::submitter`]): its jobs then go to
//! `<subject>.<submitter>`, their results are under `<submitter>.<job id>` and its inboxes are
//! `_INBOX_<submitter>`, so that the server's permissions keep each submitter to its own jobs
//! and results (`deploy/nats/`). A worker takes the submitter of a job from the subject the
//! server received it on, never from the job itself.

use std::{
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use async_nats::{
    header::NATS_MESSAGE_ID,
    jetstream::{
        self,
        consumer::{pull, AckPolicy, PullConsumer},
        kv::{self, CreateErrorKind, Operation},
        stream,
    },
    Client, ConnectErrorKind, ConnectOptions, Event, HeaderMap,
};
use futures::StreamExt;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{
    error::{RefusalCause, ServiceError},
    job::Job,
    result::{Attempt, JobResult},
    security::{server_addresses, server_names, FleetSecurity},
    streams::{bucket_stream, duplicate_window, open_bucket, open_job_stream, Replicas},
    wire::check_submitter,
};

// OPTIONS
// ================================================================================================

/// Where a fleet's jobs and results live, how a client connects, and how long a worker may hold
/// a job. Its `Debug` shows no secret (nor the password of a URL).
#[derive(Clone, PartialEq, Eq)]
pub struct FleetOptions {
    /// The NATS servers' URLs, comma-separated (`nats://host:4222`, `tls://host:4222`): the
    /// client fails over between them, and to the servers of their cluster.
    pub url: String,
    /// The client's credentials and TLS settings (default: none).
    pub security: FleetSecurity,
    /// The submitter this client submits and reads results as (`[0-9A-Za-z_-]`, at most 64
    /// characters; the module documentation), or none: jobs on [`Self::subject`] and results
    /// under the job ids. A worker serves every submitter whatever this is.
    pub submitter: Option<String>,
    /// The replicas of the job stream and the buckets when this client creates them (at most
    /// the servers of the cluster); given, an existing stream with another number is refused
    /// ([`ServiceError::StreamSettings`]). None: one per server of the cluster, at most 3 (one
    /// on a lone server), and existing streams as they are.
    pub replicas: Option<usize>,
    /// The work-queue stream of the jobs (default `MIDEN_GPU_JOBS`).
    pub stream: String,
    /// The subject jobs are published on (default `miden-gpu.jobs`).
    pub subject: String,
    /// The workers' durable pull consumer (default `miden-gpu-workers`).
    pub consumer: String,
    /// The key-value bucket of the results (default `miden-gpu-results`).
    pub results: String,
    /// The key-value bucket of the jobs' solo attempts (default `miden-gpu-attempts`): what
    /// each redelivered job's workers record before proving it, so that the next delivery knows
    /// how the earlier ones ended. Its records live [`ATTEMPTS_TTL`].
    pub attempts: String,
    /// How long a worker may hold a job at its first delivery without acknowledging it or
    /// reporting progress before the server delivers it again (default 30 s; workers report
    /// progress every third of the shortest ack wait). Set when the consumer is created.
    pub ack_wait: Duration,
    /// The ack waits of the later deliveries, the last repeated ([`DEFAULT_BACKOFF`]: 60 s,
    /// then 120 s; empty: [`Self::ack_wait`] for every delivery): the consumer's `backoff`. A
    /// job whose worker ended is delivered again only once its delivery's ack wait has passed,
    /// so each redelivery of a job comes later than the one before. Set when the consumer is
    /// created; fewer values than [`Self::max_deliver`].
    pub backoff: Vec<Duration>,
    /// The most deliveries of one job, however they ended (default 20; -1: no limit): a
    /// backstop behind the workers' limit on solo attempts. The last one files an
    /// [`super::FailureKind::Abandoned`] result. Set when the consumer is created.
    pub max_deliver: i64,
    /// The most jobs delivered to the fleet's workers and not yet acknowledged, all workers
    /// together (default 1024): the consumer's `max_ack_pending`. Each worker pulls one job per
    /// free pool slot, so the queue, not a worker, holds the backlog. Set when the consumer is
    /// created.
    pub max_ack_pending: i64,
    /// How long [`Fleet::connect`] tries to reach the server and open the fleet's objects,
    /// trying again while the server is away (default 60 s; zero: once).
    pub connect_timeout: Duration,
    /// How long a result is kept once written ([`DEFAULT_RESULT_TTL`]: 7 days; zero keeps
    /// results for ever): the results bucket's maximum age, after which the server deletes a
    /// result and the job has none. Set when the bucket is created; [`Fleet::set_result_ttl`]
    /// changes it on an existing bucket.
    pub result_ttl: Duration,
}

/// The default of [`FleetOptions::result_ttl`]: 7 days.
pub const DEFAULT_RESULT_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The default of [`FleetOptions::backoff`]: the second delivery's ack wait is 60 s, the later
/// ones' 120 s.
pub const DEFAULT_BACKOFF: [Duration; 2] = [Duration::from_secs(60), Duration::from_secs(120)];

/// How long the record of a job's solo attempts is kept ([`FleetOptions::attempts`]): 7 days,
/// the time a job may stay queued and still have its attempts counted.
pub const ATTEMPTS_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The first delay before a connection or publication is tried again.
const RETRY_DELAY: Duration = Duration::from_millis(250);
/// The longest delay between tries.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// How often a client waiting for a result reads it again without having seen it written (a
/// write missed while the connection was down).
const RESULT_RECHECK: Duration = Duration::from_secs(2);
/// The first delay before a result seen written is read again where the server had not stored
/// it yet (a cluster stores it once a majority of its replicas has).
const FIRST_RESULT_RECHECK: Duration = Duration::from_millis(5);

impl FleetOptions {
    /// The default names and limits, on the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            security: FleetSecurity::default(),
            submitter: None,
            replicas: None,
            stream: "MIDEN_GPU_JOBS".into(),
            subject: "miden-gpu.jobs".into(),
            consumer: "miden-gpu-workers".into(),
            results: "miden-gpu-results".into(),
            attempts: "miden-gpu-attempts".into(),
            ack_wait: Duration::from_secs(30),
            backoff: DEFAULT_BACKOFF.to_vec(),
            max_deliver: 20,
            max_ack_pending: 1024,
            connect_timeout: Duration::from_secs(60),
            result_ttl: DEFAULT_RESULT_TTL,
        }
    }

    /// The subject this client publishes jobs on: `<subject>.<submitter>`, or the subject.
    pub fn job_subject(&self) -> String {
        match &self.submitter {
            Some(submitter) => format!("{}.{submitter}", self.subject),
            None => self.subject.clone(),
        }
    }

    /// The key of this client's result of job `id`: `<submitter>.<id>`, or the id.
    pub fn result_key(&self, id: &str) -> String {
        result_key(self.submitter.as_deref(), id)
    }
}

impl fmt::Debug for FleetOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetOptions")
            .field("url", &server_names(&self.url))
            .field("security", &self.security)
            .field("submitter", &self.submitter)
            .field("replicas", &self.replicas)
            .field("stream", &self.stream)
            .field("subject", &self.subject)
            .field("consumer", &self.consumer)
            .field("results", &self.results)
            .field("attempts", &self.attempts)
            .field("ack_wait", &self.ack_wait)
            .field("backoff", &self.backoff)
            .field("max_deliver", &self.max_deliver)
            .field("max_ack_pending", &self.max_ack_pending)
            .field("connect_timeout", &self.connect_timeout)
            .field("result_ttl", &self.result_ttl)
            .finish()
    }
}

/// The key of job `id`'s result when `submitter` submitted it: `<submitter>.<id>`, or the id.
pub(crate) fn result_key(submitter: Option<&str>, id: &str) -> String {
    match submitter {
        Some(submitter) => format!("{submitter}.{id}"),
        None => id.to_string(),
    }
}

// FLEET
// ================================================================================================

/// A connection to a fleet's NATS server, with its job stream and buckets (created if absent).
/// The client reconnects by itself when the server goes away; calls made meanwhile fail and may
/// be retried.
pub struct Fleet {
    client: Client,
    jetstream: jetstream::Context,
    stream: stream::Stream,
    results: kv::Store,
    attempts: kv::Store,
    /// How many times the client has connected (the first time included).
    connections: watch::Receiver<u64>,
    options: FleetOptions,
}

/// A job's record of solo attempts and its revision in the attempts bucket (none: no record).
pub(crate) type AttemptRecord = (Vec<Attempt>, Option<u64>);

/// The jobs of a fleet's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    /// Jobs no worker holds.
    pub waiting: u64,
    /// Jobs workers hold (being proved, or held by a worker that ended, until the ack wait).
    pub in_progress: u64,
}

impl Fleet {
    /// Connects to the server as `name` and opens (creating where absent) the job stream and
    /// the buckets, trying again while the server is away, for at most
    /// [`FleetOptions::connect_timeout`].
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server cannot be reached or does not open them within
    /// that time; at once, [`ServiceError::Refused`] (credentials, TLS),
    /// [`ServiceError::PermissionDenied`], [`ServiceError::StreamSettings`],
    /// [`ServiceError::ServerUrl`] and [`ServiceError::Credentials`].
    pub async fn connect(options: &FleetOptions, name: &str) -> Result<Self, ServiceError> {
        let start = Instant::now();
        let mut delay = RETRY_DELAY;
        loop {
            match Self::connect_once(options, name).await {
                Ok(fleet) => return Ok(fleet),
                // the server is away, or not ready: it may be later
                Err(error @ ServiceError::Nats { .. })
                    if start.elapsed() + delay < options.connect_timeout =>
                {
                    debug!(%error, "cannot open the fleet yet; trying again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                },
                Err(ServiceError::Nats { action, message })
                    if !options.connect_timeout.is_zero() =>
                {
                    let seconds = options.connect_timeout.as_secs();
                    let message = format!("{message} (tried for {seconds} s)");
                    return Err(ServiceError::Nats { action, message });
                },
                Err(error) => return Err(error),
            }
        }
    }

    /// One try of [`Self::connect`].
    async fn connect_once(options: &FleetOptions, name: &str) -> Result<Self, ServiceError> {
        let servers = server_addresses(&options.url)?;
        let server = server_names(&options.url);
        let (connected, connections) = watch::channel(0);
        let connected = Arc::new(connected);
        let denied = Arc::new(Mutex::new(None::<String>));
        let denial = denied.clone();
        let mut connect = ConnectOptions::new();
        if let Some(submitter) = &options.submitter {
            check_submitter(submitter).map_err(ServiceError::Submitter)?;
            connect = connect.custom_inbox_prefix(format!("_INBOX_{submitter}"));
        }
        let client = options
            .security
            .apply(connect)?
            .name(name)
            .event_callback(move |event| {
                let connected = connected.clone();
                let denial = denial.clone();
                async move {
                    match event {
                        Event::ServerError(error)
                            if error
                                .to_string()
                                .to_lowercase()
                                .contains("permissions violation") =>
                        {
                            warn!(%error, "the NATS server denied a subject");
                            if let Ok(mut denied) = denial.lock() {
                                *denied = Some(error.to_string());
                            }
                        },
                        Event::Disconnected => {
                            warn!("disconnected from the NATS server; reconnecting")
                        },
                        Event::Connected => {
                            info!("connected to the NATS server");
                            connected.send_modify(|count| *count += 1);
                        },
                        event => debug!(%event, "NATS client event"),
                    }
                }
            })
            .connect(servers)
            .await
            .map_err(|error| refusal(&server, error))?;
        let jetstream = jetstream::new(client.clone());
        // the server lists the client addresses of every server of its cluster, its own among
        // them (none where it is alone)
        let mut servers = client.server_info().connect_urls;
        servers.sort_unstable();
        servers.dedup();
        let replicas = Replicas::new(options.replicas, servers.len());
        let opened = async {
            let stream = open_job_stream(
                &jetstream,
                &options.stream,
                &options.subject,
                &options.job_subject(),
                replicas,
            )
            .await?;
            let results =
                open_bucket(&jetstream, &options.results, options.result_ttl, replicas).await?;
            let attempts =
                open_bucket(&jetstream, &options.attempts, ATTEMPTS_TTL, replicas).await?;
            Ok::<_, ServiceError>((stream, results, attempts))
        };
        let (stream, results, attempts) = match opened.await {
            Ok(opened) => opened,
            Err(error) => {
                let denied = denied.lock().ok().and_then(|mut denied| denied.take());
                return Err(match denied {
                    Some(message) => ServiceError::PermissionDenied { server, message },
                    None => error,
                });
            },
        };
        Ok(Self {
            client,
            jetstream,
            stream,
            results,
            attempts,
            connections,
            options: options.clone(),
        })
    }

    /// The options the fleet was opened with.
    pub fn options(&self) -> &FleetOptions {
        &self.options
    }

    /// Whether the client is connected to the server now.
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// The largest message the server takes, in bytes.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    // JOBS
    // --------------------------------------------------------------------------------------------

    /// Puts `job` on the queue, once: JetStream drops a second publication of its id within
    /// the stream's duplicate window.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not confirm the job was stored.
    pub async fn submit(&self, job: &Job) -> Result<(), ServiceError> {
        self.submit_raw(&job.id, job.encode()?).await
    }

    /// Puts the message `payload` on the queue with the job id `id` in its `Nats-Msg-Id`
    /// header, as [`Self::submit`] does with an encoded [`Job`]; a worker files the error result
    /// of a message that is not a job under `id`.
    ///
    /// # Errors
    /// As [`Self::submit`].
    pub async fn submit_raw(&self, id: &str, payload: Vec<u8>) -> Result<(), ServiceError> {
        let failed = |e: &dyn std::fmt::Display| ServiceError::nats(format!("submit job {id}"), e);
        let mut headers = HeaderMap::new();
        headers.insert(NATS_MESSAGE_ID, id);
        let acknowledgement = self
            .jetstream
            .publish_with_headers(self.options.job_subject(), headers, payload.into())
            .await
            .map_err(|e| failed(&e))?;
        acknowledgement.await.map_err(|e| failed(&e))?;
        Ok(())
    }

    /// Puts `job` on the queue as [`Self::submit`] does, trying again while the server is away
    /// (a second publication is harmless: the server drops it by the job's id), for at most
    /// `limit`.
    ///
    /// # Errors
    /// [`ServiceError::NotQueued`] when the server has not confirmed the job within `limit`.
    pub async fn submit_within(&self, job: &Job, limit: Duration) -> Result<(), ServiceError> {
        let payload = job.encode()?;
        let start = Instant::now();
        let mut delay = RETRY_DELAY;
        let not_queued = |message: String| ServiceError::NotQueued {
            id: job.id.clone(),
            seconds: limit.as_secs(),
            message,
        };
        loop {
            let left = limit.saturating_sub(start.elapsed());
            let error =
                match tokio::time::timeout(left, self.submit_raw(&job.id, payload.clone())).await {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(error)) => error,
                    Err(_) => return Err(not_queued("no confirmation from the server".into())),
                };
            if start.elapsed() + delay >= limit {
                return Err(not_queued(error.to_string()));
            }
            debug!(%error, "the job is not queued yet; trying again");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_RETRY_DELAY);
        }
    }

    /// Puts `job` on the queue ([`Self::submit_within`] `submit_limit`) and waits for its result
    /// as [`Self::wait_for_result`] does, at most `timeout` if given. Each time the client
    /// connects to the server again, the job is published again within `submit_limit`: a
    /// server that restarted without it gets it back, and one that has it drops the copy.
    ///
    /// # Errors
    /// [`ServiceError::NotQueued`]; [`ServiceError::TimedOut`]; [`ServiceError::MalformedResult`].
    pub async fn submit_and_wait(
        &self,
        job: &Job,
        submit_limit: Duration,
        timeout: Option<Duration>,
    ) -> Result<JobResult, ServiceError> {
        let start = Instant::now();
        let key = self.options.result_key(&job.id);
        let mut connections = self.connections.clone();
        connections.mark_unchanged();
        self.submit_within(job, submit_limit).await?;
        let wait = async {
            loop {
                tokio::select! {
                    watched = self.watch_result(&key) => match watched {
                        Ok(bytes) => return JobResult::decode(&job.id, &bytes),
                        Err(error) => {
                            debug!(%error, "watching for the result again");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        },
                    },
                    changed = connections.changed() => {
                        if changed.is_err() {
                            let closed = "the client closed";
                            return Err(ServiceError::nats("wait for the result", closed));
                        }
                        info!(id = job.id, "connected again; publishing the job again");
                        self.submit_within(job, submit_limit).await?;
                    },
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(limit) => {
                let left = limit.saturating_sub(start.elapsed());
                tokio::time::timeout(left, wait).await.map_err(|_| ServiceError::TimedOut {
                    id: job.id.clone(),
                    seconds: limit.as_secs(),
                })?
            },
        }
    }

    /// The jobs waiting and in progress, from the workers' consumer (all the stream's jobs
    /// wait while no worker has created it).
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not answer.
    pub async fn queue_depth(&self) -> Result<QueueDepth, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| ServiceError::nats("read the queue depth", e);
        match self.stream.get_consumer::<pull::Config>(&self.options.consumer).await {
            Ok(consumer) => {
                let info = consumer.get_info().await.map_err(|e| failed(&e))?;
                Ok(QueueDepth {
                    waiting: info.num_pending,
                    in_progress: info.num_ack_pending as u64,
                })
            },
            Err(_) => {
                let info = self.stream.get_info().await.map_err(|e| failed(&e))?;
                Ok(QueueDepth { waiting: info.state.messages, in_progress: 0 })
            },
        }
    }

    /// The workers' durable pull consumer (created with [`FleetOptions::ack_wait`],
    /// [`FleetOptions::backoff`], [`FleetOptions::max_deliver`] and
    /// [`FleetOptions::max_ack_pending`] where absent: explicit acknowledgements, every job
    /// once).
    pub(crate) async fn consumer(&self) -> Result<PullConsumer, ServiceError> {
        let name = &self.options.consumer;
        let options = &self.options;
        // the server's backoff holds the first delivery's ack wait too
        let backoff = match options.backoff.is_empty() {
            true => Vec::new(),
            false => std::iter::once(options.ack_wait).chain(options.backoff.clone()).collect(),
        };
        self.stream
            .get_or_create_consumer(
                name,
                pull::Config {
                    durable_name: Some(name.clone()),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: options.ack_wait,
                    backoff,
                    max_deliver: options.max_deliver,
                    max_ack_pending: options.max_ack_pending,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| ServiceError::nats(format!("open the consumer {name}"), e))
    }

    // RESULTS
    // --------------------------------------------------------------------------------------------

    /// The result of job `id` (under [`FleetOptions::result_key`]), if there is one yet.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not answer; [`ServiceError::MalformedResult`].
    pub async fn result(&self, id: &str) -> Result<Option<JobResult>, ServiceError> {
        let stored = self.stored_result(&self.options.result_key(id)).await?;
        stored.map(|bytes| JobResult::decode(id, &bytes)).transpose()
    }

    /// The value stored under `key` of the results bucket, if any.
    async fn stored_result(&self, key: &str) -> Result<Option<Vec<u8>>, ServiceError> {
        let entry = self
            .results
            .entry(key)
            .await
            .map_err(|e| ServiceError::nats(format!("read the result {key}"), e))?;
        Ok(entry.filter(|entry| entry.operation == Operation::Put).map(|e| e.value.to_vec()))
    }

    /// Waits for the result of job `id` (under [`FleetOptions::result_key`]; a subscription to
    /// its key's writes, renewed when the connection drops), at most `timeout` if given.
    ///
    /// # Errors
    /// [`ServiceError::TimedOut`]; [`ServiceError::MalformedResult`].
    pub async fn wait_for_result(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<JobResult, ServiceError> {
        let key = self.options.result_key(id);
        let wait = async {
            loop {
                match self.watch_result(&key).await {
                    Ok(bytes) => return JobResult::decode(id, &bytes),
                    Err(error) => {
                        debug!(%error, "watching for the result again");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    },
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(limit) => tokio::time::timeout(limit, wait).await.map_err(|_| {
                ServiceError::TimedOut { id: id.to_string(), seconds: limit.as_secs() }
            })?,
        }
    }

    /// The first value stored under `key`, present or to come; an error when the subscription
    /// ends first. The value is read from the bucket each time a write of the key is seen (the
    /// message seen is not trusted: the bucket may have refused it), and every
    /// [`RESULT_RECHECK`] besides. This needs no consumer, so that a submitter's permissions can
    /// be the subjects of its own keys.
    async fn watch_result(&self, key: &str) -> Result<Vec<u8>, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| ServiceError::nats(format!("watch {key}"), e);
        let subject = format!("$KV.{}.{key}", self.options.results);
        let mut writes = self.client.subscribe(subject).await.map_err(|e| failed(&e))?;
        let mut recheck = RESULT_RECHECK;
        loop {
            if let Some(bytes) = self.stored_result(key).await? {
                return Ok(bytes);
            }
            tokio::select! {
                write = writes.next() => match write {
                    Some(_) => recheck = FIRST_RESULT_RECHECK,
                    None => return Err(failed(&"the subscription ended")),
                },
                _ = tokio::time::sleep(recheck) => recheck = (recheck * 2).min(RESULT_RECHECK),
            }
        }
    }

    /// Writes `result` under `key` unless a result is there already; returns whether it was
    /// written. A job thus never has two results, even when two workers prove it.
    pub(crate) async fn write_result(
        &self,
        key: &str,
        result: &JobResult,
    ) -> Result<bool, ServiceError> {
        match self.results.create(key, result.encode()?.into()).await {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == CreateErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(ServiceError::nats(format!("write the result {key}"), error)),
        }
    }

    /// Sets how long results are kept ([`FleetOptions::result_ttl`]) on the existing results
    /// bucket, for every result in it: results older than `ttl` are deleted at once. Nothing
    /// is changed where the bucket has that maximum age already.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not answer or refuses the change.
    pub async fn set_result_ttl(&self, ttl: Duration) -> Result<(), ServiceError> {
        let name = bucket_stream(&self.options.results);
        let failed = |e: &dyn std::fmt::Display| {
            ServiceError::nats(format!("set the maximum age of the stream {name}"), e)
        };
        let mut stream = self.jetstream.get_stream(&name).await.map_err(|e| failed(&e))?;
        let mut config = stream.info().await.map_err(|e| failed(&e))?.config.clone();
        if config.max_age == ttl {
            return Ok(());
        }
        info!(
            bucket = self.options.results,
            from_s = config.max_age.as_secs(),
            to_s = ttl.as_secs(),
            "changing how long results are kept"
        );
        config.max_age = ttl;
        config.duplicate_window = duplicate_window(ttl);
        self.jetstream.update_stream(config).await.map_err(|e| failed(&e))?;
        Ok(())
    }

    /// The solo attempts recorded for job `id` (its result's key), and the record's revision.
    pub(crate) async fn attempts(&self, id: &str) -> Result<AttemptRecord, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| {
            ServiceError::nats(format!("read the attempts at job {id}"), e)
        };
        let Some(entry) = self.attempts.entry(id).await.map_err(|e| failed(&e))? else {
            return Ok((Vec::new(), None));
        };
        if entry.operation != Operation::Put {
            return Ok((Vec::new(), Some(entry.revision)));
        }
        let attempts = serde_json::from_slice(&entry.value).map_err(|e| failed(&e))?;
        Ok((attempts, Some(entry.revision)))
    }

    /// Replaces the record of job `id`'s solo attempts at `revision` (none: where there is no
    /// record) with `attempts`; returns the new revision. Fails where another worker changed
    /// the record since.
    pub(crate) async fn record_attempts(
        &self,
        id: &str,
        attempts: &[Attempt],
        revision: Option<u64>,
    ) -> Result<u64, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| {
            ServiceError::nats(format!("record the attempts at job {id}"), e)
        };
        let value: Vec<u8> = serde_json::to_vec(attempts).map_err(ServiceError::Encode)?;
        match revision {
            None => self.attempts.create(id, value.into()).await.map_err(|e| failed(&e)),
            Some(revision) => {
                self.attempts.update(id, value.into(), revision).await.map_err(|e| failed(&e))
            },
        }
    }

    /// Whether there is a result under `key`.
    pub(crate) async fn has_result(&self, key: &str) -> Result<bool, ServiceError> {
        Ok(self.stored_result(key).await?.is_some())
    }

    /// The submitter of a job the server received on `subject` (none: on
    /// [`FleetOptions::subject`] itself); an error for a subject of no valid submitter.
    pub(crate) fn submitter_of<'a>(&self, subject: &'a str) -> Result<Option<&'a str>, String> {
        if subject == self.options.subject {
            return Ok(None);
        }
        let submitter = subject
            .strip_prefix(self.options.subject.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .ok_or_else(|| format!("a job on subject {subject}, not one of the fleet's"))?;
        check_submitter(submitter)?;
        Ok(Some(submitter))
    }
}

// CONNECTIONS
// ================================================================================================

/// The error of a connection to `server` that failed: [`ServiceError::Refused`] where trying
/// again would not help (credentials, TLS), else [`ServiceError::Nats`].
fn refusal(server: &str, error: async_nats::ConnectError) -> ServiceError {
    let refused = |cause| ServiceError::Refused { server: server.to_string(), cause };
    // a handshake that fails, or an alert of the server after it, comes as an I/O error
    if let Some(tls) = tls_cause(&error) {
        return refused(RefusalCause::Tls(tls));
    }
    match error.kind() {
        ConnectErrorKind::AuthorizationViolation => refused(RefusalCause::Authorization),
        ConnectErrorKind::Authentication => {
            refused(RefusalCause::Authentication(error.to_string()))
        },
        ConnectErrorKind::Tls => refused(RefusalCause::Tls(error.to_string())),
        ConnectErrorKind::ServerParse => {
            ServiceError::ServerUrl { url: server.to_string(), message: error.to_string() }
        },
        _ => ServiceError::nats(format!("connect to {server}"), error),
    }
}

/// The message of the TLS error among the causes of `error`, if there is one.
fn tls_cause(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        let inner = error.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref);
        let tls = match inner {
            Some(inner) => inner.downcast_ref::<async_nats::rustls::Error>(),
            None => error.downcast_ref::<async_nats::rustls::Error>(),
        };
        if let Some(tls) = tls {
            return Some(tls.to_string());
        }
        cause = error.source();
    }
    None
}
