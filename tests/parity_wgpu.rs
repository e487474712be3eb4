//! The shared parity harness on the wgpu backend: with the adapter's own chunk size and its
//! preferred arithmetic (64-bit integers where it has them), and with the portable 32-bit
//! arithmetic and small forced chunks so that every multi-part path runs (arrays in many parts,
//! many row chunks and staging rounds, columns longer than a part).
//!
//! Without an adapter they are reported as ignored, with the reason, unless `MIDEN_GPU_REQUIRE`
//! names `wgpu` (see `common/device.rs`). Run with `--release`: on a software adapter
//! (lavapipe) kernels are slow.

mod common;

use common::device::{tests, DeviceTests};

use common::Case;
use miden_gpu::{
    wgpu::{AdapterSummary, Arithmetic, WgpuCommitter, WgpuOptions},
    GpuCommitter, HashFunction, RescueLanes,
};

/// The options of every test: the defaults, on the adapter `WGPU_BACKEND` and
/// `WGPU_ADAPTER_NAME` choose where set.
fn options() -> WgpuOptions {
    WgpuOptions::from_env()
}

/// The committer, with the adapter's preferred arithmetic unless one is given (the adapter is
/// known to be present).
fn committer(arithmetic: Option<Arithmetic>) -> WgpuCommitter {
    committer_with(WgpuOptions { arithmetic, ..options() })
}

/// The committer `options` make (the adapter is known to be present).
fn committer_with(options: WgpuOptions) -> WgpuCommitter {
    let committer = WgpuCommitter::with_options(options).expect("wgpu backend");
    eprintln!(
        "wgpu adapter: {} (software: {}, arithmetic: {:?}, RPO/RPX lanes: {:?})",
        committer.device_name(),
        committer.is_software(),
        committer.arithmetic(),
        committer.rescue_lanes()
    );
    committer
}

fn main() {
    let absent = AdapterSummary::find(&options()).err().map(|e| e.to_string());
    DeviceTests::new("wgpu", absent)
        .on_device(tests![
            wgpu_backend_matches_winterfell,
            wgpu_prover_matches_winterfell,
            wgpu_backend_matches_winterfell_with_small_chunks,
            wgpu_backend_matches_winterfell_with_columns_longer_than_a_chunk,
            wgpu_field_arithmetic_matches_felt,
            wgpu_rescue_on_one_invocation_matches_winterfell,
            wgpu_stage_times,
            wgpu_fri_matches_winterfell,
            wgpu_fri_matches_winterfell_with_small_chunks,
            wgpu_grinding_matches_the_coins,
            wgpu_wide_short_ldes_agree
        ])
        .on_device_when_asked(tests![wgpu_w1_timing])
        .run()
}

fn wgpu_backend_matches_winterfell() {
    let committer = committer(None);
    common::run_parity_suite(&committer, 0x3C9D, 36, &common::GPU_HASHES);
}

/// `GpuProver` on wgpu: proofs byte-identical to Winterfell's (grinding off, so deterministic)
/// for every field extension and hash, verified; tampered proofs rejected.
fn wgpu_prover_matches_winterfell() {
    let committer = committer(None);
    common::check_proofs(std::sync::Arc::new(committer), &common::GPU_HASHES);
}

fn wgpu_backend_matches_winterfell_with_small_chunks() {
    let committer = committer_with(WgpuOptions {
        arithmetic: Some(Arithmetic::U32),
        max_chunk_bytes: Some(64 << 10),
        ..options()
    });
    assert_eq!(committer.max_chunk_bytes(), 64 << 10);
    common::run_parity_suite(&committer, 0x5A11, 24, &common::GPU_HASHES);
}

// FIELD ARITHMETIC
// ================================================================================================

const FIELD_TEST_KERNEL: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read> b: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec2<u32>>;

@compute @workgroup_size(64)
fn field_ops(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&a)) {
        return;
    }
    out[4u * i] = gl_mul(a[i], b[i]);
    out[4u * i + 1u] = gl_square(a[i]);
    out[4u * i + 2u] = gl_add(a[i], b[i]);
    out[4u * i + 3u] = gl_sub(a[i], b[i]);
}
"#;

/// Runs `field_ops` in `arithmetic` on the operand words: 4 result words per pair, or `None` for
/// the 64-bit arithmetic on an adapter without 64-bit integers.
fn run_field_ops(arithmetic: Arithmetic, a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    use wgpu::util::DeviceExt;
    let adapter = miden_gpu::wgpu::find_adapter(&options()).expect("adapter");
    let features = match arithmetic {
        Arithmetic::U32 => wgpu::Features::empty(),
        Arithmetic::U64 => wgpu::Features::SHADER_INT64,
    };
    if !adapter.features().contains(features) {
        return None;
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: features,
        ..Default::default()
    }))
    .expect("device");
    let source = miden_gpu::wgpu::field_source(arithmetic) + FIELD_TEST_KERNEL;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("field_ops"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("field_ops"),
        layout: None,
        module: &module,
        entry_point: Some("field_ops"),
        compilation_options: Default::default(),
        cache: None,
    });
    let input = |words: &[u64]| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(words),
            usage: wgpu::BufferUsages::STORAGE,
        })
    };
    let (a_buf, b_buf) = (input(a), input(b));
    let size = 4 * 8 * a.len() as u64;
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: a_buf.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: b_buf.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 2, resource: out.as_entire_binding() },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups((a.len() as u32).div_ceil(64), 1, 1);
    }
    encoder.copy_buffer_to_buffer(&out, 0, &staging, 0, size);
    queue.submit([encoder.finish()]);
    staging.slice(..).map_async(wgpu::MapMode::Read, |r| r.expect("map"));
    device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    let view = staging.slice(..).get_mapped_range().expect("mapped");
    let words = bytemuck::cast_slice::<u8, u64>(&view).to_vec();
    Some(words)
}

/// Montgomery multiply, square, add and subtract of the WGSL kernels against `Felt`, word for
/// word (the hashes must reproduce winter_math's non-canonical results too), in the portable
/// 32-bit arithmetic and, where the adapter has 64-bit integers, the 64-bit one; on
/// `common::field_test_words`: edge, near-2^64 and random words.
fn wgpu_field_arithmetic_matches_felt() {
    use winter_math::FieldElement;
    let (a, b) = common::field_test_words(2);
    for arithmetic in [Arithmetic::U32, Arithmetic::U64] {
        let Some(out) = run_field_ops(arithmetic, &a, &b) else {
            eprintln!("{arithmetic:?}: skipped, the adapter has no 64-bit integers");
            continue;
        };
        common::assert_field_words(
            &format!("{arithmetic:?}"),
            ["mul", "square", "add", "sub"],
            (&a, &b),
            &out,
            |x, y| [x * y, x.square(), x + y, x - y],
        );
    }
}

/// RPO and RPX with one invocation per permutation where the adapter would use quads: row
/// hashing (whole and partitioned, multi-dispatch rows), trees and commitments.
fn wgpu_rescue_on_one_invocation_matches_winterfell() {
    let committer =
        committer_with(WgpuOptions { rescue_lanes: Some(RescueLanes::Single), ..options() });
    assert_eq!(committer.rescue_lanes(), RescueLanes::Single);
    let hashes = [HashFunction::Rpo256, HashFunction::Rpx256];
    let seed = 0x1A7E;
    common::check_hash_rows(&committer, seed, &hashes);
    common::check_inexact_rows(&committer, &hashes);
    common::check_build_tree(&committer, seed, &hashes);
    for (i, case) in common::random_cases(seed, 6, &hashes).iter().enumerate() {
        common::check_case(&committer, case, seed + i as u64);
    }
}

/// Columns longer than one part: interpolation on the host, coset evaluation by folding, and
/// DEEP combinations over polynomials and sums in many parts.
fn wgpu_backend_matches_winterfell_with_columns_longer_than_a_chunk() {
    let committer = committer_with(WgpuOptions {
        arithmetic: Some(Arithmetic::U32),
        max_chunk_bytes: Some(4 << 10),
        ..options()
    });
    let cases = [
        (10, 3, 2, 1, 1, HashFunction::Rpo256, false),
        (11, 5, 4, 2, 2, HashFunction::Rpx256, false),
        (9, 2, 8, 3, 4, HashFunction::Rpo256, false),
        (9, 3, 2, 1, 2, HashFunction::Rpx256, true),
        (8, 2, 4, 3, 1, HashFunction::Rpo256, true),
        (9, 4, 2, 2, 2, HashFunction::Poseidon2, false),
    ];
    for (i, (log_rows, cols, blowup, extension, partitions, hash, composition)) in
        cases.into_iter().enumerate()
    {
        let case = Case { log_rows, cols, blowup, extension, partitions, hash, composition };
        eprintln!("[wgpu, 4 KiB parts] {case:?}");
        common::check_case(&committer, &case, 0xF01D + i as u64);
    }
    common::check_deep(&committer, 0xC0DE, 6);
}

/// The FRI commit phase against winter-fri's: every extension degree, folding factor, blowup
/// 2–32, layer counts up to the most the domain allows, RPO and RPX.
fn wgpu_fri_matches_winterfell() {
    let committer = committer(None);
    common::check_fri(&committer, &common::random_fri_cases(0xF41, 40, 9), 0xF41);
}

/// The FRI commit phase with 1 KiB parts in the portable arithmetic: layers, leaves and tree
/// levels in many parts, polynomials longer than a part (coset evaluation by folding).
fn wgpu_fri_matches_winterfell_with_small_chunks() {
    let committer = committer_with(WgpuOptions {
        arithmetic: Some(Arithmetic::U32),
        max_chunk_bytes: Some(1 << 10),
        ..options()
    });
    common::check_fri(&committer, &common::random_fri_cases(0xF42, 20, 9), 0xF42);
}

/// Stage times from timestamp queries: reported after each commitment where the adapter has
/// `TIMESTAMP_QUERY` (every stage that ran takes some time; no device interpolation when the
/// columns are longer than a part), never otherwise; the single-stage calls leave them alone.
/// BLAKE3 rows are transposed by their own pass on every adapter (RPO/RPX rows on quads may be
/// read from the NTT's output by the hashing kernel, with no rows stage).
fn wgpu_stage_times() {
    use miden_gpu::{CommitRequest, Felt, PolyInput, RowHashing};

    let committer = committer(None);
    assert_eq!(committer.last_stage_times(), [], "no commitment yet");
    let columns: Vec<Vec<Felt>> = (0..11u64)
        .map(|c| (0..1u64 << 10).map(|i| Felt::new(c * 4096 + i + 1)).collect())
        .collect();
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &refs },
        blowup: 4,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Blake3_256,
    };
    let commitment = committer.commit(&request).expect("commit");
    let times = committer.last_stage_times();
    eprintln!("stage times (can time: {}): {times:?}", committer.can_time_stages());
    if !committer.can_time_stages() {
        assert_eq!(times, []);
        return;
    }
    let [times] = times.as_slice() else { panic!("one device's times: {times:?}") };
    assert_eq!((times.device.as_str(), times.passes), ("wgpu", 1));
    assert_eq!((times.upload_lde_ms, times.exchange_ms), (None, None));
    for (stage, ms) in [
        ("interpolate", times.interpolate_ms),
        ("lde", times.lde_ms),
        ("rows", times.rows_ms.expect("rows timed apart")),
        ("hash", times.hash_ms),
        ("tree", times.tree_ms),
    ] {
        assert!(ms.is_finite() && ms > 0.0, "{stage}: {ms} ms");
    }
    committer
        .hash_rows(&commitment.lde, RowHashing::WholeRow, HashFunction::Rpo256)
        .expect("hash rows");
    assert_eq!(committer.last_stage_times(), std::slice::from_ref(times));

    // Columns longer than a part: interpolated on the host (RPX rows on quads: fewer passes
    // than BLAKE3's, so every one is timed).
    let committer = committer_with(WgpuOptions { max_chunk_bytes: Some(4 << 10), ..options() });
    committer.commit(&CommitRequest { hash: HashFunction::Rpx256, ..request }).expect("commit");
    let times = committer.last_stage_times();
    let [times] = times.as_slice() else { panic!("one device's times: {times:?}") };
    assert_eq!(times.interpolate_ms, 0.0);
    assert!(times.lde_ms > 0.0 && times.hash_ms > 0.0, "{times:?}");
}

/// Timing of a W1-shaped trace commitment (73 base columns, 2^20 rows unless
/// `MIDEN_GPU_BENCH_LOG_ROWS` says otherwise, blowup 8, RPO256, whole-row leaves) against the
/// CPU backend (skipped with `MIDEN_GPU_BENCH_SKIP_CPU=1`), with the results compared. Not part
/// of the suite: run with `--ignored`; `RUST_LOG=miden_gpu=info` prints the time of each stage.
fn wgpu_w1_timing() {
    use std::time::Instant;

    use miden_gpu::{CommitRequest, CpuCommitter, Felt, PolyInput, RowHashing};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .try_init();
    let gpu = committer(None);
    let log_rows: u32 =
        std::env::var("MIDEN_GPU_BENCH_LOG_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut rng = StdRng::seed_from_u64(1);
    let columns: Vec<Vec<Felt>> = (0..73)
        .map(|_| (0..1usize << log_rows).map(|_| Felt::new(rng.random::<u64>() >> 1)).collect())
        .collect();
    let refs: Vec<&[Felt]> = columns.iter().map(|c| c.as_slice()).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &refs },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let mut times = Vec::new();
    let mut result = None;
    for _ in 0..3 {
        drop(result.take());
        let start = Instant::now();
        result = Some(gpu.commit(&request).expect("wgpu commit"));
        times.push(start.elapsed());
    }
    let gpu_result = result.expect("three runs");
    if std::env::var("MIDEN_GPU_BENCH_SKIP_CPU").as_deref() == Ok("1") {
        eprintln!("W1 2^{log_rows} x 73, blowup 8, RPO: wgpu {times:?} ({})", gpu.device_name());
        return;
    }
    let start = Instant::now();
    let cpu = CpuCommitter::new().commit(&request).expect("cpu commit");
    let cpu_time = start.elapsed();
    eprintln!(
        "W1 2^{log_rows} x 73, blowup 8, RPO: wgpu {times:?} ({}), cpu {cpu_time:?} ({}); speedup {:.1}x",
        gpu.device_name(),
        CpuCommitter::new().device_name(),
        cpu_time.as_secs_f64() / times[2].as_secs_f64()
    );
    assert_eq!(gpu_result.root(), cpu.root(), "roots differ");
    assert!(gpu_result.polys == cpu.polys, "polynomials differ");
    assert!(gpu_result.lde.data == cpu.lde.data, "LDE rows differ");
}

/// The proof-of-work search against miden-crypto's coins, in the preferred and the portable
/// arithmetic, with factors whose batches miss now and then (so later dispatches run).
fn wgpu_grinding_matches_the_coins() {
    common::check_grind(&committer(None), 0x6A1F, 6, 0..=11);
    common::check_grind(&committer(Some(Arithmetic::U32)), 0x6A20, 4, 0..=11);
}

/// Rows wider than the LDE is long (200 to 330 columns, 16 to 128 LDE rows), in both
/// arithmetics.
fn wgpu_wide_short_ldes_agree() {
    let mut found = Vec::new();
    for arithmetic in [None, Some(Arithmetic::U32)] {
        let c = committer(arithmetic);
        let mut differences = common::wide_short_lde_differences(&c, 0x51DF);
        differences.extend(common::wide_short_case_failures(&c, 0x51E1));
        found.extend(differences.into_iter().map(|d| format!("{arithmetic:?}: {d}")));
    }
    assert!(found.is_empty(), "{} shapes differ:\n{}", found.len(), found.join("\n"));
}
