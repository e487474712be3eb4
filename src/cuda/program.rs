//! The CUDA program: kernel sources embedded in the crate, a prelude of constants generated from
//! miden-crypto, and NVRTC compilation to a CUBIN for the GPU present, cached per process.
//!
//! No `nvcc` at build time: the sources travel in the crate (`include_str!`) and NVRTC compiles
//! them at first use for the device's own architecture (`sm_90` on Hopper), so the kernels use
//! that architecture's instructions. A warm prover pays the compilation once per architecture.

use std::{
    collections::HashMap,
    ffi::{CStr, CString},
    fmt::Write,
    sync::{Arc, Mutex, OnceLock},
};

use cudarc::nvrtc::sys as nvrtc;
use miden_crypto::{
    hash::{poseidon2::Poseidon2, rpo::Rpo256, rpx::Rpx256},
    Felt,
};

use super::{options::CudaOptions, status::unavailable};
use crate::{
    backend::Backend,
    error::{DeviceFailure, DeviceStatus, GpuError},
    hash::{blake3_tables, HashFunction},
};

// The kernels hold Poseidon2's state in `STATE_WIDTH` (12) registers.
const _: () =
    assert!(Poseidon2::STATE_WIDTH == 12, "the CUDA kernels assume a Poseidon2 width of 12");

/// The hash functions the CUDA kernels implement.
pub(super) const HASHES: [HashFunction; 5] = HashFunction::ALL;

/// Threads per block of the hashing and Merkle kernels (the kernels' `__launch_bounds__`).
pub(super) const HASH_BLOCK: u32 = 128;

/// Threads of the one block that builds a tree's top levels (`merkle_top_*`, its
/// `__launch_bounds__`): every level whose launch would run at most this many threads.
pub(super) const MERKLE_TOP_BLOCK: u32 = 512;

/// Threads per block of the NTT passes (the kernel's `__launch_bounds__`).
pub(super) const NTT_BLOCK: u32 = 256;

/// log2 of the largest NTT tile a block holds in shared memory (`NTT_TILE_LOG` in ntt.cu).
pub(super) const NTT_TILE_LOG: u32 = 12;

/// The whole-row RPO/RPX kernels' minimum resident blocks per SM (the second
/// `__launch_bounds__` argument) without [`CudaOptions::hash_min_blocks`]: 8 on quads of lanes
/// (at most 64 registers a thread, which holds a triple of the state), the fastest of the values
/// around it when measured.
const ROW_QUAD_MIN_BLOCKS: u32 = 8;

/// The other hashing and Merkle kernels' minimum resident blocks per SM without
/// [`CudaOptions::hash_min_blocks`]: 3 leaves them up to 168 registers, the whole state of a
/// permutation in one thread; asking for more caps their registers lower, which measured slower.
const OTHER_HASH_MIN_BLOCKS: u32 = 3;

/// The Poseidon2 row-hashing kernels' minimum resident blocks per SM without
/// [`CudaOptions::hash_min_blocks`]: at 3 they took 90 registers and filled 29 % of the warp
/// slots; 5 measured fastest of 3 to 8 on an H100 (858 against 817 M permutations/s; the Merkle
/// levels keep 3, which measured fastest for them).
const POSEIDON2_ROWS_MIN_BLOCKS: u32 = 5;

const FIELD: &str = include_str!("../../cuda/field.cuh");
const EXT: &str = include_str!("../../cuda/ext.cuh");
const RESCUE: &str = include_str!("../../cuda/rescue.cuh");
const POSEIDON2: &str = include_str!("../../cuda/poseidon2.cuh");
const BLAKE3: &str = include_str!("../../cuda/blake3.cuh");
const NTT: &str = include_str!("../../cuda/ntt.cu");
const HASH: &str = include_str!("../../cuda/hash.cu");
const FRI: &str = include_str!("../../cuda/fri.cu");
const DEEP: &str = include_str!("../../cuda/deep.cu");
const COMPOSITION: &str = include_str!("../../cuda/composition.cu");

/// The sources that define kernels, by file name (for the signature test of `kernels`).
#[cfg(test)]
pub(super) const KERNEL_FILES: [(&str, &str); 5] = [
    ("ntt.cu", NTT),
    ("hash.cu", HASH),
    ("fri.cu", FRI),
    ("deep.cu", DEEP),
    ("composition.cu", COMPOSITION),
];

// SOURCE
// ================================================================================================

/// The complete CUDA source the backend compiles with the default options (see
/// [`kernel_source_with`]).
pub fn kernel_source() -> String {
    kernel_source_with(&CudaOptions::default())
}

/// The complete CUDA source the backend compiles with `options` (their rescue lanes and hashing
/// blocks per SM): field and extension arithmetic, the generated constants, the Rescue and
/// Poseidon2 permutations, BLAKE3, the NTT, hashing, FRI and DEEP kernels, in dependency order.
pub fn kernel_source_with(options: &CudaOptions) -> String {
    let mut source = String::with_capacity(
        FIELD.len()
            + EXT.len()
            + RESCUE.len()
            + POSEIDON2.len()
            + BLAKE3.len()
            + NTT.len()
            + HASH.len()
            + FRI.len()
            + DEEP.len()
            + 16384,
    );
    source.push_str(FIELD);
    source.push_str(EXT);
    source.push_str(&prelude(options));
    source.push_str(RESCUE);
    source.push_str(POSEIDON2);
    source.push_str(BLAKE3);
    source.push_str(NTT);
    source.push_str(HASH);
    source.push_str(FRI);
    source.push_str(DEEP);
    source
}

/// Constants generated from miden-crypto (never retyped): the MDS matrix, the Rescue and
/// Poseidon2 round constants and Poseidon2's internal diagonal in Montgomery form, Poseidon2's
/// round counts, the Montgomery forms of 0..7 for the sponge's length word; then BLAKE3's; and
/// the tuning `options` choose (lanes per Rescue permutation, hashing blocks per SM).
fn prelude(options: &CudaOptions) -> String {
    // RPX shares RPO's MDS matrix and round constants; fail loudly if a release ever splits them.
    assert!(
        Rpo256::MDS == Rpx256::MDS && Rpo256::ARK1 == Rpx256::ARK1 && Rpo256::ARK2 == Rpx256::ARK2,
        "RPO and RPX constants differ: the CUDA kernels assume shared tables"
    );
    let mut out =
        String::from("\n// GENERATED CONSTANTS (src/cuda/program.rs, from miden-crypto)\n");
    let _ = writeln!(out, "#define HASH_BLOCK {HASH_BLOCK}");
    let _ = writeln!(out, "#define MERKLE_TOP_BLOCK {MERKLE_TOP_BLOCK}");
    let min_blocks = options.hash_min_blocks;
    let _ =
        writeln!(out, "#define HASH_MIN_BLOCKS {}", min_blocks.unwrap_or(OTHER_HASH_MIN_BLOCKS));
    let _ =
        writeln!(out, "#define ROW_QUAD_MIN_BLOCKS {}", min_blocks.unwrap_or(ROW_QUAD_MIN_BLOCKS));
    let _ = writeln!(
        out,
        "#define POSEIDON2_ROWS_MIN_BLOCKS {}",
        min_blocks.unwrap_or(POSEIDON2_ROWS_MIN_BLOCKS)
    );
    // the MDS layer is read as a circulant (row i is row 0 rotated by i) from its first row
    let circulant =
        (0..12).all(|i| (0..12).all(|j| Rpo256::MDS[i][j] == Rpo256::MDS[0][(j + 12 - i) % 12]));
    assert!(circulant, "the RPO MDS matrix is not circulant: the CUDA MDS layer assumes it");
    let row: Vec<String> = Rpo256::MDS[0].iter().map(|x| format!("{}u", x.as_int())).collect();
    let _ = writeln!(out, "#define RESCUE_MDS_ROW {{{}}}", row.join(", "));
    let _ = writeln!(out, "#define RESCUE_LANES {}", options.rescue_lanes.count());
    for (name, table) in [("ARK1", &Rpo256::ARK1), ("ARK2", &Rpo256::ARK2)] {
        let _ = writeln!(
            out,
            "__constant__ u64 {name}[{}] = {{{}}};",
            table.len() * 12,
            hex_list(table.iter().flatten())
        );
    }
    let _ = writeln!(out, "#define P2_EXTERNAL_HALF {}", Poseidon2::NUM_EXTERNAL_ROUNDS_HALF);
    let _ = writeln!(out, "#define P2_INTERNAL {}", Poseidon2::NUM_INTERNAL_ROUNDS);
    let external: Vec<Felt> = Poseidon2::ARK_EXT_INITIAL
        .iter()
        .chain(&Poseidon2::ARK_EXT_TERMINAL)
        .flatten()
        .copied()
        .collect();
    for (name, table) in [
        ("P2_ARK_EXT", &external[..]),
        ("P2_ARK_INT", &Poseidon2::ARK_INT[..]),
        ("P2_MAT_DIAG", &Poseidon2::MAT_DIAG[..]),
    ] {
        let _ = writeln!(
            out,
            "__constant__ u64 {name}[{}] = {{{}}};",
            table.len(),
            hex_list(table.iter())
        );
    }
    let lengths: Vec<Felt> = (0..8u8).map(Felt::from).collect();
    let _ = writeln!(out, "__constant__ u64 SPONGE_LEN[8] = {{{}}};\n", hex_list(lengths.iter()));
    out.push_str(&blake3_prelude());
    out
}

/// The generated part of `blake3.cuh` (see `blake3_tables`): the initial value, the tree stack's
/// depth and the message permutation.
fn blake3_prelude() -> String {
    let iv: Vec<String> = blake3_tables::iv().iter().map(|w| format!("0x{w:08x}u")).collect();
    let permuted: Vec<String> =
        blake3_tables::PERMUTATION.iter().map(|i| format!("m[{i}]")).collect();
    let mut out = String::new();
    let _ = writeln!(out, "#define B3_IV {{{}}}", iv.join(", "));
    let _ = writeln!(out, "#define B3_STACK {}", blake3_tables::CV_STACK);
    let _ = writeln!(
        out,
        "__device__ __forceinline__ void b3_permute(u32 m[16]) {{\n    \
         const u32 t[16] = {{{}}};\n#pragma unroll\n    \
         for (int i = 0; i < 16; i++) m[i] = t[i];\n}}\n",
        permuted.join(", ")
    );
    out
}

fn hex_list<'a>(values: impl Iterator<Item = &'a Felt>) -> String {
    values.map(|x| format!("0x{:016x}ull", x.inner())).collect::<Vec<_>>().join(", ")
}

// NVRTC
// ================================================================================================

/// Whether the NVRTC library can be loaded (dynamic loading panics on a missing library, so every
/// entry point checks this first).
pub(super) fn nvrtc_present() -> bool {
    // SAFETY: only looks for the library; loads nothing and calls no entry point.
    unsafe { nvrtc::is_culib_present() }
}

/// Compiles [`kernel_source_with`] `options` for `arch` (e.g. `sm_90`) into a CUBIN.
///
/// Any NVRTC diagnostic, warnings included, is an error: the program log must be empty; options
/// out of range are refused as [`CudaOptions::check`] says. Results are cached per architecture
/// and source (which carries every option that changes it) for the life of the process.
pub fn compile_for_arch(arch: &str, options: &CudaOptions) -> Result<Arc<Vec<u8>>, GpuError> {
    options.check()?;
    compile_source_for_arch(arch, kernel_source_with(options))
}

/// The program of a recorded composition (see `cuda/composition.cu`): the field code, the
/// sizes the kernel's frame takes, the kernel, then `functions` (the graph's, named
/// `composition_row`, from [`crate::constraints::cuda_source`]).
pub(super) fn composition_source(sizes: &CompositionSizes, functions: &str) -> String {
    let CompositionSizes { outputs, main_width, x_slots, table_words } = sizes;
    format!(
        "{FIELD}\n#define COMPOSITION_OUTPUTS {outputs}\n#define COMPOSITION_MAIN_WIDTH {main_width}\n#define COMPOSITION_X_SLOTS {x_slots}\n\
         #define COMPOSITION_TABLE_WORDS {table_words}\n{COMPOSITION}\n{functions}"
    )
}

/// The sizes a composition program is compiled for.
pub(super) struct CompositionSizes {
    /// Words the row writes: the extension degree.
    pub outputs: usize,
    /// Base columns of the main segment (the auxiliary ones follow them in the column table).
    pub main_width: usize,
    /// Exponent slots of `x`.
    pub x_slots: usize,
    /// Words of the step tables' entries.
    pub table_words: usize,
}

/// `source` compiled for `arch` into a CUBIN as the backend compiles its programs (any NVRTC
/// diagnostic is an error), cached per architecture and source for the life of the process (a
/// composition's program is the same for every proof of its AIR's shape).
pub fn compile_source_for_arch(arch: &str, source: String) -> Result<Arc<Vec<u8>>, GpuError> {
    type Cache = Mutex<HashMap<(String, String), Arc<Vec<u8>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (arch.to_string(), source);
    if let Some(cubin) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(cubin.clone());
    }
    if !nvrtc_present() {
        return Err(unavailable("the NVRTC library (libnvrtc) was not found"));
    }
    let _span = tracing::info_span!("cuda.nvrtc", arch).entered();
    let cubin = Arc::new(compile(&key.1, arch)?);
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(key, cubin.clone());
    Ok(cubin)
}

fn compile(source: &str, arch: &str) -> Result<Vec<u8>, GpuError> {
    let program = Program::new(source)?;
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    let options: Vec<CString> =
        options.iter().map(|o| CString::new(o.as_str()).expect("no NUL in options")).collect();
    let pointers: Vec<*const core::ffi::c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let status =
        // SAFETY: `program` is live, and `pointers` holds `pointers.len()` NUL-terminated options
        // that `options` keeps alive through the call.
        unsafe { nvrtc::nvrtcCompileProgram(program.0, pointers.len() as i32, pointers.as_ptr()) };
    let log = program.log()?;
    nvrtc_check_logged(status, "nvrtcCompileProgram", &log)?;
    if !log.trim().is_empty() {
        return Err(nvrtc_error("nvrtcCompileProgram", status, "NVRTC reported diagnostics", &log));
    }
    let mut size = 0usize;
    // SAFETY: `program` is live and has been compiled; `size` is a live integer to write.
    nvrtc_check(unsafe { nvrtc::nvrtcGetCUBINSize(program.0, &mut size) }, "nvrtcGetCUBINSize")?;
    let mut cubin = vec![0u8; size];
    nvrtc_check(
        // SAFETY: `cubin` holds the `size` bytes that `nvrtcGetCUBINSize` reported for this
        // program.
        unsafe { nvrtc::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()) },
        "nvrtcGetCUBIN",
    )?;
    Ok(cubin)
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtc::nvrtcProgram);

impl Program {
    fn new(source: &str) -> Result<Self, GpuError> {
        let source = CString::new(source).map_err(|_| {
            GpuError::internal(
                Backend::Cuda,
                "nvrtcCreateProgram",
                "the kernel source contains a NUL byte",
            )
        })?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: `raw` is a live handle to write, `source` and the name are NUL-terminated and
        // outlive the call (NVRTC copies them), and no headers are given (count 0, null arrays).
        let status = unsafe {
            nvrtc::nvrtcCreateProgram(
                &mut raw,
                source.as_ptr(),
                c"miden_gpu.cu".as_ptr(),
                0,
                core::ptr::null(),
                core::ptr::null(),
            )
        };
        nvrtc_check(status, "nvrtcCreateProgram")?;
        Ok(Self(raw))
    }

    fn log(&self) -> Result<String, GpuError> {
        let mut size = 0usize;
        nvrtc_check(
            // SAFETY: the program is live and `size` a live integer to write.
            unsafe { nvrtc::nvrtcGetProgramLogSize(self.0, &mut size) },
            "nvrtcGetProgramLogSize",
        )?;
        let mut log = vec![0u8; size.max(1)];
        nvrtc_check(
            // SAFETY: `log` holds at least the `size` bytes that `nvrtcGetProgramLogSize` reported
            // (one if none).
            unsafe { nvrtc::nvrtcGetProgramLog(self.0, log.as_mut_ptr().cast()) },
            "nvrtcGetProgramLog",
        )?;
        Ok(CStr::from_bytes_until_nul(&log)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `Program::new` and is destroyed once here.
        let _ = unsafe { nvrtc::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// [`GpuError::Device`] unless NVRTC's `call` returned success.
fn nvrtc_check(status: nvrtc::nvrtcResult, call: &'static str) -> Result<(), GpuError> {
    nvrtc_check_logged(status, call, "")
}

/// [`nvrtc_check`], the error carrying the compiler's `log`.
fn nvrtc_check_logged(
    status: nvrtc::nvrtcResult,
    call: &'static str,
    log: &str,
) -> Result<(), GpuError> {
    if status == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: NVRTC returns a static NUL-terminated string for every status.
    let name = unsafe { CStr::from_ptr(nvrtc::nvrtcGetErrorString(status)) };
    Err(nvrtc_error(call, status, &name.to_string_lossy(), log))
}

/// [`GpuError::Device`] for NVRTC's `call`, which returned `status` (named `name`) and left
/// `log`.
fn nvrtc_error(call: &'static str, status: nvrtc::nvrtcResult, name: &str, log: &str) -> GpuError {
    let status =
        DeviceStatus::Nvrtc { code: status as u32, name: name.to_string(), log: log.to_string() };
    GpuError::Device { backend: Backend::Cuda, failure: DeviceFailure::new(call, status) }
}
