//! Recording of device work: dispatches, copies and clears are collected into a [`Batch`],
//! then encoded into one command buffer with one parameter arena (a uniform buffer bound
//! with dynamic offsets) and submitted at once, so a whole stage costs one submission.
//! Consecutive dispatches of one [`Stage`] share a compute pass; a pass is timed when a
//! commitment is (see `timestamps`).

use std::sync::Arc;

use bytemuck::Pod;

use super::{
    buffers::BufferPool,
    constants::HashConstants,
    context::{Context, WORKGROUP_SIZE},
    kernels::{TypedKernel, TypedProgram},
    pipelines::{Kernel, Pipeline, Pipelines, PARAMS_BYTES},
    timestamps::{Stage, Timer},
};
use crate::{
    error::{to_u32, GpuError, Result},
    hash::RescueLanes,
};

/// What a dispatch runs: a kernel made at start-up, or a program made since.
enum Dispatched {
    Kernel(Kernel),
    Program(Arc<Pipeline>),
}

enum Op {
    Dispatch {
        dispatched: Dispatched,
        buffers: Vec<::wgpu::Buffer>,
        params_offset: u32,
        groups: (u32, u32),
        stage: Option<Stage>,
    },
    Copy {
        src: ::wgpu::Buffer,
        src_offset: u64,
        dst: ::wgpu::Buffer,
        dst_offset: u64,
        size: u64,
    },
    Clear {
        buffer: ::wgpu::Buffer,
    },
    /// Resolve of the commitment's timestamps (a no-op when nothing is timed).
    ResolveTimestamps,
}

/// Device work recorded for one submission.
pub(super) struct Batch {
    ops: Vec<Op>,
    params: Vec<u8>,
    /// Alignment of dynamic uniform offsets.
    align: u64,
    /// Largest workgroup count per grid dimension.
    max_groups: u64,
    /// Stage of the dispatches recorded from now on.
    stage: Option<Stage>,
    /// Invocations per RPO/RPX permutation of whole-row hashing and Merkle levels.
    rescue_lanes: RescueLanes,
}

impl Batch {
    pub fn new(ctx: &Context) -> Self {
        Self {
            ops: Vec::new(),
            params: Vec::new(),
            align: (ctx.limits.min_uniform_buffer_offset_alignment as u64).max(PARAMS_BYTES),
            max_groups: ctx.limits.max_compute_workgroups_per_dimension as u64,
            stage: None,
            rescue_lanes: ctx.rescue_lanes,
        }
    }

    /// Whether whole-row RPO/RPX hashing and Merkle levels run on quads (the device's choice).
    pub fn rescue_quads(&self) -> bool {
        self.rescue_lanes == RescueLanes::Quad
    }

    /// Tags the dispatches recorded from now on with `stage` (`None`: untimed).
    pub fn set_stage(&mut self, stage: Option<Stage>) {
        self.stage = stage;
    }

    /// The stage of the dispatches being recorded.
    pub fn stage(&self) -> Option<Stage> {
        self.stage
    }

    /// Runs `kernel` with `params` over `workgroups` workgroups (a 2-D grid when needed; the
    /// kernels flatten it and skip positions past their work), binding `buffers` as its
    /// storage bindings 1, 2, ...
    pub fn dispatch<P: Pod, const N: usize>(
        &mut self,
        kernel: TypedKernel<P, N>,
        params: &P,
        buffers: [&::wgpu::Buffer; N],
        workgroups: u64,
    ) -> Result<()> {
        self.push_dispatch(Dispatched::Kernel(kernel.kernel()), params, &buffers, workgroups)
    }

    /// Runs `program` with `params` over one invocation per item, as [`Self::dispatch_items`].
    pub fn dispatch_program<P: Pod, const N: usize>(
        &mut self,
        program: &TypedProgram<P, N>,
        params: &P,
        buffers: [&::wgpu::Buffer; N],
        items: u64,
    ) -> Result<()> {
        let dispatched = Dispatched::Program(program.pipeline());
        self.push_dispatch(dispatched, params, &buffers, items.div_ceil(WORKGROUP_SIZE))
    }

    fn push_dispatch<P: Pod>(
        &mut self,
        dispatched: Dispatched,
        params: &P,
        buffers: &[&::wgpu::Buffer],
        workgroups: u64,
    ) -> Result<()> {
        if workgroups == 0 {
            return Ok(());
        }
        let params_offset = to_u32(self.params.len(), "the parameter bytes of a batch")?;
        let bytes = bytemuck::bytes_of(params);
        debug_assert!(bytes.len() as u64 <= PARAMS_BYTES);
        self.params.extend_from_slice(bytes);
        self.params.resize(params_offset as usize + self.align as usize, 0);
        // As few rows of workgroups as fit, each as short as that allows: at most y - 1
        // workgroups past the end (a full first row could leave almost a whole row idle).
        let y = workgroups.div_ceil(self.max_groups);
        if y > self.max_groups {
            return Err(GpuError::DimensionOverflow {
                what: "workgroups of a dispatch",
                value: workgroups,
            });
        }
        // both at most `max_groups`, a u32 limit
        let (x, y) = (workgroups.div_ceil(y) as u32, y as u32);
        self.ops.push(Op::Dispatch {
            dispatched,
            buffers: buffers.iter().map(|&buffer| buffer.clone()).collect(),
            params_offset,
            groups: (x, y),
            stage: self.stage,
        });
        Ok(())
    }

    /// Dispatches [`Kernel::lanes`] invocations per work item.
    pub fn dispatch_items<P: Pod, const N: usize>(
        &mut self,
        kernel: TypedKernel<P, N>,
        params: &P,
        buffers: [&::wgpu::Buffer; N],
        items: u64,
    ) -> Result<()> {
        let invocations =
            items.checked_mul(kernel.kernel().lanes()).ok_or(GpuError::DimensionOverflow {
                what: "invocations of a dispatch",
                value: items,
            })?;
        self.dispatch(kernel, params, buffers, invocations.div_ceil(WORKGROUP_SIZE))
    }

    /// Copies `size` bytes between buffers.
    pub fn copy(
        &mut self,
        src: &::wgpu::Buffer,
        src_offset: u64,
        dst: &::wgpu::Buffer,
        dst_offset: u64,
        size: u64,
    ) {
        self.ops.push(Op::Copy {
            src: src.clone(),
            src_offset,
            dst: dst.clone(),
            dst_offset,
            size,
        });
    }

    /// Zeroes a buffer.
    pub fn clear(&mut self, buffer: &::wgpu::Buffer) {
        self.ops.push(Op::Clear { buffer: buffer.clone() });
    }

    /// Records the resolve of the timestamps of every pass encoded before it (the end of a
    /// timed commitment).
    pub fn resolve_timestamps(&mut self) {
        self.ops.push(Op::ResolveTimestamps);
    }

    /// Encodes everything into one command buffer and submits it, timing the passes of staged
    /// dispatches if `timer` is recording; `None` if nothing was recorded. (The parameter arena
    /// goes back to the pool at once: a later `write_buffer` to it is ordered after this
    /// submission.)
    pub fn submit(
        self,
        ctx: &Context,
        pipelines: &Pipelines,
        constants: &HashConstants,
        pool: &BufferPool,
        timer: Option<&Timer>,
    ) -> Result<Option<::wgpu::SubmissionIndex>> {
        if self.ops.is_empty() {
            return Ok(None);
        }
        let arena = pool.acquire(
            &ctx.device,
            self.params.len().max(1) as u64,
            ::wgpu::BufferUsages::UNIFORM | ::wgpu::BufferUsages::COPY_DST,
        );
        if !self.params.is_empty() {
            ctx.queue.write_buffer(&arena, 0, &self.params);
        }
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let mut ops = self.ops.iter().peekable();
        while let Some(op) = ops.next() {
            match op {
                Op::Dispatch { stage, .. } => {
                    let pass_stage = *stage;
                    let mut pass = encoder.begin_compute_pass(&::wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: timer.and_then(|t| t.pass(pass_stage)),
                    });
                    let mut next = Some(op);
                    while let Some(Op::Dispatch {
                        dispatched,
                        buffers,
                        params_offset,
                        groups,
                        ..
                    }) = next
                    {
                        let (pipeline, hash) = match dispatched {
                            Dispatched::Kernel(kernel) => {
                                (pipelines.get(*kernel), kernel.constants())
                            },
                            Dispatched::Program(pipeline) => (&**pipeline, None),
                        };
                        let group = bind_group(ctx, &pipeline.layout, &arena, buffers);
                        pass.set_pipeline(&pipeline.pipeline);
                        pass.set_bind_group(0, &group, &[*params_offset]);
                        if let Some(hash) = hash {
                            pass.set_bind_group(1, constants.group(hash), &[]);
                        }
                        pass.dispatch_workgroups(groups.0, groups.1, 1);
                        next = ops.next_if(
                            |op| matches!(op, Op::Dispatch { stage, .. } if *stage == pass_stage),
                        );
                    }
                },
                Op::Copy { src, src_offset, dst, dst_offset, size } => {
                    encoder.copy_buffer_to_buffer(src, *src_offset, dst, *dst_offset, *size);
                },
                Op::Clear { buffer } => encoder.clear_buffer(buffer, 0, None),
                Op::ResolveTimestamps => {
                    if let Some(timer) = timer {
                        timer.encode_resolve(&mut encoder);
                    }
                },
            }
        }
        ctx.submit(encoder.finish()).map(Some)
    }
}

fn bind_group(
    ctx: &Context,
    layout: &::wgpu::BindGroupLayout,
    arena: &::wgpu::Buffer,
    buffers: &[::wgpu::Buffer],
) -> ::wgpu::BindGroup {
    let mut entries = vec![::wgpu::BindGroupEntry {
        binding: 0,
        resource: ::wgpu::BindingResource::Buffer(::wgpu::BufferBinding {
            buffer: arena,
            offset: 0,
            size: ::wgpu::BufferSize::new(PARAMS_BYTES),
        }),
    }];
    for (i, buffer) in buffers.iter().enumerate() {
        entries.push(::wgpu::BindGroupEntry {
            binding: i as u32 + 1,
            resource: buffer.as_entire_binding(),
        });
    }
    ctx.device.create_bind_group(&::wgpu::BindGroupDescriptor {
        label: None,
        layout,
        entries: &entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgpu::kernels::unbound;

    /// A batch with the smallest grid limit wgpu guarantees, recorded without a device.
    fn batch() -> Batch {
        Batch {
            ops: Vec::new(),
            params: Vec::new(),
            align: PARAMS_BYTES,
            max_groups: 65_535,
            stage: None,
            rescue_lanes: RescueLanes::Single,
        }
    }

    #[test]
    fn grids_past_two_dimensions_are_typed_errors() {
        let mut batch = batch();
        let params = [7u32; 4];
        let tile = unbound(Kernel::NttTile);
        batch.dispatch(tile, &params, [], 65_535 * 65_535).unwrap();
        let Some(Op::Dispatch { groups, .. }) = batch.ops.last() else { panic!("no dispatch") };
        assert_eq!(*groups, (65_535, 65_535));
        batch.dispatch(tile, &params, [], 65_536).unwrap();
        let Some(Op::Dispatch { groups, .. }) = batch.ops.last() else { panic!("no dispatch") };
        assert_eq!(*groups, (32_768, 2), "as few rows as fit, each as short as that allows");

        let too_many = batch.dispatch(tile, &params, [], 65_535 * 65_535 + 1);
        assert!(
            matches!(too_many, Err(GpuError::DimensionOverflow { value, .. }) if value == 65_535 * 65_535 + 1)
        );
        let quads = unbound(Kernel::HashRowsQuad(crate::hash::HashFunction::Rpo256));
        let overflowing = batch.dispatch_items(quads, &params, [], u64::MAX / 2);
        assert!(
            matches!(
                overflowing,
                Err(GpuError::DimensionOverflow { what: "invocations of a dispatch", .. })
            ),
            "{overflowing:?}"
        );
        assert_eq!(batch.ops.len(), 2, "refused dispatches record nothing");
    }
}
