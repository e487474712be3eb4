//! `ProverPool`: mixed jobs (Fibonacci AIRs of several sizes, hashes and fields; Miden programs
//! with feature `miden`) proved concurrently, each proof identical to the one proved alone and
//! verified; a failing or panicking job fails alone; a full queue refuses or makes `submit`
//! wait; shutdown finishes the queued jobs.
//!
//! Host memory: a job beyond the pool's host limit is `OutOfMemory`, jobs that do not fit
//! together wait for each other, and four jobs per slot on two slots stay within the limit.
//! Two wgpu committers on one adapter prove concurrently, and FRI layers kept on the device
//! count in its memory.
//!
//! On the CPU backend everywhere, and on wgpu where an adapter is present (lavapipe in CI);
//! without one the wgpu tests are reported as ignored, with the reason (`common/device.rs`).

mod common;

use std::{
    collections::BTreeSet,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Arc,
    },
    thread,
    time::{Duration, Instant},
};

use common::{
    device::{tests, DeviceTests},
    fib::{FibAir, FibProver, FibTrace},
};
use miden_crypto::hash::{rpo::Rpo256, rpx::Rpx256};
use miden_gpu::{
    compare_proofs,
    faults::{Fault, FaultyCommitter},
    pool::{JobHandle, PoolError, WORKERS_PER_SLOT},
    Backend, BackendOptions, GpuCommitter, GpuError, GpuHasher, GpuProver, HashFunction,
    PoolOptions, ProverPool,
};
use winter_air::{proof::Proof, BatchingMethod, FieldExtension, ProofOptions};
use winter_crypto::{hashers::Blake3_256, DefaultRandomCoin, MerkleTree};
use winter_prover::Prover;
use winter_verifier::AcceptableOptions;

fn main() {
    DeviceTests::new("wgpu", wgpu_absent())
        .on_host(tests![
            cpu_pool_proves_mixed_jobs_as_alone,
            concurrent_jobs_spread_over_the_slots,
            start_turns_are_held_one_per_slot,
            slots_with_their_own_threads_prove_on_them,
            failing_jobs_fail_alone,
            full_queue_refuses_and_submit_waits,
            shutdown_finishes_queued_jobs,
            drop_finishes_queued_jobs,
            options_out_of_range_are_typed_errors,
            jobs_beyond_the_host_limit_are_out_of_memory,
            jobs_wait_for_host_memory,
            four_jobs_per_slot_stay_within_the_host_limit
        ])
        .on_device(tests![
            wgpu_pool_proves_mixed_jobs_as_alone,
            wgpu_committers_share_the_adapter,
            wgpu_counts_kept_fri_layers
        ])
        .run()
}

#[cfg(feature = "wgpu")]
fn wgpu_absent() -> Option<String> {
    let options = miden_gpu::wgpu::WgpuOptions::from_env();
    miden_gpu::wgpu::AdapterSummary::find(&options).err().map(|e| e.to_string())
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_absent() -> Option<String> {
    Some("miden-gpu was built without the `wgpu` feature".into())
}

fn cpu_pool(cpu_slots: usize, workers: Option<usize>, queue_capacity: Option<usize>) -> ProverPool {
    let options = PoolOptions {
        cpu_slots,
        workers,
        queue_capacity,
        ..PoolOptions::new(BackendOptions::new(Backend::Cpu))
    };
    ProverPool::new(&options).expect("CPU pool")
}

/// Runs `f` on a rayon pool of one thread: Winterfell's concurrent grinding keeps the first
/// nonce any thread finds, so only then are two correct proofs equal byte for byte.
fn on_one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(f)
}

// FIBONACCI JOBS
// ================================================================================================

/// A Fibonacci proof: its hash, field, trace length and width.
#[derive(Debug, Clone, Copy)]
struct FibCase {
    hash: HashFunction,
    field: FieldExtension,
    log_steps: u32,
    pairs: usize,
}

const FIB_CASES: [FibCase; 4] = [
    FibCase {
        hash: HashFunction::Rpo256,
        field: FieldExtension::Quadratic,
        log_steps: 10,
        pairs: 2,
    },
    FibCase { hash: HashFunction::Rpx256, field: FieldExtension::Cubic, log_steps: 8, pairs: 3 },
    FibCase {
        hash: HashFunction::Blake3_256,
        field: FieldExtension::Quadratic,
        log_steps: 9,
        pairs: 1,
    },
    FibCase { hash: HashFunction::Rpo256, field: FieldExtension::Cubic, log_steps: 8, pairs: 4 },
];

impl FibCase {
    fn options(&self) -> ProofOptions {
        ProofOptions::new(
            27,
            8,
            0,
            self.field,
            4,
            31,
            BatchingMethod::Linear,
            BatchingMethod::Linear,
        )
    }

    fn trace(&self) -> FibTrace {
        FibTrace::new(self.pairs, 1 << self.log_steps)
    }

    /// The proof on one rayon thread: by `GpuProver` on `committer` (CPU fallback off), or by
    /// Winterfell's own prover when there is none.
    fn prove(&self, committer: Option<Arc<dyn GpuCommitter>>) -> Vec<u8> {
        match self.hash {
            HashFunction::Rpo256 => self.prove_with::<Rpo256>(committer),
            HashFunction::Rpx256 => self.prove_with::<Rpx256>(committer),
            HashFunction::Blake3_256 => self.prove_with::<Blake3_256<miden_gpu::Felt>>(committer),
            hash => unreachable!("no Fibonacci case uses {hash}"),
        }
    }

    fn prove_with<H: GpuHasher>(&self, committer: Option<Arc<dyn GpuCommitter>>) -> Vec<u8> {
        let prover = FibProver::<H>::new(self.options());
        let proof = on_one_thread(|| match committer {
            Some(committer) => GpuProver::with_committer(prover, committer)
                .with_cpu_fallback(false)
                .prove(self.trace()),
            None => prover.prove(self.trace()),
        });
        proof.expect("Fibonacci proof").to_bytes()
    }

    fn verifies(&self, proof: &[u8]) -> bool {
        match self.hash {
            HashFunction::Rpo256 => self.verifies_with::<Rpo256>(proof),
            HashFunction::Rpx256 => self.verifies_with::<Rpx256>(proof),
            HashFunction::Blake3_256 => self.verifies_with::<Blake3_256<miden_gpu::Felt>>(proof),
            hash => unreachable!("no Fibonacci case uses {hash}"),
        }
    }

    fn verifies_with<H: GpuHasher>(&self, proof: &[u8]) -> bool {
        let acceptable = AcceptableOptions::OptionSet(vec![self.options()]);
        Proof::from_bytes(proof).is_ok_and(|proof| {
            winter_verifier::verify::<FibAir, H, DefaultRandomCoin<H>, MerkleTree<H>>(
                proof,
                self.trace().inputs(),
                &acceptable,
            )
            .is_ok()
        })
    }
}

/// Queues the proof of `case` on the job's committer, on one rayon thread.
fn submit_fib(pool: &ProverPool, case: FibCase) -> JobHandle<Vec<u8>> {
    pool.submit(move |job| Ok(case.prove(Some(job.committer().clone()))))
}

// MIXED JOBS
// ================================================================================================

fn cpu_pool_proves_mixed_jobs_as_alone() {
    check_mixed_jobs(cpu_pool(2, Some(3), None));
}

fn wgpu_pool_proves_mixed_jobs_as_alone() {
    let pool =
        ProverPool::new(&PoolOptions::new(BackendOptions::new(Backend::Wgpu))).expect("wgpu pool");
    assert_eq!(
        (pool.backend(), pool.slots(), pool.workers()),
        (Backend::Wgpu, 1, WORKERS_PER_SLOT)
    );
    check_mixed_jobs(pool);
}

/// Every Fibonacci case (one thread each, so byte-identical to Winterfell's proof of the trace
/// alone), one `prove_winterfell` job (all threads: compared with `compare_proofs`, which
/// accepts another grinding nonce), and the Miden jobs, all queued at once; every proof
/// verifies.
fn check_mixed_jobs(pool: ProverPool) {
    let fib_jobs: Vec<_> = FIB_CASES.iter().map(|&case| submit_fib(&pool, case)).collect();
    let helper_case = FIB_CASES[0];
    let helper_job =
        pool.prove_winterfell(FibProver::<Rpo256>::new(helper_case.options()), helper_case.trace());
    #[cfg(feature = "miden")]
    let miden_jobs = miden_jobs::submit(&pool);

    for (case, job) in FIB_CASES.iter().zip(fib_jobs) {
        let proof = job.wait().expect("Fibonacci job");
        assert!(
            proof == case.prove(None),
            "{case:?}: the pool's proof differs from the proof alone"
        );
        assert!(case.verifies(&proof), "{case:?}: the pool's proof does not verify");
    }
    let proof = helper_job.wait().expect("prove_winterfell job");
    let alone = Proof::from_bytes(&helper_case.prove(None)).expect("proof");
    let agreement = compare_proofs(&alone, &proof);
    assert!(agreement.is_match(), "prove_winterfell: {agreement}");
    assert!(helper_case.verifies(&proof.to_bytes()), "prove_winterfell's proof does not verify");
    #[cfg(feature = "miden")]
    miden_jobs::check(miden_jobs);
    pool.shutdown();
}

#[cfg(feature = "miden")]
mod miden_jobs {
    use miden_assembly::Assembler;
    use miden_gpu::{
        compare_proofs,
        miden::{self, programs},
        pool::JobHandle,
        Felt, ProverPool,
    };
    use miden_processor::{AdviceInputs, DefaultHost, Program, StackInputs, StackOutputs};
    use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
    use miden_verifier::ProgramInfo;

    use super::on_one_thread;

    const N: u64 = 30;

    pub struct Jobs {
        fibonacci: JobHandle<(StackOutputs, ExecutionProof)>,
        hash_memory: JobHandle<(StackOutputs, ExecutionProof)>,
    }

    fn program(source: &str) -> Program {
        Assembler::default().assemble_program(source).expect("program assembles")
    }

    fn inputs() -> StackInputs {
        StackInputs::new(vec![Felt::new(N)]).expect("valid stack inputs")
    }

    fn options(hash: HashFunction) -> ProvingOptions {
        ProvingOptions::with_96_bit_security(hash)
    }

    /// `FIBONACCI` (RPO) through a closure on one thread, `HASH_MEMORY` (RPX) through
    /// `prove_miden`.
    pub fn submit(pool: &ProverPool) -> Jobs {
        let fibonacci = pool.submit(|job| {
            let committer = job.committer().clone();
            Ok(on_one_thread(|| {
                miden::prove_with_committer(
                    &program(programs::FIBONACCI),
                    inputs(),
                    AdviceInputs::default(),
                    &mut DefaultHost::default(),
                    options(HashFunction::Rpo256),
                    committer,
                )
            })?)
        });
        let hash_memory = pool.prove_miden(
            program(programs::HASH_MEMORY),
            inputs(),
            AdviceInputs::default(),
            DefaultHost::default(),
            options(HashFunction::Rpx256),
        );
        Jobs { fibonacci, hash_memory }
    }

    /// Each proof against `miden_prover`'s of the program alone: byte-identical for the
    /// one-thread job, equal but for the grinding nonce for the other; both verify.
    pub fn check(jobs: Jobs) {
        let cases = [
            (programs::FIBONACCI, HashFunction::Rpo256, jobs.fibonacci, true),
            (programs::HASH_MEMORY, HashFunction::Rpx256, jobs.hash_memory, false),
        ];
        for (source, hash, job, exact) in cases {
            let program = program(source);
            let (outputs, proof) = job.wait().expect("Miden job");
            let (alone_outputs, alone) = on_one_thread(|| {
                miden_prover::prove(
                    &program,
                    inputs(),
                    AdviceInputs::default(),
                    &mut DefaultHost::default(),
                    options(hash),
                )
                .expect("miden_prover proves")
            });
            assert_eq!(outputs, alone_outputs, "{hash:?}: stack outputs differ");
            if exact {
                assert!(proof.to_bytes() == alone.to_bytes(), "{hash:?}: proofs differ");
            } else {
                let stark = |proof: &ExecutionProof| proof.clone().into_parts().1;
                let agreement = compare_proofs(&stark(&alone), &stark(&proof));
                assert!(agreement.is_match(), "{hash:?}: {agreement}");
            }
            let verified =
                miden_verifier::verify(ProgramInfo::from(program), inputs(), outputs, proof);
            assert!(verified.is_ok(), "{hash:?}: the pool's proof does not verify: {verified:?}");
        }
    }
}

// SCHEDULING
// ================================================================================================

/// Two jobs that can only finish together run at once, bound to the two slots.
fn concurrent_jobs_spread_over_the_slots() {
    let pool = cpu_pool(2, Some(2), None);
    assert_eq!((pool.slots(), pool.workers(), pool.queue_capacity()), (2, 2, 2));
    let arrived = Arc::new(AtomicUsize::new(0));
    let jobs: Vec<_> = (0..2)
        .map(|_| {
            let arrived = arrived.clone();
            pool.submit(move |job| {
                let slot = job.slot();
                arrived.fetch_add(1, Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(30);
                while arrived.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(1));
                }
                Ok((slot, arrived.load(Ordering::SeqCst)))
            })
        })
        .collect();
    let results: Vec<_> = jobs.into_iter().map(|job| job.wait().expect("job")).collect();
    assert!(results.iter().all(|&(_, arrived)| arrived == 2), "the jobs did not run together");
    let slots: BTreeSet<_> = results.iter().map(|&(slot, _)| slot).collect();
    assert_eq!(slots, BTreeSet::from([0, 1]), "both jobs ran on one slot");
}

/// As many jobs hold a start turn at once as the pool has slots; a job gets its slot when it
/// asks for it, after its turn: of six jobs on two slots, each holding its turn until a second
/// holder arrives and its slot until all six are bound, two hold a turn at once, and each slot
/// serves three.
fn start_turns_are_held_one_per_slot() {
    let pool = cpu_pool(2, Some(6), None);
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let bound = Arc::new(AtomicUsize::new(0));
    let wait_for = |count: &AtomicUsize, at_least: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while count.load(Ordering::SeqCst) < at_least && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
    };
    let jobs: Vec<_> = (0..6)
        .map(|_| {
            let (holding, most, bound) = (holding.clone(), most.clone(), bound.clone());
            pool.submit(move |job| {
                let turn = job.start_turn();
                most.fetch_max(holding.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                wait_for(&most, 2);
                holding.fetch_sub(1, Ordering::SeqCst);
                drop(turn);
                let slot = job.slot();
                bound.fetch_add(1, Ordering::SeqCst);
                wait_for(&bound, 6);
                Ok(slot)
            })
        })
        .collect();
    let slots: Vec<_> = jobs.into_iter().map(|job| job.wait().expect("job")).collect();
    assert_eq!(most.load(Ordering::SeqCst), 2, "jobs holding a start turn at once");
    assert_eq!(slots.iter().filter(|&&slot| slot == 0).count(), 3, "slots of the jobs: {slots:?}");
}

/// With `threads_per_slot`, a job's host work runs on its slot's own rayon threads, and a
/// Winterfell job proved there agrees with the proof alone.
fn slots_with_their_own_threads_prove_on_them() {
    let options = PoolOptions {
        cpu_slots: 2,
        workers: Some(2),
        threads_per_slot: Some(3),
        ..PoolOptions::new(BackendOptions::new(Backend::Cpu))
    };
    let pool = ProverPool::new(&options).expect("CPU pool");
    let probes: Vec<_> = (0..4)
        .map(|_| {
            pool.submit(|job| {
                let name = thread::current().name().unwrap_or_default().to_string();
                Ok((job.slot(), rayon::current_num_threads(), name))
            })
        })
        .collect();
    for probe in probes {
        let (slot, threads, name) = probe.wait().expect("probe job");
        assert_eq!(threads, 3, "slot {slot}'s job ran on {threads} threads");
        assert!(name.starts_with(&format!("prover-slot-{slot}-")), "slot {slot}: thread {name}");
    }
    let case = FIB_CASES[0];
    let proof = pool
        .prove_winterfell(FibProver::<Rpo256>::new(case.options()), case.trace())
        .wait()
        .expect("prove_winterfell job");
    let alone = Proof::from_bytes(&case.prove(None)).expect("proof");
    let agreement = compare_proofs(&alone, &proof);
    assert!(agreement.is_match(), "{agreement}");
    assert!(case.verifies(&proof.to_bytes()), "the proof does not verify");
}

/// A job that blocks its worker until `gate` receives, after telling `started` it runs.
fn gated_job(pool: &ProverPool) -> (JobHandle<usize>, mpsc::Sender<()>) {
    let (open, gate) = mpsc::channel();
    let (started, running) = mpsc::channel();
    let job = pool.submit(move |_| {
        started.send(()).expect("test waits");
        gate.recv().expect("test opens the gate");
        Ok(0)
    });
    running.recv_timeout(Duration::from_secs(30)).expect("the gated job starts");
    (job, open)
}

/// With the only worker held, a queue of 2 takes two jobs, `try_submit` refuses the third
/// (handing it back), and `submit` of it waits until the worker frees a place.
fn full_queue_refuses_and_submit_waits() {
    let pool = cpu_pool(1, Some(1), Some(2));
    let (first, gate) = gated_job(&pool);
    let queued: Vec<_> =
        (1..=2).map(|n| pool.try_submit(move |_| Ok(n)).expect("room in the queue")).collect();
    assert_eq!(pool.queued(), 2);
    let full = match pool.try_submit(move |_| Ok(3)) {
        Err(full) => full,
        Ok(_) => panic!("a full queue took a job"),
    };
    assert_eq!(full.capacity, 2);
    assert_eq!(full.to_string(), "the pool's queue is full (2 jobs waiting)");

    let submitted = AtomicBool::new(false);
    let last = thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let job = pool.submit(full.job);
            submitted.store(true, Ordering::SeqCst);
            job
        });
        thread::sleep(Duration::from_millis(200));
        assert!(!submitted.load(Ordering::SeqCst), "submit did not wait for room in the queue");
        gate.send(()).expect("gated job waits");
        waiting.join().expect("submitting thread")
    });
    let results: Vec<_> = std::iter::once(first)
        .chain(queued)
        .chain([last])
        .map(|job| job.wait().expect("job"))
        .collect();
    assert_eq!(results, [0, 1, 2, 3]);
}

fn shutdown_finishes_queued_jobs() {
    finish_queued_jobs(ProverPool::shutdown);
}

fn drop_finishes_queued_jobs() {
    finish_queued_jobs(drop);
}

/// Five proofs queued behind a held worker are all proved once `end` (shutdown or drop)
/// returns, the worker freed meanwhile.
fn finish_queued_jobs(end: fn(ProverPool)) {
    let pool = cpu_pool(1, Some(1), Some(8));
    let (first, gate) = gated_job(&pool);
    let case = FIB_CASES[3];
    let proved = Arc::new(AtomicUsize::new(0));
    let jobs: Vec<_> = (0..5)
        .map(|_| {
            let proved = proved.clone();
            pool.submit(move |job| {
                let proof = case.prove(Some(job.committer().clone()));
                proved.fetch_add(1, Ordering::SeqCst);
                Ok(proof)
            })
        })
        .collect();
    let opener = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        gate.send(()).expect("gated job waits");
    });
    end(pool);
    assert_eq!(proved.load(Ordering::SeqCst), 5, "the pool ended before its queued jobs");
    opener.join().expect("gate opener");
    assert_eq!(first.wait().expect("gated job"), 0);
    let alone = case.prove(None);
    for job in jobs {
        assert!(job.wait().expect("queued proof") == alone, "a queued proof differs");
    }
}

// FAILURES
// ================================================================================================

/// An injected backend fault (CPU fallback off), a job's own error, a panic and (feature
/// `miden`) a failing program each end their own job with their own error; the jobs around
/// them prove as alone, and the pool keeps proving on every slot.
fn failing_jobs_fail_alone() {
    let pool = cpu_pool(2, Some(3), None);
    let case = FIB_CASES[1];
    let before = submit_fib(&pool, case);
    let fault = Fault::KernelFailure;
    let faulty = pool.submit(move |job| {
        let committer = Arc::new(FaultyCommitter::new(job.committer().clone(), fault, 0));
        Ok(case.prove(Some(committer)))
    });
    let own_error = pool.submit(|_| -> Result<(), PoolError> {
        Err(PoolError::Failed("the job found no trace".into()))
    });
    let panics = pool.submit(|_| -> Result<(), PoolError> { panic!("the job gives up") });
    #[cfg(feature = "miden")]
    let failing_program = pool.prove_miden(
        miden_assembly::Assembler::default()
            .assemble_program("begin push.0 assert end")
            .expect("program assembles"),
        miden_processor::StackInputs::default(),
        miden_processor::AdviceInputs::default(),
        miden_processor::DefaultHost::default(),
        miden_prover::ProvingOptions::with_96_bit_security(miden_prover::HashFunction::Rpo256),
    );
    let after: Vec<_> = (0..2 * pool.slots()).map(|_| submit_fib(&pool, case)).collect();

    let expected = fault.error(Backend::Cpu).to_string();
    match faulty.wait() {
        Err(PoolError::Panicked { message, .. }) if message.contains(&expected) => {},
        other => panic!("the faulty job ended in {other:?}, not a panic carrying `{expected}`"),
    }
    match own_error.wait() {
        Err(PoolError::Failed(error)) => assert_eq!(error.to_string(), "the job found no trace"),
        other => panic!("the failing job ended in {other:?}"),
    }
    match panics.wait() {
        Err(error @ PoolError::Panicked { .. }) => {
            assert!(error.to_string().ends_with("panicked: the job gives up"), "{error}")
        },
        other => panic!("the panicking job ended in {other:?}"),
    }
    #[cfg(feature = "miden")]
    match failing_program.wait() {
        Err(PoolError::Miden(miden_gpu::miden::ProveError::Execution(_))) => {},
        other => panic!("the failing program ended in {:?}", other.map(|_| ())),
    }
    let alone = case.prove(None);
    for job in std::iter::once(before).chain(after) {
        assert!(job.wait().expect("proof next to failures") == alone, "a proof differs");
    }
}

fn options_out_of_range_are_typed_errors() {
    let cpu = || PoolOptions::new(BackendOptions::new(Backend::Cpu));
    for (options, name) in [
        (PoolOptions { workers: Some(0), ..cpu() }, "workers"),
        (PoolOptions { queue_capacity: Some(0), ..cpu() }, "queue_capacity"),
        (PoolOptions { cpu_slots: 0, ..cpu() }, "cpu_slots"),
        (PoolOptions { threads_per_slot: Some(0), ..cpu() }, "threads_per_slot"),
    ] {
        match ProverPool::new(&options) {
            Err(PoolError::InvalidOption { option, value: 0, .. }) => assert_eq!(option, name),
            other => panic!("{name} = 0 gave {:?}", other.map(|_| ())),
        }
    }
    let defaults = cpu_pool(3, None, None);
    let workers = 3 * WORKERS_PER_SLOT;
    assert_eq!(
        (defaults.slots(), defaults.workers(), defaults.queue_capacity()),
        (3, workers, workers)
    );
    assert_eq!(defaults.committers().len(), 3);

    let cuda = BackendOptions::new(Backend::Cuda);
    #[cfg(feature = "cuda")]
    for list in [vec![], vec![0, 0]] {
        let mut options = cuda.clone();
        options.cuda.devices = Some(list.clone());
        match ProverPool::new(&PoolOptions::new(options)) {
            Err(PoolError::Backend(GpuError::InvalidDeviceList { .. })) => {},
            other => panic!("devices {list:?} gave {:?}", other.map(|_| ())),
        }
    }
    #[cfg(not(feature = "cuda"))]
    match ProverPool::new(&PoolOptions::new(cuda)) {
        Err(PoolError::Backend(GpuError::BackendUnavailable { .. })) => {},
        other => panic!("CUDA without the feature gave {:?}", other.map(|_| ())),
    }
}

// HOST MEMORY
// ================================================================================================

/// The host memory `prove_winterfell` reserves for `case`.
fn host_need(case: &FibCase) -> u64 {
    use winter_prover::Trace;
    miden_gpu::pool::proof_host_bytes(case.trace().info(), &case.options())
}

/// A job whose estimate exceeds the pool's host limit is `OutOfMemory` at once (Winterfell,
/// Miden and a job reserving its own), and the pool goes on proving what fits.
fn jobs_beyond_the_host_limit_are_out_of_memory() {
    let case = FIB_CASES[3];
    let limit = host_need(&case) - 1;
    let options = PoolOptions {
        cpu_slots: 2,
        host_memory_limit: Some(limit),
        ..PoolOptions::new(BackendOptions::new(Backend::Cpu))
    };
    let pool = ProverPool::new(&options).expect("CPU pool");
    assert_eq!(pool.host_memory_limit(), Some(limit));
    let too_large = FIB_CASES[0];
    let winterfell =
        pool.prove_winterfell(FibProver::<Rpo256>::new(too_large.options()), too_large.trace());
    let own = pool.submit(move |job| job.reserve_host(limit + 1).map(|r| r.bytes()));
    #[cfg(feature = "miden")]
    let miden = pool.prove_miden(
        miden_assembly::Assembler::default()
            .assemble_program(miden_gpu::miden::programs::FIBONACCI)
            .expect("program assembles"),
        miden_processor::StackInputs::new(vec![miden_gpu::Felt::new(30)]).expect("inputs"),
        miden_processor::AdviceInputs::default(),
        miden_processor::DefaultHost::default(),
        miden_prover::ProvingOptions::with_96_bit_security(miden_prover::HashFunction::Rpo256),
    );
    let fits = pool.submit(move |job| {
        let _host = job.reserve_host(limit)?;
        Ok(case.prove(Some(job.committer().clone())))
    });

    let expected = host_need(&too_large);
    match winterfell.wait() {
        Err(PoolError::OutOfMemory { needed, limit: l, .. }) => {
            assert_eq!((needed, l), (expected, limit))
        },
        other => panic!("a proof beyond the limit ended in {:?}", other.map(|_| ())),
    }
    match own.wait() {
        Err(error @ PoolError::OutOfMemory { .. }) => {
            assert!(error.to_string().contains("more than the pool's limit"), "{error}")
        },
        other => panic!("a reservation beyond the limit ended in {other:?}"),
    }
    #[cfg(feature = "miden")]
    match miden.wait() {
        Err(PoolError::OutOfMemory { needed, .. }) => assert!(needed > limit),
        other => panic!("a Miden proof beyond the limit ended in {:?}", other.map(|_| ())),
    }
    assert!(fits.wait().expect("a proof within the limit") == case.prove(None));
    assert_eq!(pool.host_memory_reserved_peak(), limit);
}

/// With room for one job's estimate, jobs on two slots run one at a time, in turn.
fn jobs_wait_for_host_memory() {
    let case = FIB_CASES[1];
    let options = PoolOptions {
        cpu_slots: 2,
        host_memory_limit: Some(host_need(&case)),
        ..PoolOptions::new(BackendOptions::new(Backend::Cpu))
    };
    let pool = ProverPool::new(&options).expect("CPU pool");
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let jobs: Vec<_> = (0..4)
        .map(|_| {
            let (running, most) = (running.clone(), most.clone());
            pool.submit(move |job| {
                let _host = job.reserve_host(host_need(&case))?;
                most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let proof = case.prove(Some(job.committer().clone()));
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(proof)
            })
        })
        .collect();
    let alone = case.prove(None);
    for job in jobs {
        assert!(job.wait().expect("proof") == alone, "a proof differs");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two jobs held the host memory of one");
    assert_eq!(pool.host_memory_reserved_peak(), host_need(&case));
}

/// Four jobs per slot on two CPU slots, with room for two jobs' estimates: every proof equals
/// its proof alone and verifies, the reservations never exceed the limit, and the process's
/// peak resident memory is reported.
fn four_jobs_per_slot_stay_within_the_host_limit() {
    let limit = 2 * FIB_CASES.iter().map(host_need).max().expect("cases");
    let options = PoolOptions {
        cpu_slots: 2,
        workers: Some(8),
        host_memory_limit: Some(limit),
        ..PoolOptions::new(BackendOptions::new(Backend::Cpu))
    };
    let pool = ProverPool::new(&options).expect("CPU pool");
    let jobs: Vec<_> = (0..8)
        .map(|i| {
            let case = FIB_CASES[i % FIB_CASES.len()];
            let job = pool.submit(move |job| {
                let _host = job.reserve_host(host_need(&case))?;
                Ok(case.prove(Some(job.committer().clone())))
            });
            (case, job)
        })
        .collect();
    for (case, job) in jobs {
        let proof = job.wait().expect("proof");
        assert!(proof == case.prove(None), "{case:?}: the proof differs from the proof alone");
        assert!(case.verifies(&proof), "{case:?}: the proof does not verify");
    }
    assert!(pool.host_memory_reserved_peak() <= limit);
    if cfg!(target_os = "linux") {
        assert!(pool.peak_resident_bytes().is_some_and(|bytes| bytes > 0));
    }
}

// WGPU COMMITTERS SHARING AN ADAPTER
// ================================================================================================

/// Two committers on one adapter, four threads each, prove at once: every proof equals its
/// proof alone and verifies.
fn wgpu_committers_share_the_adapter() {
    let committers: Vec<Arc<dyn GpuCommitter>> =
        (0..2).map(|_| Backend::Wgpu.create().expect("wgpu committer")).collect();
    let proofs: Vec<(FibCase, Vec<u8>)> = thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let committer = committers[i % 2].clone();
                let case = FIB_CASES[i % FIB_CASES.len()];
                scope.spawn(move || (case, case.prove(Some(committer))))
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("proving thread")).collect()
    });
    for (case, proof) in proofs {
        assert!(proof == case.prove(None), "{case:?}: the proof differs from the proof alone");
        assert!(case.verifies(&proof), "{case:?}: the proof does not verify");
    }
}

/// FRI layers kept on the device for the queries count in the committer's memory until they
/// are dropped.
fn wgpu_counts_kept_fri_layers() {
    use miden_gpu::{fri::FriRequest, Digest, Felt};
    let committer = Backend::Wgpu.create().expect("wgpu committer");
    let before = committer.memory_in_use().expect("wgpu counts its memory");
    let coefficients: Vec<Felt> = (1..=1u64 << 12).map(Felt::new).collect();
    let components = [coefficients.as_slice(), coefficients.as_slice()];
    let request = FriRequest {
        components: &components,
        blowup: 8,
        folding_factor: 4,
        num_layers: 3,
        hash: HashFunction::Rpo256,
        keep_layers: true,
    };
    let layers = committer
        .commit_fri(&request, &mut |_: Digest| vec![Felt::new(3), Felt::new(5)])
        .expect("FRI layers");
    assert!(layers.kept.is_some(), "wgpu did not keep the layers");
    // the first layer alone: 2^15 quadratic evaluations
    let first_layer = (8u64 << 12) * 2 * 8;
    let held = committer.memory_in_use().expect("wgpu counts its memory");
    assert!(held >= before + first_layer, "kept layers not counted: {before} -> {held}");
}
