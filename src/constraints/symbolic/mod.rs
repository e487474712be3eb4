//! Symbolic field elements: `Copy` handles into a thread-local recording arena.
//!
//! [`SymBase`] stands for `Felt` and [`SymExt`] for its extensions of degree 1, 2 and 3; both
//! implement winter-math's `FieldElement`, so an AIR's own generic constraint code runs on them
//! and every operation it performs becomes a node of a [`GraphBuilder`]. Extension operations are
//! lowered to base operations here, following winter-math's formulas operation for operation
//! (`ExtensibleField<2>` / `<3>` for `f64::BaseElement`), so the graph's words equal the words of
//! the AIR run on real values.
//!
//! What cannot be recorded faithfully (a comparison that is not trivially true, `inv`, `div`,
//! conjugation, byte and slice views, serialization, randomness) marks the recording as failed,
//! with the reason, and returns a placeholder.

mod base;
mod ext;
mod recorder;
mod shared;

pub(crate) use base::SymBase;
pub(crate) use ext::SymExt;
pub use recorder::Unrecordable;
pub(crate) use recorder::{record, Recorded};
