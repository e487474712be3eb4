//! Compiles every CUDA kernel with NVRTC, with no GPU needed: for Hopper (`sm_90`, what the
//! backend uses on H100/H200) and an older architecture (`sm_80`). Any NVRTC or ptxas
//! diagnostic, warnings included, fails the test.
//!
//! Needs `libnvrtc` on the loader path (e.g. from the `nvidia-cuda-nvrtc-cu12` wheel, see
//! notes/cuda.md); without it the test fails unless `MIDEN_GPU_SKIP_CUDA=1`.

#![cfg(feature = "cuda")]

use miden_gpu::{
    cuda::{compile_for_arch, kernel_source, KERNELS},
    GpuError,
};

fn compile(arch: &str) -> Option<Vec<u8>> {
    match compile_for_arch(arch) {
        Ok(cubin) => Some(cubin.to_vec()),
        Err(GpuError::BackendUnavailable { reason, .. })
            if std::env::var("MIDEN_GPU_SKIP_CUDA").is_ok_and(|v| v == "1") =>
        {
            eprintln!("skipping NVRTC compilation: {reason}");
            None
        }
        Err(e) => panic!("CUDA kernels failed to compile for {arch}: {e}"),
    }
}

#[test]
fn kernels_compile_for_hopper_and_ampere() {
    for arch in ["sm_90", "sm_80"] {
        let Some(cubin) = compile(arch) else { return };
        // an ELF image that names every kernel the backend loads
        assert_eq!(
            &cubin[..4],
            b"\x7fELF",
            "{arch}: NVRTC did not return a CUBIN"
        );
        for kernel in KERNELS {
            assert!(
                cubin.windows(kernel.len()).any(|w| w == kernel.as_bytes()),
                "{arch}: kernel `{kernel}` missing from the CUBIN"
            );
        }
    }
}

#[test]
fn source_carries_generated_constants() {
    let source = kernel_source();
    for needle in [
        "#define RESCUE_MDS {7u, 23u, 8u",
        "__constant__ u64 ARK1[84]",
        "__constant__ u64 ARK2[84]",
        "SPONGE_LEN[8]",
    ] {
        assert!(
            source.contains(needle),
            "generated prelude lacks `{needle}`"
        );
    }
}
