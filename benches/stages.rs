//! Criterion benches per stage and per backend present, on realistic shapes scaled to the
//! machine (8 and 73 columns):
//! - `commit/<backend>`: the whole trace commitment (interpolation + LDE + hashing + tree);
//! - `lde/<backend>`: interpolation + coset LDE alone (throughput in LDE elements). CPU:
//!   Winterfell's `interpolate_columns` + `RowMatrix::evaluate_polys_over` (wall time). wgpu and
//!   CUDA: device kernel time of those stages inside a whole commitment (timestamp queries /
//!   CUDA events, `iter_custom`; uploads and downloads are not counted); wgpu needs an adapter
//!   with `TIMESTAMP_QUERY`, else the group is skipped with a message;
//! - `hash_rows/<backend>`: row hashing (RPO, RPX);
//! - `merkle/<backend>`: the Merkle tree (RPO, RPX).
//!
//! `cargo bench --bench stages [--features cuda] [-- <filter, e.g. lde>]`;
//! `MIDEN_GPU_BENCH_LOG_ROWS` sets the trace length (default 2^14 rows, LDE blowup 8).

#[path = "../examples/support/mod.rs"]
mod support;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use miden_gpu::{Digest, Felt, HashFunction, LdeRows, RowHashing};
use winter_math::{fft, StarkField};
use winter_prover::{
    matrix::{ColMatrix, RowMatrix},
    StarkDomain,
};

const BLOWUP: usize = 8;

/// Column counts of every group.
const COLUMNS: [usize; 2] = [8, 73];

fn log_rows() -> u32 {
    std::env::var("MIDEN_GPU_BENCH_LOG_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(14)
}

fn stages(c: &mut Criterion) {
    let rows = 1usize << log_rows();
    let lde_rows = rows * BLOWUP;
    for committer in support::available_backends(None) {
        let name = committer.backend().to_string();
        for cols in COLUMNS {
            let columns = support::random_columns(cols as u64, cols, rows);
            let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();

            let mut group = c.benchmark_group(format!("commit/{name}"));
            group.sample_size(10).throughput(Throughput::Elements(lde_rows as u64));
            for hash in [HashFunction::Rpo256, HashFunction::Rpx256] {
                let request = support::trace_request(&slices, BLOWUP, hash);
                group.bench_function(
                    BenchmarkId::new(format!("{hash}/{cols}cols"), lde_rows),
                    |b| b.iter(|| committer.commit(&request).expect("commit")),
                );
            }
            group.finish();

            let lde: LdeRows = committer
                .commit(&support::trace_request(&slices, BLOWUP, HashFunction::Rpo256))
                .expect("commit")
                .lde;
            let mut group = c.benchmark_group(format!("hash_rows/{name}"));
            group.sample_size(10).throughput(Throughput::Elements(lde_rows as u64));
            for hash in [HashFunction::Rpo256, HashFunction::Rpx256] {
                group.bench_function(
                    BenchmarkId::new(format!("{hash}/{cols}cols"), lde_rows),
                    |b| {
                        b.iter(|| {
                            committer.hash_rows(&lde, RowHashing::WholeRow, hash).expect("hash")
                        })
                    },
                );
            }
            group.finish();
        }

        let words = support::random_columns(4, 4, lde_rows);
        let leaves: Vec<Digest> = (0..lde_rows)
            .map(|i| Digest::from_felts(core::array::from_fn(|j| words[j][i])))
            .collect();
        let mut group = c.benchmark_group(format!("merkle/{name}"));
        group.sample_size(10).throughput(Throughput::Elements(lde_rows as u64));
        for hash in [HashFunction::Rpo256, HashFunction::Rpx256] {
            group.bench_function(BenchmarkId::new(hash.to_string(), lde_rows), |b| {
                b.iter(|| committer.build_tree(&leaves, hash).expect("tree"))
            });
        }
        group.finish();
    }
}

// LDE STAGE
// ================================================================================================

/// `lde/<backend>`: interpolation + LDE only, for every backend present.
fn lde(c: &mut Criterion) {
    let rows = 1usize << log_rows();
    let lde_rows = rows * BLOWUP;

    // CPU: Winterfell's own interpolation and LDE, the domain made once as a prover does.
    let domain =
        StarkDomain::from_twiddles(fft::get_twiddles::<Felt>(rows), BLOWUP, Felt::GENERATOR);
    let mut group = c.benchmark_group("lde/cpu");
    for cols in COLUMNS {
        let trace = ColMatrix::new(support::random_columns(cols as u64, cols, rows));
        group.sample_size(10).throughput(Throughput::Elements((lde_rows * cols) as u64));
        group.bench_function(BenchmarkId::new(format!("{cols}cols"), lde_rows), |b| {
            b.iter(|| {
                let polys = trace.interpolate_columns();
                RowMatrix::evaluate_polys_over::<8>(&polys, &domain)
            })
        });
    }
    group.finish();

    #[cfg(feature = "wgpu")]
    match miden_gpu::wgpu::WgpuCommitter::with_options(miden_gpu::wgpu::WgpuOptions::from_env()) {
        Ok(wgpu) if wgpu.can_time_stages() => device_lde(c, "wgpu", rows, &wgpu, || {
            let times = miden_gpu::GpuCommitter::last_stage_times(&wgpu);
            let t = times.first().expect("wgpu stage times");
            t.interpolate_ms + t.lde_ms
        }),
        Ok(wgpu) => eprintln!(
            "lde/wgpu: the wgpu LDE stage cannot be timed on this adapter ({}): no TIMESTAMP_QUERY",
            miden_gpu::GpuCommitter::device_name(&wgpu)
        ),
        Err(error) => eprintln!("skipping lde/wgpu: {error}"),
    }

    #[cfg(feature = "cuda")]
    match miden_gpu::cuda::CudaOptions::from_env()
        .and_then(miden_gpu::cuda::CudaCommitter::with_options)
    {
        // GPUs work side by side: the stage takes as long as the slowest one.
        Ok(cuda) => device_lde(c, "cuda", rows, &cuda, || {
            let times = miden_gpu::GpuCommitter::last_stage_times(&cuda);
            times.iter().map(|t| t.interpolate_ms + t.lde_ms).fold(0.0, f32::max)
        }),
        Err(error) => eprintln!("skipping lde/cuda: {error}"),
    }
}

/// `lde/<name>` for a GPU backend: each iteration commits and adds the interpolation + LDE
/// device time (milliseconds) that `lde_ms` reads after the commitment.
#[allow(dead_code)]
fn device_lde(
    c: &mut Criterion,
    name: &str,
    rows: usize,
    committer: &dyn miden_gpu::GpuCommitter,
    lde_ms: impl Fn() -> f32,
) {
    let lde_rows = rows * BLOWUP;
    let mut group = c.benchmark_group(format!("lde/{name}"));
    for cols in COLUMNS {
        let columns = support::random_columns(cols as u64, cols, rows);
        let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
        let request = support::trace_request(&slices, BLOWUP, HashFunction::Rpo256);
        group.sample_size(10).throughput(Throughput::Elements((lde_rows * cols) as u64));
        group.bench_function(BenchmarkId::new(format!("{cols}cols"), lde_rows), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        committer.commit(&request).expect("commit");
                        Duration::from_secs_f64(f64::from(lde_ms()) / 1e3)
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, stages, lde);
criterion_main!(benches);
