//! Fuzzed parity: proptest draws shapes and values and checks the backend against Winterfell.
//!
//! The backend comes from `MIDEN_GPU_BACKEND` (default: the CPU backend); the number of cases
//! from `PROPTEST_CASES` (default 64, bounded for CI; the device runs use 10 000).

mod common;

use common::Case;
use miden_gpu::{Backend, BackendOptions, GpuCommitter, HashFunction};
use proptest::prelude::*;

fn committer() -> std::sync::Arc<dyn GpuCommitter> {
    let mut options = BackendOptions::from_env().expect("MIDEN_GPU_* variables");
    if options.backend == Backend::Auto {
        options.backend = Backend::Cpu;
    }
    options.create().expect("backend under test")
}

/// The hash functions of the backend under test: all of them on the CPU.
fn hashes() -> Vec<HashFunction> {
    match BackendOptions::from_env().expect("MIDEN_GPU_BACKEND").backend {
        Backend::Auto | Backend::Cpu => HashFunction::ALL.to_vec(),
        _ => common::GPU_HASHES.to_vec(),
    }
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u32..=9,
        1usize..=160,
        prop::sample::select(vec![2usize, 4, 8, 16]),
        1usize..=3,
        prop::sample::select(vec![1usize, 2, 4]),
        prop::sample::select(hashes()),
        prop::bool::ANY,
    )
        .prop_map(|(log_rows, cols, blowup, extension, partitions, hash, composition)| Case {
            log_rows,
            cols: if composition { cols.min(16) } else { cols },
            blowup,
            extension,
            partitions,
            hash,
            composition,
        })
}

/// Cases that passed so far (printed every 1000, so a long device run shows its progress).
static CASES_PASSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn backend_matches_winterfell(case in case(), seed in any::<u64>()) {
        thread_local!(static COMMITTER: std::sync::Arc<dyn GpuCommitter> = committer());
        COMMITTER.with(|c| common::check_case(c.as_ref(), &case, seed));
        let done = CASES_PASSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if done.is_multiple_of(1000) {
            eprintln!("fuzz: {done} cases passed");
        }
    }
}
