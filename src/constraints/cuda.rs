//! CUDA source for a [`ConstraintGraph`], over the Goldilocks field code of `cuda/field.cuh`
//! (whose operations are field-exact on any word, as the interpreter's are).
//!
//! The operation nodes are split, in order, into chunks of at most `max_operations`; each chunk
//! is a `__device__ __noinline__` function, which bounds the registers and the compile time of
//! any one function (one large function of a big AIR spills and takes NVRTC minutes). A value a
//! later chunk or an output needs goes through a `carry` array of the top function.
//!
//! The source reads its inputs through macros the including program defines, with `f` the
//! frame the functions pass along: `CE_MAIN(column, next)`, `CE_AUX(word, next)` (an auxiliary
//! column's base component, `column · degree + component`), `CE_PERIODIC(column)`,
//! `CE_RANDOM(word)`, `CE_CONST(slot)`, `CE_XPOW(slot)`, `CE_TABLE(word)`, and the inverse
//! `CE_INV(value)`. For a graph named `NAME` it defines:
//! `__device__ void NAME(const FRAME& f, u64* out)` (`FRAME` the frame's type), writing the main
//! constraints, the auxiliary constraints' components, then the composed value's components to
//! `out`, in that order.

use std::fmt::Write;

use super::graph::{ConstraintGraph, Input, NodeId, Op};

// ================================================================================================
// SOURCE
// ================================================================================================

/// The CUDA source of `graph` as the module docs describe, named `name` (a C identifier), its
/// functions taking the frame type `frame`, in chunks of at most `max_operations` operations (at
/// least 1). The program defines the frame and the input macros before it.
pub fn cuda_source(
    graph: &ConstraintGraph,
    name: &str,
    frame: &str,
    max_operations: usize,
) -> String {
    let layout = Layout::new(graph, max_operations.max(1));
    let outputs = [graph.main_outputs(), graph.aux_outputs(), graph.composition_outputs()];
    let mut source = String::new();
    for (index, chunk) in layout.chunks.iter().enumerate() {
        let _ = writeln!(
            source,
            "__device__ __noinline__ void {name}_chunk{index}(const {frame}& f, u64* carry) {{"
        );
        for &id in chunk {
            let operand = |operand| layout.operand(graph, operand, index);
            let value = expression(graph.nodes()[id as usize], graph.extension_degree(), &operand);
            let _ = writeln!(source, "    const u64 v{id} = {value};");
            if let Some(slot) = layout.carry_slot[id as usize] {
                let _ = writeln!(source, "    carry[{slot}] = v{id};");
            }
        }
        source.push_str("}\n\n");
    }
    let _ = writeln!(
        source,
        "__device__ void {name}(const {frame}& f, u64* out) {{\n    u64 carry[{}];",
        layout.carry_len.max(1)
    );
    for index in 0..layout.chunks.len() {
        let _ = writeln!(source, "    {name}_chunk{index}(f, carry);");
    }
    for (i, &id) in outputs.iter().flat_map(|ids| ids.iter()).enumerate() {
        let value = layout.operand(graph, id, usize::MAX);
        let _ = writeln!(source, "    out[{i}] = {value};");
    }
    source.push_str("}\n");
    source
}

/// The expression of one node: a leaf's read, or an operation of its operands' expressions.
fn expression(op: Op, degree: usize, operand: &dyn Fn(NodeId) -> String) -> String {
    let next = |next: bool| u8::from(next);
    match op {
        Op::Const(slot) => format!("CE_CONST({slot})"),
        Op::Input(Input::Main { column, next: n }) => format!("CE_MAIN({column}, {})", next(n)),
        Op::Input(Input::Aux { column, component, next: n }) => {
            let word = column as usize * degree + component as usize;
            format!("CE_AUX({word}, {})", next(n))
        },
        Op::Input(Input::Periodic(column)) => format!("CE_PERIODIC({column})"),
        Op::Input(Input::Random { index, component }) => {
            format!("CE_RANDOM({})", index as usize * degree + component as usize)
        },
        Op::Input(Input::XPower(slot)) => format!("CE_XPOW({slot})"),
        Op::Input(Input::Table(word)) => format!("CE_TABLE({word})"),
        Op::Add(a, b) => format!("gl_add({}, {})", operand(a), operand(b)),
        Op::Sub(a, b) => format!("gl_sub({}, {})", operand(a), operand(b)),
        Op::Mul(a, b) => format!("gl_mul({}, {})", operand(a), operand(b)),
        Op::Neg(a) => format!("gl_sub(0ull, {})", operand(a)),
        Op::Double(a) => format!("gl_double({})", operand(a)),
        Op::Inv(a) => format!("CE_INV({})", operand(a)),
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
    fn operand(&self, graph: &ConstraintGraph, id: NodeId, chunk: usize) -> String {
        match (self.chunk_of[id as usize], self.carry_slot[id as usize]) {
            (Some(c), _) if c == chunk => format!("v{id}"),
            (Some(_), Some(slot)) => format!("carry[{slot}]"),
            _ => {
                expression(graph.nodes()[id as usize], graph.extension_degree(), &|_| String::new())
            },
        }
    }
}
