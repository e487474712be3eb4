//! Compiles every CUDA kernel with NVRTC, with no GPU needed: for Hopper (`sm_90`) and an older
//! architecture (`sm_80`), with the default options and with the tuning options that change the
//! source. Any NVRTC or ptxas diagnostic, warnings included, fails the test.
//!
//! Needs `libnvrtc` on the loader path (`scripts/test.sh` fetches it from the
//! `nvidia-cuda-nvrtc-cu12` wheel on Linux); without it the compilation is reported as ignored,
//! with the reason, unless `MIDEN_GPU_REQUIRE` names `cuda`.

mod common;

use common::device::{tests, DeviceTests};
use miden_gpu::{
    cuda::{
        compile_for_arch, kernel_source, kernel_source_with, CudaOptions, COMPOSITION_KERNELS,
        KERNELS,
    },
    GpuError, RescueLanes,
};

fn main() {
    let absent = match compile_for_arch("sm_90", &CudaOptions::default()) {
        Err(GpuError::BackendUnavailable { reason, .. }) => Some(reason),
        _ => None,
    };
    DeviceTests::new("cuda", absent)
        .on_device(tests![kernels_compile_for_hopper_and_ampere, tuned_kernels_compile])
        .on_host(tests![source_carries_generated_constants, options_out_of_range_are_refused])
        .run()
}

fn kernels_compile_for_hopper_and_ampere() {
    for arch in ["sm_90", "sm_80"] {
        check_compiles(arch, &CudaOptions::default());
    }
}

/// The options that change the source (one thread per Rescue permutation, other hashing blocks
/// per SM) compile too, each into a CUBIN of its own.
fn tuned_kernels_compile() {
    let default = compile_for_arch("sm_90", &CudaOptions::default()).expect("default kernels");
    for options in [
        CudaOptions { rescue_lanes: RescueLanes::Single, ..CudaOptions::default() },
        CudaOptions { hash_min_blocks: Some(4), ..CudaOptions::default() },
    ] {
        let cubin = check_compiles("sm_90", &options);
        assert!(cubin != default, "{options:?}: the cached default CUBIN came back");
    }
    // options that leave the source alone share its CUBIN
    let synced = CudaOptions { sync_each_launch: true, ..CudaOptions::default() };
    assert!(std::sync::Arc::ptr_eq(&compile_for_arch("sm_90", &synced).unwrap(), &default));
}

/// Compiles the kernels for `arch` with `options` into an ELF image that names every kernel the
/// backend loads.
fn check_compiles(arch: &str, options: &CudaOptions) -> std::sync::Arc<Vec<u8>> {
    let cubin = compile_for_arch(arch, options)
        .unwrap_or_else(|e| panic!("CUDA kernels failed to compile for {arch} ({options:?}): {e}"));
    assert_eq!(&cubin[..4], b"\x7fELF", "{arch}: NVRTC did not return a CUBIN");
    // the composition kernels are in the programs compiled per AIR (see tests/constraints.rs)
    for kernel in KERNELS.iter().filter(|kernel| !COMPOSITION_KERNELS.contains(kernel)) {
        assert!(
            cubin.windows(kernel.len()).any(|w| w == kernel.as_bytes()),
            "{arch}: kernel `{kernel}` missing from the CUBIN"
        );
    }
    cubin
}

fn options_out_of_range_are_refused() {
    for blocks in [0, 17] {
        let options = CudaOptions { hash_min_blocks: Some(blocks), ..CudaOptions::default() };
        let err = compile_for_arch("sm_90", &options).err();
        assert!(matches!(err, Some(GpuError::BackendUnavailable { .. })), "{blocks}: {err:?}");
    }
}

fn source_carries_generated_constants() {
    let source = kernel_source();
    for needle in [
        "#define RESCUE_MDS_ROW {7u, 23u, 8u, 26u, 13u, 10u, 9u, 7u, 6u, 22u, 21u, 8u}",
        "__constant__ u64 ARK1[84]",
        "__constant__ u64 ARK2[84]",
        "SPONGE_LEN[8]",
    ] {
        assert!(source.contains(needle), "generated prelude lacks `{needle}`");
    }
    for (options, needles) in [
        (CudaOptions::default(), ["#define RESCUE_LANES 4", "#define HASH_MIN_BLOCKS 3"]),
        (
            CudaOptions {
                rescue_lanes: RescueLanes::Single,
                hash_min_blocks: Some(5),
                ..CudaOptions::default()
            },
            ["#define RESCUE_LANES 1", "#define ROW_QUAD_MIN_BLOCKS 5"],
        ),
    ] {
        let source = kernel_source_with(&options);
        for needle in needles {
            assert!(source.contains(needle), "{options:?}: the source lacks `{needle}`");
        }
    }
}
