//! [`Fleet`]: a connection to the NATS server and the JetStream objects of a prover fleet: the
//! work-queue stream of jobs, the workers' durable pull consumer, the results bucket and the
//! bucket of the jobs' solo attempts.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_nats::{
    header::NATS_MESSAGE_ID,
    jetstream::{
        self,
        consumer::{pull, AckPolicy, PullConsumer},
        kv::{self, CreateErrorKind, Operation},
        stream::{self, DiscardPolicy, RetentionPolicy, StorageType},
    },
    Client, ConnectOptions, Event, HeaderMap,
};
use futures::StreamExt;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{
    error::ServiceError,
    job::Job,
    result::{Attempt, JobResult},
};

// OPTIONS
// ================================================================================================

/// Where a fleet's jobs and results live, and how long a worker may hold a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetOptions {
    /// The NATS server's URL (`nats://host:4222`).
    pub url: String,
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

/// The longest window in which the server drops a second write of a message id (JetStream's
/// default); never longer than a stream's maximum age.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

impl FleetOptions {
    /// The default names and limits, on the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
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
    /// [`ServiceError::Nats`] when the server cannot be reached or refuses to create them
    /// within that time.
    pub async fn connect(options: &FleetOptions, name: &str) -> Result<Self, ServiceError> {
        let start = Instant::now();
        let mut delay = RETRY_DELAY;
        loop {
            match Self::connect_once(options, name).await {
                Ok(fleet) => return Ok(fleet),
                Err(error) if start.elapsed() + delay < options.connect_timeout => {
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
        let (connected, connections) = watch::channel(0);
        let connected = Arc::new(connected);
        let client = ConnectOptions::new()
            .name(name)
            .event_callback(move |event| {
                let connected = connected.clone();
                async move {
                    match event {
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
            .connect(&options.url)
            .await
            .map_err(|e| ServiceError::nats(format!("connect to {}", options.url), e))?;
        let jetstream = jetstream::new(client.clone());
        let stream = jetstream
            .get_or_create_stream(stream::Config {
                name: options.stream.clone(),
                subjects: vec![options.subject.clone()],
                retention: RetentionPolicy::WorkQueue,
                storage: StorageType::File,
                ..Default::default()
            })
            .await
            .map_err(|e| ServiceError::nats(format!("open the stream {}", options.stream), e))?;
        let results = open_bucket(&jetstream, &options.results, options.result_ttl).await?;
        let attempts = open_bucket(&jetstream, &options.attempts, ATTEMPTS_TTL).await?;
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
            .publish_with_headers(self.options.subject.clone(), headers, payload.into())
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
        let mut connections = self.connections.clone();
        connections.mark_unchanged();
        self.submit_within(job, submit_limit).await?;
        let wait = async {
            loop {
                tokio::select! {
                    watched = self.watch_result(&job.id) => match watched {
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

    /// The result of job `id`, if there is one yet.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not answer; [`ServiceError::MalformedResult`].
    pub async fn result(&self, id: &str) -> Result<Option<JobResult>, ServiceError> {
        let value = self
            .results
            .get(id)
            .await
            .map_err(|e| ServiceError::nats(format!("read the result of job {id}"), e))?;
        value.map(|bytes| JobResult::decode(id, &bytes)).transpose()
    }

    /// Waits for the result of job `id` (a watch on its key, renewed when the connection
    /// drops), at most `timeout` if given.
    ///
    /// # Errors
    /// [`ServiceError::TimedOut`]; [`ServiceError::MalformedResult`].
    pub async fn wait_for_result(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<JobResult, ServiceError> {
        let wait = async {
            loop {
                match self.watch_result(id).await {
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

    /// The first value of key `id`, present or to come; an error when the watch ends first.
    async fn watch_result(&self, id: &str) -> Result<Vec<u8>, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| ServiceError::nats(format!("watch job {id}"), e);
        let mut watch = self.results.watch_with_history(id).await.map_err(|e| failed(&e))?;
        while let Some(entry) = watch.next().await {
            let entry = entry.map_err(|e| failed(&e))?;
            if entry.operation == Operation::Put {
                return Ok(entry.value.to_vec());
            }
        }
        Err(failed(&"the watch ended"))
    }

    /// Writes `result` under its job's id unless a result is there already; returns whether it
    /// was written. A job thus never has two results, even when two workers prove it.
    pub(crate) async fn write_result(&self, result: &JobResult) -> Result<bool, ServiceError> {
        let id = &result.id;
        match self.results.create(id, result.encode()?.into()).await {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == CreateErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(ServiceError::nats(format!("write the result of job {id}"), error)),
        }
    }

    /// Sets how long results are kept ([`FleetOptions::result_ttl`]) on the existing results
    /// bucket, for every result in it: results older than `ttl` are deleted at once. Nothing
    /// is changed where the bucket has that maximum age already.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the server does not answer or refuses the change.
    pub async fn set_result_ttl(&self, ttl: Duration) -> Result<(), ServiceError> {
        let name = results_stream(&self.options.results);
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

    /// The solo attempts recorded for job `id`, and the record's revision.
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

    /// Whether job `id` has a result.
    pub(crate) async fn has_result(&self, id: &str) -> Result<bool, ServiceError> {
        let entry = self
            .results
            .entry(id)
            .await
            .map_err(|e| ServiceError::nats(format!("read the result of job {id}"), e))?;
        Ok(entry.is_some_and(|entry| entry.operation == Operation::Put))
    }
}

// BUCKETS
// ================================================================================================

/// The stream of the key-value bucket `bucket`.
fn results_stream(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// The duplicate window of a stream whose messages live `max_age` (zero: for ever).
fn duplicate_window(max_age: Duration) -> Duration {
    match max_age.is_zero() {
        true => DUPLICATE_WINDOW,
        false => max_age.min(DUPLICATE_WINDOW),
    }
}

/// The key-value bucket `bucket`, its stream created where absent with the settings the client
/// gives a bucket of one value per key and a maximum age of `ttl` (the client's own bucket
/// creation first reads account fields that nats-server 2.9 does not send).
async fn open_bucket(
    jetstream: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
) -> Result<kv::Store, ServiceError> {
    let failed =
        |e: &dyn std::fmt::Display| ServiceError::nats(format!("open the bucket {bucket}"), e);
    jetstream
        .get_or_create_stream(stream::Config {
            name: results_stream(bucket),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_age: ttl,
            duplicate_window: duplicate_window(ttl),
            max_messages_per_subject: 1,
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: 1,
            ..Default::default()
        })
        .await
        .map_err(|e| failed(&e))?;
    jetstream.get_key_value(bucket).await.map_err(|e| failed(&e))
}
