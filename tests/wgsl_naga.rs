//! Every composed WGSL module of the wgpu backend parses, validates, and translates to MSL,
//! SPIR-V and HLSL with naga: the kernels are checked for Metal, Vulkan and DX12 without an
//! adapter.
#![cfg(feature = "wgpu")]

use miden_gpu::wgpu::composed_shaders;
use naga::{
    back::{hlsl, msl, spv},
    valid::{
        Capabilities, ModuleInfo, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator,
    },
    Module,
};

/// Parses and validates one module, with 64-bit integers and subgroup operations allowed only
/// where needed.
fn validate(name: &str, source: &str, int64: bool, subgroups: bool) -> (Module, ModuleInfo) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name}: WGSL parse error:\n{}", e.emit_to_string(source)));
    let mut capabilities = Capabilities::empty();
    capabilities.set(Capabilities::SHADER_INT64, int64);
    capabilities.set(Capabilities::SUBGROUP, subgroups);
    let mut validator = Validator::new(ValidationFlags::all(), capabilities);
    if subgroups {
        validator
            .subgroup_stages(ShaderStages::COMPUTE)
            .subgroup_operations(SubgroupOperationSet::all());
    }
    let info = validator
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: validation error:\n{}", e.emit_to_string(source)));
    (module, info)
}

#[test]
fn every_shader_validates_and_translates() {
    let shaders = composed_shaders();
    assert!(shaders.len() >= 8, "expected every module, got {}", shaders.len());
    for shader in &shaders {
        let (module, info) =
            validate(&shader.name, &shader.source, shader.needs_int64, shader.needs_subgroups);
        assert!(!module.entry_points.is_empty(), "{}: no entry point", shader.name);

        let msl_options = msl::Options { lang_version: (2, 3), ..Default::default() };
        msl::write_string(&module, &info, &msl_options, &msl::PipelineOptions::default())
            .unwrap_or_else(|e| panic!("{}: MSL: {e}", shader.name));

        spv::write_vec(&module, &info, &spv::Options::default(), None)
            .unwrap_or_else(|e| panic!("{}: SPIR-V: {e}", shader.name));

        let mut hlsl_source = String::new();
        let hlsl_options =
            hlsl::Options { shader_model: hlsl::ShaderModel::V6_0, ..Default::default() };
        hlsl::Writer::new(&mut hlsl_source, &hlsl_options, &hlsl::PipelineOptions::default())
            .write(&module, &info, None)
            .unwrap_or_else(|e| panic!("{}: HLSL: {e}", shader.name));
    }
}

#[test]
fn portable_shaders_need_no_64_bit_integers() {
    for shader in composed_shaders().iter().filter(|s| !s.needs_int64) {
        validate(&shader.name, &shader.source, false, shader.needs_subgroups);
    }
}

/// The modules without quad entry points need no subgroup operations, and the quad variants
/// exist for RPO and RPX in both arithmetics.
#[test]
fn only_quad_kernels_need_subgroups() {
    let shaders = composed_shaders();
    for shader in shaders.iter().filter(|s| !s.needs_subgroups) {
        validate(&shader.name, &shader.source, shader.needs_int64, false);
        assert!(!shader.source.contains("subgroup"), "{}: uses subgroups", shader.name);
    }
    let quads: Vec<&str> =
        shaders.iter().filter(|s| s.needs_subgroups).map(|s| s.name.as_str()).collect();
    for name in [
        "hash_rows_rpo_quads",
        "hash_rows_rpx_int64_quads",
        "merkle_rpo_int64_quads",
        "merkle_rpx_quads",
    ] {
        assert!(quads.contains(&name), "no {name} among {quads:?}");
    }
}
