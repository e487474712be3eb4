//! `GpuProver` on the CPU backend: proofs byte-identical to Winterfell's default prover for every
//! field extension and hash, that verify; tampered proofs are rejected. Winterfell's own
//! transcript, which the prover mirrors, held to the pinned release's. And the self-check: a
//! backend that returns wrong data without an error never yields a proof that does not verify.

mod common;

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Instant,
};

use miden_crypto::hash::{blake::Blake3_256, rpo::Rpo256};
use miden_gpu::{
    fri::{FoldingChannel, FriLayers, FriRequest},
    Backend, CommitRequest, Commitment, CpuCommitter, DeviceFailure, DeviceStatus, Digest, Felt,
    GpuCommitter, GpuError, GpuProver, HashFunction, Keep, KeptRows, LdeRows, RowHashing,
};
use winter_air::proof::Proof;
use winter_crypto::{DefaultRandomCoin, MerkleTree};
use winter_math::FieldElement;
use winter_prover::Prover;
use winter_verifier::AcceptableOptions;

use common::fib::{FibAir, FibProver, FibTrace};

#[test]
fn gpu_prover_matches_winterfell_on_cpu_backend() {
    common::check_proofs(Arc::new(CpuCommitter::new()), &HashFunction::ALL);
}

/// BLAKE3 of the serialized proof of a fixed Fibonacci trace under winter-prover 0.13.1.
///
/// `GpuProver` mirrors winter-prover's private proof flow (the order of the Fiat–Shamir draws,
/// the proof's layout), which the exact `=0.13.1` pins in Cargo.toml hold still. A new winter
/// release that changes the transcript changes this digest: the mirrored code must then be
/// checked against the new release before the pins move.
const PINNED_PROOF_DIGEST: &str =
    "0xb3744d667a64c1c91eb52cdc1f3a6e78630adb8a412578e6e22131a296a64a14";

#[test]
fn winterfell_transcript_is_the_pinned_releases() {
    let options = common::fib_proof_options();
    // One thread: Winterfell's concurrent grinding keeps the first nonce any thread finds.
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    let (winterfell, gpu_prover) = one_thread.install(|| {
        let winterfell = FibProver::<Rpo256>::new(options.clone())
            .prove(FibTrace::new(3, 1 << 10))
            .expect("Winterfell proof")
            .to_bytes();
        let gpu_prover = GpuProver::with_committer(
            FibProver::<Rpo256>::new(options.clone()),
            Arc::new(CpuCommitter::new()),
        )
        .with_cpu_fallback(false)
        .prove(FibTrace::new(3, 1 << 10))
        .expect("GpuProver proof")
        .to_bytes();
        (winterfell, gpu_prover)
    });
    assert!(winterfell == gpu_prover, "GpuProver's proof differs from Winterfell's");
    let digest = String::from(Blake3_256::hash(&winterfell));
    assert_eq!(
        digest, PINNED_PROOF_DIGEST,
        "Winterfell's proof of a fixed trace changed: its transcript is no longer the pinned \
         release's, which GpuProver mirrors"
    );
}

// SELF-CHECK
// ================================================================================================

/// What a [`CorruptingCommitter`] changes in the commitment it corrupts.
#[derive(Debug, Clone, Copy)]
enum Corruption {
    /// The linear coefficient of the first polynomial: the out-of-domain frame and the DEEP
    /// composition are computed from it.
    Coefficient,
    /// The first element of LDE row 0 of a trace segment, which the constraint evaluation
    /// reads: the composition polynomial is wrong. (The composition's LDE is read only where it
    /// is queried, and its leaves were hashed before the change, so it is not corrupted so.)
    /// With its debug assertions, Winterfell's evaluator checks the constraint degrees and
    /// panics first, so this runs only where they are off
    /// ([`common::winterfell_checks_degrees`]).
    LdeElement,
}

/// The corruptions the self-check tests make, each with the commitment it hits by call order
/// (0 the main trace, 1 the auxiliary trace, 2 the composition polynomial).
fn corruptions() -> Vec<(Corruption, usize)> {
    let mut cases: Vec<_> = (0..3).map(|call| (Corruption::Coefficient, call)).collect();
    if !common::winterfell_checks_degrees() {
        cases.extend([(Corruption::LdeElement, 0), (Corruption::LdeElement, 1)]);
    }
    cases
}

/// The CPU backend, but one commitment (by call order) comes back changed, with no error: a
/// backend returning wrong data silently. With `keep_rows`, the rows of the commitments asked to
/// keep them stay "on the device" instead ([`HeldRows`]).
struct CorruptingCommitter {
    cpu: CpuCommitter,
    corruption: Corruption,
    corrupted_call: usize,
    calls: AtomicUsize,
    keep_rows: Option<KeepRows>,
}

/// How a [`CorruptingCommitter`] keeps rows: whether every read fails, and the reads counted.
#[derive(Clone)]
struct KeepRows {
    fail: bool,
    reads: Arc<AtomicUsize>,
}

impl CorruptingCommitter {
    fn new(corruption: Corruption, corrupted_call: usize) -> Self {
        let calls = AtomicUsize::new(0);
        Self { cpu: CpuCommitter::new(), corruption, corrupted_call, calls, keep_rows: None }
    }
}

impl GpuCommitter for CorruptingCommitter {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }

    fn device_name(&self) -> String {
        "CPU, corrupting one commitment".into()
    }

    fn commit(&self, request: &CommitRequest<'_>) -> miden_gpu::Result<Commitment> {
        let mut commitment = self.cpu.commit(request)?;
        if self.calls.fetch_add(1, Ordering::SeqCst) == self.corrupted_call {
            match self.corruption {
                Corruption::Coefficient => commitment.polys[0][1] += Felt::ONE,
                Corruption::LdeElement => commitment.lde.data[0] += Felt::ONE,
            }
        }
        Ok(commitment)
    }

    fn commit_keeping(
        &self,
        request: &CommitRequest<'_>,
        keep: Keep,
    ) -> miden_gpu::Result<Commitment> {
        let mut commitment = self.commit(request)?;
        if let (true, Some(KeepRows { fail, reads })) = (keep.rows, self.keep_rows.clone()) {
            let empty = LdeRows { data: Vec::new().into(), ..commitment.lde.clone() };
            let lde = std::mem::replace(&mut commitment.lde, empty);
            commitment.kept_rows = Some(Arc::new(HeldRows { lde, fail, reads }));
        }
        Ok(commitment)
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> miden_gpu::Result<Vec<Digest>> {
        self.cpu.hash_rows(lde, row_hashing, hash)
    }

    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> miden_gpu::Result<Vec<Digest>> {
        self.cpu.build_tree(leaves, hash)
    }

    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> miden_gpu::Result<FriLayers> {
        self.cpu.commit_fri(request, channel)
    }
}

fn verifies(proof: &Proof, trace: &FibTrace) -> bool {
    let acceptable = AcceptableOptions::OptionSet(vec![common::fib_proof_options()]);
    winter_verifier::verify::<FibAir, Rpo256, DefaultRandomCoin<Rpo256>, MerkleTree<Rpo256>>(
        proof.clone(),
        trace.inputs(),
        &acceptable,
    )
    .is_ok()
}

fn corrupting_prover(corruption: Corruption, call: usize) -> GpuProver<FibProver<Rpo256>> {
    GpuProver::with_committer(
        FibProver::<Rpo256>::new(common::fib_proof_options()),
        Arc::new(CorruptingCommitter::new(corruption, call)),
    )
}

/// Every corruption of every commitment in turn: the proof is the CPU's, byte for byte (one
/// rayon thread: Winterfell's concurrent grinding keeps the first nonce any thread finds).
#[test]
fn self_check_answers_a_silently_wrong_backend_with_the_cpu_proof() {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(|| {
        let trace = FibTrace::new(2, 256);
        let expected = FibProver::<Rpo256>::new(common::fib_proof_options())
            .prove(FibTrace::new(2, 256))
            .expect("Winterfell proof");
        for (corruption, call) in corruptions() {
            let proof = corrupting_prover(corruption, call)
                .prove(FibTrace::new(2, 256))
                .expect("proof re-made on the CPU");
            assert!(verifies(&proof, &trace), "{corruption:?} in call {call}: does not verify");
            assert!(proof == expected, "{corruption:?} in call {call}: not the CPU prover's proof");
        }
    });
}

#[test]
fn self_check_without_fallback_panics_with_the_typed_error() {
    for (corruption, call) in corruptions() {
        let prover = corrupting_prover(corruption, call).with_cpu_fallback(false);
        let outcome = catch_unwind(AssertUnwindSafe(|| prover.prove(FibTrace::new(2, 256))));
        let payload = outcome.expect_err("a proof was returned from wrong data");
        let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.starts_with("the proof made on cpu does not verify (")
                && message.ends_with("the backend returned wrong data without an error, or the trace does not satisfy the AIR"),
            "{corruption:?} in call {call}: {message}"
        );
    }
}

/// What the self-check catches: without it, the same corruption gives a proof that fails.
#[test]
fn without_self_check_the_wrong_data_gives_a_proof_that_fails() {
    for (corruption, call) in corruptions() {
        let proof = corrupting_prover(corruption, call)
            .with_self_check(false)
            .prove(FibTrace::new(2, 256))
            .expect("a proof, wrong");
        let trace = FibTrace::new(2, 256);
        assert!(!verifies(&proof, &trace), "{corruption:?} in call {call}: it verifies");
    }
}

// ROWS KEPT ON THE DEVICE
// ================================================================================================

/// Rows "on the device": only what [`KeptRows::read`] returns leaves them.
#[derive(Debug)]
struct HeldRows {
    lde: LdeRows,
    fail: bool,
    reads: Arc<AtomicUsize>,
}

impl KeptRows for HeldRows {
    fn read(&self, positions: &[usize]) -> miden_gpu::Result<Vec<Vec<Felt>>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            let status = DeviceStatus::Internal("failed".into());
            let failure = DeviceFailure::new("kept row read", status);
            return Err(GpuError::Device { backend: Backend::Cpu, failure });
        }
        Ok(positions.iter().map(|&p| self.lde.row(p).to_vec()).collect())
    }
}

/// A prover on a [`CorruptingCommitter`] that corrupts nothing and keeps rows, and the counter
/// of its reads.
fn row_keeping_prover(fail: bool) -> (GpuProver<FibProver<Rpo256>>, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let committer = CorruptingCommitter {
        keep_rows: Some(KeepRows { fail, reads: reads.clone() }),
        ..CorruptingCommitter::new(Corruption::Coefficient, usize::MAX)
    };
    let options = common::fib_proof_options();
    (GpuProver::with_committer(FibProver::<Rpo256>::new(options), Arc::new(committer)), reads)
}

/// The composition's rows kept on the "device" and read at the query positions alone give
/// Winterfell's proof, byte for byte; so does a read that fails, answered by committing to the
/// composition again on the CPU (one rayon thread: Winterfell's concurrent grinding keeps the
/// first nonce any thread finds).
#[test]
fn kept_composition_rows_give_winterfells_proof() {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(|| {
        let expected = FibProver::<Rpo256>::new(common::fib_proof_options())
            .prove(FibTrace::new(2, 256))
            .expect("Winterfell proof");
        for fail_reads in [false, true] {
            let (prover, reads) = row_keeping_prover(fail_reads);
            let proof = prover.prove(FibTrace::new(2, 256)).expect("proof");
            assert_eq!(reads.load(Ordering::SeqCst), 1, "failing reads {fail_reads}: reads");
            assert!(proof == expected, "failing reads {fail_reads}: not Winterfell's proof");
        }
    });
}

/// Without the CPU fallback, a failed read of kept rows is a panic carrying the typed error.
#[test]
fn a_failed_read_of_kept_rows_without_fallback_panics_with_the_error() {
    let (prover, _) = row_keeping_prover(true);
    let prover = prover.with_cpu_fallback(false);
    let outcome = catch_unwind(AssertUnwindSafe(|| prover.prove(FibTrace::new(2, 256))));
    let payload = outcome.expect_err("a proof without the rows");
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(message, "constraint queries failed: cpu device failure: kept row read: failed");
}

/// The self-check's cost: the time of `GpuProver::prove` on the CPU backend with and without
/// it, and of verification alone, for a Fibonacci trace of 2^16 steps (`cargo test --release
/// --test prover -- --ignored --nocapture self_check_cost`).
#[test]
#[ignore = "timing; prints the self-check's cost"]
fn self_check_cost() {
    let prover = |self_check: bool| {
        GpuProver::with_committer(
            FibProver::<Rpo256>::new(common::fib_proof_options()),
            Arc::new(CpuCommitter::new()),
        )
        .with_self_check(self_check)
    };
    let best_of = |runs: usize, mut run: Box<dyn FnMut() -> f64>| {
        (0..runs).map(|_| run()).fold(f64::INFINITY, f64::min)
    };
    let timed = |self_check: bool| -> Box<dyn FnMut() -> f64> {
        Box::new(move || {
            let start = Instant::now();
            prover(self_check).prove(FibTrace::new(2, 1 << 16)).expect("proof");
            start.elapsed().as_secs_f64()
        })
    };
    let unchecked = best_of(5, timed(false));
    let checked = best_of(5, timed(true));
    let proof = prover(false).prove(FibTrace::new(2, 1 << 16)).expect("proof");
    let trace = FibTrace::new(2, 1 << 16);
    let verify = best_of(
        5,
        Box::new(|| {
            let start = Instant::now();
            assert!(verifies(&proof, &trace));
            start.elapsed().as_secs_f64()
        }),
    );
    println!(
        "2^16 steps, 2 pairs, {} threads: prove {:.1} ms without self-check, {:.1} ms with; \
         verification alone {:.2} ms ({:.2}% of the proof)",
        rayon::current_num_threads(),
        unchecked * 1e3,
        checked * 1e3,
        verify * 1e3,
        100.0 * verify / unchecked
    );
}
