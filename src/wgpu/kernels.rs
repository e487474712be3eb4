//! Every kernel dispatch of the backend, typed: one constructor per entry point, returning a
//! [`TypedKernel`] that knows the kernel's parameter struct and its number of storage bindings.
//! [`super::batch::Batch::dispatch`] takes only a typed kernel, the parameters as that struct and
//! exactly that many buffers, so a dispatch with the wrong parameter struct or buffer count does
//! not compile. No other module makes a typed kernel.
//!
//! The binding counts are written once, in [`typed_kernels!`] below; a unit test parses every
//! composed shader with naga and checks each entry point's bindings (the parameter uniform,
//! then the storage buffers with their access, and the hash constants' group) against the
//! typed kernel and the pipeline layout made for it, so a drift between the Rust and WGSL sides
//! fails without a device. The parameter structs are defined here too, below the kernels that take
//! them, and checked against their WGSL twins by `params_layout`.

use std::{marker::PhantomData, sync::Arc};

use bytemuck::{Pod, Zeroable};

use super::pipelines::{Access, Kernel, Pipeline};
use crate::hash::HashFunction;

// TYPED KERNEL
// ================================================================================================

/// A kernel whose parameter block is a `P` and which binds `N` storage buffers (bindings 1 to
/// `N` of group 0).
pub(super) struct TypedKernel<P, const N: usize> {
    kernel: Kernel,
    _params: PhantomData<fn(&P)>,
}

impl<P, const N: usize> Clone for TypedKernel<P, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P, const N: usize> Copy for TypedKernel<P, N> {}

impl<P, const N: usize> TypedKernel<P, N> {
    const fn new(kernel: Kernel) -> Self {
        Self { kernel, _params: PhantomData }
    }

    /// The entry point (its pipeline, its lanes, its constants).
    pub fn kernel(self) -> Kernel {
        self.kernel
    }
}

/// A kernel typed as binding nothing, with an arbitrary parameter block: recording tests
/// without a device (which has no buffers to bind).
#[cfg(test)]
pub(super) fn unbound(kernel: Kernel) -> TypedKernel<[u32; 4], 0> {
    TypedKernel::new(kernel)
}

// KERNELS
// ================================================================================================

/// `_`, for a variant's field in a pattern.
#[cfg(test)]
macro_rules! wildcard {
    ($arg:ident) => {
        _
    };
}

/// The constructors of the typed kernels, `name(args) = Kernel::Variant(args): Params, N;`,
/// and the binding count of every kernel for the test ([`storage_bindings`]).
macro_rules! typed_kernels {
    ($(
        $(#[$doc:meta])*
        $name:ident($($arg:ident: $arg_ty:ty)?) = $variant:path: $params:ty, $bindings:literal;
    )*) => {
        $(
            $(#[$doc])*
            pub(super) fn $name($($arg: $arg_ty)?) -> TypedKernel<$params, $bindings> {
                TypedKernel::new($variant $(($arg))?)
            }
        )*

        /// The storage bindings of `kernel`'s typed constructor.
        #[cfg(test)]
        fn storage_bindings(kernel: Kernel) -> usize {
            match kernel {
                $($variant $((wildcard!($arg)))? => $bindings,)*
            }
        }
    };
}

typed_kernels! {
    /// One radix-2 DIF stage: data, twiddles.
    ntt_stage() = Kernel::NttStage: NttParams, 2;
    /// Two radix-2 DIF stages in one pass: data, twiddles.
    ntt_stage_pair() = Kernel::NttStagePair: NttParams, 2;
    /// The small DIF stages in workgroup memory: data, twiddles.
    ntt_tile() = Kernel::NttTile: NttParams, 2;
    /// Coset scaling of coefficients: source, destination, powers.
    coset_scale() = Kernel::CosetScale: CosetParams, 3;
    /// Bit reversal and scaling after an inverse NTT: source, destination, powers.
    finish_interpolation() = Kernel::FinishInterpolation: InterpolateParams, 3;
    /// Evaluations into row-major LDE rows: source, destination.
    to_rows() = Kernel::ToRows: RowsParams, 2;
    /// Row hashes into leaves: rows, leaves, saved sponges.
    hash_rows(hash: HashFunction) = Kernel::HashRows: HashRowsParams, 3;
    /// Whole-row hashes on quads: rows (or coset evaluations), leaves, saved sponges, copied
    /// rows.
    hash_rows_quad(hash: HashFunction) = Kernel::HashRowsQuad: HashRowsParams, 4;
    /// One Merkle level: left children, right children, parents.
    merge_nodes(hash: HashFunction) = Kernel::MergeNodes: MergeParams, 3;
    /// One Merkle level on quads: left children, right children, parents.
    merge_nodes_quad(hash: HashFunction) = Kernel::MergeNodesQuad: MergeParams, 3;
    /// Coset evaluations into the first FRI layer's rows: source, destination.
    fri_rows() = Kernel::FriRows: FriParams, 2;
    /// FRI layer rows folded into the next layer: source, destination, powers.
    fri_fold() = Kernel::FriFold: FriParams, 3;
    /// One column into the DEEP combination: three component sources, the sum.
    deep_combine() = Kernel::DeepCombine: DeepParams, 4;
    /// Blocks of one column at the out-of-domain points: three component sources, the values.
    deep_evaluate() = Kernel::DeepEvaluate: DeepParams, 4;
    /// A batch of proof-of-work nonces: the nonce found.
    grind(hash: HashFunction) = Kernel::Grind: GrindParams, 1;
}

// PROGRAMS
// ================================================================================================

/// A pipeline made after start-up (a program generated per AIR shape) whose parameter block is a
/// `P` and which binds `N` storage buffers, as a [`TypedKernel`].
pub(super) struct TypedProgram<P, const N: usize> {
    pipeline: Arc<Pipeline>,
    _params: PhantomData<fn(&P)>,
}

impl<P, const N: usize> TypedProgram<P, N> {
    /// The pipeline to dispatch.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.pipeline.clone()
    }
}

/// The storage bindings of a composition program (`composition.wgsl`): the main and auxiliary
/// columns' coset evaluations, the parameter words, the composition.
pub(super) const COMPOSITION_STORAGE: [Access; 4] =
    [Access::Read, Access::Read, Access::Read, Access::ReadWrite];

/// A composition program's pipeline, made with [`COMPOSITION_STORAGE`], typed.
pub(super) fn composition_program(
    pipeline: Arc<Pipeline>,
) -> TypedProgram<CompositionParams, { COMPOSITION_STORAGE.len() }> {
    TypedProgram { pipeline, _params: PhantomData }
}

/// `CompositionParams` of composition.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
pub(super) struct CompositionParams {
    pub(super) count: u32,
    pub(super) log_n: u32,
    pub(super) ce_blowup: u32,
    pub(super) coset: u32,
    pub(super) out_stride: u32,
}

// TESTS
// ================================================================================================

#[cfg(test)]
mod tests {
    use naga::{
        valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator},
        AddressSpace, StorageAccess,
    };

    use super::*;
    use crate::wgpu::{pipelines::Access, shaders::Arithmetic};

    /// The group-0 and group-1 bindings `kernel`'s entry point uses in its module's source:
    /// (group 0 bindings in order with their address space, whether it uses group 1).
    fn used_bindings(kernel: Kernel) -> (Vec<(u32, AddressSpace)>, bool) {
        let quads = kernel.lanes() > 1;
        let source = kernel.module().source(Arithmetic::U32, quads);
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{:?}: {}", kernel, e.emit_to_string(&source)));
        let mut validator = Validator::new(ValidationFlags::all(), Capabilities::all());
        validator
            .subgroup_stages(ShaderStages::COMPUTE)
            .subgroup_operations(SubgroupOperationSet::all());
        let info = validator.validate(&module).expect("the composed shader validates");
        let index = module
            .entry_points
            .iter()
            .position(|entry| entry.name == kernel.entry_point())
            .unwrap_or_else(|| panic!("{kernel:?}: no entry point {}", kernel.entry_point()));
        let uses = info.get_entry_point(index);
        let mut group0 = Vec::new();
        let mut group1 = false;
        for (handle, global) in module.global_variables.iter() {
            let Some(binding) = &global.binding else { continue };
            if uses[handle].is_empty() {
                continue;
            }
            match binding.group {
                0 => group0.push((binding.binding, global.space)),
                1 => group1 = true,
                group => panic!("{kernel:?}: binds group {group}"),
            }
        }
        group0.sort_by_key(|&(binding, _)| binding);
        (group0, group1)
    }

    #[test]
    fn every_kernel_binds_what_its_wgsl_entry_point_declares() {
        let mut failures = Vec::new();
        for kernel in Kernel::all(true) {
            let storage = kernel.storage();
            if storage_bindings(kernel) != storage.len() {
                failures.push(format!(
                    "{kernel:?}: typed with {} storage bindings, laid out with {}",
                    storage_bindings(kernel),
                    storage.len()
                ));
            }
            let (group0, group1) = used_bindings(kernel);
            let mut expected = vec![(0, AddressSpace::Uniform)];
            expected.extend(storage.iter().zip(1..).map(|(access, binding)| {
                let access = match access {
                    Access::Read => StorageAccess::LOAD,
                    Access::ReadWrite => StorageAccess::LOAD | StorageAccess::STORE,
                };
                (binding, AddressSpace::Storage { access })
            }));
            if group0 != expected {
                failures
                    .push(format!("{kernel:?}: WGSL binds {group0:?}, the layout {expected:?}"));
            }
            if group1 != kernel.constants().is_some() {
                failures.push(format!("{kernel:?}: WGSL uses the constants group: {group1}"));
            }
        }
        assert!(failures.is_empty(), "kernel bindings differ:\n{}", failures.join("\n"));
    }
}

// PARAMETER BLOCKS
// ================================================================================================

/// `DeepParams` of deep.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
pub(super) struct DeepParams {
    pub(super) count: u32,
    pub(super) first: u32,
    pub(super) src: [u32; 3],
    pub(super) col_degree: u32,
    pub(super) degree: u32,
    pub(super) init: u32,
    pub(super) k: [[u32; 2]; 3],
    pub(super) x1: [[u32; 2]; 3],
    pub(super) block_len: u32,
    pub(super) _pad: u32,
}

/// `FriParams` of fri.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
pub(super) struct FriParams {
    pub(super) count: u32,
    pub(super) src_offset: u32,
    pub(super) dst_offset: u32,
    pub(super) dst_stride: u32,
    pub(super) folding: u32,
    pub(super) degree: u32,
    pub(super) first: u32,
    pub(super) log_unit: u32,
    pub(super) slot_step: u32,
    pub(super) rows: u32,
    pub(super) domain_mask: u32,
    pub(super) root_table: u32,
    pub(super) alpha: [[u32; 2]; 3],
    pub(super) f_inv: [u32; 2],
}

/// `GrindParams` of grind.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct GrindParams {
    pub(super) state: [[u32; 4]; 6],
    pub(super) start_lo: u32,
    pub(super) start_hi: u32,
    pub(super) count: u32,
    pub(super) factor: u32,
}

/// `HashRowsParams` of hash_rows.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct HashRowsParams {
    pub(super) num_rows: u32,
    pub(super) row_width: u32,
    pub(super) num_cols: u32,
    pub(super) partition_size: u32,
    pub(super) src_offset: u32,
    pub(super) dst_offset: u32,
    pub(super) first_event: u32,
    pub(super) num_events: u32,
    pub(super) total_events: u32,
    pub(super) copy_offset: u32,
    pub(super) copy_rows: u32,
    pub(super) coset_rows: u32,
    pub(super) log_len: u32,
    pub(super) row0: u32,
}

/// `InterpolateParams` of interpolate.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct InterpolateParams {
    pub(super) count: u32,
    pub(super) log_len: u32,
    pub(super) src_offset: u32,
    pub(super) src_stride: u32,
    pub(super) log_src_len: u32,
    pub(super) dst_offset: u32,
    pub(super) first: u32,
    pub(super) offset_table: u32,
    pub(super) factor_lo: u32,
    pub(super) factor_hi: u32,
}

/// `CosetParams` of coset.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct CosetParams {
    pub(super) count: u32,
    pub(super) log_len: u32,
    pub(super) src_offset: u32,
    pub(super) src_stride: u32,
    pub(super) dst_offset: u32,
    pub(super) exp_offset: u32,
    pub(super) coset: u32,
    pub(super) accumulate: u32,
    pub(super) domain_mask: u32,
    pub(super) generator_table: u32,
    pub(super) root_table: u32,
}

/// `RowsParams` of rows.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct RowsParams {
    pub count: u32,
    pub num_cols: u32,
    pub src_offset: u32,
    pub log_len: u32,
    pub row0: u32,
    pub row_width: u32,
    pub col0: u32,
    pub dst_offset: u32,
}

/// `MergeParams` of merkle.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct MergeParams {
    pub(super) count: u32,
    pub(super) log_group: u32,
    pub(super) left_offset: u32,
    pub(super) right_offset: u32,
    pub(super) dst_offset: u32,
}

/// `NttParams` of ntt.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct NttParams {
    pub(super) offset: u32,
    pub(super) count: u32,
    pub(super) log_half: u32,
}
