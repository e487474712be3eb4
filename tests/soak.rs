//! Soak: 100 commitments back to back on one committer; device memory returns to its baseline
//! and throughput does not degrade. Heavy, so `#[ignore]`d: run it on a GPU machine with
//! `MIDEN_GPU_BACKEND=cuda cargo test --release --features cuda --test soak -- --ignored --nocapture`.

mod common;

use std::time::Instant;

use miden_gpu::{Backend, BackendOptions, Felt, HashFunction, PolyInput, RowHashing};

#[test]
#[ignore = "heavy; run on a GPU machine"]
fn hundred_commitments_keep_memory_and_throughput() {
    let committer = {
        let mut options = BackendOptions::from_env().expect("MIDEN_GPU_* variables");
        if options.backend == Backend::Auto {
            options.backend = Backend::Cpu;
        }
        options.create().expect("backend under test")
    };
    let log_rows: u32 =
        std::env::var("MIDEN_GPU_SOAK_LOG_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(42);
    let columns: Vec<Vec<Felt>> = (0..73)
        .map(|_| (0..1 << log_rows).map(|_| common::random_felt(&mut rng)).collect())
        .collect();
    let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
    let request = miden_gpu::CommitRequest {
        input: PolyInput::Trace { columns: &slices },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let reference = committer.commit(&request).expect("first commitment").root();
    let baseline = committer.memory_in_use();
    assert!(
        baseline.is_some() || committer.backend() == Backend::Cpu,
        "a GPU backend must report its device memory for the soak to check it"
    );
    let mut times = Vec::with_capacity(100);
    for i in 0..100 {
        let start = Instant::now();
        let root = committer.commit(&request).expect("commitment").root();
        times.push(start.elapsed().as_secs_f64());
        assert_eq!(root, reference, "commitment {i} gave another root");
    }
    let after = committer.memory_in_use();
    let first: f64 = times[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = times[90..].iter().sum::<f64>() / 10.0;
    println!(
        "soak on {}: 100 x (73 cols x 2^{log_rows}, blowup 8, RPO): first 10 avg {first:.4} s, last 10 avg {last:.4} s; memory in use before {baseline:?}, after {after:?}",
        committer.device_name()
    );
    assert_eq!(baseline, after, "device memory in use changed over the soak");
    assert!(last < first * 1.25, "throughput degraded: {first:.4} s -> {last:.4} s");
}
