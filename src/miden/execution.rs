//! How a program is executed before its proof ([`Execution`]): Miden's reference processor,
//! which builds the trace row by row on one thread, or Miden's fast processor followed by the
//! trace built from its fragments on every core.
//!
//! Both give the same trace, and so the same proof (see [`super::MidenTrace`] for the one value
//! the parallel builder writes otherwise). A failing program's error always comes from the
//! reference processor, so it reads as `miden_prover`'s.

use std::sync::Arc;

use miden_air::trace::{PADDED_TRACE_WIDTH, TRACE_WIDTH};
use miden_assembly::debuginfo::{Location, SourceFile, SourceSpan};
use miden_core::{DebugOptions, EventId, EventName};
use miden_crypto::Felt;
use miden_processor::{
    fast::FastProcessor, AdviceInputs, AdviceMutation, AssertError, AsyncHost, BaseHost,
    DebugError, EventError, ExecutionError, ExecutionOptions, ExecutionTrace, FutureMaybeSend,
    MastForest, ProcessState, Program, StackInputs, SyncHost, TraceError, Word, NUM_RAND_ROWS,
};
use rayon::prelude::*;
use tracing::{info, info_span};
use winter_prover::{matrix::ColMatrix, Trace};

use super::trace::MidenTrace;
use crate::host::on_copy_pool;
use crate::prover::spans;

// EXECUTION
// ================================================================================================

/// The cycles of one trace fragment of [`Execution::Parallel`]: the unit of its parallel trace
/// building (2^20 cycles give 256 fragments).
const FRAGMENT_CYCLES: usize = 1 << 12;

/// Which of Miden's processors executes a program before its proof; both give the same proof.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Execution {
    /// `miden_processor::execute`, as `miden_prover::prove` runs it: the trace is built row by
    /// row on one thread, and `ExecutionOptions::max_cycles` stops a program as soon as it runs
    /// past it. The choice for programs from untrusted sources.
    Reference,
    /// Miden's fast processor (`FastProcessor::execute_for_trace`), then the trace built from
    /// its fragments on every core (`miden_processor::parallel::build_trace`): faster than the
    /// reference processor wherever there are cores to spare, since the trace is built in
    /// parallel.
    ///
    /// `max_cycles` is checked once the program ends (a longer run is
    /// `ExecutionError::CycleLimitExceeded`), so a program that never ends is not stopped: use
    /// [`Execution::Reference`] for programs you do not trust. When the fast processor fails
    /// (a failing program, or one whose stack outgrows the fast processor's buffer), the program
    /// runs again on the reference processor, whose result is returned.
    #[default]
    Parallel,
}

/// Executes `program` as `execution` says, with the stack inputs, advice and execution options
/// `miden_processor::execute` takes.
///
/// # Errors
/// The reference processor's error for a program that fails, and
/// `ExecutionError::CycleLimitExceeded` for one that runs past `options.max_cycles()`.
pub(super) fn execute(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ExecutionOptions,
    execution: Execution,
) -> Result<MidenTrace, ExecutionError> {
    // `miden_processor::execute` enters the `spans::EXECUTION` span itself
    let reference = |advice_inputs, host: &mut _| {
        miden_processor::execute(program, stack_inputs.clone(), advice_inputs, host, options)
            .map(MidenTrace::from)
    };
    let max_cycles = options.max_cycles() as usize;
    match execution {
        Execution::Reference => reference(advice_inputs, host),
        Execution::Parallel => {
            let parallel = info_span!(spans::EXECUTION).in_scope(|| {
                execute_parallel(program, &stack_inputs, advice_inputs.clone(), host, options)
            });
            match parallel {
                Ok(trace) if trace.execution().trace_len_summary().trace_len() > max_cycles => {
                    Err(ExecutionError::CycleLimitExceeded(options.max_cycles()))
                },
                Ok(trace) => Ok(trace),
                Err(error) => {
                    let executed = reference(advice_inputs, host);
                    if executed.is_ok() {
                        info!(%error, "the fast processor failed where the reference one did not");
                    }
                    executed
                },
            }
        },
    }
}

/// [`Execution::Parallel`]: the fast processor's run, then the trace built from its fragments.
fn execute_parallel(
    program: &Program,
    stack_inputs: &StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ExecutionOptions,
) -> Result<MidenTrace, ExecutionError> {
    // the fast processor takes the stack inputs bottom first
    let stack: Vec<Felt> = stack_inputs.iter().rev().copied().collect();
    let debugging = options.enable_debugging() || options.enable_tracing();
    let processor = if debugging {
        FastProcessor::new_debug(&stack, advice_inputs)
    } else {
        FastProcessor::new_with_advice_inputs(&stack, advice_inputs)
    };
    let mut host = AsAsync { host, tracing: options.enable_tracing() };
    let (output, context) = info_span!("execute_fast").in_scope(|| {
        pollster::block_on(processor.execute_for_trace(program, &mut host, FRAGMENT_CYCLES))
    })?;
    let trace = info_span!("build_trace").in_scope(|| {
        miden_processor::parallel::build_trace(
            output,
            context,
            program.hash(),
            program.kernel().clone(),
        )
    });
    Ok(info_span!("reference_padding").in_scope(|| MidenTrace::with_main(trace, reference_padding)))
}

/// The main segment of `trace` with its padding columns as the reference processor leaves them:
/// zero in every row. The parallel builder also writes random values into their last rows,
/// where the reference processor randomizes only the `TRACE_WIDTH` columns of the trace.
fn reference_padding(trace: &ExecutionTrace) -> ColMatrix<Felt> {
    let main = trace.main_segment();
    let rows = main.num_rows();
    // a copy: on the copy threads, not behind other proofs' tasks on the caller's pool
    let columns = on_copy_pool(|| {
        (0..PADDED_TRACE_WIDTH)
            .into_par_iter()
            .map(|index| {
                let mut column = main.get_column(index).to_vec();
                if index >= TRACE_WIDTH {
                    column[rows - NUM_RAND_ROWS..].fill(Felt::new(0));
                }
                column
            })
            .collect()
    });
    ColMatrix::new(columns)
}

// HOST
// ================================================================================================

/// A synchronous host seen by the fast processor, which takes an asynchronous one: each call
/// answers at once. Trace decorators reach the host only when the execution options enable
/// tracing, as on the reference processor.
struct AsAsync<'a, H> {
    host: &'a mut H,
    tracing: bool,
}

impl<H: SyncHost> BaseHost for AsAsync<'_, H> {
    fn get_label_and_source_file(
        &self,
        location: &Location,
    ) -> (SourceSpan, Option<Arc<SourceFile>>) {
        self.host.get_label_and_source_file(location)
    }

    fn on_debug(
        &mut self,
        process: &mut ProcessState,
        options: &DebugOptions,
    ) -> Result<(), DebugError> {
        self.host.on_debug(process, options)
    }

    fn on_trace(&mut self, process: &mut ProcessState, trace_id: u32) -> Result<(), TraceError> {
        if self.tracing {
            self.host.on_trace(process, trace_id)
        } else {
            Ok(())
        }
    }

    fn on_assert_failed(&mut self, process: &ProcessState, err_code: Felt) -> Option<AssertError> {
        self.host.on_assert_failed(process, err_code)
    }

    fn resolve_event(&self, event_id: EventId) -> Option<&EventName> {
        self.host.resolve_event(event_id)
    }
}

impl<H: SyncHost> AsyncHost for AsAsync<'_, H> {
    fn get_mast_forest(&self, node_digest: &Word) -> impl FutureMaybeSend<Option<Arc<MastForest>>> {
        let forest = self.host.get_mast_forest(node_digest);
        async move { forest }
    }

    fn on_event(
        &mut self,
        process: &ProcessState<'_>,
    ) -> impl FutureMaybeSend<Result<Vec<AdviceMutation>, EventError>> {
        let mutations = self.host.on_event(process);
        async move { mutations }
    }
}

// NAMES
// ================================================================================================

impl core::fmt::Display for Execution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Execution::Parallel => "parallel",
            Execution::Reference => "reference",
        })
    }
}

impl core::str::FromStr for Execution {
    type Err = String;

    /// `parallel` or `reference`, as [`Execution`]'s `Display` writes them.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "parallel" => Ok(Execution::Parallel),
            "reference" => Ok(Execution::Reference),
            _ => Err(format!("unknown execution `{name}`; expected parallel or reference")),
        }
    }
}

// TESTS
// ================================================================================================

#[cfg(test)]
mod tests {
    use miden_assembly::Assembler;
    use miden_processor::DefaultHost;

    use super::*;
    use crate::miden::programs::{iteration_inputs, FIBONACCI, HASH_MEMORY, U32_ADVICE};

    fn assemble(source: &str) -> Program {
        Assembler::default().assemble_program(source).expect("program assembles")
    }

    fn u32_advice(n: u64) -> AdviceInputs {
        let values = (0..n).map(|i| 0x9E37_79B9u64.wrapping_mul(i + 1) & 0xFFFF_FFFF);
        AdviceInputs::default().with_stack_values(values).expect("u32 advice values")
    }

    fn run(
        program: &Program,
        (n, advice): (u64, &AdviceInputs),
        options: ExecutionOptions,
        execution: Execution,
    ) -> Result<MidenTrace, ExecutionError> {
        let mut host = DefaultHost::default();
        execute(program, iteration_inputs(n), advice.clone(), &mut host, options, execution)
    }

    /// Everything the proof reads from a trace is the same after both executions: the main
    /// segment (every column and row), the auxiliary columns for random elements, the public
    /// values and the trace's shape.
    fn assert_same_trace(reference: &MidenTrace, parallel: &MidenTrace) {
        let (a, b) = (reference.main_segment(), parallel.main_segment());
        assert_eq!((a.num_cols(), a.num_rows()), (b.num_cols(), b.num_rows()), "shape");
        for column in 0..a.num_cols() {
            assert!(a.get_column(column) == b.get_column(column), "main column {column} differs");
        }
        let rand: Vec<Felt> = (0..miden_air::trace::AUX_TRACE_RAND_ELEMENTS as u64)
            .map(|i| Felt::new(0x9E37_79B9_7F4A_7C15 ^ i))
            .collect();
        let (reference, parallel) = (reference.execution(), parallel.execution());
        let (aux_a, aux_b) = (reference.build_aux_trace(&rand), parallel.build_aux_trace(&rand));
        let (aux_a, aux_b) = (aux_a.expect("aux columns"), aux_b.expect("aux columns"));
        for column in 0..aux_a.num_cols() {
            assert!(
                aux_a.get_column(column) == aux_b.get_column(column),
                "aux column {column} differs"
            );
        }
        assert_eq!(reference.info(), parallel.info());
        assert_eq!(reference.stack_outputs(), parallel.stack_outputs());
        assert_eq!(reference.program_info(), parallel.program_info());
        assert_eq!(reference.trace_len_summary(), parallel.trace_len_summary());
        assert_eq!(reference.final_precompile_transcript(), parallel.final_precompile_transcript());
        assert_eq!(reference.precompile_requests(), parallel.precompile_requests());
    }

    /// The parallel builder's own trace differs from the reference only in the padding columns'
    /// last rows, which [`reference_padding`] zeroes; the rest is the same, for programs that
    /// use the decoder and stack, the hasher and memory chiplets, the range checker and advice.
    #[test]
    fn parallel_execution_gives_the_reference_trace() {
        let none = AdviceInputs::default();
        let cases = [
            (FIBONACCI, 1000, none.clone()),
            (HASH_MEMORY, 40, none),
            (U32_ADVICE, 60, u32_advice(60)),
        ];
        for (source, n, advice) in cases {
            let program = assemble(source);
            let options = ExecutionOptions::default();
            let mut host = DefaultHost::default();
            let parallel = execute_parallel(
                &program,
                &iteration_inputs(n),
                advice.clone(),
                &mut host,
                options,
            )
            .expect("the fast processor runs these programs");
            let reference =
                run(&program, (n, &advice), options, Execution::Reference).expect("executes");
            assert_same_trace(&reference, &parallel);
            let built = parallel.execution().main_segment();
            let padding =
                (TRACE_WIDTH..PADDED_TRACE_WIDTH).map(|c| built.get(c, built.num_rows() - 1));
            assert!(
                padding.into_iter().any(|value| value != Felt::new(0)),
                "the builder randomizes the padding"
            );
        }
    }

    /// A procedure of a dynamically linked library (an external node the host resolves), its
    /// event (handled by the host's library handler) and a `call` into a new context, in a loop
    /// over several fragments: the adapter's host calls give the reference trace.
    #[test]
    fn libraries_events_and_calls_give_the_reference_trace() {
        let source = "
            use miden::core::math::u64

            proc mix
                mul add.3
            end

            begin
                repeat.300
                    push.3.7.1000000.5
                    exec.u64::div
                    call.mix
                    drop drop
                end
            end";
        let core = miden_core_lib::CoreLibrary::default();
        let program = Assembler::default()
            .with_dynamic_library(&core)
            .expect("the core library links")
            .assemble_program(source)
            .expect("program assembles");
        let (options, none) = (ExecutionOptions::default(), AdviceInputs::default());
        let inputs = StackInputs::default();
        let host = || DefaultHost::default().with_library(&core).expect("the core library loads");
        let reference = execute(
            &program,
            inputs.clone(),
            none.clone(),
            &mut host(),
            options,
            Execution::Reference,
        )
        .expect("executes");
        let parallel = execute_parallel(&program, &inputs, none, &mut host(), options)
            .expect("the fast processor runs it");
        assert!(reference.execution().trace_len_summary().trace_len() > 2 * FRAGMENT_CYCLES);
        assert_same_trace(&reference, &parallel);
    }

    /// A stack deeper than the fast processor's buffer fails there, and the reference processor
    /// then executes the program.
    #[test]
    fn a_deep_stack_is_executed_on_the_reference_processor() {
        let program = assemble("begin repeat.7000 push.1 end repeat.7000 drop end end");
        let (options, none) = (ExecutionOptions::default(), AdviceInputs::default());
        let mut host = DefaultHost::default();
        let fast =
            execute_parallel(&program, &iteration_inputs(0), none.clone(), &mut host, options);
        assert!(fast.is_err(), "the fast processor's stack buffer holds 7000 elements");
        let reference = run(&program, (0, &none), options, Execution::Reference).expect("executes");
        let parallel = run(&program, (0, &none), options, Execution::Parallel).expect("executes");
        assert_same_trace(&reference, &parallel);
    }

    /// A program that runs past `max_cycles` is `CycleLimitExceeded` on both processors, and a
    /// failing program's error is the reference processor's.
    #[test]
    fn errors_are_the_reference_processors() {
        let (fibonacci, none) = (assemble(FIBONACCI), AdviceInputs::default());
        let limited = ExecutionOptions::new(Some(4096), 64, false, false).expect("options");
        for execution in [Execution::Reference, Execution::Parallel] {
            let error = run(&fibonacci, (2000, &none), limited, execution).err();
            assert!(
                matches!(error, Some(ExecutionError::CycleLimitExceeded(4096))),
                "{execution}: {error:?}"
            );
            assert!(run(&fibonacci, (200, &none), limited, execution).is_ok(), "{execution}");
        }
        let failing = assemble("begin push.1 push.2 add push.4 assert_eq end");
        let options = ExecutionOptions::default();
        let errors = [Execution::Reference, Execution::Parallel].map(|execution| {
            run(&failing, (0, &none), options, execution).err().map(|e| e.to_string())
        });
        assert!(errors[0].is_some(), "the program fails");
        assert_eq!(errors[0], errors[1]);
    }

    #[test]
    fn names_round_trip() {
        for execution in [Execution::Reference, Execution::Parallel] {
            assert_eq!(execution.to_string().parse::<Execution>(), Ok(execution));
        }
        assert!("fast".parse::<Execution>().is_err());
    }
}
