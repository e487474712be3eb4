//! The constraint graph against the AIR's own code and the composition from it against
//! winter-prover's `DefaultConstraintEvaluator`, every CE row compared as field elements: the
//! Fibonacci AIR, seeded random AIRs (transition constraints of degree 1-9, periodic columns,
//! single, periodic and sequence assertions, auxiliary segments, base, quadratic and cubic
//! fields, CE blowups below the LDE blowup, 2^3 to 2^16 rows), and AIRs a graph cannot follow.

mod common;

use common::{
    device::{tests, DeviceTests},
    fib::{self, FibAir, FibTrace},
};

/// Why the random AIRs' compositions cannot be compared in this build: `None` where Winterfell
/// runs without its debug assertions, which check the constraint degrees on the trace, and a
/// random AIR's random trace fails them.
fn why_random_compositions_cannot_be_compared() -> Option<&'static str> {
    common::winterfell_checks_degrees().then_some(
        "a debug build: winter-prover checks constraint degrees on the trace, which random traces fail; run with --release",
    )
}

fn main() {
    let host = DeviceTests::new("cpu", None)
        .on_host(tests![
            fib_composition_equals_winterfell,
            fib_graph_equals_its_code,
            random_air_graphs_equal_their_code,
            equal_operations_are_shared,
            constant_operations_fold_and_dead_nodes_go,
            structural_hash_ignores_constant_values,
            value_dependent_air_is_reported,
        ])
        .on_host_unless(
            why_random_compositions_cannot_be_compared(),
            tests![random_air_compositions_equal_winterfell],
        );
    #[cfg(feature = "miden")]
    let host = host.on_host(tests![miden_composition_equals_winterfell]);
    #[cfg(feature = "cuda")]
    let host = {
        // SAFETY: only asks the dynamic loader whether libnvrtc can be opened.
        let nvrtc_present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
        let absent =
            (!nvrtc_present).then(|| "the NVRTC library (libnvrtc) was not found".to_string());
        let host = host.and(
            DeviceTests::new("cuda", absent).on_device(tests![generated_cuda_compiles_with_nvrtc]),
        );
        let no_gpu = miden_gpu::cuda::device_count().err().map(|e| e.to_string());
        let gpu = DeviceTests::new("cuda", no_gpu)
            .on_device(tests![
                cuda_fib_compositions_equal_winterfell,
                cuda_random_compositions_equal_winterfell,
            ])
            .on_device_when_asked(tests![cuda_wide_air_timing]);
        #[cfg(feature = "miden")]
        let gpu = gpu.on_device(tests![cuda_miden_composition_equals_winterfell]);
        host.and(gpu)
    };
    #[cfg(feature = "wgpu")]
    let host = {
        let host = host.on_host(tests![generated_wgsl_validates_and_translates]);
        let absent = wgpu::absent();
        let device = DeviceTests::new("wgpu", absent)
            .on_device(tests![
                wgpu_fib_compositions_equal_winterfell,
                wgpu_random_compositions_equal_winterfell,
            ])
            .on_device_when_asked(tests![wgpu_wide_air_timing]);
        #[cfg(feature = "miden")]
        let device = device.on_device(tests![wgpu_miden_composition_equals_winterfell]);
        host.and(device)
    };
    host.run()
}
use miden_crypto::hash::blake::Blake3_256;
use miden_gpu::{
    constraints::{
        capture, CaptureError, ConstraintGraph, FrameInputs, GraphConstraintEvaluator, Unrecordable,
    },
    Felt, GpuCommitter,
};
use rand::{rngs::StdRng, Rng, SeedableRng};
use winter_air::{
    Air, AirContext, Assertion, AuxRandElements, BatchingMethod, ConstraintCompositionCoefficients,
    EvaluationFrame, FieldExtension, PartitionOptions, ProofOptions, TraceInfo,
    TransitionConstraintDegree,
};
use winter_crypto::MerkleTree;
use winter_math::{
    fields::{CubeExtension, QuadExtension},
    ExtensionOf, FieldElement, ToElements,
};
use winter_prover::{
    matrix::ColMatrix, ConstraintEvaluator, DefaultConstraintEvaluator, DefaultTraceLde,
    StarkDomain, Trace, TraceLde,
};

type Hasher = Blake3_256;
type Lde<E> = DefaultTraceLde<E, Hasher, MerkleTree<Hasher>>;

// ================================================================================================
// RANDOM VALUES
// ================================================================================================

/// The largest Goldilocks word: words at or above it are non-canonical.
const MODULUS: u64 = 0xffff_ffff_0000_0001;

fn random_felt(rng: &mut StdRng) -> Felt {
    loop {
        let value = Felt::new(rng.random::<u64>());
        if value != Felt::ZERO {
            return value;
        }
    }
}

/// A non-zero element whose word is sometimes non-canonical (as winter-math's `double` leaves).
fn random_word(rng: &mut StdRng) -> Felt {
    if rng.random_bool(0.2) {
        Felt::from_mont(rng.random_range(MODULUS..=u64::MAX))
    } else {
        random_felt(rng)
    }
}

fn random_element<E: FieldElement<BaseField = Felt>>(rng: &mut StdRng) -> E {
    let components: Vec<Felt> = (0..E::EXTENSION_DEGREE).map(|_| random_felt(rng)).collect();
    E::slice_from_base_elements(&components)[0]
}

fn random_word_element<E: FieldElement<BaseField = Felt>>(rng: &mut StdRng) -> E {
    let components: Vec<Felt> = (0..E::EXTENSION_DEGREE).map(|_| random_word(rng)).collect();
    E::slice_from_base_elements(&components)[0]
}

fn random_elements<E: FieldElement<BaseField = Felt>>(rng: &mut StdRng, count: usize) -> Vec<E> {
    (0..count).map(|_| random_element(rng)).collect()
}

// ================================================================================================
// PARITY
// ================================================================================================

/// What evaluates the recorded composition against Winterfell's evaluator.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The CPU interpreter ([`GraphConstraintEvaluator`]).
    Interpreter,
    /// A GPU backend, over the trace LDE it kept.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    Backend(&'a dyn GpuCommitter),
}

/// Both evaluators over one random LDE of `air`'s trace shape; panics at the first differing row.
fn assert_composition_parity<A, E>(air: &A, rng: &mut StdRng, label: &str, target: Target<'_>)
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    let info = air.trace_info();
    let n = info.length();
    let main = ColMatrix::new(
        (0..info.main_trace_width()).map(|_| (0..n).map(|_| random_felt(rng)).collect()).collect(),
    );
    let width = info.aux_segment_width();
    let random_aux = |rng: &mut StdRng, _: &[E]| {
        ColMatrix::new((0..width).map(|_| random_elements::<E>(rng, n)).collect())
    };
    assert_composition_parity_on(air, &main, random_aux, rng, label, target);
}

/// Both evaluators over the LDE of `main` and of the auxiliary segment `aux` builds from the
/// random elements; panics at the first differing row.
fn assert_composition_parity_on<A, E>(
    air: &A,
    main: &ColMatrix<Felt>,
    aux: impl FnOnce(&mut StdRng, &[E]) -> ColMatrix<E>,
    rng: &mut StdRng,
    label: &str,
    target: Target<'_>,
) where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    let info = air.trace_info();
    let domain = StarkDomain::new(air);
    let (mut lde, _) = Lde::<E>::new(info, main, &domain, PartitionOptions::default());
    let mut aux_trace = None;
    let aux_rand = info.is_multi_segment().then(|| {
        let elements = random_elements(rng, info.get_num_aux_segment_rand_elements());
        let segment = aux(rng, &elements);
        lde.set_aux_trace(&segment, &domain);
        aux_trace = Some(segment);
        AuxRandElements::new(elements)
    });
    let coefficients = ConstraintCompositionCoefficients {
        transition: random_elements(rng, air.context().num_transition_constraints()),
        boundary: random_elements(rng, air.context().num_assertions()),
    };

    let expected = DefaultConstraintEvaluator::new(air, aux_rand.clone(), coefficients.clone())
        .evaluate(&lde, &domain)
        .into_inner();
    let actual = match target {
        Target::Interpreter => GraphConstraintEvaluator::new(air, aux_rand, coefficients)
            .unwrap_or_else(|error| panic!("{label}: capture failed: {error}"))
            .evaluate(&lde, &domain)
            .into_inner(),
        Target::Backend(committer) => on_backend::evaluate(
            committer,
            air,
            main,
            aux_trace.as_ref(),
            aux_rand,
            coefficients,
            &domain,
        ),
    };
    assert_eq!(expected.len(), actual.len(), "{label}: CE domain sizes");
    if let Some(row) = (0..expected.len()).find(|&i| expected[i] != actual[i]) {
        panic!("{label}: CE row {row} of {} differs", expected.len());
    }
}

/// The graph's outputs against the AIR's own code on random frames (non-canonical words too).
fn assert_graph_matches_air<A, E>(air: &A, graph: &ConstraintGraph, rng: &mut StdRng, frames: usize)
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    let info = air.trace_info();
    let num_periodic = air.get_periodic_column_values().len();
    let mut values = Vec::new();
    for frame in 0..frames {
        let row =
            |rng: &mut StdRng| (0..info.main_trace_width()).map(|_| random_word(rng)).collect();
        let main = EvaluationFrame::from_rows(row(rng), row(rng));
        let periodic: Vec<Felt> = (0..num_periodic).map(|_| random_word(rng)).collect();
        let aux_row = |rng: &mut StdRng| {
            (0..info.aux_segment_width()).map(|_| random_word_element::<E>(rng)).collect()
        };
        let aux = info
            .is_multi_segment()
            .then(|| EvaluationFrame::<E>::from_rows(aux_row(rng), aux_row(rng)));
        let (aux_current, aux_next): (&[E], &[E]) =
            aux.as_ref().map_or((&[], &[]), |aux| (aux.current(), aux.next()));
        let random: Vec<E> = (0..info.get_num_aux_segment_rand_elements())
            .map(|_| random_word_element(rng))
            .collect();

        let inputs = FrameInputs {
            main_current: main.current(),
            main_next: main.next(),
            aux_current: E::slice_as_base_elements(aux_current),
            aux_next: E::slice_as_base_elements(aux_next),
            periodic: &periodic,
            random: E::slice_as_base_elements(&random),
            x_powers: &[],
            tables: &[],
        };
        graph.interpret(&inputs, graph.constants(), &mut values);

        let mut expected = vec![Felt::ZERO; air.context().num_main_transition_constraints()];
        air.evaluate_transition(&main, &periodic, &mut expected);
        let actual: Vec<Felt> =
            graph.main_outputs().iter().map(|&id| values[id as usize]).collect();
        assert_eq!(expected, actual, "main constraints, frame {frame}");
        // bit for bit: the words too, non-canonical ones included
        let words = |v: &[Felt]| v.iter().map(|x| x.inner()).collect::<Vec<_>>();
        assert_eq!(words(&expected), words(&actual), "main constraint words, frame {frame}");

        if let Some(aux) = &aux {
            let mut expected = vec![E::ZERO; air.context().num_aux_transition_constraints()];
            let rand = AuxRandElements::new(random);
            air.evaluate_aux_transition(&main, aux, &periodic, &rand, &mut expected);
            let actual: Vec<Felt> =
                graph.aux_outputs().iter().map(|&id| values[id as usize]).collect();
            let expected = E::slice_as_base_elements(&expected);
            assert_eq!(words(expected), words(&actual), "aux constraint words, frame {frame}");
        }
    }
}

// ================================================================================================
// FIBONACCI AIR
// ================================================================================================

fn fib_air(pairs: usize, length: usize, blowup: usize, extension: FieldExtension) -> FibAir {
    let trace = FibTrace::new(pairs, length);
    let options = ProofOptions::new(
        27,
        blowup,
        0,
        extension,
        4,
        31,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    );
    FibAir::new(trace.info().clone(), trace.inputs(), options)
}

fn fib_composition_equals_winterfell() {
    fib_compositions(Target::Interpreter);
}

/// The Fibonacci AIR's composition against Winterfell's on `target`, in the three fields.
fn fib_compositions(target: Target<'_>) {
    let mut rng = StdRng::seed_from_u64(1);
    for (pairs, length, blowup) in [(1, 8, 2), (3, 64, 8), (2, 1024, 4)] {
        let air = fib_air(pairs, length, blowup, FieldExtension::Quadratic);
        let label = "fib quadratic";
        assert_composition_parity::<_, QuadExtension<Felt>>(&air, &mut rng, label, target);
        let air = fib_air(pairs, length, blowup, FieldExtension::Cubic);
        assert_composition_parity::<_, CubeExtension<Felt>>(&air, &mut rng, "fib cubic", target);
        let air = fib_air(pairs, length, blowup, FieldExtension::None);
        assert_composition_parity::<_, Felt>(&air, &mut rng, "fib base", target);
    }
}

fn fib_graph_equals_its_code() {
    let mut rng = StdRng::seed_from_u64(2);
    let air = fib_air(4, 64, 8, FieldExtension::Quadratic);
    let graph = capture::<_, QuadExtension<Felt>>(&air).expect("fib is captured");
    assert_eq!(graph.main_outputs().len(), 8);
    assert_eq!(graph.aux_outputs().len(), 2);
    assert_graph_matches_air::<_, QuadExtension<Felt>>(&air, &graph, &mut rng, 100);
}

// ================================================================================================
// RANDOM AIRS
// ================================================================================================

/// A leaf of a random constraint expression.
#[derive(Debug, Clone, Copy)]
enum Leaf {
    Main(usize, bool),
    Aux(usize, bool),
    Periodic(usize),
    Random(usize),
    Const(u64),
}

/// A random constraint expression, evaluated with the AIR's generic field type.
#[derive(Debug, Clone)]
enum Expr {
    Leaf(Leaf),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Double(Box<Expr>),
    Square(Box<Expr>),
    Exp(Box<Expr>, u64),
    /// An auxiliary value times a main leaf through `mul_base` (a product in the main segment).
    MulBase(Box<Expr>, Leaf),
}

/// How an expression's leaves read the frame.
trait Leaves<E> {
    fn leaf(&self, leaf: Leaf) -> E;
    fn mul_base(&self, value: E, by: Leaf) -> E;
}

impl Expr {
    fn eval<E: FieldElement<BaseField = Felt>>(&self, leaves: &impl Leaves<E>) -> E {
        match self {
            Expr::Leaf(leaf) => leaves.leaf(*leaf),
            Expr::Add(a, b) => a.eval(leaves) + b.eval(leaves),
            Expr::Sub(a, b) => a.eval(leaves) - b.eval(leaves),
            Expr::Mul(a, b) => a.eval(leaves) * b.eval(leaves),
            Expr::Neg(a) => -a.eval(leaves),
            Expr::Double(a) => a.eval(leaves).double(),
            Expr::Square(a) => a.eval(leaves).square(),
            Expr::Exp(a, power) => a.eval(leaves).exp((*power).into()),
            Expr::MulBase(a, by) => leaves.mul_base(a.eval(leaves), *by),
        }
    }

    /// The same expression with every constant changed (same shape, other values).
    fn with_other_constants(&self) -> Expr {
        let map = |e: &Expr| Box::new(e.with_other_constants());
        match self {
            Expr::Leaf(Leaf::Const(c)) => Expr::Leaf(Leaf::Const(c.wrapping_mul(3) | 1)),
            Expr::Leaf(leaf) => Expr::Leaf(*leaf),
            Expr::Add(a, b) => Expr::Add(map(a), map(b)),
            Expr::Sub(a, b) => Expr::Sub(map(a), map(b)),
            Expr::Mul(a, b) => Expr::Mul(map(a), map(b)),
            Expr::Neg(a) => Expr::Neg(map(a)),
            Expr::Double(a) => Expr::Double(map(a)),
            Expr::Square(a) => Expr::Square(map(a)),
            Expr::Exp(a, p) => Expr::Exp(map(a), *p),
            Expr::MulBase(a, by) => Expr::MulBase(map(a), *by),
        }
    }
}

/// A main frame's leaves.
struct MainLeaves<'a, E: FieldElement> {
    frame: &'a EvaluationFrame<E>,
    periodic: &'a [E],
}

impl<E: FieldElement<BaseField = Felt>> Leaves<E> for MainLeaves<'_, E> {
    fn leaf(&self, leaf: Leaf) -> E {
        match leaf {
            Leaf::Main(c, false) => self.frame.current()[c],
            Leaf::Main(c, true) => self.frame.next()[c],
            Leaf::Periodic(j) => self.periodic[j],
            Leaf::Const(value) => E::from(Felt::new(value)),
            Leaf::Aux(..) | Leaf::Random(_) => E::ONE,
        }
    }

    fn mul_base(&self, value: E, by: Leaf) -> E {
        value * self.leaf(by)
    }
}

/// An auxiliary frame's leaves, main values lifted into the extension.
struct AuxLeaves<'a, F: FieldElement, E: FieldElement> {
    main: MainLeaves<'a, F>,
    aux: &'a EvaluationFrame<E>,
    random: &'a [E],
}

impl<F, E> Leaves<E> for AuxLeaves<'_, F, E>
where
    F: FieldElement<BaseField = Felt>,
    E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
{
    fn leaf(&self, leaf: Leaf) -> E {
        match leaf {
            Leaf::Aux(c, false) => self.aux.current()[c],
            Leaf::Aux(c, true) => self.aux.next()[c],
            Leaf::Random(k) => self.random[k],
            Leaf::Const(value) => E::from(Felt::new(value)),
            main => E::from(self.main.leaf(main)),
        }
    }

    fn mul_base(&self, value: E, by: Leaf) -> E {
        value.mul_base(self.main.leaf(by))
    }
}

/// One assertion of a random AIR, on its own column.
#[derive(Debug, Clone)]
enum AssertionKind {
    Single { step: usize },
    Periodic { first_step: usize, stride: usize },
    Sequence { first_step: usize, stride: usize },
}

/// A seeded random AIR's description: its public inputs.
#[derive(Debug, Clone)]
struct Description {
    length: usize,
    main_width: usize,
    aux_width: usize,
    num_random: usize,
    main: Vec<(Expr, usize)>,
    aux: Vec<(Expr, usize)>,
    periodic: Vec<Vec<Felt>>,
    main_assertions: Vec<(AssertionKind, Vec<Felt>)>,
    aux_assertions: Vec<(AssertionKind, Vec<Felt>)>,
    extension: FieldExtension,
    lde_blowup_over_ce: usize,
}

impl ToElements<Felt> for Description {
    fn to_elements(&self) -> Vec<Felt> {
        Vec::new()
    }
}

impl Description {
    fn random(rng: &mut StdRng, length: usize) -> Self {
        let main_width = rng.random_range(2..=6);
        let multi = rng.random_bool(0.7);
        let aux_width = if multi { rng.random_range(1..=3) } else { 0 };
        let num_random = if multi { rng.random_range(1..=3) } else { 0 };
        let periodic = (0..rng.random_range(0..=3))
            .map(|_| {
                let period = 1 << rng.random_range(1..=length.trailing_zeros().min(4));
                (0..period).map(|_| random_felt(rng)).collect()
            })
            .collect();
        let mut description = Self {
            length,
            main_width,
            aux_width,
            num_random,
            main: Vec::new(),
            aux: Vec::new(),
            periodic,
            main_assertions: Vec::new(),
            aux_assertions: Vec::new(),
            extension: [FieldExtension::None, FieldExtension::Quadratic, FieldExtension::Cubic]
                [rng.random_range(0..3)],
            lde_blowup_over_ce: 1 << rng.random_range(0..=2),
        };
        for _ in 0..rng.random_range(1..=4) {
            let degree = rng.random_range(1..=9);
            let expr = description.expr(rng, degree, false);
            description.main.push((expr, degree));
        }
        if multi {
            for _ in 0..rng.random_range(1..=3) {
                let degree = rng.random_range(1..=9);
                let expr = description.expr(rng, degree, true);
                description.aux.push((expr, degree));
            }
        }
        // a CE domain of at least 16 rows (Winterfell's smallest fragment)
        if length == 8 {
            let expr = description.expr(rng, 3, false);
            description.main.push((expr, 3));
        }
        description.main_assertions = description.assertions(rng, main_width);
        if multi {
            description.aux_assertions = description.assertions(rng, aux_width);
        }
        description
    }

    /// A wide AIR of one segment in the quadratic field: `constraints` transition constraints
    /// of degrees 1 to 9 (each degree as often) over `width` columns, two periodic columns, an
    /// assertion of each kind.
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    fn wide(rng: &mut StdRng, length: usize, width: usize, constraints: usize) -> Self {
        let periodic = [4, 16].map(|period| (0..period).map(|_| random_felt(rng)).collect());
        let mut description = Self {
            length,
            main_width: width,
            aux_width: 0,
            num_random: 0,
            main: Vec::new(),
            aux: Vec::new(),
            periodic: periodic.to_vec(),
            main_assertions: Vec::new(),
            aux_assertions: Vec::new(),
            extension: FieldExtension::Quadratic,
            lde_blowup_over_ce: 1,
        };
        for i in 0..constraints {
            let degree = 1 + i % 9;
            let expr = description.expr(rng, degree, false);
            description.main.push((expr, degree));
        }
        let n = length;
        description.main_assertions = vec![
            (AssertionKind::Single { step: 0 }, vec![random_felt(rng)]),
            (AssertionKind::Periodic { first_step: 1, stride: 8 }, vec![random_felt(rng)]),
            (
                AssertionKind::Sequence { first_step: 0, stride: n / 64 },
                (0..64).map(|_| random_felt(rng)).collect(),
            ),
        ];
        description
    }

    fn leaf(&self, rng: &mut StdRng, aux: bool) -> Leaf {
        match rng.random_range(0..if aux { 5 } else { 3 }) {
            0 if !self.periodic.is_empty() => {
                Leaf::Periodic(rng.random_range(0..self.periodic.len()))
            },
            1 => Leaf::Const(rng.random::<u64>() | 1),
            3 => Leaf::Aux(rng.random_range(0..self.aux_width), rng.random_bool(0.5)),
            4 => Leaf::Random(rng.random_range(0..self.num_random)),
            _ => Leaf::Main(rng.random_range(0..self.main_width), rng.random_bool(0.5)),
        }
    }

    /// A trace-dependent degree-1 expression: a sum of leaves, one of them a column.
    fn linear(&self, rng: &mut StdRng, aux: bool) -> Expr {
        let column = if aux && rng.random_bool(0.6) {
            Leaf::Aux(rng.random_range(0..self.aux_width), rng.random_bool(0.5))
        } else {
            Leaf::Main(rng.random_range(0..self.main_width), rng.random_bool(0.5))
        };
        let mut expr = Expr::Leaf(column);
        for _ in 0..rng.random_range(0..=2) {
            let term = Expr::Leaf(self.leaf(rng, aux));
            expr = match rng.random_range(0..3) {
                0 => Expr::Add(Box::new(expr), Box::new(term)),
                1 => Expr::Sub(Box::new(term), Box::new(expr)),
                _ => Expr::Add(Box::new(Expr::Double(Box::new(expr))), Box::new(term)),
            };
        }
        expr
    }

    /// An expression of (at most) `degree` in the trace values.
    fn expr(&self, rng: &mut StdRng, degree: usize, aux: bool) -> Expr {
        let expr = if degree == 1 {
            self.linear(rng, aux)
        } else {
            match rng.random_range(0..4) {
                0 if degree.is_multiple_of(2) => {
                    Expr::Square(Box::new(self.expr(rng, degree / 2, aux)))
                },
                1 => Expr::Exp(Box::new(self.linear(rng, aux)), degree as u64),
                2 if aux => {
                    let by = Leaf::Main(rng.random_range(0..self.main_width), rng.random_bool(0.5));
                    Expr::MulBase(Box::new(self.expr(rng, degree - 1, aux)), by)
                },
                _ => {
                    let split = rng.random_range(1..degree);
                    Expr::Mul(
                        Box::new(self.expr(rng, split, aux)),
                        Box::new(self.expr(rng, degree - split, aux)),
                    )
                },
            }
        };
        match rng.random_range(0..4) {
            0 => Expr::Neg(Box::new(expr)),
            1 => Expr::Sub(Box::new(expr), Box::new(self.linear(rng, aux))),
            _ => expr,
        }
    }

    /// One assertion per chosen column, column 0 always (so none overlap, and a segment has
    /// one), every kind, steps from small sets so that divisors repeat.
    fn assertions(&self, rng: &mut StdRng, width: usize) -> Vec<(AssertionKind, Vec<Felt>)> {
        let n = self.length;
        let mut result = Vec::new();
        for column in 0..width {
            if column > 0 && rng.random_bool(0.2) {
                continue;
            }
            let kind = match rng.random_range(0..3) {
                0 => AssertionKind::Single { step: [0, n - 1, n / 2][rng.random_range(0..3)] },
                1 => {
                    let stride = 1 << rng.random_range(1..=n.trailing_zeros());
                    AssertionKind::Periodic { first_step: rng.random_range(0..stride), stride }
                },
                _ => {
                    // sometimes 64 values or more: winter-prover tabulates those polynomials
                    let values = 1 << rng.random_range(1..n.trailing_zeros());
                    let stride = n / values;
                    AssertionKind::Sequence { first_step: rng.random_range(0..stride), stride }
                },
            };
            let count = match kind {
                AssertionKind::Sequence { stride, .. } => n / stride,
                _ => 1,
            };
            result.push((kind, (0..count).map(|_| random_felt(rng)).collect()));
        }
        result
    }

    fn options(&self, blowup: usize) -> ProofOptions {
        ProofOptions::new(
            27,
            blowup,
            0,
            self.extension,
            4,
            31,
            BatchingMethod::Linear,
            BatchingMethod::Linear,
        )
    }

    fn trace_info(&self) -> TraceInfo {
        if self.aux.is_empty() {
            TraceInfo::new(self.main_width, self.length)
        } else {
            TraceInfo::new_multi_segment(
                self.main_width,
                self.aux_width,
                self.num_random,
                self.length,
                vec![],
            )
        }
    }

    /// The AIR, with an LDE blowup `lde_blowup_over_ce` times its CE blowup (at least 2).
    fn air(&self) -> RandomAir {
        let degree = |d: &(Expr, usize)| TransitionConstraintDegree::new(d.1);
        let ce_blowup = self
            .main
            .iter()
            .chain(&self.aux)
            .map(|d| degree(d).min_blowup_factor())
            .max()
            .unwrap_or(1);
        let blowup = (ce_blowup * self.lde_blowup_over_ce).max(2);
        RandomAir::new(self.trace_info(), self.clone(), self.options(blowup))
    }

    fn with_other_constants(&self) -> Self {
        let map =
            |c: &[(Expr, usize)]| c.iter().map(|(e, d)| (e.with_other_constants(), *d)).collect();
        Self { main: map(&self.main), aux: map(&self.aux), ..self.clone() }
    }
}

fn assertion<E: FieldElement<BaseField = Felt>>(
    column: usize,
    kind: &AssertionKind,
    values: Vec<E>,
) -> Assertion<E> {
    match *kind {
        AssertionKind::Single { step } => Assertion::single(column, step, values[0]),
        AssertionKind::Periodic { first_step, stride } => {
            Assertion::periodic(column, first_step, stride, values[0])
        },
        AssertionKind::Sequence { first_step, stride } => {
            Assertion::sequence(column, first_step, stride, values)
        },
    }
}

/// The test AIR of a [`Description`].
struct RandomAir {
    context: AirContext<Felt>,
    description: Description,
}

impl Air for RandomAir {
    type BaseField = Felt;
    type PublicInputs = Description;

    fn new(trace_info: TraceInfo, description: Description, options: ProofOptions) -> Self {
        let degrees = |c: &[(Expr, usize)]| {
            c.iter().map(|(_, d)| TransitionConstraintDegree::new(*d)).collect::<Vec<_>>()
        };
        let context = if description.aux.is_empty() {
            AirContext::new(
                trace_info,
                degrees(&description.main),
                description.main_assertions.len(),
                options,
            )
        } else {
            AirContext::new_multi_segment(
                trace_info,
                degrees(&description.main),
                degrees(&description.aux),
                description.main_assertions.len(),
                description.aux_assertions.len(),
                options,
            )
        };
        Self { context, description }
    }

    fn context(&self) -> &AirContext<Felt> {
        &self.context
    }

    fn evaluate_transition<E: FieldElement<BaseField = Felt>>(
        &self,
        frame: &EvaluationFrame<E>,
        periodic_values: &[E],
        result: &mut [E],
    ) {
        let leaves = MainLeaves { frame, periodic: periodic_values };
        for (slot, (expr, _)) in result.iter_mut().zip(&self.description.main) {
            *slot = expr.eval(&leaves);
        }
    }

    fn evaluate_aux_transition<F, E>(
        &self,
        main_frame: &EvaluationFrame<F>,
        aux_frame: &EvaluationFrame<E>,
        periodic_values: &[F],
        aux_rand_elements: &AuxRandElements<E>,
        result: &mut [E],
    ) where
        F: FieldElement<BaseField = Felt>,
        E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
    {
        let leaves = AuxLeaves {
            main: MainLeaves { frame: main_frame, periodic: periodic_values },
            aux: aux_frame,
            random: aux_rand_elements.rand_elements(),
        };
        for (slot, (expr, _)) in result.iter_mut().zip(&self.description.aux) {
            *slot = expr.eval(&leaves);
        }
    }

    fn get_periodic_column_values(&self) -> Vec<Vec<Felt>> {
        self.description.periodic.clone()
    }

    fn get_assertions(&self) -> Vec<Assertion<Felt>> {
        self.description
            .main_assertions
            .iter()
            .enumerate()
            .map(|(column, (kind, values))| assertion(column, kind, values.clone()))
            .collect()
    }

    fn get_aux_assertions<E: FieldElement<BaseField = Felt>>(
        &self,
        aux_rand_elements: &AuxRandElements<E>,
    ) -> Vec<Assertion<E>> {
        let alpha = aux_rand_elements.rand_elements()[0];
        self.description
            .aux_assertions
            .iter()
            .enumerate()
            .map(|(column, (kind, values))| {
                let values = values.iter().map(|&v| alpha * E::from(v)).collect();
                assertion(column, kind, values)
            })
            .collect()
    }
}

/// Runs `check` with the description's field as `E`.
fn with_field(
    description: &Description,
    rng: &mut StdRng,
    check: &dyn Fn(&RandomAir, &mut StdRng, FieldKind),
) {
    check(&description.air(), rng, FieldKind::of(description.extension));
}

/// The field a random case runs in.
#[derive(Debug, Clone, Copy)]
enum FieldKind {
    Base,
    Quadratic,
    Cubic,
}

impl FieldKind {
    fn of(extension: FieldExtension) -> Self {
        match extension {
            FieldExtension::None => FieldKind::Base,
            FieldExtension::Quadratic => FieldKind::Quadratic,
            FieldExtension::Cubic => FieldKind::Cubic,
        }
    }
}

fn parity(air: &RandomAir, rng: &mut StdRng, field: FieldKind, label: &str, target: Target<'_>) {
    match field {
        FieldKind::Base => assert_composition_parity::<_, Felt>(air, rng, label, target),
        FieldKind::Quadratic => {
            assert_composition_parity::<_, QuadExtension<Felt>>(air, rng, label, target)
        },
        FieldKind::Cubic => {
            assert_composition_parity::<_, CubeExtension<Felt>>(air, rng, label, target)
        },
    }
}

fn graph_check(air: &RandomAir, rng: &mut StdRng, field: FieldKind) {
    fn run<E: FieldElement<BaseField = Felt>>(air: &RandomAir, rng: &mut StdRng) {
        let graph = capture::<_, E>(air).expect("a random AIR is captured");
        assert_graph_matches_air::<_, E>(air, &graph, rng, 20);
    }
    match field {
        FieldKind::Base => run::<Felt>(air, rng),
        FieldKind::Quadratic => run::<QuadExtension<Felt>>(air, rng),
        FieldKind::Cubic => run::<CubeExtension<Felt>>(air, rng),
    }
}

fn random_air_compositions_equal_winterfell() {
    random_compositions(Target::Interpreter);
}

/// 43 random AIRs of 2^3 to 2^16 rows (the largest with a CE blowup below the LDE blowup),
/// each composition against Winterfell's on `target`.
fn random_compositions(target: Target<'_>) {
    let mut rng = StdRng::seed_from_u64(3);
    let lengths = (0..40).map(|i| 1usize << (3 + i % 6)).chain([1 << 12, 1 << 14, 1 << 16]);
    for (case, length) in lengths.enumerate() {
        let mut description = Description::random(&mut rng, length);
        if length == 1 << 16 {
            // the large case: narrow, low degree, a CE blowup below the LDE blowup
            description.main.truncate(1);
            description.main[0].1 = description.main[0].1.min(3);
            description.aux.iter_mut().for_each(|(_, d)| *d = (*d).min(3));
            description.lde_blowup_over_ce = 2;
        }
        let label = format!(
            "random AIR case {case} (2^{} rows, {:?})",
            length.trailing_zeros(),
            description.extension
        );
        with_field(&description, &mut rng, &|air, rng, field| {
            parity(air, rng, field, &label, target)
        });
    }
}

fn random_air_graphs_equal_their_code() {
    let mut rng = StdRng::seed_from_u64(4);
    for _ in 0..30 {
        let description = Description::random(&mut rng, 64);
        with_field(&description, &mut rng, &graph_check);
    }
}

// ================================================================================================
// MIDEN
// ================================================================================================

/// Miden's `ProcessorAir` on the trace of a program that hashes, touches memory and
/// range-checks (`HASH_MEMORY`: the hasher and memory chiplets and the range checker).
#[cfg(feature = "miden")]
fn miden_composition_equals_winterfell() {
    miden_composition(Target::Interpreter);
}

/// Miden's composition against Winterfell's on `target`.
#[cfg(feature = "miden")]
fn miden_composition(target: Target<'_>) {
    use miden_air::{ProcessorAir, PublicInputs};
    use miden_assembly::Assembler;
    use miden_gpu::miden::programs::HASH_MEMORY;
    use miden_processor::{execute, AdviceInputs, DefaultHost, ExecutionOptions, StackInputs};
    use miden_prover::{HashFunction, ProvingOptions};

    let program = Assembler::default().assemble_program(HASH_MEMORY).expect("program assembles");
    let stack_inputs = StackInputs::new(vec![Felt::new(20)]).expect("stack inputs");
    let trace = execute(
        &program,
        stack_inputs.clone(),
        AdviceInputs::default(),
        &mut DefaultHost::default(),
        ExecutionOptions::default(),
    )
    .expect("program runs");
    let inputs = PublicInputs::new(
        trace.program_info().clone(),
        stack_inputs,
        trace.stack_outputs().clone(),
        trace.final_precompile_transcript().state(),
    );
    let options = ProvingOptions::with_96_bit_security(HashFunction::Rpo256).into();
    let air = ProcessorAir::new(trace.info().clone(), inputs, options);
    let graph = capture::<_, QuadExtension<Felt>>(&air).expect("ProcessorAir is captured");
    let mut rng = StdRng::seed_from_u64(6);
    assert_graph_matches_air::<_, QuadExtension<Felt>>(&air, &graph, &mut rng, 20);
    let aux = |_: &mut StdRng, elements: &[QuadExtension<Felt>]| {
        trace.build_aux_trace(elements).expect("Miden builds its aux trace")
    };
    assert_composition_parity_on(&air, trace.main_segment(), aux, &mut rng, "miden", target);
}

// ================================================================================================
// GRAPH BUILDING AND STRUCTURAL HASH
// ================================================================================================

/// An AIR of one main constraint `expr` over two columns.
fn one_constraint_air(expr: Expr, degree: usize) -> RandomAir {
    Description {
        length: 16,
        main_width: 2,
        aux_width: 0,
        num_random: 0,
        main: vec![(expr, degree)],
        aux: Vec::new(),
        periodic: Vec::new(),
        main_assertions: vec![(AssertionKind::Single { step: 0 }, vec![Felt::ONE])],
        aux_assertions: Vec::new(),
        extension: FieldExtension::Quadratic,
        lde_blowup_over_ce: 1,
    }
    .air()
}

fn column(c: usize) -> Box<Expr> {
    Box::new(Expr::Leaf(Leaf::Main(c, false)))
}

fn constant(value: u64) -> Box<Expr> {
    Box::new(Expr::Leaf(Leaf::Const(value)))
}

fn equal_operations_are_shared() {
    let sum = || Box::new(Expr::Add(column(0), column(1)));
    let graph =
        capture::<_, QuadExtension<Felt>>(&one_constraint_air(Expr::Mul(sum(), sum()), 2)).unwrap();
    // one addition, one multiplication, two inputs
    assert_eq!(graph.num_operations(), 2);
    assert_eq!(graph.nodes().len(), 4);
}

fn constant_operations_fold_and_dead_nodes_go() {
    let expr = Expr::Mul(Box::new(Expr::Add(constant(2), constant(3))), column(0));
    let graph = capture::<_, QuadExtension<Felt>>(&one_constraint_air(expr, 1)).unwrap();
    // the sum folded into one constant; the addends, zero and one are dead
    assert_eq!(graph.num_operations(), 1);
    assert_eq!(graph.constants(), &[Felt::new(5)]);

    // Felt's constant-time `exp` computes a product per bit; only x^5's own chain stays
    let graph =
        capture::<_, QuadExtension<Felt>>(&one_constraint_air(Expr::Exp(column(1), 5), 5)).unwrap();
    assert_eq!(graph.num_operations(), 4);
}

fn structural_hash_ignores_constant_values() {
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..10 {
        let description = Description::random(&mut rng, 32);
        let first = capture::<_, QuadExtension<Felt>>(&description.air()).unwrap();
        let second =
            capture::<_, QuadExtension<Felt>>(&description.with_other_constants().air()).unwrap();
        assert_eq!(first.structural_hash(), second.structural_hash());
        assert_eq!(first.nodes(), second.nodes());
        let other =
            capture::<_, QuadExtension<Felt>>(&Description::random(&mut rng, 32).air()).unwrap();
        assert_ne!(first.structural_hash(), other.structural_hash());
    }
    // the Fibonacci AIR: other public inputs, same shape; more pairs, another shape
    let hash = |pairs, length| {
        capture::<_, QuadExtension<Felt>>(&fib_air(pairs, length, 8, FieldExtension::Quadratic))
            .unwrap()
            .structural_hash()
    };
    assert_eq!(hash(2, 64), hash(2, 128));
    assert_ne!(hash(2, 64), hash(3, 64));
}

// ================================================================================================
// AIRS A GRAPH CANNOT FOLLOW
// ================================================================================================

/// The Fibonacci AIR's constraints behind an operation that depends on values.
struct ValueDependentAir {
    inner: FibAir,
    operation: Unrecordable,
}

impl Air for ValueDependentAir {
    type BaseField = Felt;
    type PublicInputs = fib::FibInputs;

    fn new(trace_info: TraceInfo, inputs: fib::FibInputs, options: ProofOptions) -> Self {
        Self {
            inner: FibAir::new(trace_info, inputs, options),
            operation: Unrecordable::Comparison,
        }
    }

    fn context(&self) -> &AirContext<Felt> {
        self.inner.context()
    }

    fn evaluate_transition<E: FieldElement<BaseField = Felt>>(
        &self,
        frame: &EvaluationFrame<E>,
        periodic_values: &[E],
        result: &mut [E],
    ) {
        self.inner.evaluate_transition(frame, periodic_values, result);
        let value = frame.current()[0];
        match self.operation {
            Unrecordable::Comparison if value == E::ZERO => result[0] = E::ONE,
            Unrecordable::Inversion => result[0] *= value.inv(),
            Unrecordable::Division => result[0] /= value,
            _ => {},
        }
    }

    fn evaluate_aux_transition<F, E>(
        &self,
        main_frame: &EvaluationFrame<F>,
        aux_frame: &EvaluationFrame<E>,
        periodic_values: &[F],
        aux_rand_elements: &AuxRandElements<E>,
        result: &mut [E],
    ) where
        F: FieldElement<BaseField = Felt>,
        E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
    {
        self.inner.evaluate_aux_transition(
            main_frame,
            aux_frame,
            periodic_values,
            aux_rand_elements,
            result,
        );
    }

    fn get_assertions(&self) -> Vec<Assertion<Felt>> {
        self.inner.get_assertions()
    }

    fn get_aux_assertions<E: FieldElement<BaseField = Felt>>(
        &self,
        aux_rand_elements: &AuxRandElements<E>,
    ) -> Vec<Assertion<E>> {
        self.inner.get_aux_assertions(aux_rand_elements)
    }
}

fn value_dependent_air_is_reported() {
    for operation in [Unrecordable::Comparison, Unrecordable::Inversion, Unrecordable::Division] {
        let inner = fib_air(2, 64, 8, FieldExtension::Quadratic);
        let air = ValueDependentAir { inner, operation };
        let error = capture::<_, QuadExtension<Felt>>(&air).expect_err("not capturable");
        assert_eq!(error, CaptureError::Unrecordable { operation, count: 1 });
        assert!(error.to_string().contains(&operation.to_string()), "{error}");
        let coefficients = ConstraintCompositionCoefficients {
            transition: vec![QuadExtension::<Felt>::ONE; 5],
            boundary: vec![QuadExtension::<Felt>::ONE; 6],
        };
        let result = GraphConstraintEvaluator::new(&air, None, coefficients);
        assert!(matches!(result, Err(CaptureError::Unrecordable { .. })));
    }
}

// ================================================================================================
// TIMING
// ================================================================================================

/// Winterfell's evaluator on this host's cores against `committer`'s over a wide AIR: 200
/// constraints of degree up to 9 over 80 columns, 2^20 rows (`MIDEN_GPU_BENCH_LOG_ROWS` says
/// otherwise), blowup 8, the compositions compared. The device time is the evaluation over the
/// kept LDE (the trace commitment before it is not timed): its first call (which compiles the
/// program) and the best of three more. Not part of the suite: run with `--ignored`.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn wide_air_timing(committer: &dyn GpuCommitter) {
    use std::time::Instant;

    type E = QuadExtension<Felt>;
    let log_rows: u32 =
        std::env::var("MIDEN_GPU_BENCH_LOG_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut rng = StdRng::seed_from_u64(17);
    let description = Description::wide(&mut rng, 1 << log_rows, 80, 200);
    let air = description.air();
    let graph = capture::<_, E>(&air).expect("the wide AIR is captured");
    let n = air.trace_length();
    let main =
        ColMatrix::new((0..80).map(|_| (0..n).map(|_| random_felt(&mut rng)).collect()).collect());
    let domain = StarkDomain::new(&air);
    let coefficients = ConstraintCompositionCoefficients {
        transition: random_elements::<E>(&mut rng, air.context().num_transition_constraints()),
        boundary: random_elements(&mut rng, air.context().num_assertions()),
    };
    let (lde, _) = Lde::<E>::new(air.trace_info(), &main, &domain, PartitionOptions::default());
    let started = Instant::now();
    let expected = DefaultConstraintEvaluator::new(&air, None, coefficients.clone())
        .evaluate(&lde, &domain)
        .into_inner();
    let winterfell = started.elapsed();
    drop(lde);

    let started = Instant::now();
    miden_gpu::constraints::Composition::new(&air, None, &coefficients).expect("recorded");
    let recording = started.elapsed();
    let session = on_backend::Session::new::<_, E>(committer, &air, &main, None, &domain);
    let (mut first, mut best) = (None, std::time::Duration::MAX);
    let mut reading = std::time::Duration::MAX;
    let mut actual = Vec::new();
    for _ in 0..4 {
        let started = Instant::now();
        let kept = session.evaluate_kept::<_, E>(&air, None, &coefficients, &domain);
        let evaluated = started.elapsed();
        actual = E::slice_from_base_elements(&kept.read().expect("read")).to_vec();
        let elapsed = started.elapsed();
        reading = reading.min(elapsed - evaluated);
        match first {
            None => first = Some(elapsed),
            Some(_) => best = best.min(elapsed),
        }
    }
    assert!(expected == actual, "the compositions differ");
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "wide AIR on {}: {} constraints (degree <= 9) over 80 columns, 2^{log_rows} rows, CE \
         domain 2^{}, {} operations: Winterfell's evaluator {:.1} ms on {} threads; {} first \
         {:.1} ms, then {:.2} ms ({:.1}x; of it the recording {:.1} ms, the read {:.1} ms); compositions equal",
        committer.device_name(),
        air.context().num_transition_constraints(),
        expected.len().ilog2(),
        graph.num_operations(),
        ms(winterfell),
        rayon::current_num_threads(),
        committer.backend(),
        ms(first.expect("timed")),
        ms(best),
        ms(winterfell) / ms(best),
        ms(recording),
        ms(reading),
    );
}

// ================================================================================================
// CUDA SOURCE
// ================================================================================================

/// The CUDA programs of the compositions of the Fibonacci AIR (no step tables) and of a large
/// random AIR (split into several functions) compile with NVRTC for Hopper without a
/// diagnostic, as the backend compiles them, and define the composition kernel (reported as
/// ignored, with the reason, without `libnvrtc`).
#[cfg(feature = "cuda")]
fn generated_cuda_compiles_with_nvrtc() {
    use miden_gpu::cuda::{compile_source_for_arch, composition_program};

    let mut rng = StdRng::seed_from_u64(7);
    for (name, composition, main_width) in sample_compositions(&mut rng) {
        let source = composition_program(&composition, main_width);
        assert!(source.contains("composition_row_chunk0("), "{name}: no generated function");
        let cubin = compile_source_for_arch("sm_90", source)
            .unwrap_or_else(|e| panic!("{name}: NVRTC rejected the composition program: {e}"));
        let kernel = b"composition";
        assert!(cubin.windows(kernel.len()).any(|w| w == kernel), "{name}: no composition kernel");
    }
}

/// The compositions the generated programs are compiled for, with their main trace widths: the
/// Fibonacci AIR's, and a random cubic AIR's of more than 400 operations (several chunks).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn sample_compositions(
    rng: &mut StdRng,
) -> Vec<(&'static str, miden_gpu::constraints::Composition, usize)> {
    let fib_air = fib_air(4, 64, 8, FieldExtension::Quadratic);
    let fib = composition_of::<_, QuadExtension<Felt>>(&fib_air, rng);
    let mut description = Description::random(rng, 64);
    description.extension = FieldExtension::Cubic;
    for _ in 0..40 {
        let degree = rng.random_range(5..=9);
        let expr = description.expr(rng, degree, false);
        description.main.push((expr, degree));
    }
    let large_air = description.air();
    let large = composition_of::<_, CubeExtension<Felt>>(&large_air, rng);
    assert!(large.graph().num_operations() > 400, "{} operations", large.graph().num_operations());
    vec![
        ("fib", fib, fib_air.trace_info().main_trace_width()),
        ("large", large, large_air.trace_info().main_trace_width()),
    ]
}

/// `air`'s composition with random coefficients and random elements.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn composition_of<A, E>(air: &A, rng: &mut StdRng) -> miden_gpu::constraints::Composition
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    let info = air.trace_info();
    let aux_rand = info.is_multi_segment().then(|| {
        AuxRandElements::new(random_elements::<E>(rng, info.get_num_aux_segment_rand_elements()))
    });
    let coefficients = ConstraintCompositionCoefficients {
        transition: random_elements(rng, air.context().num_transition_constraints()),
        boundary: random_elements(rng, air.context().num_assertions()),
    };
    miden_gpu::constraints::Composition::new(air, aux_rand.as_ref(), &coefficients)
        .expect("the composition is recorded")
}

// ================================================================================================
// ON THE CUDA BACKEND
// ================================================================================================

#[cfg(feature = "cuda")]
fn cuda_fib_compositions_equal_winterfell() {
    fib_compositions(Target::Backend(&cuda::committer()));
}

#[cfg(feature = "cuda")]
fn cuda_random_compositions_equal_winterfell() {
    random_compositions(Target::Backend(&cuda::committer()));
}

#[cfg(all(feature = "cuda", feature = "miden"))]
fn cuda_miden_composition_equals_winterfell() {
    miden_composition(Target::Backend(&cuda::committer()));
}

#[cfg(feature = "cuda")]
fn cuda_wide_air_timing() {
    wide_air_timing(&cuda::committer());
}

#[cfg(feature = "cuda")]
mod cuda {
    use miden_gpu::cuda::{CudaCommitter, CudaOptions};

    pub(super) fn committer() -> CudaCommitter {
        CudaCommitter::with_options(CudaOptions::from_env().expect("CUDA options"))
            .expect("CUDA backend")
    }
}

// ================================================================================================
// ON THE WGPU BACKEND
// ================================================================================================

/// Every fib and random AIR's composition, in each arithmetic the adapter runs.
#[cfg(feature = "wgpu")]
fn wgpu_fib_compositions_equal_winterfell() {
    for committer in wgpu::committers() {
        fib_compositions(Target::Backend(&committer));
    }
}

#[cfg(feature = "wgpu")]
fn wgpu_random_compositions_equal_winterfell() {
    for committer in wgpu::committers() {
        random_compositions(Target::Backend(&committer));
    }
}

#[cfg(all(feature = "wgpu", feature = "miden"))]
fn wgpu_miden_composition_equals_winterfell() {
    for committer in wgpu::committers() {
        miden_composition(Target::Backend(&committer));
    }
}

/// The wide AIR's timing in the adapter's fastest arithmetic.
#[cfg(feature = "wgpu")]
fn wgpu_wide_air_timing() {
    let committer = wgpu::committers().pop().expect("a wgpu committer");
    wide_air_timing(&committer);
}

/// The composition programs of the Fibonacci AIR and of a large random AIR, in both
/// arithmetics, parse and validate with naga and translate to MSL, SPIR-V and HLSL: the
/// generated WGSL is checked for Metal, Vulkan and DX12 without an adapter.
#[cfg(feature = "wgpu")]
fn generated_wgsl_validates_and_translates() {
    use miden_gpu::wgpu::{composition_shader, Arithmetic};
    use naga::{
        back::{hlsl, msl, spv},
        valid::{Capabilities, ValidationFlags, Validator},
    };

    let mut rng = StdRng::seed_from_u64(11);
    for (name, composition, _) in sample_compositions(&mut rng) {
        for arithmetic in [Arithmetic::U32, Arithmetic::U64] {
            let label = format!("{name} ({arithmetic:?})");
            let source = composition_shader(&composition, arithmetic);
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("{label}: {}", e.emit_to_string(&source)));
            let mut capabilities = Capabilities::empty();
            capabilities.set(Capabilities::SHADER_INT64, arithmetic == Arithmetic::U64);
            let info = Validator::new(ValidationFlags::all(), capabilities)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{label}: {}", e.emit_to_string(&source)));
            let msl_options = msl::Options { lang_version: (2, 3), ..Default::default() };
            msl::write_string(&module, &info, &msl_options, &msl::PipelineOptions::default())
                .unwrap_or_else(|e| panic!("{label}: MSL: {e}"));
            spv::write_vec(&module, &info, &spv::Options::default(), None)
                .unwrap_or_else(|e| panic!("{label}: SPIR-V: {e}"));
            let mut hlsl_source = String::new();
            let hlsl_options =
                hlsl::Options { shader_model: hlsl::ShaderModel::V6_0, ..Default::default() };
            hlsl::Writer::new(&mut hlsl_source, &hlsl_options, &hlsl::PipelineOptions::default())
                .write(&module, &info, None)
                .unwrap_or_else(|e| panic!("{label}: HLSL: {e}"));
        }
    }
}

/// The wgpu committers of the tests.
#[cfg(feature = "wgpu")]
mod wgpu {
    use miden_gpu::wgpu::{AdapterSummary, Arithmetic, WgpuCommitter, WgpuOptions};

    /// Why no adapter runs the tests, if none does.
    pub(super) fn absent() -> Option<String> {
        AdapterSummary::find(&WgpuOptions::from_env()).err().map(|e| e.to_string())
    }

    /// A committer in each arithmetic the adapter runs: 32-bit integers always, 64-bit ones
    /// where it has them.
    pub(super) fn committers() -> Vec<WgpuCommitter> {
        [Arithmetic::U32, Arithmetic::U64]
            .into_iter()
            .filter_map(|arithmetic| {
                let options =
                    WgpuOptions { arithmetic: Some(arithmetic), ..WgpuOptions::from_env() };
                let committer = WgpuCommitter::with_options(options);
                match (&committer, arithmetic) {
                    (Err(error), Arithmetic::U64) => {
                        eprintln!("no 64-bit arithmetic on this adapter: {error}");
                    },
                    (Err(error), _) => panic!("wgpu backend: {error}"),
                    (Ok(_), _) => eprintln!("wgpu composition, {arithmetic:?} arithmetic"),
                }
                committer.ok()
            })
            .collect()
    }
}

/// The composition on a GPU backend, as `GpuProver` runs it: the trace segments committed
/// with their LDE rows kept on the device, the recorded composition evaluated there.
mod on_backend {
    use miden_gpu::{
        composition::CompositionRequest, constraints::Composition, CommitRequest, GpuCommitter,
        HashFunction, Keep, KeptRows, PolyInput, RowHashing,
    };
    use std::sync::Arc;

    use super::*;

    /// `columns` committed on `committer` with the rows kept there.
    fn kept(committer: &dyn GpuCommitter, columns: &[&[Felt]], blowup: usize) -> Arc<dyn KeptRows> {
        let request = CommitRequest {
            input: PolyInput::Trace { columns },
            blowup,
            row_hashing: RowHashing::WholeRow,
            hash: HashFunction::Blake3_256,
        };
        let keep = Keep { polys: false, rows: true, tree: false };
        let commitment = committer.commit_keeping(&request, keep).expect("the commitment");
        commitment.kept_rows.expect("the rows are kept on the device")
    }

    /// A trace's segments committed on a backend with their LDE rows kept there.
    pub(super) struct Session<'a> {
        committer: &'a dyn GpuCommitter,
        main: Arc<dyn KeptRows>,
        main_width: usize,
        aux: Option<(Arc<dyn KeptRows>, usize)>,
    }

    impl<'a> Session<'a> {
        /// Commits to `main` and `aux` (split into base components) on `committer`.
        pub(super) fn new<A, E>(
            committer: &'a dyn GpuCommitter,
            air: &A,
            main: &ColMatrix<Felt>,
            aux: Option<&ColMatrix<E>>,
            domain: &StarkDomain<Felt>,
        ) -> Self
        where
            A: Air<BaseField = Felt>,
            E: FieldElement<BaseField = Felt>,
        {
            let blowup = domain.trace_to_lde_blowup();
            debug_assert_eq!(air.trace_length(), main.num_rows());
            let main_columns: Vec<&[Felt]> = main.columns().collect();
            let main_rows = kept(committer, &main_columns, blowup);
            let d = E::EXTENSION_DEGREE;
            let aux = aux.map(|aux| {
                let components: Vec<Vec<Felt>> = aux
                    .columns()
                    .flat_map(|column| {
                        let flat = E::slice_as_base_elements(column);
                        (0..d).map(move |c| flat.iter().skip(c).step_by(d).copied().collect())
                    })
                    .collect();
                let columns: Vec<&[Felt]> = components.iter().map(Vec::as_slice).collect();
                (kept(committer, &columns, blowup), columns.len())
            });
            Self { committer, main: main_rows, main_width: main.num_cols(), aux }
        }

        /// The composition recorded from `air` and evaluated on the backend over the kept rows.
        pub(super) fn evaluate<A, E>(
            &self,
            air: &A,
            aux_rand: Option<&AuxRandElements<E>>,
            coefficients: &ConstraintCompositionCoefficients<E>,
            domain: &StarkDomain<Felt>,
        ) -> Vec<E>
        where
            A: Air<BaseField = Felt>,
            E: FieldElement<BaseField = Felt>,
        {
            let kept = self.evaluate_kept(air, aux_rand, coefficients, domain);
            let words = kept.read().expect("the composition read from the device");
            E::slice_from_base_elements(&words).to_vec()
        }

        /// [`Self::evaluate`], the evaluations left on the backend.
        pub(super) fn evaluate_kept<A, E>(
            &self,
            air: &A,
            aux_rand: Option<&AuxRandElements<E>>,
            coefficients: &ConstraintCompositionCoefficients<E>,
            domain: &StarkDomain<Felt>,
        ) -> std::sync::Arc<dyn miden_gpu::composition::KeptEvaluations>
        where
            A: Air<BaseField = Felt>,
            E: FieldElement<BaseField = Felt>,
        {
            let composition =
                Composition::new(air, aux_rand, coefficients).expect("the composition is recorded");
            let x_bases = composition.x_power_bases(domain);
            let request = CompositionRequest {
                composition: &composition,
                main: self.main.as_ref(),
                aux: self.aux.as_ref().map(|(rows, _)| rows.as_ref()),
                main_width: self.main_width,
                aux_width: self.aux.as_ref().map_or(0, |(_, width)| *width),
                trace_len: air.trace_length(),
                lde_blowup: domain.trace_to_lde_blowup(),
                ce_blowup: air.ce_blowup_factor(),
                x_bases: &x_bases,
            };
            self.committer.evaluate_composition(&request).expect("the composition on the device")
        }
    }

    pub(super) fn evaluate<A, E>(
        committer: &dyn GpuCommitter,
        air: &A,
        main: &ColMatrix<Felt>,
        aux: Option<&ColMatrix<E>>,
        aux_rand: Option<AuxRandElements<E>>,
        coefficients: ConstraintCompositionCoefficients<E>,
        domain: &StarkDomain<Felt>,
    ) -> Vec<E>
    where
        A: Air<BaseField = Felt>,
        E: FieldElement<BaseField = Felt>,
    {
        Session::new(committer, air, main, aux, domain).evaluate(
            air,
            aux_rand.as_ref(),
            &coefficients,
            domain,
        )
    }
}
