//! Span names of the steps of a proof: Winterfell's, and the Miden VM's around them.
//!
//! The prover enters these spans as Winterfell's own prover does, so `tracing` layers (stage
//! times, progress displays) read one set of names for both.

/// Main trace segment: interpolate, extend, hash, tree.
pub const MAIN_TRACE: &str = "commit_to_main_trace_segment";
/// Auxiliary trace segment (includes building the aux trace, except for Miden's bus columns:
/// [`AUX_TRACE_BUILD`]).
pub const AUX_TRACE: &str = "commit_to_aux_trace_segment";
/// Constraint commitment: composition polynomial, extend, hash, tree.
pub const CONSTRAINTS: &str = "commit_to_constraint_evaluations";
/// Evaluation of the constraints over the constraint-evaluation domain.
pub const CONSTRAINT_EVALUATION: &str = "evaluate_constraints";
/// Miden VM: execution of the program (`miden_processor::execute`).
pub const EXECUTION: &str = "execute_program";
/// Miden VM: building the auxiliary (bus) columns (`miden_prover` and this crate's `miden`
/// module), outside Winterfell's [`AUX_TRACE`] span.
pub const AUX_TRACE_BUILD: &str = "build_aux_trace";
/// Building the DEEP composition polynomial.
pub const DEEP_BUILD: &str = "build_deep_composition_poly";
/// Evaluating the DEEP composition polynomial over the LDE domain.
pub const DEEP_EVALUATION: &str = "evaluate_deep_composition_poly";
/// Folding and committing to the FRI layers.
pub const FRI_LAYERS: &str = "compute_fri_layers";
/// Grinding and drawing the query positions.
pub const QUERY_POSITIONS: &str = "determine_query_positions";
/// Assembling the proof object.
pub const PROOF_OBJECT: &str = "build_proof_object";
/// Verifying the finished proof ([`crate::GpuProver::with_self_check`]).
pub const SELF_CHECK: &str = "verify_proof";
