//! Criterion benches per stage and per backend present: row hashing (RPO, RPX), Merkle tree,
//! and the whole trace commitment (interpolation + LDE + hashing + tree; the LDE's share is the
//! whole minus the other stages), on realistic shapes scaled to the machine.
//!
//! `cargo bench --bench stages [--features cuda]`; `MIDEN_GPU_BENCH_LOG_ROWS` sets the trace
//! length (default 2^14 rows, LDE blowup 8).

#[path = "../examples/support/mod.rs"]
mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use miden_gpu::{Felt, HashFunction, LdeRows, RowHashing};

const BLOWUP: usize = 8;

fn log_rows() -> u32 {
    std::env::var("MIDEN_GPU_BENCH_LOG_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(14)
}

fn stages(c: &mut Criterion) {
    let rows = 1usize << log_rows();
    let lde_rows = rows * BLOWUP;
    for committer in support::available_backends(None) {
        let name = committer.backend().to_string();
        for cols in [8usize, 73] {
            let columns = support::random_columns(cols as u64, cols, rows);
            let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();

            let mut group = c.benchmark_group(format!("commit/{name}"));
            group.sample_size(10).throughput(Throughput::Elements(lde_rows as u64));
            for hash in [HashFunction::Rpo256, HashFunction::Rpx256] {
                let request = support::trace_request(&slices, BLOWUP, hash);
                group.bench_function(BenchmarkId::new(format!("{hash}/{cols}cols"), lde_rows), |b| {
                    b.iter(|| committer.commit(&request).expect("commit"))
                });
            }
            group.finish();

            let lde: LdeRows = committer
                .commit(&support::trace_request(&slices, BLOWUP, HashFunction::Rpo256))
                .expect("commit")
                .lde;
            let mut group = c.benchmark_group(format!("hash_rows/{name}"));
            group.sample_size(10).throughput(Throughput::Elements(lde_rows as u64));
            for hash in [HashFunction::Rpo256, HashFunction::Rpx256] {
                group.bench_function(BenchmarkId::new(format!("{hash}/{cols}cols"), lde_rows), |b| {
                    b.iter(|| committer.hash_rows(&lde, RowHashing::WholeRow, hash).expect("hash"))
                });
            }
            group.finish();
        }

        let words = support::random_columns(4, 4, lde_rows);
        let leaves: Vec<[Felt; 4]> =
            (0..lde_rows).map(|i| core::array::from_fn(|j| words[j][i])).collect();
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

criterion_group!(benches, stages);
criterion_main!(benches);
