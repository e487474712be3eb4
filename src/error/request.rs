//! What is wrong with a FRI, DEEP or grinding request, as values: each names what was received
//! and what would have been accepted.

use thiserror::Error;

use crate::{backend::Backend, error::GpuError};

// FRI
// ================================================================================================

/// A malformed FRI request, or a FRI result that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FriError {
    /// The polynomial has a number of base-field components no extension has.
    #[error("{0} components; expected 1, 2 or 3")]
    ComponentCount(usize),
    /// A component's length differs from the first component's.
    #[error("component {component} has {len} coefficients, but component 0 has {expected}")]
    ComponentLength {
        /// The first component whose length differs.
        component: usize,
        /// Its length.
        len: usize,
        /// The length of component 0.
        expected: usize,
    },
    /// The folding factor is not one winter-fri supports.
    #[error("folding factor {0}; expected 2, 4, 8 or 16")]
    FoldingFactor(usize),
    /// The layers would fold the domain below two evaluations (or there are none).
    #[error(
        "{layers} layers of folding by {folding_factor} do not fit a domain of {domain_len}; \
         expected at least 1 layer leaving at least 2 evaluations"
    )]
    LayerCount {
        /// Layers requested.
        layers: usize,
        /// The folding factor.
        folding_factor: usize,
        /// Evaluations in the first layer.
        domain_len: usize,
    },
    /// The channel returned a folding challenge of the wrong extension degree.
    #[error("the channel drew {drawn} components for an element of degree {degree}")]
    ChallengeComponents {
        /// Base-field components drawn.
        drawn: usize,
        /// The extension degree of the request.
        degree: usize,
    },
    /// A kept layer past the last one was opened.
    #[error("layer {layer} opened, but there are {layers} layers")]
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// Layers kept.
        layers: usize,
    },
    /// A position past a layer's rows was opened.
    #[error("position {position} opened in a layer of {rows} rows")]
    PositionOutOfRange {
        /// The position asked for.
        position: usize,
        /// Rows of the layer.
        rows: usize,
    },
    /// The CPU's replay of a failed commit phase drew a different layer root than the backend
    /// had sent the channel, so the challenges drawn already cannot be reused.
    #[error("the backend's layer root differs from the CPU's after: {after}")]
    RootDiverged {
        /// The backend's error the replay followed.
        after: Box<GpuError>,
    },
    /// A count does not fit the integer winter-fri's proof format stores it in.
    #[error("{count} {what} exceed what a FRI proof can record")]
    CountTooLarge {
        /// What was counted.
        what: &'static str,
        /// The count.
        count: usize,
    },
}

// DEEP
// ================================================================================================

/// A malformed DEEP evaluation or combination request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeepError {
    /// The extension degree is not 1, 2 or 3.
    #[error("extension degree {0}; expected 1, 2 or 3")]
    ExtensionDegree(usize),
    /// The request has no segments.
    #[error("no segments; expected at least one")]
    NoSegments,
    /// A segment's polynomials are held by another backend than the one asked.
    #[error("segment {segment} is held by {held_by}, not {expected}")]
    SegmentBackend {
        /// The segment's index.
        segment: usize,
        /// The backend holding it.
        held_by: Backend,
        /// The backend asked.
        expected: Backend,
    },
    /// A segment's polynomials differ in length from the first segment's.
    #[error("segment {segment} has polynomials of {poly_len} coefficients, not {expected}")]
    SegmentLength {
        /// The segment's index.
        segment: usize,
        /// Its polynomials' length.
        poly_len: usize,
        /// The first segment's polynomials' length.
        expected: usize,
    },
    /// A segment's base columns cannot be columns of its degree (or the degree is neither 1
    /// nor the extension degree).
    #[error(
        "segment {segment}: {base_columns} base columns cannot be columns of degree {degree}; \
         expected degree 1 or {ext_degree} dividing the columns"
    )]
    SegmentColumns {
        /// The segment's index.
        segment: usize,
        /// Its base columns.
        base_columns: usize,
        /// The degree it was given.
        degree: usize,
        /// The request's extension degree.
        ext_degree: usize,
    },
    /// The number of coefficient components differs from the columns' count times the degree.
    #[error("{received} coefficient components for {columns} columns of degree {degree}")]
    CoefficientCount {
        /// Components given.
        received: usize,
        /// Columns of the segments.
        columns: usize,
        /// The extension degree.
        degree: usize,
    },
    /// The points are not two elements of the extension degree.
    #[error("{received} point components; expected two points of degree {degree}")]
    PointCount {
        /// Components given.
        received: usize,
        /// The extension degree.
        degree: usize,
    },
    /// A segment's polynomials are not held by the committer asked.
    #[error("a segment's polynomials are not held by this committer")]
    NotResident,
    /// The segments have no columns to combine.
    #[error("the segments have no columns; expected at least one")]
    NoColumns,
}

// GRINDING
// ================================================================================================

/// A proof-of-work search that cannot end.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrindError {
    /// No value has more than 64 trailing zeros.
    #[error("grinding factor {0} above 64")]
    FactorTooLarge(u32),
    /// No nonce below the search's bound is accepted.
    #[error("no proof-of-work nonce below {below}")]
    NoNonce {
        /// The bound of the search.
        below: u64,
    },
}

/// A malformed constraint evaluation request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvaluationError {
    /// The trace length or a blowup is not a power of two, or the CE blowup exceeds the LDE's.
    #[error(
        "trace length {trace_len}, LDE blowup {lde_blowup}, CE blowup {ce_blowup}: expected \
         powers of two with the CE blowup at most the LDE blowup"
    )]
    Domain {
        /// The trace length.
        trace_len: usize,
        /// The LDE blowup.
        lde_blowup: usize,
        /// The CE blowup.
        ce_blowup: usize,
    },
    /// The auxiliary rows are given without an auxiliary width, or the other way round.
    #[error("auxiliary rows given: {given}, but the auxiliary width says otherwise")]
    AuxSegment {
        /// Whether rows were given.
        given: bool,
    },
    /// The graph is a capture of the transition constraints, not a composition.
    #[error("the graph has no composition outputs of its extension degree")]
    NotComposed,
    /// The x-power bases do not match the composition's exponent slots.
    #[error("{given} x-power bases for {expected} exponent slots")]
    XBases {
        /// Bases given.
        given: usize,
        /// Slots of the composition.
        expected: usize,
    },
    /// The graph reads a column the segment does not have.
    #[error("the graph reads {segment} column {column} of a segment of {width}")]
    Column {
        /// `"main"` or `"auxiliary"`.
        segment: &'static str,
        /// The base column read.
        column: usize,
        /// Base columns of the segment.
        width: usize,
    },
    /// The rows are not held by this backend (another backend's, or of other GPUs).
    #[error("the trace rows are not held by this committer")]
    RowsNotHere,
}
