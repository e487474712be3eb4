//! The FRI commit phase on the device: the orchestration of `fold.rs`'s kernels with the
//! commitments' coset evaluation, row hashing and Merkle levels.
//!
//! The DEEP coefficients go up once and are evaluated coset by coset into the first layer's
//! rows (as a commitment's LDE, `lde.rs`). Each layer is then one [`DownloadQueue`]: hash its
//! rows into leaves, build its tree, download the root (and, unless the layers are kept on the
//! device, rows, leaves and nodes); the host draws `alpha` from the channel, and the next
//! download queue folds the layer, still on the device, into the next one (or into the
//! remainder, downloaded last).
//! Kept layers are opened by copying the queried rows and path nodes into one read-back buffer.

use std::sync::Arc;

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;

use super::{
    buffers::Chunked,
    constants::felt_bytes,
    context::{wgpu_failure, Context},
    download::{download_array, DownloadQueue, RecordSink, Sinks, Store, Target},
    fold::{record_fold, record_layer_rows, Layer},
    hash::{record_hash_rows, sponge_buffer, RowBlock, RowBuffers, RowSource},
    lde::{record_coset_evaluation, CosetArrays, CosetShape},
    merkle::{download_levels, push_level_sinks, record_tree, tree_levels, Layout},
    sizes::{DIGEST_BYTES, FELT_BYTES},
    upload::{upload, Staged, Write},
    Engine,
};
use crate::{
    committer::{
        fri::{
            path_indices, FoldingChannel, FriLayer, FriLayers, FriRequest, FriShape, KeptLayers,
            LayerOpening,
        },
        RowHashing,
    },
    error::{FriError, GpuError, Result},
    hash::Digest,
    host::{zeroed_host, HostOptions},
};

/// Sink indices of a layer's downloads: rows, leaves, then the tree levels.
const ROWS_SINK: usize = 0;
const LEAF_SINK: usize = 1;
const LEVEL_SINK: usize = 2;

// COMMIT PHASE
// ================================================================================================

/// Evaluates the DEEP polynomial over the LDE domain and commits to and folds every layer.
pub(super) fn commit_fri(
    engine: &Engine<'_>,
    request: &FriRequest<'_>,
    shape: FriShape,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayers> {
    let degree = shape.ext_degree as u64;
    let folding = request.folding_factor as u64;
    engine.sizes.check_row((folding * degree) as usize)?;

    let mut layer = Layer::new(
        engine,
        shape.layer_rows(0, request.folding_factor) as u64,
        folding,
        degree,
        request.hash,
    );
    let mut downloads = layer_downloads(engine, &layer, request.keep_layers);
    // The upload's staging buffers are kept until the first download queue is submitted.
    let mut staged = Some(
        info_span!("wgpu.fri.evaluate", points = shape.domain_len)
            .in_scope(|| record_evaluation(engine, &mut downloads, request, shape, &layer))?,
    );
    let mut layers = Vec::with_capacity(request.num_layers);
    let mut kept = Vec::with_capacity(request.num_layers);
    for l in 0..request.num_layers {
        let _span = info_span!("wgpu.fri.layer", layer = l, rows = layer.rows()).entered();
        let committed = commit_layer(engine, downloads, &layer, request)?;
        drop(staged.take());
        let alpha = channel(committed.root);
        if alpha.len() != shape.ext_degree {
            return Err(GpuError::InvalidFri(FriError::ChallengeComponents {
                drawn: alpha.len(),
                degree: shape.ext_degree,
            }));
        }

        let last = l + 1 == request.num_layers;
        let next = if last {
            Layer::new(engine, layer.rows(), 1, degree, request.hash)
        } else {
            Layer::new(engine, layer.rows() / folding, folding, degree, request.hash)
        };
        downloads = if last {
            remainder_downloads(engine, &next)
        } else {
            layer_downloads(engine, &next, request.keep_layers)
        };
        let log_domain = (layer.rows() * folding).ilog2();
        let (powers, tables) =
            engine.tables().powers(&engine.ctx.device, &engine.ctx.queue, log_domain);
        record_fold(downloads.batch(), &layer, &next, &alpha, (&powers, tables))?;
        let layer = std::mem::replace(&mut layer, next);
        match committed.host {
            Some(host) => layers.push(host),
            None => {
                kept.push(KeptLayer { layer, leaves: committed.leaves, levels: committed.levels })
            },
        }
    }

    download_array(&mut downloads, &layer.array, degree * FELT_BYTES, |first| Target::Records {
        sink: ROWS_SINK,
        first,
    })?;
    let remainder = downloads.finish()?.felts.pop().unwrap_or_default();
    let kept: Option<Box<dyn KeptLayers>> = request
        .keep_layers
        .then(|| Box::new(WgpuKeptLayers { ctx: engine.ctx.clone(), layers: kept }) as _);
    Ok(FriLayers { layers, kept, remainder })
}

// FIRST LAYER
// ================================================================================================

/// Uploads the DEEP coefficients and records their evaluation over the LDE domain into `layer`,
/// coset by coset. Each component is zero-padded to at least the folding factor, so that a
/// coset has at least as many points as a row has slots and every coset fills whole rows.
fn record_evaluation(
    engine: &Engine<'_>,
    downloads: &mut DownloadQueue<'_, '_>,
    request: &FriRequest<'_>,
    shape: FriShape,
    layer: &Layer,
) -> Result<Staged> {
    let device = &engine.ctx.device;
    let part = engine.sizes.felts();
    let poly_len = (shape.poly_len as u64).max(layer.slots);
    let domain_len = shape.domain_len as u64;
    let unit = poly_len.min(part);
    let cosets = CosetShape { num_cols: layer.degree, poly_len, unit, domain_len };

    let coefficients = Chunked::new(engine.pool, device, layer.degree * poly_len, FELT_BYTES, part);
    if poly_len > shape.poly_len as u64 {
        for p in 0..coefficients.num_parts() {
            downloads.batch().clear(coefficients.part(p));
        }
    }
    let writes: Vec<Write<'_>> = request
        .components
        .iter()
        .enumerate()
        .map(|(d, component)| Write {
            bytes: felt_bytes(component),
            array: &coefficients,
            first: d as u64 * poly_len,
            record_bytes: FELT_BYTES,
        })
        .collect();
    let staged = upload(engine, downloads.batch(), &writes)?;

    let work = Chunked::new(engine.pool, device, layer.degree * unit, FELT_BYTES, part);
    let (powers, tables) = engine.tables().powers(device, &engine.ctx.queue, domain_len.ilog2());
    let twiddles = engine.tables().twiddles(device, &engine.ctx.queue, unit.ilog2(), false);
    let num_cosets = domain_len / unit;
    for coset in 0..num_cosets {
        let arrays = CosetArrays {
            coefficients: &coefficients,
            work: &work,
            powers: &powers,
            twiddles: &twiddles,
        };
        record_coset_evaluation(downloads.batch(), cosets, coset, arrays, tables)?;
        record_layer_rows(downloads.batch(), &work, unit, coset, num_cosets, layer)?;
    }
    Ok(staged)
}

// LAYER COMMITMENT
// ================================================================================================

/// A committed layer: its root, and the layer on the host (downloaded whole) or its leaves and
/// tree levels on the device (kept).
struct Committed {
    root: Digest,
    host: Option<FriLayer>,
    leaves: Chunked,
    levels: Vec<Chunked>,
}

/// Records the hashing of `layer`'s rows and its Merkle tree on `downloads`; downloads the root,
/// and the rows, leaves and nodes unless the request keeps the layers (columns transposed on the
/// host).
fn commit_layer(
    engine: &Engine<'_>,
    mut downloads: DownloadQueue<'_, '_>,
    layer: &Layer,
    request: &FriRequest<'_>,
) -> Result<Committed> {
    let device = &engine.ctx.device;
    let (rows, width) = (layer.rows(), layer.width());
    let leaves = Chunked::new(engine.pool, device, rows, DIGEST_BYTES, engine.sizes.digests());
    let levels = tree_levels(engine.pool, device, rows, engine.sizes.digests());
    let sponges = sponge_buffer(
        engine,
        request.hash,
        RowHashing::WholeRow,
        width as usize,
        layer.array.part_len,
    );
    for p in 0..layer.array.num_parts() {
        let (first, count) = layer.array.part_range(p);
        let (leaf_buffer, dst_offset) = leaves.locate(first);
        let block = RowBlock {
            num_rows: count,
            row_width: width as usize,
            num_cols: width as usize,
            src_offset: 0,
            dst_offset,
            source: RowSource::RowMajor,
        };
        let buffers = RowBuffers {
            rows: layer.array.part(p),
            leaves: leaf_buffer,
            sponges: &sponges,
            copies: None,
        };
        let events = engine.sizes.hash_events;
        record_hash_rows(
            downloads.batch(),
            request.hash,
            RowHashing::WholeRow,
            block,
            buffers,
            events,
        )?;
    }
    record_tree(downloads.batch(), request.hash, &leaves, Layout::new(rows, 1), &levels)?;

    if request.keep_layers {
        let root = levels.last().expect("a layer has at least two rows");
        download_array(&mut downloads, root, DIGEST_BYTES, |first| Target::Records {
            sink: ROWS_SINK,
            first,
        })?;
        let root = downloads.finish()?.digests.pop().unwrap_or_default()[0];
        return Ok(Committed { root, host: None, leaves, levels });
    }
    download_array(&mut downloads, &layer.array, width * FELT_BYTES, |first| Target::Records {
        sink: ROWS_SINK,
        first,
    })?;
    download_array(&mut downloads, &leaves, DIGEST_BYTES, |first| Target::Records {
        sink: LEAF_SINK,
        first,
    })?;
    download_levels(&mut downloads, &levels, LEVEL_SINK)?;
    let mut sinks = downloads.finish()?;
    let nodes = sinks.digests.pop().unwrap_or_default();
    let leaf_digests = sinks.digests.pop().unwrap_or_default();
    let row_major = sinks.felts.pop().unwrap_or_default();
    let columns = info_span!("wgpu.fri.columns")
        .in_scope(|| transpose(&row_major, rows as usize, width as usize, &engine.host))?;
    let host = FriLayer { columns, num_rows: rows as usize, leaves: leaf_digests, nodes };
    Ok(Committed { root: host.root(), host: Some(host), leaves, levels })
}

/// Column-major `columns` of [`FriLayer`] from `num_rows` row-major rows of `width` elements.
fn transpose(
    rows: &[Felt],
    num_rows: usize,
    width: usize,
    host: &HostOptions,
) -> Result<Vec<Felt>> {
    let mut columns = zeroed_host(rows.len(), host)?;
    columns.par_chunks_mut(num_rows).enumerate().for_each(|(c, column)| {
        for (i, value) in column.iter_mut().enumerate() {
            *value = rows[i * width + c];
        }
    });
    Ok(columns)
}

// HOST SINKS
// ================================================================================================

/// A download queue delivering `layer`'s rows, leaves and nodes (Winterfell's layout), or its
/// root alone when the layers are kept on the device.
fn layer_downloads<'e>(
    engine: &'e Engine<'e>,
    layer: &Layer,
    keep: bool,
) -> DownloadQueue<'e, 'static> {
    let (rows, width) = (layer.rows() as usize, layer.width() as usize);
    let host = engine.host;
    DownloadQueue::new(
        engine,
        Box::new(move || {
            let mut sinks = Sinks::default();
            if keep {
                sinks.digests.push(zeroed_host(1, &host)?);
                sinks.records.push(natural_sink(Store::Digests(0), 4, 1));
                return Ok(sinks);
            }
            sinks.felts.push(zeroed_host(rows * width, &host)?);
            sinks.digests.push(zeroed_host(rows, &host)?);
            sinks.digests.push(zeroed_host(rows, &host)?);
            sinks.records.push(natural_sink(Store::Felts(0), width, rows));
            sinks.records.push(natural_sink(Store::Digests(0), 4, rows));
            push_level_sinks(&mut sinks, Store::Digests(1), rows, Layout::new(rows as u64, 1));
            Ok(sinks)
        }),
    )
}

/// A download queue delivering the remainder `layer` (one slot per row) in natural order.
fn remainder_downloads<'e>(engine: &'e Engine<'e>, layer: &Layer) -> DownloadQueue<'e, 'static> {
    let (rows, width) = (layer.rows() as usize, layer.width() as usize);
    let host = engine.host;
    DownloadQueue::new(
        engine,
        Box::new(move || {
            let mut sinks = Sinks::default();
            sinks.felts.push(zeroed_host(rows * width, &host)?);
            sinks.records.push(natural_sink(Store::Felts(0), width, rows));
            Ok(sinks)
        }),
    )
}

/// A sink of `len` records of `record_len` elements in natural order.
fn natural_sink(store: Store, record_len: usize, len: usize) -> RecordSink {
    RecordSink { store, start: 0, record_len, groups: 1, group_len: len }
}

// KEPT LAYERS
// ================================================================================================

/// One committed layer on the device: its rows (row-major parts), leaves and tree levels (natural
/// order, `levels[k - 1]` the nodes `k` levels above the leaves).
struct KeptLayer {
    layer: Layer,
    leaves: Chunked,
    levels: Vec<Chunked>,
}

/// The layers of one FRI commit phase kept on the device, opened by copying the queried rows and
/// path nodes into one staging buffer and reading it back.
struct WgpuKeptLayers {
    ctx: Arc<Context>,
    layers: Vec<KeptLayer>,
}

impl KeptLayers for WgpuKeptLayers {
    /// [`WgpuKeptLayers::read`], with wgpu's errors checked as in a call of the committer.
    fn open(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        self.ctx.checked(|| self.read(layer, positions))
    }
}

impl WgpuKeptLayers {
    /// Layer `layer`'s rows and Merkle paths at `positions`.
    fn read(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        let kept =
            self.layers.get(layer).ok_or(GpuError::InvalidFri(FriError::LayerOutOfRange {
                layer,
                layers: self.layers.len(),
            }))?;
        let (rows, width) = (kept.layer.rows() as usize, kept.layer.width());
        if let Some(&p) = positions.iter().find(|&&p| p >= rows) {
            return Err(GpuError::InvalidFri(FriError::PositionOutOfRange { position: p, rows }));
        }
        let row_bytes = width * FELT_BYTES;
        // (buffer, byte offset, bytes) of each position's row, leaf, sibling leaf, path nodes
        let mut copies: Vec<(&::wgpu::Buffer, u64, u64)> = Vec::new();
        for &p in positions {
            let (buffer, index) = kept.layer.array.locate(p as u64);
            copies.push((buffer, index as u64 * row_bytes, row_bytes));
        }
        fn digest(array: &Chunked, index: u64) -> (&::wgpu::Buffer, u64, u64) {
            let (buffer, record) = array.locate(index);
            (buffer, record as u64 * DIGEST_BYTES, DIGEST_BYTES)
        }
        for &p in positions {
            copies.push(digest(&kept.leaves, p as u64));
            copies.push(digest(&kept.leaves, (p ^ 1) as u64));
        }
        let depth = rows.ilog2();
        for &p in positions {
            for node in path_indices(p, rows) {
                let level = depth - node.ilog2();
                let first = rows >> level;
                copies.push(digest(&kept.levels[level as usize - 1], (node - first) as u64));
            }
        }
        let total: u64 = copies.iter().map(|c| c.2).sum();
        let ctx = &self.ctx;
        let staging = ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("miden-gpu fri openings"),
            size: total.max(8),
            usage: ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let mut offset = 0;
        for &(buffer, start, bytes) in &copies {
            encoder.copy_buffer_to_buffer(buffer, start, &staging, offset, bytes);
            offset += bytes;
        }
        ctx.submit(encoder.finish())?;
        let mapping = ctx.map(&staging, ::wgpu::MapMode::Read, ..)?;
        ctx.wait_for_map(&staging, &mapping, "waiting for FRI openings")?;
        let words: Vec<u64> = {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| wgpu_failure("reading FRI openings", e))?;
            view.chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect()
        };
        staging.unmap();

        let (row_words, rest) = words.split_at(positions.len() * width as usize);
        let (leaf_words, node_words) = rest.split_at(positions.len() * 8);
        let as_digest = |w: &[u64]| Digest::from_words([w[0], w[1], w[2], w[3]]);
        let path_len = (depth as usize - 1) * 4;
        Ok(LayerOpening {
            rows: row_words
                .chunks(width as usize)
                .map(|row| row.iter().map(|&w| Felt::from_mont(w)).collect())
                .collect(),
            paths: leaf_words
                .chunks(8)
                .enumerate()
                .map(|(i, leaf)| {
                    let mut path = vec![as_digest(&leaf[4..])];
                    let nodes = &node_words[i * path_len..(i + 1) * path_len];
                    path.extend(nodes.chunks(4).map(as_digest));
                    (as_digest(&leaf[..4]), path)
                })
                .collect(),
        })
    }
}
