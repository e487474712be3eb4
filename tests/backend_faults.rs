//! Faults injected inside the GPU backends (feature `fault-injection`): every device operation of
//! a commitment, a read of the rows a commitment kept, a constraint composition over them, a DEEP
//! evaluation, a DEEP combination and a FRI commit phase fails in turn.
//!
//! For each workload and each kind of operation the backend passes through its injector, a
//! counting pass reports how many operations of that kind the call performs; then for every k in
//! 1..=count the k-th one fails, the call must return a typed error (never a panic, never a
//! result), and the same committer's next call must equal the CPU backend's bit for bit. A fault
//! after which the device is unusable (sticky) and a wait that never completes (a hang, against
//! a short deadline) must give `DeviceLost` and `Timeout`, every later call `DeviceLost` at once,
//! and a proof with the CPU fallback must still equal the CPU's.
//!
//! wgpu runs wherever an adapter is present (lavapipe on a machine without a GPU); CUDA where a
//! device is, else it is reported as ignored with the reason (see `common/device.rs`). Each line
//! printed names the backend, workload and kind, the count reached, and the k that passed.

mod common;

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::Arc,
    time::{Duration, Instant},
};

use common::{
    device::{tests, DeviceTests},
    fib::{FibAir, FibProver, FibTrace},
};
use miden_crypto::hash::rpo::Rpo256;
use miden_gpu::{
    composition::CompositionRequest,
    constraints::{Composition, GraphConstraintEvaluator},
    deep::{CombineRequest, DeepSegment, EvaluateRequest},
    fri::FriRequest,
    inject::{Injection, Injector, Operation},
    wgpu::{AdapterSummary, WgpuCommitter, WgpuOptions},
    CommitRequest, CpuCommitter, Digest, Felt, GpuCommitter, GpuError, GpuProver, HashFunction,
    Keep, KeptRows, PolyInput, ResidentPolys, RowHashing,
};
use rand::{rngs::StdRng, Rng, SeedableRng};
use winter_air::{
    Air, AuxRandElements, BatchingMethod, ConstraintCompositionCoefficients, FieldExtension,
    PartitionOptions, ProofOptions,
};
use winter_crypto::MerkleTree;
use winter_math::fields::QuadExtension;
use winter_prover::{
    matrix::ColMatrix, ConstraintEvaluator, DefaultTraceLde, Prover, StarkDomain, Trace, TraceLde,
};

/// The deadline of every wait in the tests of hangs: short, so that each hang costs little.
const SHORT_DEADLINE: Duration = Duration::from_millis(500);

fn main() {
    let wgpu = DeviceTests::new(
        "wgpu",
        AdapterSummary::find(&wgpu_options()).err().map(|e| e.to_string()),
    )
    .on_device(tests![
        wgpu_every_operation_fails_in_turn,
        wgpu_sticky_fault_loses_the_device,
        wgpu_hang_times_out
    ]);
    cuda::tests(wgpu).run()
}

// BACKENDS
// ================================================================================================

/// A GPU committer under test and its injector.
struct Subject {
    committer: Arc<dyn GpuCommitter>,
    injector: Arc<Injector>,
    /// The kinds of operation its backend passes through the injector.
    kinds: &'static [Operation],
}

fn wgpu_options() -> WgpuOptions {
    WgpuOptions::from_env()
}

fn wgpu_subject(wait_timeout: Option<Duration>) -> Subject {
    let defaults = wgpu_options();
    let options =
        WgpuOptions { wait_timeout: wait_timeout.unwrap_or(defaults.wait_timeout), ..defaults };
    let committer = WgpuCommitter::with_options(options).expect("wgpu backend");
    eprintln!("[wgpu] adapter: {}", committer.device_name());
    let injector = committer.fault_injector();
    Subject { committer: Arc::new(committer), injector, kinds: &Operation::WGPU }
}

fn wgpu_every_operation_fails_in_turn() {
    every_operation_fails_in_turn(&wgpu_subject(None));
}

fn wgpu_sticky_fault_loses_the_device() {
    sticky_fault_loses_the_device(|| wgpu_subject(None), Operation::Submit);
}

fn wgpu_hang_times_out() {
    hang_times_out(|| wgpu_subject(Some(SHORT_DEADLINE)));
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use super::*;
    use miden_gpu::cuda::{device_count, CudaCommitter, CudaOptions};

    /// The CUDA tests beside `others`.
    pub fn tests(others: DeviceTests) -> DeviceTests {
        let absent = device_count().err().map(|e| e.to_string());
        others.and(DeviceTests::new("cuda", absent).on_device(tests![
            cuda_every_operation_fails_in_turn,
            cuda_sticky_fault_loses_the_device,
            cuda_hang_times_out
        ]))
    }

    fn subject(wait_timeout: Option<Duration>) -> Subject {
        let defaults = CudaOptions::from_env().expect("CUDA options");
        let options =
            CudaOptions { wait_timeout: wait_timeout.unwrap_or(defaults.wait_timeout), ..defaults };
        let committer = CudaCommitter::with_options(options).expect("CUDA backend");
        eprintln!("[cuda] device: {}", committer.device_name());
        let injector = committer.fault_injector();
        Subject { committer: Arc::new(committer), injector, kinds: &Operation::CUDA }
    }

    /// Held by each CUDA test: a committer that shares its GPU with another of the process frees
    /// its reusable buffers after each call, so another test's committer would change the
    /// operations a call makes between the call that counts them and the calls that strike them.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    fn alone() -> MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cuda_every_operation_fails_in_turn() {
        let _alone = alone();
        every_operation_fails_in_turn(&subject(None));
    }

    fn cuda_sticky_fault_loses_the_device() {
        let _alone = alone();
        sticky_fault_loses_the_device(|| subject(None), Operation::Launch);
    }

    fn cuda_hang_times_out() {
        let _alone = alone();
        hang_times_out(|| subject(Some(SHORT_DEADLINE)));
    }
}

#[cfg(not(feature = "cuda"))]
mod cuda {
    use super::*;

    /// Without feature `cuda` there are no CUDA tests.
    pub fn tests(others: DeviceTests) -> DeviceTests {
        others
    }
}

// WORKLOADS
// ================================================================================================

/// The inputs of every workload, and what the CPU backend computes from them.
struct Inputs {
    main: Vec<Vec<Felt>>,
    aux: Vec<Vec<Felt>>,
    deep_coefficients: Vec<Felt>,
    points: Vec<Felt>,
    fri: Vec<Vec<Felt>>,
    fib: FibCase,
}

/// A Fibonacci AIR over the base field, its main trace's columns, a random auxiliary column
/// and random elements, random composition coefficients and positions of its LDE: the rows a
/// commitment keeps are read and composed.
struct FibCase {
    air: FibAir,
    columns: Vec<Vec<Felt>>,
    aux: Vec<Felt>,
    aux_rand: AuxRandElements<Felt>,
    coefficients: ConstraintCompositionCoefficients<Felt>,
    positions: Vec<usize>,
}

impl FibCase {
    fn new(rng: &mut StdRng) -> Self {
        let trace = FibTrace::new(2, ROWS);
        let options = ProofOptions::new(
            27,
            4,
            0,
            FieldExtension::None,
            4,
            31,
            BatchingMethod::Linear,
            BatchingMethod::Linear,
        );
        let air = FibAir::new(trace.info().clone(), trace.inputs(), options);
        let columns = trace.main_segment().columns().map(<[Felt]>::to_vec).collect();
        let aux = (0..ROWS).map(|_| common::random_felt(rng)).collect();
        let rand_count = air.trace_info().get_num_aux_segment_rand_elements();
        let aux_rand =
            AuxRandElements::new((0..rand_count).map(|_| common::random_felt(rng)).collect());
        let coefficients = ConstraintCompositionCoefficients {
            transition: (0..air.context().num_transition_constraints())
                .map(|_| common::random_felt(rng))
                .collect(),
            boundary: (0..air.context().num_assertions())
                .map(|_| common::random_felt(rng))
                .collect(),
        };
        let lde_len = ROWS * 4;
        let positions = (0..9).map(|_| rng.random_range(0..lde_len)).chain([0, lde_len - 1]);
        Self { air, columns, aux, aux_rand, coefficients, positions: positions.collect() }
    }

    fn request<'a>(&self, columns: &'a [&'a [Felt]]) -> CommitRequest<'a> {
        CommitRequest {
            input: PolyInput::Trace { columns },
            blowup: self.air.options().blowup_factor(),
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        }
    }

    /// The main segment (`aux`: the auxiliary one) committed on `committer` with its rows kept
    /// there.
    fn kept_rows(
        &self,
        committer: &dyn GpuCommitter,
        aux: bool,
    ) -> Result<Arc<dyn KeptRows>, GpuError> {
        let columns: Vec<&[Felt]> =
            if aux { vec![&self.aux] } else { self.columns.iter().map(Vec::as_slice).collect() };
        let commitment = committer.commit_keeping(
            &self.request(&columns),
            Keep { polys: false, rows: true, tree: false },
        )?;
        Ok(commitment.kept_rows.expect("a GPU backend keeps the rows of a small commitment"))
    }

    /// The recorded composition, over the LDE domain's coset of the CE domain.
    fn composition(&self) -> (Composition, StarkDomain<Felt>) {
        let composition = Composition::new(&self.air, Some(&self.aux_rand), &self.coefficients)
            .expect("the Fibonacci composition is recorded");
        (composition, StarkDomain::new(&self.air))
    }

    /// The commitment to the composition polynomial of `input`.
    fn composition_request<'a>(&self, input: PolyInput<'a>) -> CommitRequest<'a> {
        CommitRequest { input, ..self.request(&[]) }
    }

    /// The rows at the positions and the composition with its commitment's nodes, on the CPU:
    /// the CPU's commitments and the graph's interpreter over Winterfell's LDE.
    fn expected(&self) -> (Vec<u64>, Vec<u64>) {
        let columns: Vec<&[Felt]> = self.columns.iter().map(Vec::as_slice).collect();
        let cpu = CpuCommitter::new().commit(&self.request(&columns)).expect("CPU commitment");
        let rows = self.positions.iter().flat_map(|&p| canonical(cpu.lde.row(p))).collect();
        let domain = StarkDomain::new(&self.air);
        let main = ColMatrix::new(self.columns.clone());
        type Lde = DefaultTraceLde<Felt, Rpo256, MerkleTree<Rpo256>>;
        let (mut lde, _) =
            Lde::new(self.air.trace_info(), &main, &domain, PartitionOptions::default());
        lde.set_aux_trace(&ColMatrix::new(vec![self.aux.clone()]), &domain);
        let aux_rand = Some(self.aux_rand.clone());
        let evaluator =
            GraphConstraintEvaluator::new(&self.air, aux_rand, self.coefficients.clone())
                .expect("the Fibonacci constraints are recorded");
        let composition = evaluator.evaluate(&lde, &domain).into_inner();
        let commitment = CpuCommitter::new()
            .commit(&self.composition_request(PolyInput::Composition {
                components: &[&composition],
                column_len: ROWS,
                num_columns: self.air.context().num_constraint_composition_columns(),
            }))
            .expect("CPU commitment of the composition");
        let words = canonical(&composition).chain(digests(&commitment.nodes)).collect();
        (rows, words)
    }
}

fn canonical(values: &[Felt]) -> impl Iterator<Item = u64> + '_ {
    values.iter().map(|v| v.as_int())
}

/// Columns per segment and their length: small, so that every k runs in bounded time.
const MAIN_COLS: usize = 6;
const AUX_COLS: usize = 2;
const ROWS: usize = 32;
const DEGREE: usize = 2;

impl Inputs {
    fn new() -> Self {
        let mut rng = StdRng::seed_from_u64(0xFA17);
        let mut columns = |count: usize, len: usize| -> Vec<Vec<Felt>> {
            (0..count).map(|_| (0..len).map(|_| common::random_felt(&mut rng)).collect()).collect()
        };
        let main = columns(MAIN_COLS, ROWS);
        let aux = columns(AUX_COLS, ROWS);
        let deep_coefficients = columns(1, (MAIN_COLS + AUX_COLS / DEGREE) * DEGREE).remove(0);
        let points = columns(1, 2 * DEGREE).remove(0);
        let fri = columns(DEGREE, ROWS);
        let fib = FibCase::new(&mut rng);
        Self { main, aux, deep_coefficients, points, fri, fib }
    }

    fn commit_request<'a>(&self, columns: &'a [&'a [Felt]]) -> CommitRequest<'a> {
        CommitRequest {
            input: PolyInput::Trace { columns },
            blowup: 4,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Rpo256,
        }
    }

    fn fri_request<'a>(&self, components: &'a [&'a [Felt]]) -> FriRequest<'a> {
        FriRequest {
            components,
            blowup: 4,
            folding_factor: 4,
            num_layers: 2,
            hash: HashFunction::Rpo256,
            keep_layers: false,
        }
    }
}

/// A call whose output is reduced to words, comparable with the CPU's.
type Workload<'a> = Box<dyn Fn(&dyn GpuCommitter) -> Result<Vec<u64>, GpuError> + 'a>;

fn felts(values: &[Felt]) -> impl Iterator<Item = u64> + '_ {
    values.iter().map(|v| v.inner())
}

fn digests(values: &[Digest]) -> impl Iterator<Item = u64> + '_ {
    values.iter().flat_map(|d| d.words())
}

/// The workloads, by name: a commitment (polynomials, LDE rows, leaves, nodes), the DEEP
/// evaluation and combination over polynomials `kept` on the device, a FRI commit phase (every
/// layer's columns, leaves and nodes, the remainder), a commitment keeping its rows with a
/// read of some of them, then with the composition over them, and a commitment keeping its tree
/// with a read of some leaves and nodes.
fn workloads<'a>(
    inputs: &'a Inputs,
    kept: &'a [ResidentPolys],
) -> Vec<(&'static str, Workload<'a>)> {
    let segments = move || -> Vec<DeepSegment<'a>> {
        vec![
            DeepSegment { polys: &kept[0], degree: 1 },
            DeepSegment { polys: &kept[1], degree: DEGREE },
        ]
    };
    vec![
        (
            "commitment",
            Box::new(move |c: &dyn GpuCommitter| {
                let columns: Vec<&[Felt]> = inputs.main.iter().map(Vec::as_slice).collect();
                let commitment = c.commit(&inputs.commit_request(&columns))?;
                let mut words: Vec<u64> = commitment.polys.iter().flat_map(|p| felts(p)).collect();
                words.extend(felts(&commitment.lde.data));
                words.extend(digests(&commitment.leaves));
                words.extend(digests(&commitment.nodes));
                Ok(words)
            }),
        ),
        (
            "DEEP evaluation",
            Box::new(move |c: &dyn GpuCommitter| {
                let segments = segments();
                let request = EvaluateRequest {
                    segments: &segments,
                    ext_degree: DEGREE,
                    points: &inputs.points,
                };
                Ok(felts(&c.evaluate_polys(&request)?).collect())
            }),
        ),
        (
            "DEEP combination",
            Box::new(move |c: &dyn GpuCommitter| {
                let segments = segments();
                let request = CombineRequest {
                    segments: &segments,
                    ext_degree: DEGREE,
                    coefficients: &inputs.deep_coefficients,
                };
                Ok(felts(&c.combine_polys(&request)?).collect())
            }),
        ),
        (
            "FRI commit phase",
            Box::new(move |c: &dyn GpuCommitter| {
                let components: Vec<&[Felt]> = inputs.fri.iter().map(Vec::as_slice).collect();
                let request = inputs.fri_request(&components);
                let mut channel = |root: Digest| {
                    let words = root.words().map(Felt::new);
                    HashFunction::Rpo256.hash_elements(&words).to_felts()[..DEGREE].to_vec()
                };
                let layers = c.commit_fri(&request, &mut channel)?;
                let mut words = Vec::new();
                for layer in &layers.layers {
                    words.extend(felts(&layer.columns));
                    words.extend(digests(&layer.leaves));
                    words.extend(digests(&layer.nodes));
                }
                words.extend(felts(&layers.remainder));
                Ok(words)
            }),
        ),
        (
            "kept rows read",
            Box::new(move |c: &dyn GpuCommitter| {
                let fib = &inputs.fib;
                let rows = fib.kept_rows(c, false)?.read(&fib.positions)?;
                Ok(rows.iter().flat_map(|row| canonical(row)).collect())
            }),
        ),
        (
            "composition",
            Box::new(move |c: &dyn GpuCommitter| {
                let fib = &inputs.fib;
                let (main, aux) = (fib.kept_rows(c, false)?, fib.kept_rows(c, true)?);
                let (composition, domain) = fib.composition();
                let x_bases = composition.x_power_bases(&domain);
                let request = CompositionRequest {
                    composition: &composition,
                    main: main.as_ref(),
                    aux: Some(aux.as_ref()),
                    main_width: fib.columns.len(),
                    aux_width: 1,
                    trace_len: fib.air.trace_length(),
                    lde_blowup: domain.trace_to_lde_blowup(),
                    ce_blowup: fib.air.ce_blowup_factor(),
                    x_bases: &x_bases,
                };
                let kept = c.evaluate_composition(&request)?;
                let mut words: Vec<u64> = canonical(&kept.read()?).collect();
                let commitment =
                    c.commit(&fib.composition_request(PolyInput::KeptComposition {
                        evaluations: kept.as_ref(),
                        column_len: ROWS,
                        num_columns: fib.air.context().num_constraint_composition_columns(),
                    }))?;
                words.extend(digests(&commitment.nodes));
                Ok(words)
            }),
        ),
        (
            "kept tree read",
            Box::new(move |c: &dyn GpuCommitter| {
                let columns: Vec<&[Felt]> = inputs.main.iter().map(Vec::as_slice).collect();
                let keep = Keep { polys: false, rows: false, tree: true };
                let commitment = c.commit_keeping(&inputs.commit_request(&columns), keep)?;
                let n = commitment
                    .kept_tree
                    .as_ref()
                    .map_or(commitment.leaves.len(), |t| t.num_leaves());
                let (leaves, nodes) =
                    ([0, 3, n / 2 + 1, n - 1], [1, 2, 3, n / 4 + 1, n / 2 + 3, n - 1]);
                let (leaves, nodes) = match &commitment.kept_tree {
                    Some(tree) => tree.read(&leaves, &nodes)?,
                    None => (
                        leaves.iter().map(|&i| commitment.leaves[i]).collect(),
                        nodes.iter().map(|&i| commitment.nodes[i]).collect(),
                    ),
                };
                Ok(digests(&leaves).chain(digests(&nodes)).collect())
            }),
        ),
    ]
}

/// What the CPU computes for each workload: the commitment and FRI phase on `CpuCommitter`, the
/// DEEP steps on the host over the CPU's polynomials.
fn expected(inputs: &Inputs) -> Vec<Vec<u64>> {
    let cpu = CpuCommitter::new();
    let polys = |columns: &[Vec<Felt>]| {
        let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
        cpu.commit(&inputs.commit_request(&slices)).expect("CPU commitment").polys
    };
    let host_polys = [(polys(&inputs.main), 1), (polys(&inputs.aux), DEGREE)];
    type E = QuadExtension<Felt>;
    let evaluations = common::host_evaluations::<E>(&host_polys, &inputs.points);
    let combination = common::host_combination::<E>(&host_polys, &inputs.deep_coefficients, ROWS);
    let none: [ResidentPolys; 0] = [];
    let on_cpu = workloads(inputs, &none);
    let (rows, composition) = inputs.fib.expected();
    vec![
        (on_cpu[0].1)(&cpu).expect("CPU commitment"),
        felts(&evaluations).collect(),
        felts(&combination).collect(),
        (on_cpu[3].1)(&cpu).expect("CPU FRI"),
        rows,
        composition,
        (on_cpu[6].1)(&cpu).expect("CPU tree"),
    ]
}

/// The main and auxiliary segments committed on `committer`, their polynomials kept there.
fn keep_polys(committer: &dyn GpuCommitter, inputs: &Inputs) -> Vec<ResidentPolys> {
    [&inputs.main, &inputs.aux]
        .into_iter()
        .map(|columns| {
            let slices: Vec<&[Felt]> = columns.iter().map(Vec::as_slice).collect();
            let commitment = committer
                .commit_keeping(
                    &inputs.commit_request(&slices),
                    Keep { polys: true, rows: false, tree: false },
                )
                .expect("commitment");
            commitment.resident.expect("a GPU backend keeps the polynomials of a small commitment")
        })
        .collect()
}

/// Runs `workload`, a panic reported as a test failure naming `what`.
fn run(
    workload: &Workload<'_>,
    committer: &dyn GpuCommitter,
    what: &str,
) -> Result<Vec<u64>, GpuError> {
    catch_unwind(AssertUnwindSafe(|| workload(committer)))
        .unwrap_or_else(|_| panic!("{what}: the call panicked instead of returning a typed error"))
}

// TESTS
// ================================================================================================

/// Every operation of every kind of every workload fails in turn with a fault after which the
/// device stays usable: a typed error, then the same committer's next call equals the CPU's.
fn every_operation_fails_in_turn(subject: &Subject) {
    let backend = subject.committer.backend();
    let committer = subject.committer.as_ref();
    let inputs = Inputs::new();
    let want = expected(&inputs);
    let kept = keep_polys(committer, &inputs);
    for ((name, workload), want) in workloads(&inputs, &kept).iter().zip(&want) {
        // the first call fills the caches (tables, pooled buffers): the calls counted and
        // struck below start from the same state
        subject.injector.disarm();
        assert_eq!(
            &run(workload, committer, name).expect("a fault-free call"),
            want,
            "[{backend}] {name}"
        );
        for &kind in subject.kinds {
            subject.injector.disarm();
            let got = run(workload, committer, name).expect("a fault-free call");
            assert_eq!(&got, want, "[{backend}] {name}: the counting call differs from the CPU");
            let count = subject.injector.count(kind);
            for k in 1..=count {
                let what = format!("[{backend}] {name}: {kind:?} {k} of {count}");
                subject.injector.arm(kind, k, Injection::Error);
                let outcome = run(workload, committer, &what);
                assert!(subject.injector.fired(), "{what}: the call did not reach it");
                match outcome {
                    Ok(_) => panic!("{what}: the call returned a result despite the fault"),
                    Err(error @ (GpuError::DeviceLost { .. } | GpuError::Timeout { .. })) => {
                        panic!("{what}: a recoverable fault gave {error}")
                    },
                    Err(_) => {},
                }
                subject.injector.disarm();
                let next = run(workload, committer, &what)
                    .unwrap_or_else(|e| panic!("{what}: the next call failed: {e}"));
                assert!(&next == want, "{what}: the next call differs from the CPU");
            }
            eprintln!("[{backend}] {name}: {kind:?}: {count} reached, k = 1..={count} passed");
        }
    }
}

/// A sticky fault of kind `kind` in the middle of a commitment: `DeviceLost`, every later call
/// `DeviceLost` at once, and a proof with the CPU fallback equal to the CPU's.
fn sticky_fault_loses_the_device(make: impl Fn() -> Subject, kind: Operation) {
    let subject = make();
    let inputs = Inputs::new();
    let none: [ResidentPolys; 0] = [];
    let workloads = workloads(&inputs, &none);
    let (name, commit) = &workloads[0];
    let committer = subject.committer.as_ref();
    let backend = committer.backend();
    subject.injector.disarm();
    run(commit, committer, name).expect("a fault-free call");
    let count = subject.injector.count(kind);
    assert!(count > 0, "[{backend}] {name}: no {kind:?}");
    let k = count.div_ceil(2);
    subject.injector.arm(kind, k, Injection::Sticky);
    let what = format!("[{backend}] {name}: sticky {kind:?} {k} of {count}");
    match run(commit, committer, &what) {
        Err(GpuError::DeviceLost { .. }) => {},
        other => panic!("{what}: {other:?} instead of DeviceLost"),
    }
    subject.injector.disarm();
    refuses_at_once(committer, commit, &what);
    eprintln!("{what}: DeviceLost, later calls refused at once");
    proof_falls_back(make(), |injector| injector.arm(kind, 1, Injection::Sticky), "sticky fault");
}

/// The first and last wait of a commitment never complete: `Timeout` within the short deadline,
/// every later call `DeviceLost` at once, and a proof with the CPU fallback equal to the CPU's.
fn hang_times_out(make: impl Fn() -> Subject) {
    let inputs = Inputs::new();
    let none: [ResidentPolys; 0] = [];
    let workloads = workloads(&inputs, &none);
    let (name, commit) = &workloads[0];
    let counting = make();
    let backend = counting.committer.backend();
    // counted as struck below: after a first call
    run(commit, counting.committer.as_ref(), name).expect("a fault-free call");
    counting.injector.disarm();
    run(commit, counting.committer.as_ref(), name).expect("a fault-free call");
    let count = counting.injector.count(Operation::Wait);
    assert!(count > 0, "[{backend}] {name}: no wait");
    drop(counting);
    for k in [1, count] {
        let subject = make();
        let committer = subject.committer.as_ref();
        run(commit, committer, name).expect("a fault-free call");
        subject.injector.arm(Operation::Wait, k, Injection::Hang);
        let what = format!("[{backend}] {name}: wait {k} of {count} hangs");
        let start = Instant::now();
        match run(commit, committer, &what) {
            Err(GpuError::Timeout { deadline, .. }) => assert_eq!(deadline, SHORT_DEADLINE),
            other => panic!("{what}: {other:?} instead of Timeout"),
        }
        let elapsed = start.elapsed();
        assert!(
            elapsed >= SHORT_DEADLINE && elapsed < SHORT_DEADLINE + Duration::from_secs(10),
            "{what}: the timeout came after {elapsed:?}"
        );
        subject.injector.disarm();
        refuses_at_once(committer, commit, &what);
        eprintln!("{what}: Timeout after {elapsed:?}, later calls refused at once");
    }
    proof_falls_back(make(), |injector| injector.arm(Operation::Wait, 1, Injection::Hang), "hang");
}

/// Every later call of `committer` is `DeviceLost`, at once.
fn refuses_at_once(committer: &dyn GpuCommitter, workload: &Workload<'_>, what: &str) {
    let start = Instant::now();
    match run(workload, committer, what) {
        Err(GpuError::DeviceLost { .. }) => {},
        other => panic!("{what}: the next call gave {other:?} instead of DeviceLost"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{what}: the refusal took {:?}",
        start.elapsed()
    );
}

/// A proof on `subject`, its injector armed by `arm`, with the CPU fallback: equal to the CPU's.
fn proof_falls_back(subject: Subject, arm: impl Fn(&Injector) + Sync, what: &str) {
    let backend = subject.committer.backend();
    let options = ProofOptions::new(
        27,
        8,
        0,
        FieldExtension::Quadratic,
        4,
        31,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    );
    // one rayon thread: Winterfell's concurrent grinding keeps the first nonce any thread finds
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(|| {
        let expected = FibProver::<Rpo256>::new(options.clone())
            .prove(FibTrace::new(2, 256))
            .expect("CPU proof")
            .to_bytes();
        arm(&subject.injector);
        let prover =
            GpuProver::with_committer(FibProver::<Rpo256>::new(options), subject.committer);
        let proof = prover.prove(FibTrace::new(2, 256)).expect("a proof with the CPU fallback");
        assert!(subject.injector.fired(), "[{backend}] {what}: the proof did not reach the fault");
        assert!(
            proof.to_bytes() == expected,
            "[{backend}] {what}: the proof differs from the CPU's"
        );
    });
    eprintln!("[{backend}] {what} during a proof: the CPU fallback gave the CPU's proof");
}
