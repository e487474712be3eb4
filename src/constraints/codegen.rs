//! The source of a [`ConstraintGraph`] in a GPU language, written once for every language: the
//! operation nodes split, in order, into functions of at most `max_operations` operations (one
//! large function of a big AIR spills and takes a GPU compiler minutes), a value a later function
//! or an output needs carried through an array of the top function. A [`Dialect`] says how one
//! language spells each piece; `cuda` and `wgsl` are the two.

use std::fmt::Write;

use super::graph::{ConstraintGraph, Input, NodeId, Op};

// ================================================================================================
// DIALECT
// ================================================================================================

/// A value the generated code reads: an input of the frame or a constant slot (the words of an
/// auxiliary column or random element numbered `index · degree + component`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Read {
    Main { column: u32, next: bool },
    Aux { word: usize, next: bool },
    Periodic(u32),
    Random(usize),
    Const(u32),
    XPower(u32),
    Table(u32),
}

/// How one language spells the generated functions.
pub(super) trait Dialect {
    /// The expression of a read.
    fn read(&self, read: Read) -> String;
    /// The expression of the field function `function` (`gl_add`, `gl_sub`, `gl_mul`,
    /// `gl_double`) of `operands`.
    fn call(&self, function: &str, operands: &[String]) -> String {
        format!("{function}({})", operands.join(", "))
    }
    /// The expression of `-a`.
    fn neg(&self, a: &str) -> String;
    /// The expression of `1 / a`.
    fn inv(&self, a: &str) -> String;
    /// The carry slot `slot` as an expression and an assignable place.
    fn carry(&self, slot: usize) -> String;
    /// The statement that names a node's value `v{id}`.
    fn bind(&self, id: NodeId, value: &str) -> String;
    /// The opening line of chunk function `index` of graph `name`.
    fn chunk_header(&self, name: &str, index: usize) -> String;
    /// The statement that calls chunk function `index`.
    fn chunk_call(&self, name: &str, index: usize) -> String;
    /// The opening of the top function, with its carry array of `carry_len` slots (at least 1).
    fn top_header(&self, name: &str, carry_len: usize) -> String;
    /// The statement that writes output `i`.
    fn output(&self, i: usize, value: &str) -> String;
}

// ================================================================================================
// SOURCE
// ================================================================================================

/// The functions of `graph` named `name` in `dialect`: chunks of at most `max_operations`
/// operations (at least 1), then the top function writing the main constraints, the auxiliary
/// constraints' components, then the composed value's components, in that order.
pub(super) fn source(
    graph: &ConstraintGraph,
    name: &str,
    max_operations: usize,
    dialect: &dyn Dialect,
) -> String {
    let layout = Layout::new(graph, max_operations.max(1));
    let outputs = [graph.main_outputs(), graph.aux_outputs(), graph.composition_outputs()];
    let mut source = String::new();
    for (index, chunk) in layout.chunks.iter().enumerate() {
        let _ = writeln!(source, "{}", dialect.chunk_header(name, index));
        for &id in chunk {
            let operand = |operand| layout.operand(graph, operand, index, dialect);
            let value = expression(graph.nodes()[id as usize], graph, &operand, dialect);
            let _ = writeln!(source, "    {}", dialect.bind(id, &value));
            if let Some(slot) = layout.carry_slot[id as usize] {
                let _ = writeln!(source, "    {} = v{id};", dialect.carry(slot));
            }
        }
        source.push_str("}\n\n");
    }
    let _ = writeln!(source, "{}", dialect.top_header(name, layout.carry_len.max(1)));
    for index in 0..layout.chunks.len() {
        let _ = writeln!(source, "    {}", dialect.chunk_call(name, index));
    }
    for (i, &id) in outputs.iter().flat_map(|ids| ids.iter()).enumerate() {
        let value = layout.operand(graph, id, usize::MAX, dialect);
        let _ = writeln!(source, "    {}", dialect.output(i, &value));
    }
    source.push_str("}\n");
    source
}

/// The expression of one node: a leaf's read, or an operation of its operands' expressions.
fn expression(
    op: Op,
    graph: &ConstraintGraph,
    operand: &dyn Fn(NodeId) -> String,
    dialect: &dyn Dialect,
) -> String {
    let degree = graph.extension_degree();
    let read = |read| dialect.read(read);
    match op {
        Op::Const(slot) => read(Read::Const(slot)),
        Op::Input(Input::Main { column, next }) => read(Read::Main { column, next }),
        Op::Input(Input::Aux { column, component, next }) => {
            read(Read::Aux { word: column as usize * degree + component as usize, next })
        },
        Op::Input(Input::Periodic(column)) => read(Read::Periodic(column)),
        Op::Input(Input::Random { index, component }) => {
            read(Read::Random(index as usize * degree + component as usize))
        },
        Op::Input(Input::XPower(slot)) => read(Read::XPower(slot)),
        Op::Input(Input::Table(word)) => read(Read::Table(word)),
        Op::Add(a, b) => dialect.call("gl_add", &[operand(a), operand(b)]),
        Op::Sub(a, b) => dialect.call("gl_sub", &[operand(a), operand(b)]),
        Op::Mul(a, b) => dialect.call("gl_mul", &[operand(a), operand(b)]),
        Op::Neg(a) => dialect.neg(&operand(a)),
        Op::Double(a) => dialect.call("gl_double", &[operand(a)]),
        Op::Inv(a) => dialect.inv(&operand(a)),
    }
}

// ================================================================================================
// CHUNK LAYOUT
// ================================================================================================

/// Which chunk computes each operation node, and the carry slots of the values that cross.
struct Layout {
    chunks: Vec<Vec<NodeId>>,
    chunk_of: Vec<Option<usize>>,
    carry_slot: Vec<Option<usize>>,
    carry_len: usize,
}

impl Layout {
    fn new(graph: &ConstraintGraph, max_operations: usize) -> Self {
        let nodes = graph.nodes();
        let mut chunks: Vec<Vec<NodeId>> = Vec::new();
        let mut chunk_of = vec![None; nodes.len()];
        for (id, op) in nodes.iter().enumerate() {
            if matches!(op, Op::Const(_) | Op::Input(_)) {
                continue;
            }
            if chunks.last().is_none_or(|chunk| chunk.len() >= max_operations) {
                chunks.push(Vec::new());
            }
            chunk_of[id] = Some(chunks.len() - 1);
            if let Some(chunk) = chunks.last_mut() {
                chunk.push(id as NodeId);
            }
        }
        let mut crosses = vec![false; nodes.len()];
        for (id, op) in nodes.iter().enumerate() {
            for operand in op.operands() {
                if chunk_of[operand as usize].is_some_and(|c| Some(c) != chunk_of[id]) {
                    crosses[operand as usize] = true;
                }
            }
        }
        let outputs = graph.main_outputs().iter().chain(graph.aux_outputs());
        outputs.chain(graph.composition_outputs()).for_each(|&id| {
            crosses[id as usize] |= chunk_of[id as usize].is_some();
        });
        let mut carry_len = 0;
        let carry_slot = crosses
            .iter()
            .map(|&crossing| {
                crossing.then(|| {
                    carry_len += 1;
                    carry_len - 1
                })
            })
            .collect();
        Self { chunks, chunk_of, carry_slot, carry_len }
    }

    /// How chunk `chunk` reads node `id`: its local value, its carry slot, or the leaf's read.
    fn operand(
        &self,
        graph: &ConstraintGraph,
        id: NodeId,
        chunk: usize,
        dialect: &dyn Dialect,
    ) -> String {
        match (self.chunk_of[id as usize], self.carry_slot[id as usize]) {
            (Some(c), _) if c == chunk => format!("v{id}"),
            (Some(_), Some(slot)) => dialect.carry(slot),
            _ => expression(graph.nodes()[id as usize], graph, &|_| String::new(), dialect),
        }
    }
}
