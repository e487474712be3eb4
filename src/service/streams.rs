//! The JetStream streams of a fleet, opened where they exist and created where absent: the
//! work-queue stream of the jobs and the streams of the key-value buckets. A stream that exists
//! with settings the fleet cannot work with is reported ([`ServiceError::StreamSettings`]),
//! never changed.

use std::time::Duration;

use async_nats::jetstream::{
    self, kv,
    stream::{self, DiscardPolicy, RetentionPolicy, StorageType},
};

use super::error::ServiceError;

/// The longest window in which the server drops a second write of a message id (JetStream's
/// default); never longer than a stream's maximum age.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// How a fleet's streams are opened: the replicas of those it creates, and whether an existing
/// stream must have that many.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replicas {
    /// The replicas of a stream created here.
    pub created: usize,
    /// Whether they were asked for: an existing stream with another number is then refused.
    pub required: bool,
}

/// The most replicas a fleet's streams get unless asked for more: JetStream's own advice for
/// a stream that survives a server's loss.
const DEFAULT_MOST_REPLICAS: usize = 3;

impl Replicas {
    /// `asked` replicas where given (required of existing streams), else one per server of the
    /// cluster the client knows of (`servers`), at most [`DEFAULT_MOST_REPLICAS`], one on a
    /// lone server.
    pub fn new(asked: Option<usize>, servers: usize) -> Self {
        let created = asked.unwrap_or(servers.clamp(1, DEFAULT_MOST_REPLICAS));
        Self { created, required: asked.is_some() }
    }
}

// JOBS
// ================================================================================================

/// The work-queue stream `name` of the jobs published on `subject` and `subject.<submitter>`,
/// created where absent; an existing one must keep its jobs as a work queue, take the
/// publications on `published` and have the replicas asked for.
pub(crate) async fn open_job_stream(
    jetstream: &jetstream::Context,
    name: &str,
    subject: &str,
    published: &str,
    replicas: Replicas,
) -> Result<stream::Stream, ServiceError> {
    let config = stream::Config {
        name: name.to_string(),
        subjects: vec![subject.to_string(), format!("{subject}.*")],
        retention: RetentionPolicy::WorkQueue,
        storage: StorageType::File,
        num_replicas: replicas.created,
        ..Default::default()
    };
    let stream = jetstream
        .get_or_create_stream(config)
        .await
        .map_err(|e| ServiceError::nats(format!("open the stream {name}"), e))?;
    let existing = &stream.cached_info().config;
    let mismatch = |setting, existing: String, wanted: String| ServiceError::StreamSettings {
        stream: name.to_string(),
        setting,
        existing,
        wanted,
    };
    if existing.retention != RetentionPolicy::WorkQueue {
        let retention = format!("{:?}", existing.retention).to_lowercase();
        return Err(mismatch("retention", retention, "workqueue".into()));
    }
    if !existing.subjects.iter().any(|pattern| subject_matches(pattern, published)) {
        let subjects = format!("subjects {:?}", existing.subjects);
        return Err(mismatch("subjects", subjects, format!("ones matching {published}")));
    }
    check_replicas(name, existing, replicas)?;
    Ok(stream)
}

// BUCKETS
// ================================================================================================

/// The stream of the key-value bucket `bucket`.
pub(crate) fn bucket_stream(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// The duplicate window of a stream whose messages live `max_age` (zero: for ever).
pub(crate) fn duplicate_window(max_age: Duration) -> Duration {
    match max_age.is_zero() {
        true => DUPLICATE_WINDOW,
        false => max_age.min(DUPLICATE_WINDOW),
    }
}

/// The key-value bucket `bucket`, its stream created where absent with the settings the client
/// gives a bucket of one value per key and a maximum age of `ttl` (the client's own bucket
/// creation first reads account fields that nats-server 2.9 does not send); an existing one
/// must have the replicas asked for.
pub(crate) async fn open_bucket(
    jetstream: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
    replicas: Replicas,
) -> Result<kv::Store, ServiceError> {
    let failed =
        |e: &dyn std::fmt::Display| ServiceError::nats(format!("open the bucket {bucket}"), e);
    let name = bucket_stream(bucket);
    let stream = jetstream
        .get_or_create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_age: ttl,
            duplicate_window: duplicate_window(ttl),
            max_messages_per_subject: 1,
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: replicas.created,
            ..Default::default()
        })
        .await
        .map_err(|e| failed(&e))?;
    check_replicas(&name, &stream.cached_info().config, replicas)?;
    jetstream.get_key_value(bucket).await.map_err(|e| failed(&e))
}

/// Refuses an existing stream whose replicas are not those required.
fn check_replicas(
    name: &str,
    existing: &stream::Config,
    replicas: Replicas,
) -> Result<(), ServiceError> {
    // a stream created with 0 replicas has one
    let count = existing.num_replicas.max(1);
    match replicas.required && count != replicas.created {
        true => Err(ServiceError::StreamSettings {
            stream: name.to_string(),
            setting: "replicas",
            existing: count.to_string(),
            wanted: replicas.created.to_string(),
        }),
        false => Ok(()),
    }
}

/// Whether the NATS subject `pattern` (tokens, `*` for one, `>` for the rest) matches `subject`.
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut tokens = subject.split('.');
    for wanted in pattern.split('.') {
        match (wanted, tokens.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {},
            (wanted, Some(token)) if wanted == token => {},
            _ => return false,
        }
    }
    tokens.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::subject_matches;

    #[test]
    fn subjects_match_as_the_server_matches_them() {
        assert!(subject_matches("miden-gpu.jobs", "miden-gpu.jobs"));
        assert!(subject_matches("miden-gpu.jobs.*", "miden-gpu.jobs.alice"));
        assert!(subject_matches("miden-gpu.>", "miden-gpu.jobs.alice"));
        assert!(!subject_matches("miden-gpu.jobs", "miden-gpu.jobs.alice"));
        assert!(!subject_matches("miden-gpu.jobs.*", "miden-gpu.jobs"));
        assert!(!subject_matches("miden-gpu.jobs.>", "miden-gpu.jobs"));
    }
}
