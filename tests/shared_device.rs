//! Committers sharing one CUDA GPU under a memory limit (`CudaOptions::memory_limit`): two
//! committers with four proving threads each prove at once, every proof verifies, and what the
//! process holds on the GPU together never exceeds the limit; FRI layers kept on the device for
//! the queries count against it, so a commitment beside them streams within the limit.
//!
//! Where this machine has no CUDA device the tests are reported as ignored, with the reason
//! (`common/device.rs`).

mod common;

use std::{
    sync::{Arc, Mutex, PoisonError},
    thread,
};

use common::{
    device::{tests, DeviceTests},
    fib::{FibAir, FibProver, FibTrace},
    random_felt,
};
use miden_crypto::hash::rpo::Rpo256;
use miden_gpu::{
    cuda::{device_count, CudaCommitter, CudaOptions},
    fri::FriRequest,
    CommitRequest, CpuCommitter, Digest, Felt, GpuCommitter, GpuProver, HashFunction, PolyInput,
    RowHashing,
};
use rand::{rngs::StdRng, SeedableRng};
use winter_air::proof::Proof;
use winter_crypto::{DefaultRandomCoin, MerkleTree};
use winter_prover::Prover;
use winter_verifier::AcceptableOptions;

fn main() {
    let absent = device_count().err().map(|e| e.to_string());
    DeviceTests::new("cuda", absent)
        .on_device(tests![
            two_committers_share_a_gpu_within_its_limit,
            kept_fri_layers_count_against_the_limit
        ])
        .run()
}

/// A committer on GPU 0 with `limit` bytes of device memory.
fn committer(limit: Option<u64>) -> Arc<CudaCommitter> {
    let options = CudaOptions { devices: Some(vec![0]), memory_limit: limit, ..Default::default() };
    Arc::new(CudaCommitter::with_options(options).expect("CUDA committer on GPU 0"))
}

// CONCURRENT PROOFS
// ================================================================================================

/// Fibonacci proofs of 2^14 steps, 16 columns, blowup 8, quadratic extension.
const PAIRS: usize = 8;
const STEPS: usize = 1 << 14;

/// The proof of the Fibonacci trace by `GpuProver` on `committer`, CPU fallback off.
fn prove(committer: Arc<dyn GpuCommitter>) -> Proof {
    GpuProver::with_committer(FibProver::<Rpo256>::new(common::fib_proof_options()), committer)
        .with_cpu_fallback(false)
        .prove(FibTrace::new(PAIRS, STEPS))
        .expect("proof")
}

fn verifies(proof: Proof) -> bool {
    let acceptable = AcceptableOptions::OptionSet(vec![common::fib_proof_options()]);
    winter_verifier::verify::<FibAir, Rpo256, DefaultRandomCoin<Rpo256>, MerkleTree<Rpo256>>(
        proof,
        FibTrace::new(PAIRS, STEPS).inputs(),
        &acceptable,
    )
    .is_ok()
}

/// The limit is one and a half times what one proof alone holds at its peak: two committers
/// that each budgeted against the whole limit could together exceed it. With four threads on
/// each, every proof verifies and the GPU's shared gauge stays within the limit.
fn two_committers_share_a_gpu_within_its_limit() {
    let _alone_on_the_gpu = ONE_TEST.lock().unwrap_or_else(PoisonError::into_inner);
    let alone = committer(None);
    assert!(verifies(prove(alone.clone())), "the proof alone does not verify");
    let peak_alone = alone.device_bytes_peak()[0];
    drop(alone);
    let limit = peak_alone + peak_alone / 2;

    let committers = [committer(Some(limit)), committer(Some(limit))];
    committers[0].reset_shared_device_peak();
    let proofs: Vec<Proof> = thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let committer = committers[i % 2].clone();
                scope.spawn(move || prove(committer))
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("proving thread")).collect()
    });
    for proof in proofs {
        assert!(verifies(proof), "a concurrent proof does not verify");
    }
    let shared_peak = committers[0].shared_device_bytes_peak()[0];
    let summed_peaks: u64 = committers.iter().map(|c| c.device_bytes_peak()[0]).sum();
    eprintln!(
        "limit {limit} B (one proof alone: {peak_alone} B); shared peak {shared_peak} B; \
         the committers' peaks summed {summed_peaks} B"
    );
    assert!(shared_peak <= limit, "the GPU held {shared_peak} B, over the limit of {limit} B");
    assert_eq!(committers[1].shared_device_bytes_peak()[0], shared_peak);
}

// KEPT FRI LAYERS
// ================================================================================================

/// The tests measure the GPU's shared peak over their own work, so they run one at a time.
static ONE_TEST: Mutex<()> = Mutex::new(());

/// FRI layers kept on the device by one committer count in the GPU's shared gauge, and a
/// commitment by another committer beside them, under a limit its full footprint alone would
/// fill, streams within the limit and equals the CPU's.
fn kept_fri_layers_count_against_the_limit() {
    let _alone_on_the_gpu = ONE_TEST.lock().unwrap_or_else(PoisonError::into_inner);
    let mut rng = StdRng::seed_from_u64(7);
    let columns: Vec<Vec<Felt>> =
        (0..16).map(|_| (0..1 << 14).map(|_| random_felt(&mut rng)).collect()).collect();
    let columns: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
    let request = CommitRequest {
        input: PolyInput::Trace { columns: &columns },
        blowup: 8,
        row_hashing: RowHashing::WholeRow,
        hash: HashFunction::Rpo256,
    };
    let expected = CpuCommitter::new().commit(&request).expect("CPU commitment");
    let alone = committer(None);
    alone.commit(&request).expect("commitment alone");
    let limit = alone.device_bytes_peak()[0];
    drop(alone);

    let keeper = committer(Some(limit));
    keeper.reset_shared_device_peak();
    let coefficients: Vec<Felt> = (0..1 << 14).map(|_| random_felt(&mut rng)).collect();
    let components = [coefficients.as_slice(), coefficients.as_slice()];
    let fri = FriRequest {
        components: &components,
        blowup: 8,
        folding_factor: 4,
        num_layers: 2,
        hash: HashFunction::Rpo256,
        keep_layers: true,
    };
    let layers = keeper
        .commit_fri(&fri, &mut |_: Digest| vec![Felt::new(3), Felt::new(5)])
        .expect("FRI layers");
    assert!(layers.kept.is_some(), "the layers were not kept");
    // the first layer's evaluations alone: 2^17 quadratic elements
    let first_layer = (8u64 << 14) * 2 * 8;
    let held = keeper.shared_device_bytes_held()[0];
    assert!(held >= first_layer, "the kept layers are not counted: {held} B held");

    let other = committer(Some(limit));
    let commitment = other.commit(&request).expect("commitment beside the kept layers");
    assert!(commitment.lde == expected.lde && commitment.nodes == expected.nodes);
    let shared_peak = other.shared_device_bytes_peak()[0];
    eprintln!("limit {limit} B; kept layers and more: {held} B; shared peak {shared_peak} B");
    assert!(shared_peak <= limit, "the GPU held {shared_peak} B, over the limit of {limit} B");
    let before = keeper.shared_device_bytes_held()[0];
    drop(layers);
    let after = keeper.shared_device_bytes_held()[0];
    assert!(after + first_layer <= before, "dropped layers still counted: {before} -> {after} B");
}
