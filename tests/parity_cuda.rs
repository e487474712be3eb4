//! The shared parity harness on the CUDA backend, plus field arithmetic, a multi-chunk
//! commitment and multi-GPU checks.
//!
//! Without an NVIDIA driver or GPU they are reported as ignored, with the reason, unless
//! `MIDEN_GPU_REQUIRE` names `cuda` (see `common/device.rs`).

mod common;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use common::{
    device::{tests, DeviceTests},
    Case,
};

use cudarc::{
    driver::{CudaContext, LaunchConfig, PushKernelArg},
    nvrtc::{compile_ptx_with_opts, CompileOptions},
};
use miden_gpu::{
    cuda::{device_count, kernel_source, CudaCommitter, CudaOptions},
    CommitRequest, CpuCommitter, Felt, GpuCommitter, GpuError, HashFunction, Keep, PolyInput,
    RescueLanes, RowHashing,
};
use rand::{rngs::StdRng, SeedableRng};
use winter_math::FieldElement;

/// The committer on the GPUs `MIDEN_GPU_DEVICES` names, else all visible GPUs (the device is
/// known to be present).
fn committer() -> CudaCommitter {
    let options = CudaOptions::from_env().expect("CUDA options");
    let committer = CudaCommitter::with_options(options).expect("CUDA backend");
    eprintln!("CUDA backend on {}", committer.device_name());
    committer
}

fn main() {
    let absent = device_count().err().map(|e| e.to_string());
    DeviceTests::new("cuda", absent)
        .on_device(tests![
            cuda_backend_matches_winterfell,
            cuda_prover_matches_winterfell,
            cuda_fri_layers_match_cpu,
            cuda_grinding_matches_the_coins,
            cuda_field_arithmetic_matches_felt,
            cuda_multi_chunk_commitment_matches_cpu,
            tuning_options_keep_the_results,
            registered_rows_match_cpu,
            invalid_options_are_rejected,
            invalid_device_lists_are_rejected,
            gpu_sets_agree,
            wide_short_ldes_agree,
            memory_cap_streams_the_lde_in_coset_groups,
            memory_cap_counts_the_twiddle_tables,
            memory_cap_holds_in_every_stage
        ])
        .run()
}

/// The memory-cap tests budget against everything the process holds on the GPU (the committers
/// of one GPU share its budget), so each runs alone: they hold this lock to write, the other
/// tests to read.
static GPU: RwLock<()> = RwLock::new(());

fn gpu_shared() -> RwLockReadGuard<'static, ()> {
    GPU.read().unwrap_or_else(PoisonError::into_inner)
}

fn gpu_alone() -> RwLockWriteGuard<'static, ()> {
    GPU.write().unwrap_or_else(PoisonError::into_inner)
}

/// The shared harness, then BLAKE3 shapes its random cases miss, for the whole-row kernel's
/// warp-wide row stores: LDEs of fewer rows than a warp (the last warp partial) with 1 to 7 base
/// columns, several blocks a row and partitioned rows; 5 columns over full warps.
fn cuda_backend_matches_winterfell() {
    let _gpu = gpu_shared();
    let c = committer();
    common::run_parity_suite(&c, 0xC0DA, 60, &common::GPU_HASHES);
    for (i, (log_rows, cols, blowup, extension, partitions, hash)) in [
        (1, 3, 2, 1, 1, HashFunction::Blake3_256),
        (2, 7, 2, 1, 1, HashFunction::Blake3_192),
        (3, 1, 2, 1, 1, HashFunction::Blake3_256),
        (2, 2, 2, 3, 1, HashFunction::Blake3_192),
        (2, 73, 4, 1, 1, HashFunction::Blake3_256),
        (2, 21, 4, 1, 2, HashFunction::Blake3_192),
        (6, 5, 8, 1, 1, HashFunction::Blake3_192),
    ]
    .into_iter()
    .enumerate()
    {
        let case = Case { log_rows, cols, blowup, extension, partitions, hash, composition: false };
        common::check_case(&c, &case, 0xB3 + i as u64);
    }
}

/// `GpuProver` on CUDA: proofs byte-identical to Winterfell's for every field extension and
/// hash, verified; tampered proofs rejected.
fn cuda_prover_matches_winterfell() {
    let _gpu = gpu_shared();
    let c = committer();
    common::check_proofs(std::sync::Arc::new(c), &common::GPU_HASHES);
}

/// The FRI commit phase (DEEP evaluation, layer leaves and trees, folding) against the CPU's.
fn cuda_fri_layers_match_cpu() {
    let _gpu = gpu_shared();
    let c = committer();
    common::check_fri(&c, &common::random_fri_cases(0xF01D, 60, 12), 0xF01D);
}

/// The proof-of-work search against miden-crypto's coins, with factors whose batches miss now
/// and then (so later batches run), up to the 16 bits of Miden's 96-bit options.
fn cuda_grinding_matches_the_coins() {
    let _gpu = gpu_shared();
    common::check_grind(&committer(), 0x6A1E, 16, 0..=16);
}

// FIELD ARITHMETIC
// ================================================================================================

const FIELD_TEST_KERNEL: &str = r#"
extern "C" __global__ void field_ops(const u64* a, const u64* b, u64* out, u32 n) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[7 * i] = gl_mul(a[i], b[i]);
    out[7 * i + 1] = gl_sqr(a[i]);
    out[7 * i + 2] = gl_sqr_alu(a[i]);
    out[7 * i + 3] = gl_add(a[i], b[i]);
    out[7 * i + 4] = gl_sub(a[i], b[i]);
    out[7 * i + 5] = gl_double(a[i]);
    out[7 * i + 6] = gl_mul_small(a[i], 4);
}
"#;

/// Montgomery multiply, both squaring forms, add, subtract, double and small multiple on the
/// device against `Felt`, word for word (the hashes must reproduce winter_math's non-canonical
/// results too), on `common::field_test_words`: edge, near-2^64 and random words.
fn cuda_field_arithmetic_matches_felt() {
    let _gpu = gpu_shared();
    committer();
    let ctx = CudaContext::new(0).expect("CUDA context");
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    let opts = CompileOptions {
        arch: None,
        options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(kernel_source() + FIELD_TEST_KERNEL, opts).expect("NVRTC");
    let module = ctx.load_module(ptx).expect("module");
    let f = module.load_function("field_ops").expect("field_ops");

    let (a, b) = common::field_test_words(1);
    let n = a.len() as u32;
    let stream = ctx.default_stream();
    let a_dev = stream.clone_htod(&a).unwrap();
    let b_dev = stream.clone_htod(&b).unwrap();
    let mut out_dev = stream.alloc_zeros::<u64>(7 * a.len()).unwrap();
    let mut launch = stream.launch_builder(&f);
    launch.arg(&a_dev).arg(&b_dev).arg(&mut out_dev).arg(&n);
    unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }.expect("launch");
    let out = stream.clone_dtoh(&out_dev).unwrap();
    common::assert_field_words(
        "CUDA",
        ["mul", "sqr", "sqr_alu", "add", "sub", "double", "mul_small(4)"],
        (&a, &b),
        &out,
        |x, y| [x * y, x.square(), x.square(), x + y, x - y, x.double(), x.mul_small(4)],
    );
}

// LARGER SHAPES
// ================================================================================================

fn random_columns(rng: &mut StdRng, cols: usize, rows: usize) -> Vec<Vec<Felt>> {
    (0..cols).map(|_| (0..rows).map(|_| common::random_felt(rng)).collect()).collect()
}

fn assert_same(got: &miden_gpu::Commitment, want: &miden_gpu::Commitment, what: &str) {
    let differences = common::commitment_differences(got, want);
    assert!(differences.is_empty(), "{what}: {}", differences.join("; "));
}

/// Several hash chunks and pinned-ring rounds: 2^18 rows x 19 columns, blowup 8 (2M LDE rows).
fn cuda_multi_chunk_commitment_matches_cpu() {
    let _gpu = gpu_shared();
    let c = committer();
    let mut rng = StdRng::seed_from_u64(7);
    let columns = random_columns(&mut rng, 19, 1 << 18);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    for (hash, row_hashing) in [
        (HashFunction::Rpo256, RowHashing::WholeRow),
        (HashFunction::Rpx256, RowHashing::Partitioned(5)),
        (HashFunction::Poseidon2, RowHashing::Partitioned(8)),
        (HashFunction::Blake3_192, RowHashing::Partitioned(3)),
        (HashFunction::Blake3_256, RowHashing::WholeRow),
    ] {
        let request = CommitRequest {
            input: PolyInput::Trace { columns: &refs },
            blowup: 8,
            row_hashing,
            hash,
        };
        let want = CpuCommitter::new().commit(&request).unwrap();
        let got = c.commit(&request).unwrap();
        assert_same(&got, &want, &format!("{hash} {row_hashing:?}"));
    }
}

// OPTIONS
// ================================================================================================

/// The committer on the GPUs `devices` with `options` otherwise.
fn committer_on(devices: &[usize], options: CudaOptions) -> Result<CudaCommitter, GpuError> {
    CudaCommitter::with_options(CudaOptions { devices: Some(devices.to_vec()), ..options })
}

/// One permutation per thread instead of per quad, other hashing blocks per SM and a
/// synchronization after every launch: each compiles its own kernels, with the CPU's results.
fn tuning_options_keep_the_results() {
    let _gpu = gpu_shared();
    let device = committer().devices()[0];
    let mut rng = StdRng::seed_from_u64(5);
    let columns = random_columns(&mut rng, 11, 1 << 12);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let variants = [
        CudaOptions { rescue_lanes: RescueLanes::Single, ..CudaOptions::default() },
        CudaOptions { hash_min_blocks: Some(2), ..CudaOptions::default() },
        CudaOptions { sync_each_launch: true, prefault_threads: Some(0), ..CudaOptions::default() },
    ];
    for options in variants {
        let what = format!("{options:?}");
        let c = committer_on(&[device], options).expect("committer with tuning options");
        for (hash, row_hashing) in [
            (HashFunction::Rpo256, RowHashing::WholeRow),
            (HashFunction::Rpx256, RowHashing::WholeRow),
            (HashFunction::Poseidon2, RowHashing::Partitioned(4)),
        ] {
            let request = CommitRequest {
                input: PolyInput::Trace { columns: &refs },
                blowup: 4,
                row_hashing,
                hash,
            };
            let want = CpuCommitter::new().commit(&request).unwrap();
            let got = c.commit(&request).unwrap();
            assert_same(&got, &want, &format!("{what}: {hash} {row_hashing:?}"));
        }
        let leaves: Vec<_> =
            (0..64).map(|_| common::random_digest(&mut rng, HashFunction::Rpo256)).collect();
        let want = CpuCommitter::new().build_tree(&leaves, HashFunction::Rpo256).unwrap();
        assert!(c.build_tree(&leaves, HashFunction::Rpo256).unwrap() == want, "{what}: tree");
    }
}

/// Sources, LDE rows, leaves and nodes in registered host memory (`pinned_rows_bytes`), read
/// and written by the DMA directly, on every GPU: the blocks registered by the first commitment
/// of a size are reused by the next, the rows of a larger commitment than the cap allows take
/// the pinned slots (its sources and tree still fit), and a streamed LDE (strided rows) goes
/// through the slots into the block; every result equals the CPU's (the sources' staging is not
/// visible from outside: the results' equality covers their upload).
fn registered_rows_match_cpu() {
    let _gpu = gpu_alone(); // the streamed case's memory cap counts every committer's buffers
    let devices = committer().devices();
    let options = CudaOptions { pinned_rows_bytes: 80 << 20, ..CudaOptions::default() };
    let mut rng = StdRng::seed_from_u64(11);
    let c = committer_on(&devices, options).expect("committer with registered rows");
    // 2^15 x 8 rows of 23 columns (row width 24): 6 MiB of sources, 48 MiB of rows and 16 MiB
    // of tree, in the cap; 2^16 x 8: 96 MiB of rows, over it, 12 MiB of sources and 32 of tree
    for (log_rows, cols, lent) in [(15, 23, true), (15, 23, true), (16, 23, false), (12, 5, true)] {
        let columns = random_columns(&mut rng, cols, 1 << log_rows);
        let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
        let request = CommitRequest {
            input: PolyInput::Trace { columns: &refs },
            blowup: 8,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        };
        let want = CpuCommitter::new().commit(&request).unwrap();
        let got = c.commit(&request).unwrap();
        let what = format!("2^{log_rows} x {cols} on {devices:?}");
        assert_eq!(got.lde.data.is_lent(), lent, "{what}: rows in a registered block");
        assert!(got.leaves.is_lent() && got.nodes.is_lent(), "{what}: tree in registered blocks");
        assert_same(&got, &want, &what);
    }
    drop(c);
    let streamed = CudaOptions {
        pinned_rows_bytes: 80 << 20,
        memory_limit: Some(24 << 20),
        ..CudaOptions::default()
    };
    let c = committer_on(&devices[..1], streamed).expect("committer with a memory cap");
    let columns = random_columns(&mut rng, 23, 1 << 14);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &refs },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpx256,
    };
    let got = c.commit(&request).unwrap();
    assert!(got.lde.data.is_lent(), "streamed rows in a registered block");
    assert!(got.leaves.is_lent() && got.nodes.is_lent(), "streamed: tree in registered blocks");
    assert_same(&got, &CpuCommitter::new().commit(&request).unwrap(), "streamed into a block");
}

/// Options out of range are typed errors when the committer is built.
fn invalid_options_are_rejected() {
    let _gpu = gpu_shared();
    for blocks in [0, 17] {
        let options = CudaOptions { hash_min_blocks: Some(blocks), ..CudaOptions::default() };
        let err = CudaCommitter::with_options(options).err();
        assert!(matches!(err, Some(GpuError::BackendUnavailable { .. })), "{blocks}: {err:?}");
    }
}

// MULTI-GPU
// ================================================================================================

fn invalid_device_lists_are_rejected() {
    let _gpu = gpu_shared();
    let c = committer();
    let count = c.devices().len();
    let err = committer_on(&[count + 7], CudaOptions::default()).err();
    assert!(matches!(err, Some(GpuError::InvalidDeviceList { .. })), "{err:?}");
    let err = committer_on(&[], CudaOptions::default()).err();
    assert!(matches!(err, Some(GpuError::InvalidDeviceList { .. })), "{err:?}");
}

/// 2 GPUs, 1 GPU and a subset give the CPU's results, with 73 columns (an uneven split) and a
/// composition input; so does the tree each of them keeps.
fn gpu_sets_agree() {
    let _gpu = gpu_shared();
    let all = committer();
    let devices = all.devices();
    let mut sets: Vec<Vec<usize>> = vec![vec![devices[0]]];
    if devices.len() >= 2 {
        sets.push(devices[..2].to_vec());
        sets.push(vec![devices[1]]);
    }
    if devices.len() >= 4 {
        sets.push(devices.clone());
    }
    if devices.len() < 2 {
        eprintln!("only one GPU visible: multi-GPU sets not exercised");
    }
    let mut rng = StdRng::seed_from_u64(11);
    let columns = random_columns(&mut rng, 73, 1 << 12);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let components = random_columns(&mut rng, 3, 1 << 15);
    let comp_refs: Vec<&[Felt]> = components.iter().map(|c| c.as_slice()).collect();
    let requests = [
        CommitRequest {
            input: PolyInput::Trace { columns: &refs },
            blowup: 8,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        },
        CommitRequest {
            input: PolyInput::Composition {
                components: &comp_refs,
                column_len: 1 << 12,
                num_columns: 8,
            },
            blowup: 4,
            row_hashing: RowHashing::Partitioned(8),
            hash: HashFunction::Rpx256,
        },
    ];
    for request in &requests {
        let want = CpuCommitter::new().commit(request).unwrap();
        for set in &sets {
            let c =
                committer_on(set, CudaOptions::default()).expect("committer on a device subset");
            let got = c.commit(request).unwrap();
            assert_same(&got, &want, &format!("devices {set:?}"));
            // the tree kept on the GPUs, read where each GPU's blocks are
            let keep = Keep { polys: false, rows: false, tree: true };
            let kept = c.commit_keeping(request, keep).unwrap();
            assert!(kept.kept_tree.is_some(), "devices {set:?}: the tree was not kept");
            common::check_kept_tree(&kept, &want, &mut rng, &format!("devices {set:?}"));
            // one entry per GPU, each named by its ordinal; the exchange only between GPUs
            let times = c.last_stage_times();
            let names: Vec<String> = times.iter().map(|t| t.device.clone()).collect();
            let want_names: Vec<String> = set.iter().map(|d| format!("cuda:{d}")).collect();
            assert_eq!(names, want_names, "devices {set:?}: stage times");
            for t in &times {
                assert_eq!(t.passes, 1, "{t:?}");
                assert!(t.upload_lde_ms.is_some() && t.rows_ms.is_none(), "{t:?}");
                assert_eq!(t.exchange_ms.is_some(), set.len() > 1, "{t:?}");
            }
        }
    }
}

/// Rows wider than the LDE is long (200 to 330 columns, 16 to 128 LDE rows) on every GPU set.
fn wide_short_ldes_agree() {
    let _gpu = gpu_shared();
    let devices = committer().devices();
    let mut sets = vec![vec![devices[0]]];
    if devices.len() >= 2 {
        sets.push(devices[..2].to_vec());
    }
    let mut found = Vec::new();
    for set in &sets {
        for sync_each_launch in [false, true] {
            let options = CudaOptions { sync_each_launch, ..CudaOptions::default() };
            let c = committer_on(set, options).expect("committer on a device subset");
            let mut differences = common::wide_short_lde_differences(&c, 0x51DE);
            differences.extend(common::wide_short_case_failures(&c, 0x51E0));
            found.extend(
                differences.into_iter().map(|d| format!("devices {set:?} {sync_each_launch}: {d}")),
            );
        }
    }
    assert!(found.is_empty(), "{} shapes differ:\n{}", found.len(), found.join("\n"));
}

// MEMORY CAP
// ================================================================================================

/// Under a shrinking device memory cap the LDE is streamed in more and more passes (coset
/// groups), with results equal to the CPU's at every cap, on one GPU and on two; below what one
/// coset per pass needs, the commitment is a typed out-of-memory error.
fn memory_cap_streams_the_lde_in_coset_groups() {
    let _gpu = gpu_alone();
    let all = committer();
    let devices = all.devices();
    let mut sets = vec![vec![devices[0]]];
    if devices.len() >= 2 {
        sets.push(devices[..2].to_vec());
    }
    let mut rng = StdRng::seed_from_u64(13);
    let columns = random_columns(&mut rng, 21, 1 << 14);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let components = random_columns(&mut rng, 3, 1 << 16);
    let comp_refs: Vec<&[Felt]> = components.iter().map(|c| c.as_slice()).collect();
    let requests = [
        CommitRequest {
            input: PolyInput::Trace { columns: &refs },
            blowup: 8,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        },
        CommitRequest {
            input: PolyInput::Composition {
                components: &comp_refs,
                column_len: 1 << 13,
                num_columns: 8,
            },
            blowup: 8,
            row_hashing: RowHashing::Partitioned(5),
            hash: HashFunction::Rpx256,
        },
    ];
    for request in &requests {
        let want = CpuCommitter::new().commit(request).unwrap();
        for set in &sets {
            let passes_seen =
                passes_as_the_cap_shrinks(request, &want, set, 256 << 20, |cap| cap * 15 / 16);
            assert!(passes_seen.first() == Some(&1) && passes_seen.len() >= 2, "{passes_seen:?}");
        }
    }
}

/// The cached twiddle tables count against the memory cap: a 2^23-row trace, whose two tables
/// (128 MiB) weigh more than the 64 MiB between the buffers of one pass and of two, under caps
/// shrinking in 16 MiB steps.
fn memory_cap_counts_the_twiddle_tables() {
    let _gpu = gpu_alone();
    let device = committer().devices()[0];
    let mut rng = StdRng::seed_from_u64(23);
    let columns = random_columns(&mut rng, 1, 1 << 23);
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &refs },
        blowup: 2,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let want = CpuCommitter::new().commit(&request).unwrap();
    let passes_seen =
        passes_as_the_cap_shrinks(&request, &want, &[device], 2560 << 20, |cap| cap - (16 << 20));
    assert_eq!(passes_seen, [1, 2]);
}

/// Every call's working buffers stay within the memory cap, not only a commitment's pipeline:
/// under caps shrinking in 256 KiB steps, a 2^16-row trace of one base column and one
/// cubic-extension column committed keeping its polynomials, the DEEP combination and
/// evaluations over them (the accumulator, 1.5 MiB, outweighs the room a commitment leaves for
/// small tables), and the single stages (hashing the main LDE's rows, building the tree over its
/// leaves), each equal to the host's, with the committer's peak device memory never above the
/// cap. The single stages need more than a commitment at one coset per pass: below what they
/// need they are a typed out-of-memory error; the sweep ends when the commitment is.
fn memory_cap_holds_in_every_stage() {
    let _gpu = gpu_alone();
    let device = committer().devices()[0];
    let mut rng = StdRng::seed_from_u64(31);
    let n = 1 << 16;
    let main = random_columns(&mut rng, 1, n);
    let aux = random_columns(&mut rng, 3, n);
    let (main_refs, aux_refs): (Vec<&[Felt]>, Vec<&[Felt]>) =
        (main.iter().map(|c| c.as_slice()).collect(), aux.iter().map(|c| c.as_slice()).collect());
    let request = |columns| CommitRequest {
        input: PolyInput::Trace { columns },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let requests = [request(&main_refs), request(&aux_refs)];
    let cpu = CpuCommitter::new();
    let wants: Vec<miden_gpu::Commitment> =
        requests.iter().map(|r| cpu.commit(r).unwrap()).collect();
    let host_polys: Vec<(Vec<Vec<Felt>>, usize)> =
        wants.iter().zip([1, 3]).map(|(w, degree)| (w.polys.clone(), degree)).collect();
    let (main_lde, main_leaves) = (&wants[0].lde, &wants[0].leaves);
    let want_leaves = cpu.hash_rows(main_lde, RowHashing::WholeRow, HashFunction::Rpo256).unwrap();
    let want_nodes = cpu.build_tree(main_leaves, HashFunction::Rpo256).unwrap();
    let (mut cap, mut single_stages_refused) = (96u64 << 20, false);
    loop {
        let options = CudaOptions { memory_limit: Some(cap), ..CudaOptions::default() };
        let c = committer_on(&[device], options).unwrap();
        let what = format!("cap {cap} B");
        let mut kept = Vec::new();
        for (request, want) in requests.iter().zip(&wants) {
            match c.commit_keeping(request, Keep { polys: true, rows: false, tree: false }) {
                Ok(got) => {
                    assert_eq!(got.root(), want.root(), "{what}: root");
                    kept.push(got.resident.unwrap_or_else(|| panic!("{what}: nothing kept")));
                },
                Err(GpuError::OutOfMemory { memory: "device", .. }) => break,
                Err(e) => panic!("{what}: commit: {e}"),
            }
        }
        if kept.len() < requests.len() {
            eprintln!("cap {cap} B: the commitment no longer fits");
            assert!(single_stages_refused, "the single stages fit wherever the commitment did");
            return;
        }
        common::check_deep_on(&c, &kept, &host_polys, 3, &mut rng, &what);
        let single_stages = [
            c.hash_rows(main_lde, RowHashing::WholeRow, HashFunction::Rpo256)
                .map(|leaves| assert!(leaves == want_leaves, "{what}: leaves")),
            c.build_tree(main_leaves, HashFunction::Rpo256)
                .map(|nodes| assert!(nodes == want_nodes, "{what}: nodes")),
        ];
        for result in single_stages {
            match result {
                Ok(()) => {},
                Err(GpuError::OutOfMemory { memory: "device", needed, available }) => {
                    assert!(needed > available, "{what}: {needed} > {available}");
                    single_stages_refused = true;
                },
                Err(e) => panic!("{what}: {e}"),
            }
        }
        let peak = c.device_bytes_peak()[0];
        assert!(peak <= cap, "{what}: {peak} B held at once");
        cap -= 256 << 10;
    }
}

/// Commits `request` on the GPUs `devices` under memory caps from `start` down (`next` gives the
/// cap after each), every result equal to `want` and the committer never holding more than its
/// cap, until a cap is refused with `OutOfMemory`; returns the pass counts seen, in order.
fn passes_as_the_cap_shrinks(
    request: &CommitRequest<'_>,
    want: &miden_gpu::Commitment,
    devices: &[usize],
    start: u64,
    next: impl Fn(u64) -> u64,
) -> Vec<usize> {
    let mut limit = start;
    let mut passes_seen = Vec::new();
    loop {
        let options = CudaOptions { memory_limit: Some(limit), ..CudaOptions::default() };
        let c = committer_on(devices, options).expect("committer");
        match c.commit(request) {
            Ok(got) => {
                let passes = c.last_stage_times()[0].passes;
                let what = format!("devices {devices:?}, cap {limit} B, {passes} passes");
                assert_same(&got, want, &what);
                let peak = c.device_bytes_peak();
                assert!(peak.iter().all(|&p| p <= limit), "{what}: held {peak:?} B at once");
                if passes_seen.last() != Some(&passes) {
                    passes_seen.push(passes);
                }
            },
            Err(GpuError::OutOfMemory { memory: "device", needed, available }) => {
                assert!(needed > available && available == limit, "{needed} > {available}");
                eprintln!("devices {devices:?}: passes {passes_seen:?} as the cap shrank");
                return passes_seen;
            },
            Err(e) => panic!("devices {devices:?}, cap {limit} B: {e}"),
        }
        limit = next(limit);
    }
}
