//! A Fibonacci AIR over `Felt` with an auxiliary segment, and its plain Winterfell prover.
//!
//! The main segment holds `pairs` independent Fibonacci sequences, two columns each; every step
//! advances a pair by two terms: `(a, b) -> (a + b, a + 2b)`. Pair `j` starts at `(1, j + 1)`;
//! the public input is the last value of pair 0's first column. The auxiliary segment is one
//! running-product column `z` over the extension field: `z_0 = 1`, `z_{i+1} = z_i · (α + a_i)`,
//! which exercises `build_aux_trace` and the aux-segment commitment.
//!
//! Shared by `examples/prove_fib.rs` and the prover tests.

#![allow(dead_code)]

use std::marker::PhantomData;

use miden_gpu::Felt;
use winter_air::{
    Air, AirContext, Assertion, AuxRandElements, ConstraintCompositionCoefficients,
    EvaluationFrame, PartitionOptions, ProofOptions, TraceInfo, TransitionConstraintDegree,
};
use winter_crypto::{DefaultRandomCoin, ElementHasher, MerkleTree};
use winter_math::{ExtensionOf, FieldElement, ToElements};
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, DefaultConstraintCommitment,
    DefaultConstraintEvaluator, DefaultTraceLde, Prover, StarkDomain, Trace, TracePolyTable,
};

// PUBLIC INPUTS
// ================================================================================================

/// The claimed last value of pair 0, and the number of pairs (the trace width).
#[derive(Debug, Clone, Copy)]
pub struct FibInputs {
    /// Last value of column 0.
    pub result: Felt,
    /// Number of Fibonacci pairs.
    pub pairs: usize,
}

impl ToElements<Felt> for FibInputs {
    fn to_elements(&self) -> Vec<Felt> {
        vec![self.result, Felt::new(self.pairs as u64)]
    }
}

// AIR
// ================================================================================================

/// The Fibonacci AIR described in the module docs.
pub struct FibAir {
    context: AirContext<Felt>,
    inputs: FibInputs,
}

impl Air for FibAir {
    type BaseField = Felt;
    type PublicInputs = FibInputs;

    fn new(trace_info: TraceInfo, inputs: FibInputs, options: ProofOptions) -> Self {
        let main_degrees = vec![TransitionConstraintDegree::new(1); 2 * inputs.pairs];
        let aux_degrees = vec![TransitionConstraintDegree::new(2)];
        let context = AirContext::new_multi_segment(
            trace_info,
            main_degrees,
            aux_degrees,
            2 * inputs.pairs + 1,
            1,
            options,
        );
        Self { context, inputs }
    }

    fn context(&self) -> &AirContext<Felt> {
        &self.context
    }

    fn evaluate_transition<E: FieldElement<BaseField = Felt>>(
        &self,
        frame: &EvaluationFrame<E>,
        _periodic_values: &[E],
        result: &mut [E],
    ) {
        let (current, next) = (frame.current(), frame.next());
        for j in 0..self.inputs.pairs {
            let (a, b) = (current[2 * j], current[2 * j + 1]);
            result[2 * j] = next[2 * j] - (a + b);
            result[2 * j + 1] = next[2 * j + 1] - (a + b + b);
        }
    }

    fn evaluate_aux_transition<F, E>(
        &self,
        main_frame: &EvaluationFrame<F>,
        aux_frame: &EvaluationFrame<E>,
        _periodic_values: &[F],
        aux_rand_elements: &AuxRandElements<E>,
        result: &mut [E],
    ) where
        F: FieldElement<BaseField = Felt>,
        E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
    {
        let alpha = aux_rand_elements.rand_elements()[0];
        let a = E::from(main_frame.current()[0]);
        result[0] = aux_frame.next()[0] - aux_frame.current()[0] * (alpha + a);
    }

    fn get_assertions(&self) -> Vec<Assertion<Felt>> {
        let last = self.trace_length() - 1;
        let mut assertions = Vec::with_capacity(2 * self.inputs.pairs + 1);
        for j in 0..self.inputs.pairs {
            assertions.push(Assertion::single(2 * j, 0, Felt::ONE));
            assertions.push(Assertion::single(2 * j + 1, 0, Felt::new(j as u64 + 1)));
        }
        assertions.push(Assertion::single(0, last, self.inputs.result));
        assertions
    }

    fn get_aux_assertions<E: FieldElement<BaseField = Felt>>(
        &self,
        _aux_rand_elements: &AuxRandElements<E>,
    ) -> Vec<Assertion<E>> {
        vec![Assertion::single(0, 0, E::ONE)]
    }
}

// TRACE
// ================================================================================================

/// The main segment of a Fibonacci execution.
pub struct FibTrace {
    info: TraceInfo,
    main: ColMatrix<Felt>,
}

impl FibTrace {
    /// Runs `pairs` sequences for `length` steps (a power of two, at least 8).
    pub fn new(pairs: usize, length: usize) -> Self {
        let mut columns = Vec::with_capacity(2 * pairs);
        for j in 0..pairs {
            let (mut a, mut b) = (Felt::ONE, Felt::new(j as u64 + 1));
            let (mut first, mut second) = (Vec::with_capacity(length), Vec::with_capacity(length));
            for _ in 0..length {
                first.push(a);
                second.push(b);
                (a, b) = (a + b, a + b + b);
            }
            columns.extend([first, second]);
        }
        let info = TraceInfo::new_multi_segment(2 * pairs, 1, 1, length, vec![]);
        Self { info, main: ColMatrix::new(columns) }
    }

    /// The public inputs this trace proves.
    pub fn inputs(&self) -> FibInputs {
        let result = self.main.get(0, self.main.num_rows() - 1);
        FibInputs { result, pairs: self.main.num_cols() / 2 }
    }
}

impl Trace for FibTrace {
    type BaseField = Felt;

    fn info(&self) -> &TraceInfo {
        &self.info
    }

    fn main_segment(&self) -> &ColMatrix<Felt> {
        &self.main
    }

    fn read_main_frame(&self, row: usize, frame: &mut EvaluationFrame<Felt>) {
        let next = (row + 1) % self.length();
        self.main.read_row_into(row, frame.current_mut());
        self.main.read_row_into(next, frame.next_mut());
    }
}

// PLAIN WINTERFELL PROVER
// ================================================================================================

/// The Fibonacci prover with Winterfell's default LDE and commitments: the CPU baseline.
pub struct FibProver<H> {
    options: ProofOptions,
    _hasher: PhantomData<H>,
}

impl<H> FibProver<H> {
    /// A prover with the given options.
    pub fn new(options: ProofOptions) -> Self {
        Self { options, _hasher: PhantomData }
    }
}

impl<H> Prover for FibProver<H>
where
    H: ElementHasher<BaseField = Felt> + Sync,
{
    type BaseField = Felt;
    type Air = FibAir;
    type Trace = FibTrace;
    type HashFn = H;
    type VC = MerkleTree<H>;
    type RandomCoin = DefaultRandomCoin<H>;
    type TraceLde<E: FieldElement<BaseField = Felt>> = DefaultTraceLde<E, H, Self::VC>;
    type ConstraintEvaluator<'a, E: FieldElement<BaseField = Felt>> =
        DefaultConstraintEvaluator<'a, FibAir, E>;
    type ConstraintCommitment<E: FieldElement<BaseField = Felt>> =
        DefaultConstraintCommitment<E, H, Self::VC>;

    fn get_pub_inputs(&self, trace: &FibTrace) -> FibInputs {
        trace.inputs()
    }

    fn options(&self) -> &ProofOptions {
        &self.options
    }

    fn new_trace_lde<E: FieldElement<BaseField = Felt>>(
        &self,
        trace_info: &TraceInfo,
        main_trace: &ColMatrix<Felt>,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
    ) -> (Self::TraceLde<E>, TracePolyTable<E>) {
        DefaultTraceLde::new(trace_info, main_trace, domain, partition_options)
    }

    fn new_evaluator<'a, E: FieldElement<BaseField = Felt>>(
        &self,
        air: &'a FibAir,
        aux_rand_elements: Option<AuxRandElements<E>>,
        composition_coefficients: ConstraintCompositionCoefficients<E>,
    ) -> Self::ConstraintEvaluator<'a, E> {
        DefaultConstraintEvaluator::new(air, aux_rand_elements, composition_coefficients)
    }

    fn build_constraint_commitment<E: FieldElement<BaseField = Felt>>(
        &self,
        composition_poly_trace: CompositionPolyTrace<E>,
        num_constraint_composition_columns: usize,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
    ) -> (Self::ConstraintCommitment<E>, CompositionPoly<E>) {
        DefaultConstraintCommitment::new(
            composition_poly_trace,
            num_constraint_composition_columns,
            domain,
            partition_options,
        )
    }

    fn build_aux_trace<E: FieldElement<BaseField = Felt>>(
        &self,
        trace: &FibTrace,
        aux_rand_elements: &AuxRandElements<E>,
    ) -> ColMatrix<E> {
        let alpha = aux_rand_elements.rand_elements()[0];
        let a = trace.main_segment().get_column(0);
        let mut z = Vec::with_capacity(a.len());
        let mut acc = E::ONE;
        for &value in a {
            z.push(acc);
            acc *= alpha + E::from(value);
        }
        ColMatrix::new(vec![z])
    }
}
