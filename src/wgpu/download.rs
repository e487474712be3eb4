//! Downloads, pipelined with the device work: a [`DownloadQueue`] records work and copies into
//! one of its staging buffers (two, or more for long queues); when one is full it is submitted
//! and mapped, and once every buffer is submitted the oldest one's bytes are delivered to host
//! memory while the device runs the newer submissions.

use std::{collections::VecDeque, mem::MaybeUninit};

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::debug_span;

use super::{
    batch::Batch,
    buffers::{Chunked, PooledBuffer},
    context::{refused, wgpu_failure, Mapping},
    Engine,
};
use crate::{
    error::Result,
    hash::Digest,
    host::{reserve_host, HostOptions},
};

/// Records per parallel task when scattering downloaded records.
const MIN_RECORDS_PER_TASK: usize = 256;

/// Words per parallel task when writing downloaded polynomial coefficients.
const MIN_WORDS_PER_TASK: usize = 1 << 14;

// HOST SINKS
// ================================================================================================

/// Which host array of [`Sinks`] a [`RecordSink`] writes into.
#[derive(Debug, Clone, Copy)]
pub(super) enum Store {
    Felts(usize),
    Digests(usize),
}

/// An array of records (LDE rows, digests) in a host array from field element `start` on, which the
/// device stores group-major: device record `x` is natural record
/// `(x / group_len) + groups * (x % group_len)` (see `merkle.rs`); `groups == 1` is natural
/// order.
pub(super) struct RecordSink {
    pub store: Store,
    pub start: usize,
    /// Field elements per record.
    pub record_len: usize,
    pub groups: usize,
    pub group_len: usize,
}

/// Where a downloaded piece goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    /// Polynomial coefficients from this flat index on (column-major, columns of equal length).
    Columns { first: usize },
    /// Records of a [`RecordSink`] from device index `first` on.
    Records { sink: usize, first: usize },
}

impl Target {
    /// The target of the record `records` past this one's first.
    fn advance(self, records: usize) -> Self {
        match self {
            Target::Columns { first } => Target::Columns { first: first + records },
            Target::Records { sink, first } => Target::Records { sink, first: first + records },
        }
    }
}

/// All host destinations of one call; the download queue owns them until it is finished.
#[derive(Default)]
pub(super) struct Sinks {
    /// Polynomial coefficients, one vector per column (see [`Sinks::reserve_columns`]).
    pub columns: Vec<Vec<Felt>>,
    /// Coefficients per column.
    column_len: usize,
    pub felts: Vec<Vec<Felt>>,
    pub digests: Vec<Vec<Digest>>,
    pub records: Vec<RecordSink>,
}

impl Sinks {
    /// Makes `count` empty columns with room for `len` coefficients each, which the
    /// [`Target::Columns`] downloads fill in order. Nothing is written here: zeroing memory that
    /// the downloads overwrite (recycled heap memory, which the allocator must clear) would delay
    /// the thread the first delivery waits for.
    pub fn reserve_columns(&mut self, count: usize, len: usize, host: &HostOptions) -> Result<()> {
        self.columns = (0..count).map(|_| reserve_host(len, host)).collect::<Result<_>>()?;
        self.column_len = len;
        Ok(())
    }

    fn deliver(&mut self, target: Target, bytes: &[u8]) -> Result<()> {
        match target {
            Target::Columns { first } => {
                // The column pieces are written in parallel: the vectors may be fresh pages, and
                // a single thread faulting them in was the slowest step of a wgpu commitment.
                let n = self.column_len.max(1);
                let mut pos = first % n;
                let mut rest = bytes;
                let mut pieces = Vec::new();
                for column in self.columns.iter_mut().skip(first / n) {
                    if rest.is_empty() {
                        break;
                    }
                    // Each column grows from its end, so its length counts the coefficients
                    // written and every element below it is initialised.
                    if pos != column.len() {
                        return Err(refused("column download", "out of order"));
                    }
                    let take = (n - pos).min(rest.len() / 8);
                    let (piece, tail) = rest.split_at(8 * take);
                    pieces.push((column, take, piece));
                    rest = tail;
                    pos = 0;
                }
                if !rest.is_empty() {
                    return Err(refused("column download", "past the last column"));
                }
                pieces.into_par_iter().for_each(|(column, take, src)| {
                    column.spare_capacity_mut()[..take]
                        .par_chunks_mut(MIN_WORDS_PER_TASK)
                        .zip(src.par_chunks(8 * MIN_WORDS_PER_TASK))
                        .for_each(|(dst, src)| write_words_uninit(dst, src));
                    let len = column.len() + take;
                    // SAFETY: `take` more elements past the old length were just written, and
                    // the capacity holds them (`take <= n - len`, reserved for `n`).
                    unsafe { column.set_len(len) };
                });
            },
            Target::Records { sink, first } => {
                let sink = &self.records[sink];
                match sink.store {
                    Store::Felts(i) => {
                        deliver_records(&mut self.felts[i][sink.start..], sink, first, bytes)
                    },
                    Store::Digests(i) => deliver_records(
                        &mut Digest::slice_as_words_mut(&mut self.digests[i])[sink.start..],
                        sink,
                        first,
                        bytes,
                    ),
                }
            },
        }
        Ok(())
    }

    /// Fails unless every reserved column has all its coefficients.
    fn check_columns(&self) -> Result<()> {
        if self.columns.iter().any(|c| c.len() != self.column_len) {
            return Err(refused("polynomial download", "incomplete"));
        }
        Ok(())
    }
}

/// Writes the device records from `first` on, `bytes`, into their natural places in `data`.
fn deliver_records<W: HostWord>(data: &mut [W], sink: &RecordSink, first: usize, bytes: &[u8]) {
    let record_bytes = 8 * sink.record_len;
    let mut index = first;
    let mut rest = bytes;
    while !rest.is_empty() {
        let (group, pos) = (index / sink.group_len, index % sink.group_len);
        let take = (sink.group_len - pos).min(rest.len() / record_bytes);
        scatter(data, sink, group + sink.groups * pos, &rest[..take * record_bytes]);
        rest = &rest[take * record_bytes..];
        index += take;
    }
}

/// Writes consecutive device records to natural records `start`, `start + groups`, ... of
/// `data`.
fn scatter<W: HostWord>(data: &mut [W], sink: &RecordSink, start: usize, bytes: &[u8]) {
    let len = sink.record_len;
    let count = bytes.len() / (8 * len);
    if count == 0 {
        return;
    }
    let stride = sink.groups * len;
    let end = (start + sink.groups * (count - 1)) * len + len;
    data[start * len..end]
        .par_chunks_mut(stride)
        .zip(bytes.par_chunks(8 * len))
        .with_min_len(MIN_RECORDS_PER_TASK)
        .for_each(|(dst, src)| write_words(&mut dst[..len], src));
}

/// A 64-bit word of host results: a field element (Montgomery form) or a digest word.
pub(super) trait HostWord: Send + Sync {
    /// The word from the device's little-endian bytes.
    fn from_device(word: u64) -> Self;
}

impl HostWord for Felt {
    fn from_device(word: u64) -> Self {
        Felt::from_mont(word)
    }
}

impl HostWord for u64 {
    fn from_device(word: u64) -> Self {
        word
    }
}

/// Words from their little-endian device bytes.
pub(super) fn write_words<W: HostWord>(dst: &mut [W], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(8)) {
        *d = W::from_device(device_word(s));
    }
}

/// [`write_words`] into memory not yet initialised.
fn write_words_uninit<W: HostWord>(dst: &mut [MaybeUninit<W>], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(8)) {
        d.write(W::from_device(device_word(s)));
    }
}

/// The word of 8 little-endian device bytes.
fn device_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

// DOWNLOAD QUEUE
// ================================================================================================

/// A piece of a staging buffer and where its bytes go.
struct Piece {
    offset: u64,
    size: u64,
    target: Target,
}

/// A submitted staging buffer being mapped.
struct InFlight {
    slot: usize,
    pieces: Vec<Piece>,
    used: u64,
    mapped: Mapping,
}

/// Makes the host destinations when the first download arrives.
pub(super) type MakeSinks<'s> = Box<dyn FnOnce() -> Result<Sinks> + 's>;

/// Records device work and downloads; see the module docs.
pub(super) struct DownloadQueue<'e, 's> {
    engine: &'e Engine<'e>,
    sinks: Option<Sinks>,
    make_sinks: Option<MakeSinks<'s>>,
    staging: Vec<PooledBuffer>,
    batch: Batch,
    slot: usize,
    used: u64,
    pieces: Vec<Piece>,
    /// Submitted staging buffers, oldest first.
    in_flight: VecDeque<InFlight>,
}

impl<'e, 's> DownloadQueue<'e, 's> {
    /// A queue of two staging buffers whose downloads go to the sinks `make_sinks` returns; it
    /// is called when the first download has arrived, so the host can prepare them while the
    /// device works.
    pub fn new(engine: &'e Engine<'e>, make_sinks: MakeSinks<'s>) -> Self {
        Self::with_buffers(engine, make_sinks, 2)
    }

    /// A queue of `count` (at least 2) staging buffers: the device may run up to `count - 1`
    /// submissions ahead of the host's deliveries, so a stretch where delivering is slower than
    /// the device (fresh host pages faulting in) is absorbed by the stretches after it.
    pub fn with_buffers(engine: &'e Engine<'e>, make_sinks: MakeSinks<'s>, count: usize) -> Self {
        let mut usage = ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST;
        if engine.ctx.kernel_downloads {
            usage |= ::wgpu::BufferUsages::STORAGE;
        }
        let staging = (0..count.max(2))
            .map(|_| engine.pool.acquire(&engine.ctx.device, engine.sizes.staging, usage))
            .collect();
        Self {
            engine,
            sinks: None,
            make_sinks: Some(make_sinks),
            staging,
            batch: Batch::new(engine.ctx),
            slot: 0,
            used: 0,
            pieces: Vec::new(),
            in_flight: VecDeque::new(),
        }
    }

    /// The batch being recorded.
    pub fn batch(&mut self) -> &mut Batch {
        &mut self.batch
    }

    /// Downloads `size` bytes of `src` from `offset` on, in records of `record_bytes`.
    pub fn download(
        &mut self,
        src: &::wgpu::Buffer,
        offset: u64,
        size: u64,
        record_bytes: u64,
        target: Target,
    ) -> Result<()> {
        let capacity = self.engine.sizes.staging;
        let max_piece = capacity / record_bytes * record_bytes;
        let mut done = 0;
        while done < size {
            let piece = (size - done).min(max_piece);
            if self.used + piece > capacity {
                self.flush()?;
            }
            let target = target.advance((done / record_bytes) as usize);
            let staging = &self.staging[self.slot];
            self.batch.copy(src, offset + done, staging, self.used, piece);
            self.pieces.push(Piece { offset: self.used, size: piece, target });
            self.used += piece;
            done += piece;
        }
        Ok(())
    }

    /// Bytes the staging buffer being filled has left.
    fn room(&self) -> u64 {
        self.engine.sizes.staging - self.used
    }

    /// Whether [`Self::reserve`] hands out `size` bytes: where kernels can write staging
    /// buffers and the bytes fit one.
    pub fn reserves(&self, size: u64) -> bool {
        self.engine.ctx.kernel_downloads
            && size <= self.engine.sizes.staging
            && size.is_multiple_of(8)
    }

    /// Where a kernel recorded next writes `size` bytes for the host itself, delivered to
    /// `target` as [`Self::download`] delivers a copy: the staging buffer and the element
    /// offset (of 8 bytes) in it. `None` where kernels cannot write staging buffers or the
    /// bytes do not fit one; the caller downloads with a copy instead.
    pub fn reserve(&mut self, size: u64, target: Target) -> Result<Option<(::wgpu::Buffer, u64)>> {
        if !self.reserves(size) {
            return Ok(None);
        }
        if self.used + size > self.engine.sizes.staging {
            self.flush()?;
        }
        let offset = self.used;
        self.pieces.push(Piece { offset, size, target });
        self.used += size;
        Ok(Some((self.staging[self.slot].clone(), offset / 8)))
    }

    /// Submits what is recorded, starts mapping its staging buffer, and delivers the previous
    /// one meanwhile.
    pub fn flush(&mut self) -> Result<()> {
        // The next batch goes on with the stage being recorded.
        let mut next = Batch::new(self.engine.ctx);
        next.set_stage(self.batch.stage());
        let batch = std::mem::replace(&mut self.batch, next);
        self.engine.submit(batch)?;
        let pieces = std::mem::take(&mut self.pieces);
        if !pieces.is_empty() {
            let slot = self.slot;
            let ctx = self.engine.ctx;
            let mapped = ctx.map(&self.staging[slot], ::wgpu::MapMode::Read, 0..self.used)?;
            self.in_flight.push_back(InFlight { slot, pieces, used: self.used, mapped });
            self.slot = (slot + 1) % self.staging.len();
        }
        self.used = 0;
        // The buffer recorded into next must be free: deliver the oldest while the device runs
        // the others.
        while self.in_flight.len() >= self.staging.len() {
            if let Some(oldest) = self.in_flight.pop_front() {
                self.complete(oldest)?;
            }
        }
        Ok(())
    }

    /// Flushes and delivers everything; returns the sinks.
    pub fn finish(mut self) -> Result<Sinks> {
        self.flush()?;
        while let Some(flight) = self.in_flight.pop_front() {
            self.complete(flight)?;
        }
        self.sinks()?.check_columns()?;
        self.sinks.take().ok_or_else(|| refused("download", "its sinks are missing"))
    }

    /// The sinks, made on first use.
    fn sinks(&mut self) -> Result<&mut Sinks> {
        if let Some(make) = self.make_sinks.take() {
            self.sinks = Some(make()?);
        }
        self.sinks.as_mut().ok_or_else(|| refused("download", "its sinks are missing"))
    }

    fn complete(&mut self, flight: InFlight) -> Result<()> {
        let staging = &self.staging[flight.slot];
        debug_span!("wgpu.wait").in_scope(|| {
            self.engine.ctx.wait_for_map(staging, &flight.mapped, "waiting for a download")
        })?;
        // The buffer is mapped now: unmap it whatever happens next.
        let made = self.sinks().map(|_| ());
        let _deliver = debug_span!("wgpu.deliver", bytes = flight.used).entered();
        let staging = &self.staging[flight.slot];
        let mut delivered = made;
        if let Some(sinks) = self.sinks.as_mut().filter(|_| delivered.is_ok()) {
            delivered = staging
                .get_mapped_range(0..flight.used)
                .map_err(|e| wgpu_failure("reading a download", e))
                .and_then(|view| {
                    flight.pieces.iter().try_for_each(|piece| {
                        let bytes =
                            &view[piece.offset as usize..(piece.offset + piece.size) as usize];
                        sinks.deliver(piece.target, bytes)
                    })
                });
        }
        staging.unmap();
        delivered
    }
}

impl Drop for DownloadQueue<'_, '_> {
    /// After an error, leaves no staging buffer mapped when it goes back to the pool (unless the
    /// device is lost: its mappings may never complete).
    fn drop(&mut self) {
        let ctx = self.engine.ctx;
        for flight in std::mem::take(&mut self.in_flight) {
            if ctx.is_lost() {
                return;
            }
            if ctx.settle_map(&flight.mapped, "unmapping a download after an error").is_ok() {
                self.staging[flight.slot].unmap();
            }
        }
    }
}

// HELPERS
// ================================================================================================

/// Downloads every part of `array`.
pub(super) fn download_array(
    downloads: &mut DownloadQueue<'_, '_>,
    array: &Chunked,
    record_bytes: u64,
    target: impl Fn(usize) -> Target,
) -> Result<()> {
    for p in 0..array.num_parts() {
        let (first, len) = array.part_range(p);
        downloads.download(
            array.part(p),
            0,
            len * record_bytes,
            record_bytes,
            target(first as usize),
        )?;
    }
    Ok(())
}

/// An array downloaded into the room other downloads leave in the staging buffers, so that it
/// travels beside the work recorded after it instead of holding that work back: a large download
/// recorded first would make the device wait while the host takes it.
pub(super) struct SpareDownload<'a> {
    array: &'a Chunked,
    record_bytes: u64,
    /// Where record 0 goes.
    target: Target,
    /// The first record not yet recorded for download.
    next: u64,
}

impl<'a> SpareDownload<'a> {
    pub fn new(array: &'a Chunked, record_bytes: u64, target: Target) -> Self {
        Self { array, record_bytes, target, next: 0 }
    }

    /// Records the download of a `1 / shares` share of the records left (rounded up), or of as
    /// many as the staging buffer being filled has room for if fewer: spread over the downloads
    /// of `shares` pieces of other work, the records add the same host work to each.
    pub fn top_up(&mut self, downloads: &mut DownloadQueue<'_, '_>, shares: u64) -> Result<()> {
        let share = (self.array.len - self.next).div_ceil(shares.max(1));
        self.download(downloads, self.next + share, |downloads| downloads.room())
    }

    /// Records the download of every record left.
    pub fn finish(mut self, downloads: &mut DownloadQueue<'_, '_>) -> Result<()> {
        self.download(downloads, self.array.len, |_| u64::MAX)
    }

    /// Records downloads up to record `end`, of at most `room(downloads)` bytes at a time and
    /// within one part each.
    fn download(
        &mut self,
        downloads: &mut DownloadQueue<'_, '_>,
        end: u64,
        room: impl Fn(&DownloadQueue<'_, '_>) -> u64,
    ) -> Result<()> {
        while self.next < end {
            let (buffer, offset) = self.array.locate(self.next);
            let in_part = (self.array.part_len - u64::from(offset)).min(end - self.next);
            let take = in_part.min(room(downloads) / self.record_bytes);
            if take == 0 {
                break;
            }
            let target = self.target.advance(self.next as usize);
            let rb = self.record_bytes;
            downloads.download(buffer, u64::from(offset) * rb, take * rb, rb, target)?;
            self.next += take;
        }
        Ok(())
    }
}

// TESTS
// ================================================================================================

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn felts(words: &[u64]) -> Vec<Felt> {
        words.iter().map(|&w| Felt::from_mont(w)).collect()
    }

    #[test]
    fn columns_fill_in_order_and_refuse_gaps_and_overruns() {
        let mut sinks = Sinks::default();
        sinks.reserve_columns(2, 3, &HostOptions::default()).unwrap();
        // one piece across the boundary of the two columns
        sinks.deliver(Target::Columns { first: 0 }, &bytes(&[11, 12, 13, 21])).unwrap();
        assert!(sinks.check_columns().is_err(), "a column is still short");
        assert!(sinks.deliver(Target::Columns { first: 5 }, &bytes(&[23])).is_err(), "a gap");
        assert!(sinks.deliver(Target::Columns { first: 4 }, &bytes(&[22, 23, 31])).is_err());
        sinks.deliver(Target::Columns { first: 4 }, &bytes(&[22, 23])).unwrap();
        sinks.check_columns().unwrap();
        assert_eq!(sinks.columns, [felts(&[11, 12, 13]), felts(&[21, 22, 23])]);
    }
}
