//! [`MidenTrace`]: the execution trace [`super::ExecutionProver`] proves, with its main segment
//! exactly as `miden_processor::execute` builds it, whichever processor built the trace.

use miden_crypto::Felt;
use miden_processor::{ExecutionTrace, PrecompileRequest};
use winter_air::{EvaluationFrame, TraceInfo};
use winter_prover::{matrix::ColMatrix, Trace};

/// A Miden execution trace to prove: `miden_processor`'s [`ExecutionTrace`] (its auxiliary
/// columns, public inputs and outputs), and the main segment that is committed to.
///
/// The main segment is the execution trace's own, or a corrected copy where the trace was built
/// by Miden's parallel builder: that builder writes random values into the last row of the
/// padding columns as well, which `miden_processor::execute` leaves at zero, and a commitment to
/// them would give another proof than `miden_prover`'s.
pub struct MidenTrace {
    execution: ExecutionTrace,
    main: Option<ColMatrix<Felt>>,
}

impl MidenTrace {
    /// `execution`, whose main segment is replaced with `main(&execution)`.
    pub(super) fn with_main(
        execution: ExecutionTrace,
        main: impl FnOnce(&ExecutionTrace) -> ColMatrix<Felt>,
    ) -> Self {
        let main = main(&execution);
        Self { execution, main: Some(main) }
    }

    /// The execution trace (its main segment may differ from [`Trace::main_segment`]; see the
    /// type's documentation).
    pub fn execution(&self) -> &ExecutionTrace {
        &self.execution
    }

    /// The precompile requests of the execution, taken out of the trace (for the proof).
    pub fn take_precompile_requests(&mut self) -> Vec<PrecompileRequest> {
        self.execution.take_precompile_requests()
    }
}

impl From<ExecutionTrace> for MidenTrace {
    /// A trace built by `miden_processor::execute`, proven as it is.
    fn from(execution: ExecutionTrace) -> Self {
        Self { execution, main: None }
    }
}

impl Trace for MidenTrace {
    type BaseField = Felt;

    fn info(&self) -> &TraceInfo {
        self.execution.info()
    }

    fn main_segment(&self) -> &ColMatrix<Felt> {
        self.main.as_ref().unwrap_or_else(|| self.execution.main_segment())
    }

    fn read_main_frame(&self, row_idx: usize, frame: &mut EvaluationFrame<Felt>) {
        let main = self.main_segment();
        let next_row_idx = (row_idx + 1) % main.num_rows();
        main.read_row_into(row_idx, frame.current_mut());
        main.read_row_into(next_row_idx, frame.next_mut());
    }
}
