//! The orchestration of one call: what is uploaded, which kernels run on which parts, what is
//! downloaded where.
//!
//! A commitment runs as: upload the evaluations once; inverse NTT and finishing into the
//! coefficient array (downloaded as the polynomials, a share with each row chunk); then for each
//! of the `W` cosets of `U` rows of the LDE domain (`U = n` unless a column does not fit one
//! binding): coset scaling, forward NTT, and for each chunk of rows: transposition into RowMatrix
//! rows, row hashing into the leaves, download of the rows; finally all Merkle levels and their
//! download. Everything goes through one [`DownloadQueue`], so the device never waits for the host
//! except when all its staging buffers are full. Dispatches are tagged with their [`Stage`]; where the
//! device has timestamp queries, the stages' device times come back with the commitment.

use miden_crypto::Felt;
use tracing::info_span;

use super::{
    batch::Batch,
    buffers::{Chunked, STORAGE},
    constants::felt_bytes,
    context::refused,
    download::{DownloadQueue, RecordSink, Sinks, SpareDownload, Store, Target},
    hash::{on_quads, record_hash_rows, sponge_buffer, RowBlock, RowBuffers, RowSource},
    kernels::RowsParams,
    lde::{
        record_coset_evaluation, record_finish_interpolation, record_to_rows, CoefficientBlock,
        CosetArrays, CosetShape,
    },
    merkle::{push_level_sinks, record_tree_downloads, tree_levels, Layout},
    ntt::record_dif,
    shaders::saved_bytes,
    sizes::{Sizes, DIGEST_BYTES, FELT_BYTES},
    timestamps::Stage,
    upload::{upload, Write},
    Engine,
};
use crate::{
    committer::{CommitRequest, Commitment, LdeRows, PolyInput, Shape, StageTimes},
    error::{to_u32, GpuError, Result},
    host::{zeroed_host, HostOptions},
};

/// Staging buffers of a commitment's download queue. The first coset's rows reach every page of
/// the fresh host vector of LDE rows, so its deliveries run at the speed of page faults, slower
/// than the device produces row chunks, while later deliveries are faster than it; with the
/// device free to run several chunks ahead, the later cosets' slack absorbs that, and each buffer
/// up to six shortened a large commitment. The buffers stay in the engine's pool (1.5 GiB of
/// host-visible memory at 256 MiB each), so a commitment whose downloads fill fewer takes fewer.
const COMMIT_STAGING_BUFFERS: usize = 6;

/// Sink indices of a commitment's records.
const LDE_SINK: usize = 0;
const LEAF_SINK: usize = 1;
const LEVEL_SINK: usize = 2;

// COMMIT
// ================================================================================================

/// The split of one commitment.
struct Plan {
    shape: Shape,
    log_n: u32,
    log_lde: u32,
    /// Length of the evaluations to interpolate (n, or m for a composition).
    input_len: u64,
    /// Elements per part of the field-element arrays.
    part: u64,
    /// Rows of one coset evaluated at once, and the number of cosets.
    unit: u64,
    units: u64,
    /// Rows per row chunk.
    rows: u64,
}

impl Plan {
    fn new(shape: Shape, request: &CommitRequest<'_>, sizes: &Sizes) -> Result<Self> {
        let input = &request.input;
        let input_len = match input {
            PolyInput::Trace { .. } => shape.poly_len,
            PolyInput::Composition { components, .. } => components[0].len(),
            PolyInput::KeptComposition { evaluations, .. } => evaluations.ce_size(),
        } as u64;
        let n = shape.poly_len as u64;
        let part = sizes.felts();
        let unit = n.min(part);
        sizes.check_row(shape.row_width)?;
        Ok(Self {
            shape,
            log_n: n.ilog2(),
            log_lde: (shape.lde_len as u64).ilog2(),
            input_len,
            part,
            unit,
            units: shape.lde_len as u64 / unit,
            rows: sizes.rows_per_chunk(shape.row_width, saved_bytes(request.hash), unit),
        })
    }

    /// The coset-by-coset evaluation of the coefficients.
    fn cosets(&self) -> CosetShape {
        CosetShape {
            num_cols: self.shape.num_cols as u64,
            poly_len: self.shape.poly_len as u64,
            unit: self.unit,
            domain_len: self.shape.lde_len as u64,
        }
    }

    /// Whether the interpolation runs on the device (every input column fits one part).
    fn device_interpolation(&self) -> bool {
        self.input_len <= self.part
    }
}

/// Computes a [`Commitment`] of `request` (checked, of shape `shape`) on the device, its
/// polynomials on the host only if `host_polys` and its LDE rows only if `host_rows` (else they
/// are hashed and dropped); returns it with its stage times where the device can tell, and the
/// device array of its polynomials (base column `c` at records `c·n ..`). Kept evaluations are
/// read from `kept`, this committer's buffer of them (component after component), which the
/// caller found: the request's kept evaluations of another committer are read to the host.
pub(super) fn commit(
    engine: &Engine<'_>,
    request: &CommitRequest<'_>,
    shape: Shape,
    host_polys: bool,
    host_rows: bool,
    kept: Option<&::wgpu::Buffer>,
) -> Result<(Commitment, Option<StageTimes>, Chunked)> {
    let plan = Plan::new(shape, request, &engine.sizes)?;
    let (n, cols, rw) = (shape.poly_len, shape.num_cols, shape.row_width);
    let device = &engine.ctx.device;

    let coefficients = Chunked::new(engine.pool, device, (cols * n) as u64, FELT_BYTES, plan.part);
    let (powers, tables) = engine.tables().powers(device, &engine.ctx.queue, plan.log_lde);
    let values = plan.device_interpolation().then(|| {
        Chunked::new(
            engine.pool,
            device,
            input_count(&request.input) as u64 * plan.input_len,
            FELT_BYTES,
            plan.part,
        )
    });

    let layout = Layout::new(shape.lde_len as u64, plan.units);
    let leaf_array = Chunked::new(
        engine.pool,
        device,
        shape.lde_len as u64,
        DIGEST_BYTES,
        engine.sizes.digests(),
    );
    let levels = tree_levels(engine.pool, device, shape.lde_len as u64, engine.sizes.digests());

    let (commitment, times) = std::thread::scope(|scope| {
        // The host allocates the outputs on another thread while the device works; the
        // download queue takes them when the first download arrives.
        let with_polys = values.is_some() && host_polys;
        let host = engine.host;
        let allocation = scope.spawn(move || {
            info_span!("wgpu.host_alloc")
                .in_scope(|| commit_sinks(&shape, with_polys, host_rows, layout, &host))
        });

        if let Some(timer) = engine.timer {
            timer.begin();
        }
        let mut batch = Batch::new(engine.ctx);
        batch.set_stage(Some(Stage::Interpolate));
        let (interpolated, staged) = match &values {
            Some(values) => {
                let writes = column_writes(input_columns(&request.input), values);
                let staged = info_span!("wgpu.upload", bytes = input_bytes(&request.input))
                    .in_scope(|| upload(engine, &mut batch, &writes))?;
                if let Some(kept) = kept {
                    let len = plan.input_len;
                    for c in 0..input_count(&request.input) as u64 {
                        let (dst, first) = values.locate(c * len);
                        let (src_at, dst_at) =
                            (c * len * FELT_BYTES, u64::from(first) * FELT_BYTES);
                        batch.copy(kept, src_at, dst, dst_at, len * FELT_BYTES);
                    }
                }
                info_span!("wgpu.interpolate", on = "device").in_scope(|| {
                    let arrays = InterpolationArrays {
                        values,
                        coefficients: &coefficients,
                        powers: &powers,
                        generator_inv_table: tables.generator_inv,
                    };
                    record_interpolation(engine, &mut batch, &plan, &request.input, &arrays)
                })?;
                (None, staged)
            },
            None => {
                let polys = info_span!("wgpu.interpolate", on = "host")
                    .in_scope(|| request.input.interpolate_on_host())?;
                let columns: Vec<&[Felt]> = polys.iter().map(|p| p.as_slice()).collect();
                let staged = info_span!("wgpu.upload").in_scope(|| {
                    upload(engine, &mut batch, &column_writes(&columns, &coefficients))
                })?;
                (Some(polys), staged)
            },
        };
        engine.submit(batch)?;
        drop((staged, values));

        let make_sinks = Box::new(move || {
            allocation.join().map_err(|_| refused("host allocation", "failed"))?
        });
        let buffers = download_bytes(&shape, with_polys, host_rows).div_ceil(engine.sizes.staging);
        let mut downloads = DownloadQueue::with_buffers(
            engine,
            make_sinks,
            (buffers as usize).min(COMMIT_STAGING_BUFFERS),
        );
        // The polynomials travel in shares beside the row chunks, so the LDE starts at once.
        let mut polys_download = with_polys
            .then(|| SpareDownload::new(&coefficients, FELT_BYTES, Target::Columns { first: 0 }));

        info_span!("wgpu.lde_hash", cosets = plan.units, rows = shape.lde_len, hash = %request.hash).in_scope(|| {
        let work = Chunked::new(engine.pool, device, (cols as u64) * plan.unit, FELT_BYTES, plan.part);
        // The rows go to the host from the hashing kernel itself where it can write them into a
        // staging buffer, else by a copy after it. Where it does (or they stay on the device)
        // and the coset evaluation is one binding, it reads the rows from the NTT's output: no
        // transposition into a row buffer.
        let bytes = plan.rows * rw as u64 * FELT_BYTES;
        let quads = on_quads(downloads.batch(), request.hash, request.row_hashing);
        let kernel_copies = host_rows && quads && downloads.reserves(bytes);
        let coset_rows = quads && work.num_parts() == 1 && (kernel_copies || !host_rows);
        let row_buffer = (!coset_rows).then(|| {
            let buffer = engine.pool.acquire(device, bytes, STORAGE);
            downloads.batch().clear(&buffer);
            buffer
        });
        let sponges = sponge_buffer(engine, request.hash, request.row_hashing, cols, plan.rows);
        let twiddles = engine.tables().twiddles(device, &engine.ctx.queue, plan.unit.ilog2(), false);
        for coset in 0..plan.units {
            let batch = downloads.batch();
            batch.set_stage(Some(Stage::Lde));
            let arrays = CosetArrays { coefficients: &coefficients, work: &work, powers: &powers, twiddles: &twiddles };
            record_coset_evaluation(batch, plan.cosets(), coset, arrays, tables)?;
            for row0 in (0..plan.unit).step_by(plan.rows as usize) {
                if let Some(row_buffer) = &row_buffer {
                    let batch = downloads.batch();
                    batch.set_stage(Some(Stage::Rows));
                    for p in 0..work.num_parts() {
                        let (first, len) = work.part_range(p);
                        let num_cols = len / plan.unit;
                        let params = RowsParams {
                            count: to_u32(plan.rows * num_cols, "elements of a row chunk")?,
                            num_cols: to_u32(num_cols, "columns of a part")?,
                            src_offset: 0,
                            log_len: plan.unit.ilog2(),
                            row0: to_u32(row0, "the first row of a chunk")?,
                            row_width: to_u32(rw, "the row width of a commitment")?,
                            col0: to_u32(first / plan.unit, "the first column of a part")?,
                            dst_offset: 0,
                        };
                        record_to_rows(batch, &params, work.part(p), row_buffer)?;
                    }
                }
                let leaf = coset * plan.unit + row0;
                let (leaf_buffer, leaf_offset) = leaf_array.locate(leaf);
                let (rows, source) = match &row_buffer {
                    Some(row_buffer) => (&**row_buffer, RowSource::RowMajor),
                    None => (work.part(0), RowSource::Coset { log_len: plan.unit.ilog2(), row0: to_u32(row0, "the first row of a chunk")? }),
                };
                let block = RowBlock { num_rows: plan.rows, row_width: rw, num_cols: cols, src_offset: 0, dst_offset: leaf_offset, source };
                let rows_target = Target::Records { sink: LDE_SINK, first: leaf as usize };
                let copies = if kernel_copies { downloads.reserve(bytes, rows_target)? } else { None };
                let buffers = RowBuffers {
                    rows,
                    leaves: leaf_buffer,
                    sponges: &sponges,
                    copies: copies.as_ref().map(|(buffer, offset)| (buffer, *offset)),
                };
                let batch = downloads.batch();
                batch.set_stage(Some(Stage::Hash));
                record_hash_rows(batch, request.hash, request.row_hashing, block, buffers, engine.sizes.hash_events)?;
                if copies.is_none() && host_rows {
                    let row_buffer = row_buffer.as_ref().ok_or_else(|| refused("row hashing", "rows neither copied by the hashing kernel nor transposed"))?;
                    downloads.download(row_buffer, 0, bytes, rw as u64 * FELT_BYTES, rows_target)?;
                }
                // the chunk's leaves travel with its rows, so after the tree only its levels remain
                let leaf_bytes = u64::from(leaf_offset) * DIGEST_BYTES;
                downloads.download(leaf_buffer, leaf_bytes, plan.rows * DIGEST_BYTES, DIGEST_BYTES, Target::Records { sink: LEAF_SINK, first: leaf as usize })?;
                if let Some(polys) = &mut polys_download {
                    let chunks_left = (plan.units - coset) * plan.unit.div_ceil(plan.rows) - row0 / plan.rows;
                    polys.top_up(&mut downloads, chunks_left)?;
                }
            }
        }
        if let Some(polys) = polys_download {
            polys.finish(&mut downloads)?;
        }
        Ok::<_, GpuError>(())
    })?;

        // The last rows go to the host while the tree is merged.
        downloads.flush()?;
        info_span!("wgpu.tree").in_scope(|| {
            downloads.batch().set_stage(Some(Stage::Tree));
            record_tree_downloads(
                &mut downloads,
                request.hash,
                &leaf_array,
                layout,
                &levels,
                LEVEL_SINK,
            )
        })?;
        let mut sinks = info_span!("wgpu.download").in_scope(|| {
            downloads.batch().resolve_timestamps();
            downloads.finish()
        })?;
        let times = match engine.timer {
            Some(timer) => timer.finish(engine.ctx)?,
            None => None,
        };
        let nodes = sinks.digests.pop().unwrap_or_default();
        let leaves = sinks.digests.pop().unwrap_or_default();
        let lde = sinks.felts.pop().unwrap_or_default();
        let polys = interpolated.unwrap_or(sinks.columns);
        let commitment = Commitment {
            polys: if host_polys { polys } else { Vec::new() },
            lde: LdeRows { data: lde.into(), row_width: rw, num_cols: cols },
            leaves: leaves.into(),
            nodes: nodes.into(),
            resident: None,
            kept_rows: None,
            kept_tree: None,
        };
        Ok((commitment, times))
    })?;
    Ok((commitment, times, coefficients))
}

/// The bytes a commitment downloads: its leaves and nodes, its LDE rows if `with_rows` and its
/// polynomials if `with_polys`.
fn download_bytes(shape: &Shape, with_polys: bool, with_rows: bool) -> u64 {
    let rows = if with_rows { (shape.lde_len * shape.row_width) as u64 * FELT_BYTES } else { 0 };
    let polys = if with_polys { (shape.num_cols * shape.poly_len) as u64 * FELT_BYTES } else { 0 };
    rows + 2 * shape.lde_len as u64 * DIGEST_BYTES + polys
}

/// The host outputs of a commitment: the polynomials (if the device computes them), the LDE
/// rows (if `with_rows`), the leaves and the tree levels above leaves stored in `layout`.
fn commit_sinks(
    shape: &Shape,
    with_polys: bool,
    with_rows: bool,
    layout: Layout,
    host: &HostOptions,
) -> Result<Sinks> {
    let mut sinks = Sinks::default();
    if with_polys {
        sinks.reserve_columns(shape.num_cols, shape.poly_len, host)?;
    }
    let rows = if with_rows { shape.lde_len * shape.row_width } else { 0 };
    sinks.felts.push(zeroed_host(rows, host)?);
    sinks.digests.push(zeroed_host(shape.lde_len, host)?);
    sinks.digests.push(zeroed_host(shape.lde_len, host)?);
    let (groups, group_len) = (layout.groups as usize, layout.group_len as usize);
    sinks.records.push(RecordSink {
        store: Store::Felts(0),
        start: 0,
        record_len: shape.row_width,
        groups,
        group_len,
    });
    sinks.records.push(RecordSink {
        store: Store::Digests(0),
        start: 0,
        record_len: 4,
        groups,
        group_len,
    });
    push_level_sinks(&mut sinks, Store::Digests(1), shape.lde_len, layout);
    Ok(sinks)
}

// INTERPOLATION
// ================================================================================================

/// The evaluations to interpolate on the host: trace columns or composition components (none
/// for kept evaluations).
fn input_columns<'a>(input: &PolyInput<'a>) -> &'a [&'a [Felt]] {
    match *input {
        PolyInput::Trace { columns } => columns,
        PolyInput::Composition { components, .. } => components,
        PolyInput::KeptComposition { .. } => &[],
    }
}

/// The number of columns to interpolate.
fn input_count(input: &PolyInput<'_>) -> usize {
    match *input {
        PolyInput::KeptComposition { evaluations, .. } => evaluations.components(),
        _ => input_columns(input).len(),
    }
}

fn input_bytes(input: &PolyInput<'_>) -> usize {
    input_columns(input).iter().map(|c| c.len() * FELT_BYTES as usize).sum()
}

/// Writes of equal-length columns one after another into `array`.
fn column_writes<'a>(columns: &[&'a [Felt]], array: &'a Chunked) -> Vec<Write<'a>> {
    let mut first = 0;
    columns
        .iter()
        .map(|column| {
            let write = Write { bytes: felt_bytes(column), array, first, record_bytes: FELT_BYTES };
            first += column.len() as u64;
            write
        })
        .collect()
}

/// The device arrays of an interpolation.
struct InterpolationArrays<'a> {
    /// The uploaded evaluations, transformed in place.
    values: &'a Chunked,
    /// The coefficients they become.
    coefficients: &'a Chunked,
    /// The power tables.
    powers: &'a ::wgpu::Buffer,
    /// Where the powers of the inverse domain offset start in `powers`.
    generator_inv_table: u32,
}

/// Records the inverse NTTs of the uploaded evaluations and their finishing into the
/// coefficient array.
fn record_interpolation(
    engine: &Engine<'_>,
    batch: &mut Batch,
    plan: &Plan,
    input: &PolyInput<'_>,
    arrays: &InterpolationArrays<'_>,
) -> Result<()> {
    let InterpolationArrays { values, coefficients, powers, generator_inv_table } = *arrays;
    let log_m = plan.input_len.ilog2();
    let inverse = engine.tables().twiddles(&engine.ctx.device, &engine.ctx.queue, log_m, true);
    for p in 0..values.num_parts() {
        let (_, len) = values.part_range(p);
        record_dif(batch, values.part(p), 0, len / plan.input_len, log_m, &inverse)?;
    }
    let n = plan.shape.poly_len as u64;
    match *input {
        PolyInput::Trace { .. } => {
            // Same layout in and out: one block per part.
            for p in 0..values.num_parts() {
                let (_, len) = values.part_range(p);
                let block = CoefficientBlock {
                    num_cols: len / n,
                    log_len: plan.log_n,
                    src_offset: 0,
                    log_src_len: log_m,
                    dst_offset: 0,
                    first: 0,
                    offset_table: None,
                };
                record_finish_interpolation(
                    batch,
                    block,
                    values.part(p),
                    coefficients.part(p),
                    powers,
                )?;
            }
        },
        PolyInput::Composition { num_columns, .. }
        | PolyInput::KeptComposition { num_columns, .. } => {
            // Output column j k + c is coefficients j n .. (j + 1) n of component c: for each j,
            // runs of components whose source and destination each stay in one part.
            let k = input_count(input) as u64;
            for j in 0..num_columns as u64 {
                let mut c = 0;
                while c < k {
                    let src_part = c * plan.input_len / values.part_len;
                    let dst_part = (j * k + c) * n / coefficients.part_len;
                    let mut end = c + 1;
                    while end < k
                        && end * plan.input_len / values.part_len == src_part
                        && (j * k + end) * n / coefficients.part_len == dst_part
                    {
                        end += 1;
                    }
                    let (src, src_offset) = values.locate(c * plan.input_len);
                    let (dst, dst_offset) = coefficients.locate((j * k + c) * n);
                    let block = CoefficientBlock {
                        num_cols: end - c,
                        log_len: plan.log_n,
                        src_offset,
                        log_src_len: log_m,
                        dst_offset,
                        first: to_u32(j * n, "the first point of a composition column")?,
                        offset_table: Some(generator_inv_table),
                    };
                    record_finish_interpolation(batch, block, src, dst, powers)?;
                    c = end;
                }
            }
        },
    }
    Ok(())
}
