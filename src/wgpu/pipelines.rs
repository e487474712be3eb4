//! The compute pipelines, made once at start-up: one per kernel, with explicit bind group
//! layouts (a composition program, generated per AIR shape, is made at its first use the same
//! way: `composition`). Group 0 binding 0 of every kernel is its parameter block (a uniform with a dynamic
//! offset into one arena per submission); bindings 1.. are storage buffers; hashing kernels
//! of an algebraic hash also bind its constants as group 1.

use std::collections::HashMap;

use super::shaders::{Arithmetic, Module, HASHES, QUAD_HASHES};
use crate::{committer::grind::GRIND_HASHES, hash::HashFunction};

/// Bytes of every kernel's parameter block (the largest WGSL parameter struct, rounded up).
pub(super) const PARAMS_BYTES: u64 = 128;

// KERNELS
// ================================================================================================

/// Read-only or read-write access of a storage binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    Read,
    ReadWrite,
}

/// One compute entry point; dispatched through its typed constructor in `kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kernel {
    /// One radix-2 DIF stage over the whole batch.
    NttStage,
    /// Two radix-2 DIF stages over the whole batch in one pass.
    NttStagePair,
    /// The small DIF stages in workgroup memory.
    NttTile,
    /// Coset scaling (and folding) of coefficients before a forward NTT.
    CosetScale,
    /// Bit reversal and scaling after an inverse NTT.
    FinishInterpolation,
    /// Transposition of evaluations into row-major LDE rows.
    ToRows,
    /// Row hashes into leaves.
    HashRows(HashFunction),
    /// One Merkle level.
    MergeNodes(HashFunction),
    /// Whole-row hashes into leaves, a quad of a subgroup per row (RPO, RPX).
    HashRowsQuad(HashFunction),
    /// One Merkle level, a quad of a subgroup per parent (RPO, RPX).
    MergeNodesQuad(HashFunction),
    /// Coset evaluations into the first FRI layer's rows.
    FriRows,
    /// Folding of FRI layer rows into the next layer.
    FriFold,
    /// One column added into the DEEP combination.
    DeepCombine,
    /// Blocks of one column at the DEEP composition's out-of-domain points.
    DeepEvaluate,
    /// A batch of proof-of-work nonces on a sponge coin (RPO, RPX).
    Grind(HashFunction),
}

impl Kernel {
    /// Every kernel; the quad kernels only if `quads`.
    pub(super) fn all(quads: bool) -> Vec<Kernel> {
        let mut kernels = vec![
            Kernel::NttStage,
            Kernel::NttStagePair,
            Kernel::NttTile,
            Kernel::CosetScale,
            Kernel::FinishInterpolation,
            Kernel::ToRows,
        ];
        kernels.extend(HASHES.map(Kernel::HashRows));
        kernels.extend(HASHES.map(Kernel::MergeNodes));
        kernels.extend([
            Kernel::FriRows,
            Kernel::FriFold,
            Kernel::DeepCombine,
            Kernel::DeepEvaluate,
        ]);
        kernels.extend(GRIND_HASHES.map(Kernel::Grind));
        if quads {
            kernels.extend(QUAD_HASHES.map(Kernel::HashRowsQuad));
            kernels.extend(QUAD_HASHES.map(Kernel::MergeNodesQuad));
        }
        kernels
    }

    /// Invocations per work item (a row, a parent): 4 for the quad kernels, else 1.
    pub fn lanes(self) -> u64 {
        match self {
            Kernel::HashRowsQuad(_) | Kernel::MergeNodesQuad(_) => 4,
            _ => 1,
        }
    }

    /// The shader module that holds the entry point.
    pub(super) fn module(self) -> Module {
        match self {
            Kernel::NttStage | Kernel::NttStagePair | Kernel::NttTile => Module::Ntt,
            Kernel::CosetScale => Module::Coset,
            Kernel::FinishInterpolation => Module::Interpolate,
            Kernel::ToRows => Module::Rows,
            Kernel::HashRows(hash) | Kernel::HashRowsQuad(hash) => Module::HashRows(hash),
            Kernel::MergeNodes(hash) | Kernel::MergeNodesQuad(hash) => Module::Merkle(hash),
            Kernel::FriRows | Kernel::FriFold => Module::Fri,
            Kernel::DeepCombine | Kernel::DeepEvaluate => Module::Deep,
            Kernel::Grind(hash) => Module::Grind(hash),
        }
    }

    /// The entry point's name in WGSL.
    pub(super) fn entry_point(self) -> &'static str {
        match self {
            Kernel::NttStage => "ntt_stage",
            Kernel::NttStagePair => "ntt_stage_pair",
            Kernel::NttTile => "ntt_tile",
            Kernel::CosetScale => "coset_scale",
            Kernel::FinishInterpolation => "finish_interpolation",
            Kernel::ToRows => "to_rows",
            Kernel::HashRows(_) => "hash_rows",
            Kernel::MergeNodes(_) => "merge_nodes",
            Kernel::HashRowsQuad(_) => "hash_rows_quad",
            Kernel::MergeNodesQuad(_) => "merge_nodes_quad",
            Kernel::FriRows => "fri_rows",
            Kernel::FriFold => "fri_fold",
            Kernel::DeepCombine => "deep_combine",
            Kernel::DeepEvaluate => "deep_evaluate",
            Kernel::Grind(_) => "grind",
        }
    }

    /// The storage bindings 1, 2, ... in order (as many as its typed constructor in `kernels`
    /// binds, which a test checks with the WGSL).
    pub(super) fn storage(self) -> &'static [Access] {
        use Access::*;
        match self {
            Kernel::NttStage | Kernel::NttStagePair | Kernel::NttTile => &[ReadWrite, Read],
            Kernel::CosetScale | Kernel::FinishInterpolation | Kernel::FriFold => {
                &[Read, ReadWrite, Read]
            },
            Kernel::ToRows | Kernel::FriRows => &[Read, ReadWrite],
            Kernel::HashRows(_) => &[Read, ReadWrite, ReadWrite],
            Kernel::HashRowsQuad(_) => &[Read, ReadWrite, ReadWrite, ReadWrite],
            Kernel::MergeNodes(_) | Kernel::MergeNodesQuad(_) => &[Read, Read, ReadWrite],
            Kernel::DeepCombine | Kernel::DeepEvaluate => &[Read, Read, Read, ReadWrite],
            Kernel::Grind(_) => &[ReadWrite],
        }
    }

    /// The hash whose constants the kernel binds as group 1.
    pub fn constants(self) -> Option<HashFunction> {
        match self {
            Kernel::HashRows(hash)
            | Kernel::MergeNodes(hash)
            | Kernel::HashRowsQuad(hash)
            | Kernel::MergeNodesQuad(hash)
            | Kernel::Grind(hash)
                if hash.is_algebraic() =>
            {
                Some(hash)
            },
            _ => None,
        }
    }
}

// PIPELINES
// ================================================================================================

/// A kernel's pipeline and the layout of its group 0.
pub(super) struct Pipeline {
    pub pipeline: ::wgpu::ComputePipeline,
    pub layout: ::wgpu::BindGroupLayout,
}

/// Every pipeline, and the layout of the hash constants group.
pub(super) struct Pipelines {
    kernels: HashMap<Kernel, Pipeline>,
    /// Layout of group 1 (the uniform of a hash function's constants).
    pub constants_layout: ::wgpu::BindGroupLayout,
}

impl Pipelines {
    /// Compiles every module once and makes every pipeline, the quad kernels too if `quads`
    /// (the device has subgroup operations).
    pub fn new(device: &::wgpu::Device, arithmetic: Arithmetic, quads: bool) -> Self {
        let modules: HashMap<Module, ::wgpu::ShaderModule> = Module::all()
            .into_iter()
            .map(|module| {
                let source = module.source(arithmetic, quads);
                (module, shader_module(device, &module.name(), source))
            })
            .collect();
        let constants_layout =
            device.create_bind_group_layout(&::wgpu::BindGroupLayoutDescriptor {
                label: Some("hash constants"),
                entries: &[::wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: ::wgpu::ShaderStages::COMPUTE,
                    ty: ::wgpu::BindingType::Buffer {
                        ty: ::wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }],
            });
        let kernels = Kernel::all(quads)
            .into_iter()
            .map(|kernel| {
                let pipeline =
                    make_pipeline(device, kernel, &modules[&kernel.module()], &constants_layout);
                (kernel, pipeline)
            })
            .collect();
        Self { kernels, constants_layout }
    }

    /// The pipeline of `kernel`.
    pub fn get(&self, kernel: Kernel) -> &Pipeline {
        &self.kernels[&kernel]
    }
}

/// The shader module of WGSL `source` (composed from the files of `wgsl/`), labelled `label`.
pub(super) fn shader_module(
    device: &::wgpu::Device,
    label: &str,
    source: String,
) -> ::wgpu::ShaderModule {
    let descriptor = ::wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: ::wgpu::ShaderSource::Wgsl(source.into()),
    };
    // Every check stays on (bounds, guarded integer division) except the injected loop
    // counters, which keep drivers from unrolling the permutation loops.
    let checks = ::wgpu::ShaderRuntimeChecks {
        force_loop_bounding: false,
        ..::wgpu::ShaderRuntimeChecks::checked()
    };
    // SAFETY: `force_loop_bounding` may be off only for shaders without infinite loops. Every
    // loop in wgsl/ counts a variable up to a bound fixed before the loop starts (a constant, a
    // parameter, or the work left), so each terminates.
    unsafe { device.create_shader_module_trusted(descriptor, checks) }
}

fn make_pipeline(
    device: &::wgpu::Device,
    kernel: Kernel,
    module: &::wgpu::ShaderModule,
    constants_layout: &::wgpu::BindGroupLayout,
) -> Pipeline {
    let constants = kernel.constants().map(|_| constants_layout);
    entry_pipeline(device, kernel.entry_point(), kernel.storage(), module, constants)
}

/// The pipeline of entry point `entry_point` of `module`, binding the parameter block, then
/// storage buffers of `storage`'s accesses, and (where given) the hash constants as group 1.
pub(super) fn entry_pipeline(
    device: &::wgpu::Device,
    entry_point: &str,
    storage: &[Access],
    module: &::wgpu::ShaderModule,
    constants_layout: Option<&::wgpu::BindGroupLayout>,
) -> Pipeline {
    let mut entries = vec![::wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: ::wgpu::ShaderStages::COMPUTE,
        ty: ::wgpu::BindingType::Buffer {
            ty: ::wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: ::wgpu::BufferSize::new(PARAMS_BYTES),
        },
        count: None,
    }];
    for (i, access) in storage.iter().enumerate() {
        entries.push(::wgpu::BindGroupLayoutEntry {
            binding: i as u32 + 1,
            visibility: ::wgpu::ShaderStages::COMPUTE,
            ty: ::wgpu::BindingType::Buffer {
                ty: ::wgpu::BufferBindingType::Storage { read_only: *access == Access::Read },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let layout = device.create_bind_group_layout(&::wgpu::BindGroupLayoutDescriptor {
        label: Some(entry_point),
        entries: &entries,
    });
    let mut groups = vec![Some(&layout)];
    if let Some(constants_layout) = constants_layout {
        groups.push(Some(constants_layout));
    }
    let pipeline_layout = device.create_pipeline_layout(&::wgpu::PipelineLayoutDescriptor {
        label: Some(entry_point),
        bind_group_layouts: &groups,
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&::wgpu::ComputePipelineDescriptor {
        label: Some(entry_point),
        layout: Some(&pipeline_layout),
        module,
        entry_point: Some(entry_point),
        compilation_options: Default::default(),
        cache: None,
    });
    Pipeline { pipeline, layout }
}
