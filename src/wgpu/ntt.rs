//! Batched NTTs (`ntt.wgsl`): the large stages two per dispatch, the small ones in workgroup
//! memory.

use super::kernels::NttParams;
use super::{
    batch::Batch,
    kernels::{ntt_stage, ntt_stage_pair, ntt_tile},
};
use crate::error::{to_u32, Result};

/// log2 of the elements one `ntt_tile` workgroup transforms (`LOG_TILE` in ntt.wgsl).
const LOG_TILE: u32 = 11;

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(NttParams { offset, count, log_half })]
}

/// Records a decimation-in-frequency NTT of `num_cols` columns of 2^log_len elements stored
/// one after another from element `offset` of `data`: natural order in, bit-reversed out.
/// `twiddles` holds w^i for i < 2^(log_len - 1); w^-1 gives the inverse transform (times n).
pub(super) fn record_dif(
    batch: &mut Batch,
    data: &::wgpu::Buffer,
    offset: u32,
    num_cols: u64,
    log_len: u32,
    twiddles: &::wgpu::Buffer,
) -> Result<()> {
    let elements = num_cols << log_len;
    let count = |items: u64| to_u32(items, "elements of an NTT");
    let buffers = [data, twiddles];
    // the large stages two per pass over the data where they pair up
    let mut log_half = log_len;
    while log_half > LOG_TILE {
        log_half -= 1;
        if log_half > LOG_TILE {
            let params = NttParams { offset, count: count(elements / 4)?, log_half };
            batch.dispatch_items(ntt_stage_pair(), &params, buffers, elements / 4)?;
            log_half -= 1;
        } else {
            let params = NttParams { offset, count: count(elements / 2)?, log_half };
            batch.dispatch_items(ntt_stage(), &params, buffers, elements / 2)?;
        }
    }
    let params = NttParams { offset, count: count(elements)?, log_half: log_len.min(LOG_TILE) - 1 };
    batch.dispatch(ntt_tile(), &params, buffers, elements.div_ceil(1 << LOG_TILE))
}
