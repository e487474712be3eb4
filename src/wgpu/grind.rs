//! The proof-of-work search (`grind.wgsl`): batches of nonces, in order, until one is accepted.

use super::kernels::GrindParams;
use super::{batch::Batch, context::wgpu_failure, kernels, Engine};
use crate::{
    committer::grind::{batch_len, first_in_batches, GrindRequest},
    error::Result,
};

/// The layout of this module's parameter struct, checked against its WGSL twin.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(GrindParams { state, start_lo, start_hi, count, factor })]
}

/// Nonces of one dispatch ([`batch_len`]): few enough that a software device answers within a
/// second or so.
const BATCH: (u64, u64) = (1 << 10, 1 << 22);

/// The first nonce `request` (validated) accepts: one dispatch per batch, whose smallest
/// accepted offset is read back.
pub(super) fn grind(engine: &Engine<'_>, request: &GrindRequest) -> Result<u64> {
    let ctx = engine.ctx;
    let words: Vec<u32> = request
        .state
        .iter()
        .flat_map(|x| {
            let w = x.inner();
            [w as u32, (w >> 32) as u32]
        })
        .collect();
    let mut state = [[0u32; 4]; 6];
    for (pair, chunk) in state.iter_mut().zip(words.chunks_exact(4)) {
        pair.copy_from_slice(chunk);
    }
    let buffer = |label, usage| {
        ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some(label),
            size: 4,
            usage,
            mapped_at_creation: false,
        })
    };
    use ::wgpu::BufferUsages as U;
    let found = buffer("miden-gpu grind found", U::STORAGE | U::COPY_SRC | U::COPY_DST);
    let readback = buffer("miden-gpu grind readback", U::MAP_READ | U::COPY_DST);
    let batch = batch_len(request.grinding_factor, BATCH.0, BATCH.1);
    first_in_batches(batch, |start, count| {
        ctx.queue.write_buffer(&found, 0, &u32::MAX.to_le_bytes());
        let params = GrindParams {
            state,
            start_lo: start as u32,
            start_hi: (start >> 32) as u32,
            count: count as u32, // at most BATCH.1
            factor: request.grinding_factor,
        };
        let mut commands = Batch::new(ctx);
        commands.dispatch_items(kernels::grind(request.hash), &params, [&found], count)?;
        commands.copy(&found, 0, &readback, 0, 4);
        engine.submit(commands)?;
        let mapping = ctx.map(&readback, ::wgpu::MapMode::Read, ..)?;
        ctx.wait_for_map(&readback, &mapping, "waiting for a grinding batch")?;
        let offset = {
            let view = readback
                .slice(..)
                .get_mapped_range()
                .map_err(|e| wgpu_failure("reading a grinding batch", e))?;
            u32::from_le_bytes(view[..4].try_into().expect("4 bytes"))
        };
        readback.unmap();
        Ok((offset != u32::MAX).then(|| start + u64::from(offset)))
    })
}
