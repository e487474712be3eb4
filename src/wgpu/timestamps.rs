//! Device times of a commitment's stages from GPU timestamp queries (`TIMESTAMP_QUERY`).
//!
//! A [`Batch`](super::batch::Batch) tags each dispatch with a [`Stage`] and starts a new
//! compute pass where the stage changes. While a commitment is being timed, every such pass
//! writes a timestamp at its beginning and its end into one query set (two queries per pass, in
//! the order the passes are encoded, across all the commitment's submissions). The last
//! submission resolves the whole set at once and copies it to a readback buffer, which is read
//! after the last download: one resolve and one map per commitment, no wait in between.
//!
//! A stage's time is the sum of its passes' (end - beginning), so it counts only kernel time:
//! copies (uploads, downloads) run outside passes and are not timed. Only pass-boundary
//! timestamps are used (the portable part of `TIMESTAMP_QUERY`, Metal included).

use std::sync::{Mutex, MutexGuard};

use super::context::{wgpu_failure, Context};
use crate::{committer::StageTimes, error::Result};

/// Timestamps of one query set; two per timed pass.
const MAX_QUERIES: u32 = ::wgpu::QUERY_SET_MAX_QUERIES;

// STAGES
// ================================================================================================

/// The stage a dispatch belongs to; passes are split where it changes. A stage's time is the
/// sum of the timestamp-query spans of its compute passes (kernels only; uploads and downloads
/// are copies outside passes and not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Inverse NTTs and finishing into coefficients (bit reversal, 1/n and offset scaling); no
    /// pass where the columns are longer than one binding and are interpolated on the host.
    Interpolate,
    /// Coset scaling (and folding of long columns) and the forward NTTs of every coset.
    Lde,
    /// Transposition of each coset's evaluations into `RowMatrix` rows; no pass where the
    /// hashing kernel reads them itself (RPO/RPX rows hashed on quads that write the host's
    /// rows).
    Rows,
    /// Row hashing into the leaves.
    Hash,
    /// Every Merkle level.
    Tree,
}

/// The backend-neutral stage times of one wgpu commitment from the summed milliseconds of each
/// stage. Stages line up with CUDA's, except that CUDA counts the row-major copy of the LDE in
/// its hash time while here it is `rows_ms` (or in the hash time too, where the hashing kernel
/// reads the coset evaluations itself).
fn stage_times(ms: &StageSums) -> StageTimes {
    let of = |stage: Stage| ms[stage as usize];
    StageTimes {
        device: "wgpu".into(),
        passes: 1,
        interpolate_ms: of(Stage::Interpolate),
        lde_ms: of(Stage::Lde),
        hash_ms: of(Stage::Hash),
        tree_ms: of(Stage::Tree),
        rows_ms: Some(of(Stage::Rows)),
        upload_lde_ms: None,
        exchange_ms: None,
    }
}

/// Milliseconds of each [`Stage`], indexed by the stage.
type StageSums = [f32; 5];

// TIMER
// ================================================================================================

/// The passes timed during the current commitment.
#[derive(Default)]
struct Log {
    /// A commitment is being timed.
    recording: bool,
    /// Stage of each timed pass; pass `i` writes queries `2i` and `2i + 1`.
    stages: Vec<Stage>,
    /// Some pass found the query set full and was not timed.
    overflow: bool,
    /// Passes covered by the recorded resolve (`None` before it).
    resolved: Option<usize>,
}

/// The query set and buffers of a committer's timestamps, made once and reused by every
/// commitment (calls are serialized by the committer).
pub(super) struct Timer {
    query_set: ::wgpu::QuerySet,
    /// Destination of the resolve (`QUERY_RESOLVE | COPY_SRC`).
    resolved: ::wgpu::Buffer,
    /// Host-readable copy of it.
    readback: ::wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period_ns: f64,
    log: Mutex<Log>,
}

impl Timer {
    /// A timer if the device was opened with `TIMESTAMP_QUERY`.
    pub fn new(ctx: &Context) -> Option<Self> {
        if !ctx.timestamps {
            return None;
        }
        let bytes = MAX_QUERIES as u64 * 8;
        let buffer = |label, usage| {
            ctx.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(Self {
            query_set: ctx.device.create_query_set(&::wgpu::QuerySetDescriptor {
                label: Some("miden-gpu timestamps"),
                ty: ::wgpu::QueryType::Timestamp,
                count: MAX_QUERIES,
            }),
            resolved: buffer(
                "timestamps resolved",
                ::wgpu::BufferUsages::QUERY_RESOLVE | ::wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "timestamps readback",
                ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
            ),
            period_ns: ctx.queue.get_timestamp_period() as f64,
            log: Mutex::new(Log::default()),
        })
    }

    /// Starts timing a commitment: passes encoded from now on are timed.
    pub fn begin(&self) {
        *self.log() = Log { recording: true, ..Log::default() };
    }

    /// The timestamp writes of a pass of `stage` about to be encoded (`None`: not timed, because
    /// no commitment is being timed, the pass has no stage, or the query set is full).
    pub fn pass(&self, stage: Option<Stage>) -> Option<::wgpu::ComputePassTimestampWrites<'_>> {
        let stage = stage?;
        let mut log = self.log();
        if !log.recording {
            return None;
        }
        let index = log.stages.len() as u32 * 2;
        if index + 2 > MAX_QUERIES {
            log.overflow = true;
            return None;
        }
        log.stages.push(stage);
        Some(::wgpu::ComputePassTimestampWrites {
            query_set: &self.query_set,
            beginning_of_pass_write_index: Some(index),
            end_of_pass_write_index: Some(index + 1),
        })
    }

    /// Encodes the resolve of every timestamp written so far and its copy to the readback
    /// buffer (after the commitment's last pass).
    pub fn encode_resolve(&self, encoder: &mut ::wgpu::CommandEncoder) {
        let mut log = self.log();
        let passes = log.stages.len();
        if !log.recording || passes == 0 {
            return;
        }
        let queries = passes as u32 * 2;
        encoder.resolve_query_set(&self.query_set, 0..queries, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, queries as u64 * 8);
        log.resolved = Some(passes);
    }

    /// Ends the commitment's timing and reads its stage times, once its submissions are done
    /// (the download queue has finished). `None` if some pass was not timed or nothing was
    /// resolved.
    pub fn finish(&self, ctx: &Context) -> Result<Option<StageTimes>> {
        let log = std::mem::take(&mut *self.log());
        let passes = log.stages.len();
        if log.overflow || passes == 0 || log.resolved != Some(passes) {
            return Ok(None);
        }
        let bytes = passes as u64 * 16;
        let mapping = ctx.map(&self.readback, ::wgpu::MapMode::Read, 0..bytes)?;
        ctx.wait_for_map(&self.readback, &mapping, "waiting for the timestamps")?;
        let mut sums = StageSums::default();
        {
            let view = self
                .readback
                .slice(0..bytes)
                .get_mapped_range()
                .map_err(|e| wgpu_failure("reading the timestamps", e))?;
            for (stage, pair) in log.stages.iter().zip(view.chunks_exact(16)) {
                let word =
                    |i: usize| u64::from_le_bytes(pair[i..i + 8].try_into().expect("8 bytes"));
                let ticks = word(8).saturating_sub(word(0));
                sums[*stage as usize] += (ticks as f64 * self.period_ns / 1e6) as f32;
            }
        }
        self.readback.unmap();
        Ok(Some(stage_times(&sums)))
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
