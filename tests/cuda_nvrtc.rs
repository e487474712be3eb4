//! Compiles every CUDA kernel with NVRTC, with no GPU needed: for Hopper (`sm_90`) and an older
//! architecture (`sm_80`). Any NVRTC or ptxas diagnostic, warnings included, fails the test.
//!
//! Needs `libnvrtc` on the loader path (`scripts/test.sh` fetches it from the
//! `nvidia-cuda-nvrtc-cu12` wheel on Linux); without it the compilation is reported as ignored,
//! with the reason, unless `MIDEN_GPU_REQUIRE` names `cuda`.

mod common;

use common::device::{tests, DeviceTests};
use miden_gpu::{
    cuda::{compile_for_arch, kernel_source, KERNELS},
    GpuError,
};

fn main() {
    let absent = match compile_for_arch("sm_90") {
        Err(GpuError::BackendUnavailable { reason, .. }) => Some(reason),
        _ => None,
    };
    DeviceTests::new("cuda", absent)
        .on_device(tests![kernels_compile_for_hopper_and_ampere])
        .on_host(tests![source_carries_generated_constants])
        .run()
}

fn kernels_compile_for_hopper_and_ampere() {
    for arch in ["sm_90", "sm_80"] {
        let cubin = compile_for_arch(arch)
            .unwrap_or_else(|e| panic!("CUDA kernels failed to compile for {arch}: {e}"));
        // an ELF image that names every kernel the backend loads
        assert_eq!(&cubin[..4], b"\x7fELF", "{arch}: NVRTC did not return a CUBIN");
        for kernel in KERNELS {
            assert!(
                cubin.windows(kernel.len()).any(|w| w == kernel.as_bytes()),
                "{arch}: kernel `{kernel}` missing from the CUBIN"
            );
        }
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
}
