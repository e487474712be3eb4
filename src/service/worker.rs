//! [`Worker`]: pulls jobs from a fleet's queue and proves them on a [`ProverPool`], as many at
//! once as the pool has workers, and files each result once.
//!
//! ## One job
//! 1. One pull request for one message while a pool worker is free, waiting at most
//!    [`WorkerOptions::pull_wait`]: a worker holds only the jobs it proves, and the queue holds
//!    the rest. Pulls that fail (the server is away) are retried with a growing delay, so the
//!    loop outlives a server restart.
//! 2. A job whose result exists already (a redelivery after its worker ended between writing
//!    the result and acknowledging the message) is acknowledged without a proof.
//! 3. A message that is not a job ([`Job::decode`]), and the last delivery the consumer allows,
//!    get an error result at once.
//! 4. A job delivered again (its earlier worker ended, or gave it back) is proved **alone**: a
//!    worker that holds other jobs gives it back (a negative acknowledgement, for a worker that
//!    holds none) and takes no new job until its own are done, and a worker that holds none
//!    proves it with no other beside it, so a job that kills its worker (out of memory, a
//!    crash) takes no other job down with it after its first delivery. Such a solo attempt is
//!    recorded in the fleet's attempts bucket before the proof starts; a job whose solo
//!    attempts have each ended with their worker, [`WorkerOptions::solo_attempts`] of them, is
//!    abandoned ([`FailureKind::Abandoned`], with the attempts). Deliveries that ended beside
//!    other jobs do not count: they say nothing of the job itself.
//! 5. Otherwise the job is prepared (the caller's [`Prepare`]: assembly, inputs) and proved on
//!    the pool ([`ProverPool::prove_miden`]: host memory admitted, the proof self-checked),
//!    while an in-progress acknowledgement goes to the server every third of the consumer's
//!    shortest ack wait.
//! 6. The result is written if absent ([`Fleet`]: create-if-absent) under its key
//!    (`<submitter>.<id>` for a job the server received on a submitter's subject, else the
//!    id), retried while the server is away, then the message is acknowledged. A result that
//!    could not be written gives the message back for a later delivery.
//!
//! ## Shutdown
//! When the future given to [`Worker::run`] completes, no new pull is made; jobs being proved
//! are finished and filed, and a message arriving meanwhile is given back at once.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use async_nats::{
    header::NATS_MESSAGE_ID,
    jetstream::{consumer::PullConsumer, AckKind, Message},
};
use futures::StreamExt;
use miden_processor::{AdviceInputs, DefaultHost, ExecutionOptions, Program, StackInputs};
use tokio::{sync::watch, task::JoinSet};
use tracing::{debug, field, info, info_span, warn, Instrument, Span};

use super::{
    error::ServiceError,
    fleet::{result_key, AttemptRecord, Fleet},
    job::Job,
    metrics::Metrics,
    result::{Attempt, AttemptEnd, FailureKind, JobFailure, JobResult, Outcome, ProvedJob},
    wire::check_job_id,
};
use crate::{
    miden::{gpu_hash_function, Execution, MidenProveOptions},
    pool::ProverPool,
};

/// The default of [`WorkerOptions::max_job_bytes`]: 4 MiB.
pub const DEFAULT_MAX_JOB_BYTES: usize = 4 << 20;

/// The default of [`WorkerOptions::solo_attempts`]: 3.
pub const DEFAULT_SOLO_ATTEMPTS: u32 = 3;

/// How often a failed result write is tried; the delays between tries double from
/// [`RETRY_DELAY`] up to [`MAX_RETRY_DELAY`] (about 20 s in all).
const WRITE_ATTEMPTS: u32 = 8;
/// The first delay before a pull or write is tried again.
const RETRY_DELAY: Duration = Duration::from_millis(250);
/// The longest delay between tries.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(4);
/// How often the queue depth is read for the metrics.
const QUEUE_DEPTH_INTERVAL: Duration = Duration::from_secs(5);
/// Bytes of a result message kept for the bucket's headers and subject.
const RESULT_OVERHEAD: usize = 1024;
/// How long a job waits in the queue before its next delivery when its solo attempt could not
/// be read or recorded (the server in trouble), so that its deliveries are not spent at once.
const REQUEUE_DELAY: Duration = Duration::from_secs(1);

// OPTIONS
// ================================================================================================

/// A worker's name and its limits on jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerOptions {
    /// The name in results, logs and the server's connection list.
    pub name: String,
    /// The largest job message taken, in bytes ([`DEFAULT_MAX_JOB_BYTES`]); a larger one is a
    /// [`FailureKind::TooLarge`] result.
    pub max_job_bytes: usize,
    /// The most cycles one execution may take (default `ExecutionOptions::MAX_CYCLES`); a job
    /// may ask for fewer.
    pub max_cycles: u32,
    /// How long one pull request waits for a job (default 1 s): also how long a shutdown may
    /// wait for an idle pull.
    pub pull_wait: Duration,
    /// Which of Miden's processors executes the jobs (default [`Execution::Reference`], which
    /// stops a program at its cycle limit as it runs; [`Execution::Parallel`] is faster but
    /// checks the limit only once the program ends, so suits a fleet of trusted submitters).
    pub execution: Execution,
    /// The solo attempts at a redelivered job, each ended with its worker, after which the
    /// next delivery abandons the job ([`DEFAULT_SOLO_ATTEMPTS`]; 0 abandons a job at its
    /// first redelivery).
    pub solo_attempts: u32,
}

impl WorkerOptions {
    /// The default limits, for the worker `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            max_job_bytes: DEFAULT_MAX_JOB_BYTES,
            max_cycles: ExecutionOptions::MAX_CYCLES,
            pull_wait: Duration::from_secs(1),
            execution: Execution::Reference,
            solo_attempts: DEFAULT_SOLO_ATTEMPTS,
        }
    }
}

/// What a job's [`Prepare`] makes of it: the program, its inputs and the host that runs it.
pub struct PreparedJob {
    /// The program to prove.
    pub program: Program,
    /// The initial operand stack.
    pub stack_inputs: StackInputs,
    /// The advice stack, map and Merkle store.
    pub advice_inputs: AdviceInputs,
    /// The host of the execution (with the libraries the program calls).
    pub host: DefaultHost,
}

/// Turns a job into a [`PreparedJob`] (assembles or decodes the program, reads the inputs),
/// or into the failure that is its result ([`FailureKind::Program`], [`FailureKind::Inputs`]).
pub type Prepare = dyn Fn(&Job) -> Result<PreparedJob, JobFailure> + Send + Sync;

// WORKER
// ================================================================================================

/// Proves a fleet's jobs on a [`ProverPool`]; see the module documentation.
pub struct Worker {
    fleet: Arc<Fleet>,
    pool: Arc<ProverPool>,
    options: WorkerOptions,
    prepare: Arc<Prepare>,
    metrics: Arc<Metrics>,
}

/// The consumer's settings a worker follows (those of whoever created it).
#[derive(Clone, Copy)]
struct Delivery {
    /// The shortest ack wait of any delivery.
    ack_wait: Duration,
    max_deliver: i64,
}

impl Delivery {
    /// Whether `delivered` is the last delivery the consumer makes.
    fn is_last(&self, delivered: u64) -> bool {
        self.max_deliver > 1 && delivered >= self.max_deliver as u64
    }
}

/// What a worker does with a job delivered again.
enum Redelivered {
    /// Proves it alone, its attempt recorded.
    Prove(AttemptRecord),
    /// Files this failure.
    Abandon(JobFailure),
    /// Gives it back for a later delivery: the attempt could not be recorded, or the worker
    /// holds other jobs.
    GiveBack,
}

impl Worker {
    /// A worker for `fleet`'s jobs on `pool`, with `prepare` for each job's program and inputs.
    ///
    /// # Errors
    /// [`ServiceError::Metrics`] if the metrics cannot be registered.
    pub fn new(
        fleet: Arc<Fleet>,
        pool: ProverPool,
        options: WorkerOptions,
        prepare: impl Fn(&Job) -> Result<PreparedJob, JobFailure> + Send + Sync + 'static,
    ) -> Result<Self, ServiceError> {
        let metrics = Arc::new(Metrics::new(pool.committers())?);
        Ok(Self { fleet, pool: Arc::new(pool), options, prepare: Arc::new(prepare), metrics })
    }

    /// The worker's metrics, for [`super::MetricsServer`].
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Serves jobs until `shutdown` completes, then finishes the jobs it holds and returns.
    ///
    /// # Errors
    /// [`ServiceError::Nats`] when the workers' consumer cannot be opened at the start; later
    /// server failures are logged and retried.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServiceError> {
        let consumer = self.fleet.consumer().await?;
        let config = &consumer.cached_info().config;
        let ack_wait = config.backoff.iter().copied().fold(config.ack_wait, Duration::min);
        let delivery = Delivery { ack_wait, max_deliver: config.max_deliver };
        let slots = self.pool.workers();
        info!(
            worker = self.options.name,
            slots,
            ack_wait_ms = config.ack_wait.as_millis() as u64,
            backoff_ms = ?config.backoff.iter().map(Duration::as_millis).collect::<Vec<_>>(),
            max_deliver = delivery.max_deliver,
            max_ack_pending = config.max_ack_pending,
            solo_attempts = self.options.solo_attempts,
            "serving jobs"
        );
        let worker = Arc::new(self);
        let (stop, stopped) = watch::channel(false);
        let serving =
            tokio::spawn(worker.clone().serve(consumer, delivery, slots, stopped.clone()));
        let depth = tokio::spawn(worker.clone().watch_queue_depth(stopped));
        shutdown.await;
        info!("stopping: finishing the jobs held");
        let _ = stop.send(true);
        if let Err(error) = serving.await {
            warn!(%error, "the job loop ended abnormally");
        }
        depth.abort();
        Ok(())
    }

    /// Pulls one job at a time while fewer than `slots` are held, none alone and none waiting
    /// for the worker to empty (module documentation), until stopped; then waits for the jobs
    /// held.
    async fn serve(
        self: Arc<Self>,
        consumer: PullConsumer,
        delivery: Delivery,
        slots: usize,
        mut stopped: watch::Receiver<bool>,
    ) {
        let mut jobs = JoinSet::new();
        // a redelivered job is proved alone; one was given back to be, so take no other
        let (mut solo, mut emptying) = (false, false);
        let mut delay = RETRY_DELAY;
        loop {
            while jobs.len() >= slots || solo || (emptying && !jobs.is_empty()) {
                if let Some(Err(error)) = jobs.join_next().await {
                    warn!(%error, "a job ended abnormally");
                }
                solo = false;
                emptying &= !jobs.is_empty();
            }
            if *stopped.borrow() {
                break;
            }
            let message = match self.pull(&consumer).await {
                Ok(Some(message)) => message,
                Ok(None) => continue,
                Err(error) => {
                    warn!(%error, "cannot pull a job; trying again");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {},
                        _ = stopped.changed() => {},
                    }
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                    continue;
                },
            };
            delay = RETRY_DELAY;
            if *stopped.borrow() {
                give_back(&message, None).await;
                continue;
            }
            let delivered = message.info().map_or(1, |info| info.delivered.max(1) as u64);
            if delivered > 1 && !jobs.is_empty() && !delivery.is_last(delivered) {
                // at once, for a worker that holds none: this one takes no job until it is
                // empty (and nats-server 2.9 lengthens a delay by the backoff's growth)
                debug!(delivered, "a job delivered again: given back for a worker with no other");
                give_back(&message, None).await;
                emptying = true;
                continue;
            }
            solo = delivered > 1 && jobs.is_empty();
            let worker = self.clone();
            jobs.spawn(async move { worker.handle(message, delivery, solo).await });
        }
        while let Some(joined) = jobs.join_next().await {
            if let Err(error) = joined {
                warn!(%error, "a job ended abnormally");
            }
        }
    }

    /// One message, or none within [`WorkerOptions::pull_wait`].
    async fn pull(&self, consumer: &PullConsumer) -> Result<Option<Message>, ServiceError> {
        let failed = |e: &dyn std::fmt::Display| ServiceError::nats("pull a job", e);
        let mut batch = consumer
            .batch()
            .max_messages(1)
            .expires(self.options.pull_wait)
            .messages()
            .await
            .map_err(|e| failed(&e))?;
        batch.next().await.transpose().map_err(|e| failed(&e))
    }

    /// Files the result of one message, then acknowledges it (module documentation); `solo`:
    /// the worker holds no other job, nor takes one until this one is done.
    async fn handle(&self, message: Message, delivery: Delivery, solo: bool) {
        let (sequence, delivered, published) = match message.info() {
            Ok(info) => {
                (info.stream_sequence, info.delivered as u64, SystemTime::from(info.published))
            },
            Err(error) => {
                warn!(%error, "a message without JetStream metadata; dropped");
                return;
            },
        };
        // the server enforces who publishes on which subject; the job cannot name another's
        let submitter = match self.fleet.submitter_of(message.subject.as_str()) {
            Ok(submitter) => submitter.map(str::to_string),
            Err(error) => {
                warn!(%error, "a job of no valid submitter; dropped");
                terminate(&message).await;
                return;
            },
        };
        let decoded = Job::decode(&message.payload, self.options.max_job_bytes);
        let id = match &decoded {
            Ok(job) => job.id.clone(),
            Err(rejected) => rejected
                .id
                .clone()
                .or_else(|| message_id(&message))
                .unwrap_or_else(|| format!("seq-{sequence}")),
        };
        let key = result_key(submitter.as_deref(), &id);
        let span = info_span!(
            "service.job",
            id = %id,
            submitter = submitter.as_deref().unwrap_or_default(),
            delivery = delivered,
            solo,
            hasher = field::Empty,
            program_hash = field::Empty,
            outcome = field::Empty,
        );
        if let Ok(job) = &decoded {
            span.record("hasher", gpu_hash_function(job.hasher).to_string());
        }
        async {
            if let Ok(true) = self.fleet.has_result(&key).await {
                info!("the job has a result already; acknowledged");
                self.metrics.duplicate();
                acknowledge(&message).await;
                return;
            }
            let mut record = None;
            let outcome = match decoded {
                Err(rejected) => Outcome::Failed(rejected.failure),
                Ok(job) => {
                    if delivered > 1 {
                        match self.redelivered(&key, delivered, delivery, solo).await {
                            Redelivered::Prove(attempts) => record = Some(attempts),
                            Redelivered::Abandon(failure) => {
                                let result = JobResult::new(
                                    id.clone(),
                                    self.options.name.clone(),
                                    Outcome::Failed(failure),
                                );
                                Span::current().record("outcome", "abandoned");
                                self.file_and_acknowledge(&key, &result, &message, None).await;
                                return;
                            },
                            Redelivered::GiveBack => {
                                give_back(&message, Some(REQUEUE_DELAY)).await;
                                return;
                            },
                        }
                    }
                    info!("proving");
                    let queued = SystemTime::now().duration_since(published).unwrap_or_default();
                    self.prove(job, &message, delivered, queued, delivery.ack_wait).await
                },
            };
            let result = self.fit(JobResult::new(id.clone(), self.options.name.clone(), outcome));
            let outcome = match &result.outcome {
                Outcome::Proved(_) => "proved".to_string(),
                Outcome::Failed(failure) => failure.kind.to_string(),
            };
            Span::current().record("outcome", outcome);
            self.file_and_acknowledge(&key, &result, &message, record).await;
        }
        .instrument(span)
        .await
    }

    /// What to do with delivery `delivered` (2 or more) of the job whose result's key is `key`:
    /// abandon it where its solo attempts have each ended with their worker, as many as
    /// allowed, or where the consumer delivers it no more; else, `solo`, record a new attempt
    /// and prove it.
    async fn redelivered(
        &self,
        key: &str,
        delivered: u64,
        delivery: Delivery,
        solo: bool,
    ) -> Redelivered {
        let last = delivery.is_last(delivered);
        let (mut attempts, revision) = match self.fleet.attempts(key).await {
            Ok(record) => record,
            Err(error) if last => {
                warn!(%error, "cannot read the job's attempts");
                (Vec::new(), None)
            },
            Err(error) => {
                warn!(%error, "cannot read the job's attempts; the job goes back to the queue");
                return Redelivered::GiveBack;
            },
        };
        let ended_with_worker = |attempt: &&Attempt| {
            attempt.ended == AttemptEnd::WorkerLost && attempt.delivery < delivered
        };
        let lost = attempts.iter().filter(ended_with_worker).count() as u64;
        let limit = u64::from(self.options.solo_attempts);
        if lost >= limit || last {
            let message = match lost >= limit {
                true => format!(
                    "{lost} solo attempts ended with their worker, the most allowed (at \
                     delivery {delivered})"
                ),
                false => format!(
                    "delivery {delivered} of {}, the last the fleet makes; {lost} solo attempts \
                     ended with their worker",
                    delivery.max_deliver
                ),
            };
            let listed: Vec<String> = attempts.iter().map(ToString::to_string).collect();
            let message = match listed.is_empty() {
                true => message,
                false => format!("{message}: {}", listed.join("; ")),
            };
            let mut failure = JobFailure::new(FailureKind::Abandoned, message);
            failure.attempts = attempts;
            return Redelivered::Abandon(failure);
        }
        if !solo {
            return Redelivered::GiveBack;
        }
        attempts.push(Attempt {
            delivery: delivered,
            worker: self.options.name.clone(),
            ended: AttemptEnd::WorkerLost,
        });
        match self.fleet.record_attempts(key, &attempts, revision).await {
            Ok(revision) => Redelivered::Prove((attempts, Some(revision))),
            Err(error) => {
                warn!(%error, "cannot record the attempt; the job goes back to the queue");
                Redelivered::GiveBack
            },
        }
    }

    /// Files `result` under `key` and acknowledges `message`, or gives the message back when
    /// the result cannot be written, noting so in the job's solo attempt if it is one
    /// (`record`: the job's attempts, the last this one).
    async fn file_and_acknowledge(
        &self,
        key: &str,
        result: &JobResult,
        message: &Message,
        record: Option<AttemptRecord>,
    ) {
        match self.file(key, result).await {
            Ok(true) => {
                match &result.outcome {
                    Outcome::Proved(proved) => info!(proving_ms = proved.proving_ms, "proved"),
                    Outcome::Failed(failure) => info!(%failure, "failed"),
                }
                self.metrics.finished(&result.outcome);
                acknowledge(message).await;
            },
            Ok(false) => {
                info!("another worker filed the job's result first");
                self.metrics.duplicate();
                acknowledge(message).await;
            },
            Err(error) => {
                warn!(%error, "cannot write the result; the job goes back to the queue");
                if let Some((mut attempts, revision)) = record {
                    if let Some(attempt) = attempts.last_mut() {
                        attempt.ended = AttemptEnd::GivenBack(format!(
                            "the result could not be written: {error}"
                        ));
                    }
                    if let Err(error) = self.fleet.record_attempts(key, &attempts, revision).await {
                        debug!(%error, "cannot record how the attempt ended");
                    }
                }
                give_back(message, None).await;
            },
        }
    }

    /// Proves `job` on the pool, reporting progress to the server meanwhile.
    async fn prove(
        &self,
        job: Job,
        message: &Message,
        delivery: u64,
        queued: Duration,
        ack_wait: Duration,
    ) -> Outcome {
        let options = match job.proving_options(self.options.max_cycles) {
            Ok(options) => options,
            Err(failure) => return Outcome::Failed(failure),
        };
        let (prepare, pool) = (self.prepare.clone(), self.pool.clone());
        let execution = self.options.execution;
        let span = Span::current();
        let proof = tokio::task::spawn_blocking(move || {
            let PreparedJob { program, stack_inputs, advice_inputs, host } = match prepare(&job) {
                Ok(prepared) => prepared,
                Err(failure) => return Ok(Err(failure)),
            };
            let hash = program.hash();
            span.record("program_hash", hash.to_hex().trim_start_matches("0x"));
            // the pool's job span, and the proof's, go inside the job's
            let handle = span.in_scope(|| {
                let checks = MidenProveOptions { execution, ..MidenProveOptions::default() };
                let inputs = (stack_inputs, advice_inputs);
                pool.prove_miden_with(program, inputs, host, options, checks)
            });
            handle.wait().map(|(outputs, proof)| Ok((hash, outputs, proof)))
        });
        self.metrics.started();
        let start = Instant::now();
        tokio::pin!(proof);
        let mut progress = tokio::time::interval((ack_wait / 3).max(Duration::from_millis(100)));
        let joined = loop {
            tokio::select! {
                joined = &mut proof => break joined,
                _ = progress.tick() => {
                    if let Err(error) = message.ack_with(AckKind::Progress).await {
                        debug!(%error, "cannot report progress");
                    }
                },
            }
        };
        let elapsed = start.elapsed();
        self.metrics.proved_in(elapsed);
        match joined {
            Ok(Ok(Ok((hash, outputs, proof)))) => Outcome::Proved(ProvedJob {
                program_hash: hash.to_hex().trim_start_matches("0x").to_string(),
                stack_outputs: outputs.iter().map(ToString::to_string).collect(),
                proof: proof.to_bytes(),
                backend: self.pool.backend().to_string(),
                delivery,
                queued_ms: queued.as_secs_f64() * 1e3,
                proving_ms: elapsed.as_secs_f64() * 1e3,
            }),
            Ok(Ok(Err(failure))) => Outcome::Failed(failure),
            Ok(Err(error)) => Outcome::Failed(JobFailure::from(&error)),
            Err(error) => Outcome::Failed(JobFailure::new(
                FailureKind::Proving,
                format!("the proof's task ended: {error}"),
            )),
        }
    }

    /// `result`, or a [`FailureKind::ResultTooLarge`] result in its place when it would not fit
    /// a message of the server.
    fn fit(&self, result: JobResult) -> JobResult {
        let limit = self.fleet.max_payload().saturating_sub(RESULT_OVERHEAD);
        let size = result.encode().map_or(usize::MAX, |bytes| bytes.len());
        if size <= limit {
            return result;
        }
        let failure = JobFailure::new(
            FailureKind::ResultTooLarge,
            format!("the result's {size} bytes exceed the server's message limit of {limit}"),
        );
        JobResult::new(result.id, result.worker, Outcome::Failed(failure))
    }

    /// Writes `result` under `key` if the job has none, trying again while the server is away;
    /// returns whether this call wrote it.
    async fn file(&self, key: &str, result: &JobResult) -> Result<bool, ServiceError> {
        let mut delay = RETRY_DELAY;
        let mut attempt = 1;
        loop {
            match self.fleet.write_result(key, result).await {
                Err(error @ ServiceError::Nats { .. }) if attempt < WRITE_ATTEMPTS => {
                    debug!(%error, attempt, "cannot write the result yet");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                    attempt += 1;
                },
                written => return written,
            }
        }
    }

    /// Reads the queue depth into the metrics every [`QUEUE_DEPTH_INTERVAL`] until stopped.
    async fn watch_queue_depth(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let mut interval = tokio::time::interval(QUEUE_DEPTH_INTERVAL);
        while !*stopped.borrow() {
            tokio::select! {
                _ = interval.tick() => {},
                _ = stopped.changed() => break,
            }
            match self.fleet.queue_depth().await {
                Ok(depth) => self.metrics.queue_depth(depth),
                Err(error) => debug!(%error, "cannot read the queue depth"),
            }
        }
    }
}

// MESSAGES
// ================================================================================================

/// The job id of a message's `Nats-Msg-Id` header, if it is a valid one.
fn message_id(message: &Message) -> Option<String> {
    let id = message.headers.as_ref()?.get(NATS_MESSAGE_ID)?.as_str();
    check_job_id(id).ok().map(|()| id.to_string())
}

/// Acknowledges `message`, waiting for the server's confirmation; a lost acknowledgement means
/// a redelivery, which finds the result and acknowledges again.
async fn acknowledge(message: &Message) {
    if let Err(error) = message.double_ack().await {
        warn!(%error, "cannot acknowledge the job; it will be delivered again and acknowledged");
    }
}

/// Ends the deliveries of `message`, which no worker can file a result of.
async fn terminate(message: &Message) {
    if let Err(error) = message.ack_with(AckKind::Term).await {
        warn!(%error, "cannot drop the message; it will be delivered again");
    }
}

/// Gives `message` back to the queue for another delivery, at once or after `delay`.
async fn give_back(message: &Message, delay: Option<Duration>) {
    if let Err(error) = message.ack_with(AckKind::Nak(delay)).await {
        warn!(%error, "cannot give the job back; it will be delivered again after the ack wait");
    }
}
