//! Any Winterfell AIR's constraints as an expression graph, and the composition from it.
//!
//! [`capture`] runs an AIR's own `evaluate_transition` / `evaluate_aux_transition` once on
//! symbolic field elements and records every field operation into a [`ConstraintGraph`] of
//! base-field nodes (extension arithmetic lowered with winter-math's formulas). The graph is
//! hash-consed, folds operations of constants, drops dead nodes and keeps constants as a table
//! outside its structure, so [`ConstraintGraph::structural_hash`] names the AIR's shape across
//! proofs. [`ConstraintGraph::interpret`] evaluates it over one frame, and
//! [`GraphConstraintEvaluator`] computes the whole composition over the constraint-evaluation
//! domain, equal bit for bit to winter-prover's `DefaultConstraintEvaluator`.
//!
//! [`cuda_source`] and [`wgsl_source`] write a graph as CUDA `__device__` functions and WGSL
//! functions over the crate's field code, in chunks of bounded size (`codegen`, once for both).
//!
//! An AIR whose constraint code compares, inverts or divides field elements (or reinterprets
//! them as bytes) is not captured: [`CaptureError`] says why, and the prover's own evaluator
//! serves it.

mod boundary;
mod capture;
mod codegen;
mod compose;
mod cuda;
mod evaluator;
mod graph;
mod interpret;
mod periodic;
mod symbolic;
mod wgsl;

pub use capture::{capture, CaptureError};
pub use compose::{Composition, StepTable};
pub use cuda::cuda_source;
pub use evaluator::GraphConstraintEvaluator;
pub use graph::{ConstraintGraph, Input, NodeId, Op};
pub use interpret::FrameInputs;
pub use symbolic::Unrecordable;
pub use wgsl::wgsl_source;
