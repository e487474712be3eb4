//! The thread-local arena the symbolic elements record into.

use std::cell::RefCell;

use crate::constraints::graph::{GraphBuilder, NodeId, Op};
use crate::Felt;

// ================================================================================================
// UNRECORDABLE OPERATIONS
// ================================================================================================

/// An operation a graph cannot follow faithfully.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrecordable {
    /// `==` between elements that are not the same node (its answer would depend on values).
    Comparison,
    /// `inv`.
    Inversion,
    /// `/` or `/=`.
    Division,
    /// `conjugate` of an extension element.
    Conjugate,
    /// `base_element`, slice or byte reinterpretations, serialization.
    Reinterpretation,
    /// Drawing a random element.
    Randomness,
}

impl std::fmt::Display for Unrecordable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unrecordable::Comparison => "a comparison of field elements",
            Unrecordable::Inversion => "an inversion",
            Unrecordable::Division => "a division",
            Unrecordable::Conjugate => "a conjugation",
            Unrecordable::Reinterpretation => "a byte, slice or base-element view",
            Unrecordable::Randomness => "a random element",
        })
    }
}

// ================================================================================================
// RECORDING
// ================================================================================================

/// The arena of one recording, with the first operation it could not follow.
#[derive(Debug, Default)]
struct Recording {
    builder: GraphBuilder,
    failure: Option<(Unrecordable, usize)>,
}

thread_local! {
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// What one recording gave.
pub(crate) struct Recorded<T> {
    /// The body's result.
    pub(crate) result: T,
    /// The recorded nodes.
    pub(crate) builder: GraphBuilder,
    /// The first unrecordable operation, with how many there were.
    pub(crate) failure: Option<(Unrecordable, usize)>,
}

/// Runs `body` with a fresh arena on this thread; `None` when a recording is already active.
pub(crate) fn record<T>(body: impl FnOnce() -> T) -> Option<Recorded<T>> {
    let started = RECORDING.with(|cell| {
        let mut slot = cell.borrow_mut();
        slot.is_none().then(|| *slot = Some(Recording::default())).is_some()
    });
    if !started {
        return None;
    }
    let _reset = ResetOnDrop;
    let result = body();
    let recording = RECORDING.with(|cell| cell.borrow_mut().take()).unwrap_or_default();
    Some(Recorded { result, builder: recording.builder, failure: recording.failure })
}

/// Ends the recording even when the body unwinds.
struct ResetOnDrop;

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        RECORDING.with(|cell| cell.borrow_mut().take());
    }
}

/// Records `op`; outside a recording it yields the zero node (symbols exist only inside one).
pub(super) fn node(op: Op) -> NodeId {
    with(|recording| recording.builder.node(op)).unwrap_or(crate::constraints::graph::ZERO_NODE)
}

/// Records a new constant slot.
pub(super) fn constant(value: Felt) -> NodeId {
    with(|recording| recording.builder.constant(value))
        .unwrap_or(crate::constraints::graph::ZERO_NODE)
}

/// Marks the recording as unable to follow the AIR.
pub(super) fn fail(reason: Unrecordable) {
    with(|recording| {
        let (first, count) = recording.failure.unwrap_or((reason, 0));
        recording.failure = Some((first, count + 1));
    });
}

fn with<T>(f: impl FnOnce(&mut Recording) -> T) -> Option<T> {
    RECORDING.with(|cell| cell.borrow_mut().as_mut().map(f))
}
