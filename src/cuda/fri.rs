//! The FRI commit phase on the first GPU (`cuda/fri.cu`, with the row-hashing and Merkle kernels
//! of the commitments).
//!
//! The DEEP coefficients go up once; the evaluations stay on the device from layer to layer.
//! Per layer: hash the rows into leaves, build the tree, read the root back for the channel's
//! `alpha`, fold into the next layer (two buffers, alternating), and download the layer
//! (columns, leaves, nodes) for the query phase while the next one is computed.

use miden_crypto::Felt;
use rayon::prelude::*;
use tracing::info_span;
use winter_math::{FieldElement, StarkField};

use super::{
    assemble::download_vec,
    gpu::{Gpu, GpuState},
    hashing::{merkle_levels, HashRowsArgs},
    launch::kernel_args,
    lde::ntt,
};
use crate::{
    error::{GpuError, Result},
    fri::{FoldingChannel, FriLayer, FriLayers, FriRequest, FriShape},
    hash::Digest,
};

/// Threads per block of the FRI kernels.
const FRI_BLOCK: u32 = 256;

// COMMIT PHASE
// ================================================================================================

/// Evaluates the DEEP polynomial over the LDE domain and commits to and folds every layer.
pub(super) fn commit_fri(
    gpu: &Gpu,
    state: &mut GpuState,
    request: &FriRequest<'_>,
    shape: FriShape,
    channel: &mut FoldingChannel<'_>,
) -> Result<FriLayers> {
    let FriShape { ext_degree: d, poly_len, domain_len } = shape;
    let folding = request.folding_factor;
    let log_domain = domain_len.ilog2();

    // Coefficients scaled by offset^k: the coset evaluation becomes a plain NTT.
    let scaled: Vec<Felt> = info_span!("cuda.fri.scale").in_scope(|| {
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
    });

    let words = domain_len * d;
    let bufs = &mut state.buffers;
    let coeffs = bufs.source.get(&gpu.ctx, scaled.len() * 8)?;
    let mut layer = bufs.lde.get(&gpu.ctx, words * 8)?;
    let mut next = bufs.slab.get(&gpu.ctx, words * 8)?;
    let leaves = bufs.leaves.get(&gpu.ctx, domain_len / folding * 32)?;
    let nodes = bufs.nodes.get(&gpu.ctx, domain_len / folding * 32)?;
    gpu.upload(&mut state.ring, coeffs, Felt::elements_as_bytes(&scaled))?;
    let _uploaded = gpu.wait_for_uploads()?;

    // First layer: bit-reversed spread, DIT NTT, then the slot layout.
    let twiddles = gpu.twiddles(state, log_domain, false)?;
    let rows = domain_len / folding;
    {
        let (mut out, mut input, mut poly_len, mut log_n, mut total) =
            (next, coeffs, poly_len as u64, log_domain, words as u64);
        let mut args = kernel_args!(out, input, poly_len, log_n, total);
        // SAFETY: arguments match `fri_spread`; `next` holds `words` words, `coeffs` d·poly_len.
        unsafe { gpu.kernels.fri_spread.launch(&gpu.compute, grid(words), FRI_BLOCK, &mut args)? };
    }
    ntt(gpu, next, d, log_domain, twiddles, false)?;
    {
        let (mut out, mut input, mut log_n, mut rows, mut dd, mut total) =
            (layer, next, log_domain, rows as u64, d as u32, words as u64);
        let mut args = kernel_args!(out, input, log_n, rows, dd, total);
        // SAFETY: arguments match `fri_to_slots`; both buffers hold `words` words.
        unsafe {
            gpu.kernels.fri_to_slots.launch(&gpu.compute, grid(words), FRI_BLOCK, &mut args)?
        };
    }

    let mut layers = Vec::with_capacity(request.num_layers);
    for l in 0..request.num_layers {
        let _span = info_span!("cuda.fri.layer", layer = l).entered();
        let rows = shape.layer_rows(l, folding);
        let width = folding * d;
        HashRowsArgs {
            src: layer,
            k_stride: 0,
            t_stride: 1,
            c_stride: rows as u64,
            num_cols: width as u32,
            part: 0,
            log_blowup: 0,
            k0: 0,
            log_cosets: 0,
            t0: 0,
            t_count: rows as u64,
            leaves,
            rows_out: 0,
            t_base: 0,
            row_width: width as u32,
        }
        .launch(gpu, gpu.kernels.hash_rows(request.hash, false))?;
        merkle_levels(gpu, request.hash, leaves, nodes, rows, 1, &(0..1))?;
        let done = gpu.completion()?;
        let mut layer_nodes: Vec<Digest> = download_vec(gpu, state, nodes, rows, &done)?;
        layer_nodes[0] = Digest::ZERO;
        let alpha = channel(layer_nodes[1]);
        if alpha.len() != d {
            return Err(GpuError::InvalidFri(format!(
                "the channel drew {} components for an element of degree {d}",
                alpha.len()
            )));
        }

        let last = l + 1 == request.num_layers;
        let consts = gpu.upload_table(&fold_constants(&alpha, rows * folding, folding))?;
        {
            let (mut out, mut input, mut n_rows, mut f, mut table, mut next_rows) = (
                next,
                layer,
                rows as u64,
                folding as u32,
                consts.ptr(),
                if last { 0 } else { (rows / folding) as u64 },
            );
            let mut args = kernel_args!(out, input, n_rows, f, table, next_rows);
            // SAFETY: arguments match the fold kernels; `layer` holds rows·folding·d words,
            // `next` rows·d, `consts` d + 4 + folding.
            unsafe {
                gpu.kernels.fri_fold(d).launch(&gpu.compute, grid(rows), FRI_BLOCK, &mut args)?
            };
        }
        let folded = gpu.completion()?;
        let columns: Vec<Felt> = download_vec(gpu, state, layer, rows * width, &folded)?;
        let layer_leaves: Vec<Digest> = download_vec(gpu, state, leaves, rows, &folded)?;
        layers.push(FriLayer { columns, num_rows: rows, leaves: layer_leaves, nodes: layer_nodes });
        std::mem::swap(&mut layer, &mut next);
        drop(consts);
    }

    let remainder_len = shape.layer_rows(request.num_layers - 1, folding) * d;
    let done = gpu.completion()?;
    let remainder = download_vec(gpu, state, layer, remainder_len, &done)?;
    Ok(FriLayers { layers, remainder })
}

/// Device bytes of the phase: the coefficients, two layer buffers, the leaves and the nodes.
pub(super) fn device_bytes(request: &FriRequest<'_>, shape: FriShape) -> u64 {
    let words = shape.poly_len * shape.ext_degree + 2 * shape.domain_len * shape.ext_degree;
    let digests = 2 * shape.domain_len / request.folding_factor;
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

/// Blocks for one thread per item.
fn grid(items: usize) -> u32 {
    items.div_ceil(FRI_BLOCK as usize) as u32
}
