//! The FRI commit phase on the first GPU (`cuda/fri.cu`, with the row-hashing and Merkle kernels
//! of the commitments).
//!
//! The DEEP coefficients go up once; the evaluations stay on the device from layer to layer.
//! Per layer: hash the rows into leaves, build the tree, read the root back for the channel's
//! `alpha`, and fold into the next layer. The layers stay on the device for the query phase,
//! which gathers the queried rows and their Merkle paths there (`gather_words`) and downloads
//! those alone; a request that does not keep them downloads each layer whole.

use std::sync::Arc;

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;
use winter_math::{FieldElement, StarkField};

use super::{
    assemble::download_vec,
    buffer::{DeviceBuffer, DeviceSlice},
    driver::{refused, Event},
    gpu::{Gpu, GpuState},
    hashing::{hash_rows, merkle_levels, RowsOf},
    kernels::{self, Grid},
    lde::ntt,
    recovery::recover,
    tables::TwiddleKey,
};
use crate::{
    committer::fri::{
        path_indices, FoldingChannel, FriLayer, FriLayers, FriRequest, FriShape, KeptLayers,
        LayerOpening,
    },
    error::{to_u32, FriError, GpuError, Result},
    hash::Digest,
    host::on_copy_pool,
};

/// Threads per block of the FRI kernels.
const FRI_BLOCK: u32 = 256;

// COMMIT PHASE
// ================================================================================================

/// Evaluates the DEEP polynomial over the LDE domain and commits to and folds every layer.
pub(super) fn commit_fri(
    gpus: &Arc<Vec<Gpu>>,
    state: &mut GpuState,
    request: &FriRequest<'_>,
    shape: FriShape,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayers> {
    let gpu = &gpus[0];
    let FriShape { ext_degree: d, poly_len, domain_len } = shape;
    let folding = request.folding_factor;
    let log_domain = domain_len.ilog2();

    // Coefficients scaled by offset^k: the coset evaluation becomes a plain NTT. On the copy
    // threads: the call holds the GPU's turn, and the caller's pool may be busy with other proofs.
    let scaled: Vec<Felt> = info_span!("cuda.fri.scale").in_scope(|| {
        on_copy_pool(|| {
            let powers = Felt::GENERATOR;
            request
                .components
                .par_iter()
                .flat_map_iter(|c| {
                    c.iter().scan(Felt::ONE, move |p, &a| {
                        let v = a * *p;
                        *p *= powers;
                        Some(v)
                    })
                })
                .collect()
        })
    });

    let words = domain_len * d;
    let bufs = &mut state.buffers;
    let coeffs = bufs.source.get(&gpu.alloc, scaled.len())?;
    let spread = bufs.slab.get(&gpu.alloc, words)?;
    gpu.upload(&mut state.ring, coeffs.slice_mut(..scaled.len())?, &scaled)?;
    let _uploaded = gpu.wait_for_uploads()?;

    // First layer: bit-reversed spread, DIT NTT, then the slot layout.
    let twiddles = state.twiddles.table(gpu, twiddles(shape))?;
    let rows = domain_len / folding;
    let mut layer = DeviceBuffer::<Felt>::new(&gpu.alloc, words)?;
    // SAFETY: `spread` holds `words` = d·domain_len elements, `coeffs` d·poly_len.
    unsafe {
        kernels::fri_spread(
            &gpu.kernels.fri_spread,
            &gpu.compute,
            grid(words)?,
            spread.slice_mut(..words)?,
            coeffs.slice(..scaled.len())?,
            poly_len as u64,
            log_domain,
            words as u64,
        )?;
    }
    ntt(gpu, spread.slice_mut(..words)?, d, log_domain, twiddles, false)?;
    // SAFETY: both buffers hold `words` elements.
    unsafe {
        kernels::fri_to_slots(
            &gpu.kernels.fri_to_slots,
            &gpu.compute,
            grid(words)?,
            layer.as_slice_mut(),
            spread.slice(..words)?,
            log_domain,
            rows as u64,
            to_u32(d, "the degree of a FRI element")?,
            words as u64,
        )?;
    }

    let mut layers = Vec::with_capacity(request.num_layers);
    let mut kept = Vec::with_capacity(request.num_layers);
    for l in 0..request.num_layers {
        let _span = info_span!("cuda.fri.layer", layer = l).entered();
        let rows = shape.layer_rows(l, folding);
        let width = folding * d;
        let width_u32 = to_u32(width, "the width of a FRI layer")?;
        let mut leaves = DeviceBuffer::<Digest>::new(&gpu.alloc, rows)?;
        let mut nodes = DeviceBuffer::<Digest>::new(&gpu.alloc, rows)?;
        let rows_of = RowsOf {
            k_stride: 0,
            t_stride: 1,
            c_stride: rows as u64,
            num_cols: width_u32,
            part: 0,
            log_blowup: 0,
            k0: 0,
            log_cosets: 0,
            t0: 0,
            t_count: rows as u64,
            t_base: 0,
            row_width: width_u32,
        };
        // SAFETY: `layer` holds `width` columns of `rows` elements, `leaves` one per row.
        unsafe {
            hash_rows(
                &gpu.compute,
                gpu.kernels.hash_rows(request.hash, false),
                layer.as_slice(),
                leaves.as_slice_mut(),
                None,
                rows_of,
            )?;
        }
        merkle_levels(gpu, request.hash, leaves.as_slice(), nodes.as_slice_mut(), 1, &(0..1))?;
        let done = gpu.completion()?;
        let root: Vec<Digest> = download_vec(gpu, &mut state.ring, nodes.slice(1..2)?, &done)?;
        let alpha = channel(root[0]);
        if alpha.len() != d {
            return Err(GpuError::InvalidFri(FriError::ChallengeComponents {
                drawn: alpha.len(),
                degree: d,
            }));
        }

        let last = l + 1 == request.num_layers;
        let next_words = rows * d;
        let mut next = DeviceBuffer::<Felt>::new(&gpu.alloc, next_words)?;
        let consts = gpu.upload_table(&fold_constants(&alpha, rows * folding, folding))?;
        // SAFETY: `layer` holds rows·folding·d elements, `next` rows·d, `consts` d + 4 +
        // folding words.
        unsafe {
            kernels::fri_fold(
                gpu.kernels.fri_fold(d),
                &gpu.compute,
                grid(rows)?,
                next.as_slice_mut(),
                layer.as_slice(),
                rows as u64,
                to_u32(folding, "the FRI folding factor")?,
                consts.as_slice(),
                if last { 0 } else { (rows / folding) as u64 },
            )?;
        }
        let folded = gpu.completion()?;
        let committed = KeptLayer { columns: layer, leaves, nodes, rows, width };
        if request.keep_layers {
            kept.push(committed);
        } else {
            layers.push(committed.download(gpu, state, &folded)?);
        }
        layer = next;
        drop(consts);
    }

    let remainder_len = shape.layer_rows(request.num_layers - 1, folding) * d;
    let done = gpu.completion()?;
    let remainder = download_vec(gpu, &mut state.ring, layer.slice(..remainder_len)?, &done)?;
    let kept: Option<Box<dyn KeptLayers>> = request
        .keep_layers
        .then(|| Box::new(CudaKeptLayers { gpus: gpus.clone(), layers: kept }) as _);
    Ok(FriLayers { layers, kept, remainder })
}

// KEPT LAYERS
// ================================================================================================

/// One committed layer on the device: `width` column-major columns of `rows` words, the leaves
/// and the Merkle nodes (Winterfell's layout).
struct KeptLayer {
    columns: DeviceBuffer<Felt>,
    leaves: DeviceBuffer<Digest>,
    nodes: DeviceBuffer<Digest>,
    rows: usize,
    width: usize,
}

impl KeptLayer {
    /// The whole layer on the host, once `ready` has passed.
    fn download(&self, gpu: &Gpu, state: &mut GpuState, ready: &Event) -> Result<FriLayer> {
        let ring = &mut state.ring;
        let columns =
            download_vec(gpu, ring, self.columns.slice(..self.rows * self.width)?, ready)?;
        let leaves = download_vec(gpu, ring, self.leaves.slice(..self.rows)?, ready)?;
        let mut nodes = download_vec(gpu, ring, self.nodes.slice(..self.rows)?, ready)?;
        nodes[0] = Digest::ZERO;
        Ok(FriLayer { columns, num_rows: self.rows, leaves, nodes })
    }
}

/// The layers of one FRI commit phase kept on the first GPU, opened by gathering the queried
/// words there (`gather_words`) and downloading them alone.
struct CudaKeptLayers {
    gpus: Arc<Vec<Gpu>>,
    layers: Vec<KeptLayer>,
}

impl KeptLayers for CudaKeptLayers {
    /// [`CudaKeptLayers::gather`], refused at once where the GPUs are lost; after an error the
    /// GPU is drained as after a failed call of the committer.
    fn open(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        let health = &self.gpus[0].health;
        health.usable()?;
        // the gathered rows and paths are allocated within the GPU's budget, as a call's are
        let _turn = self.gpus[0].device.turn();
        let opened = self.gather(layer, positions);
        if let Err(error) = &opened {
            recover(&self.gpus[..1], health, error);
        }
        opened
    }
}

impl CudaKeptLayers {
    /// Layer `layer`'s rows and Merkle paths at `positions`, gathered on the first GPU.
    fn gather(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        let kept =
            self.layers.get(layer).ok_or(GpuError::InvalidFri(FriError::LayerOutOfRange {
                layer,
                layers: self.layers.len(),
            }))?;
        let (rows, width) = (kept.rows, kept.width);
        if let Some(&p) = positions.iter().find(|&&p| p >= rows) {
            return Err(GpuError::InvalidFri(FriError::PositionOutOfRange { position: p, rows }));
        }
        let gpu = &self.gpus[0];
        let depth = rows.ilog2() as usize;
        // words of each position's row, leaf and sibling leaf, and path nodes, in that order
        let row_words: Vec<u64> = positions
            .iter()
            .flat_map(|&p| (0..width).map(move |c| (c * rows + p) as u64))
            .collect();
        let digest_words = |index: usize| (0..4).map(move |w| (index * 4 + w) as u64);
        let leaf_words: Vec<u64> =
            positions.iter().flat_map(|&p| digest_words(p).chain(digest_words(p ^ 1))).collect();
        let node_words: Vec<u64> =
            positions.iter().flat_map(|&p| path_indices(p, rows).flat_map(digest_words)).collect();
        let gathers = [
            (kept.columns.as_slice().as_words(), row_words),
            (kept.leaves.as_slice().as_words(), leaf_words),
            (kept.nodes.as_slice().as_words(), node_words),
        ];
        let words = gather_to_host(gpu, &gathers)?;

        let (row_part, rest) = words.split_at(gathers[0].1.len());
        let (leaf_part, node_part) = rest.split_at(gathers[1].1.len());
        let digest = |w: &[u64]| Digest::from_words([w[0], w[1], w[2], w[3]]);
        let rows_out = row_part
            .chunks(width.max(1))
            .map(|row| row.iter().map(|&w| Felt::from_mont(w)).collect())
            .collect();
        let path_len = (depth - 1) * 4;
        let paths = leaf_part
            .chunks(8)
            .enumerate()
            .map(|(i, leaf)| {
                let mut path = vec![digest(&leaf[4..])];
                path.extend(node_part[i * path_len..(i + 1) * path_len].chunks(4).map(digest));
                (digest(&leaf[..4]), path)
            })
            .collect();
        Ok(LayerOpening { rows: rows_out, paths })
    }
}

/// The twiddle table of the phase: the forward transform over the LDE domain.
pub(super) fn twiddles(shape: FriShape) -> TwiddleKey {
    (shape.domain_len.ilog2(), false)
}

/// Device bytes of the phase: the coefficients, the spread evaluations, and the layers with
/// their leaves and nodes (all of them when they are kept, else two at a time).
pub(super) fn device_bytes(request: &FriRequest<'_>, shape: FriShape) -> u64 {
    let f = request.folding_factor;
    let layers = if request.keep_layers { request.num_layers } else { 2 };
    let (mut words, mut digests) = (shape.poly_len * shape.ext_degree, 0);
    words += shape.domain_len * shape.ext_degree;
    for l in 0..layers.min(request.num_layers) {
        let rows = shape.layer_rows(l, f);
        words += rows * f * shape.ext_degree;
        digests += 2 * rows;
    }
    words += shape.layer_rows(request.num_layers - 1, f) * shape.ext_degree;
    (words * 8 + digests * 32) as u64
}

/// The fold kernels' constants, raw Montgomery words: alpha, offset^-1, g^-1 for a domain of
/// `domain_len`, 1/F, one, then ω^-m for m < F.
fn fold_constants(alpha: &[Felt], domain_len: usize, folding: usize) -> Vec<u64> {
    let omega_inv = Felt::get_root_of_unity(folding.ilog2()).inv();
    let mut values: Vec<Felt> = alpha.to_vec();
    values.extend([
        Felt::GENERATOR.inv(),
        Felt::get_root_of_unity(domain_len.ilog2()).inv(),
        // a folding factor is 2, 4, 8 or 16 (`FriRequest::validate`)
        Felt::from(folding as u32).inv(),
        Felt::ONE,
    ]);
    values.extend((0..folding).scan(Felt::ONE, |p, _| {
        let v = *p;
        *p *= omega_inv;
        Some(v)
    }));
    values.iter().map(|v| v.inner()).collect()
}

/// Gathers `src[index]` for every index of each `(src, indices)` pair on `gpu`
/// (`gather_words`) and downloads the words alone, pair after pair.
pub(super) fn gather_to_host(
    gpu: &Gpu,
    gathers: &[(DeviceSlice<'_, u64>, Vec<u64>)],
) -> Result<Vec<u64>> {
    if gathers.iter().any(|(src, indices)| indices.iter().any(|&i| i >= src.len() as u64)) {
        return Err(refused("cuLaunchKernel", "a gather index lies past its buffer")
            .serving("gather_words"));
    }
    let total: usize = gathers.iter().map(|(_, w)| w.len()).sum();
    let mut out = DeviceBuffer::<u64>::new(&gpu.alloc, total.max(1))?;
    let mut tables = Vec::with_capacity(gathers.len());
    let mut offset = 0;
    for (src, indices) in gathers {
        if indices.is_empty() {
            continue;
        }
        let table = gpu.upload_table(indices)?;
        // SAFETY: every index lies within `src` (checked above), the output range holds one
        // word per index.
        unsafe {
            kernels::gather_words(
                &gpu.kernels.gather_words,
                &gpu.compute,
                grid(indices.len())?,
                out.slice_mut(offset..offset + indices.len())?,
                *src,
                table.as_slice(),
                indices.len() as u64,
            )?;
        }
        offset += indices.len();
        tables.push(table);
    }
    let words = gpu.download_table(out.slice(..total)?)?;
    drop(tables);
    Ok(words)
}

/// Blocks of [`FRI_BLOCK`] threads for one thread per item.
fn grid(items: usize) -> Result<Grid> {
    let blocks = to_u32(items.div_ceil(FRI_BLOCK as usize), "blocks of a FRI launch")?;
    Ok(Grid { blocks, threads_per_block: FRI_BLOCK })
}
