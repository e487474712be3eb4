//! CUDA source for a [`ConstraintGraph`], over the Goldilocks field code of `cuda/field.cuh`
//! (whose operations are field-exact on any word, as the interpreter's are), in the chunks of
//! `codegen`.
//!
//! The source reads its inputs through macros the including program defines, with `f` the
//! frame the functions pass along: `CE_MAIN(column, next)`, `CE_AUX(word, next)` (an auxiliary
//! column's base component, `column · degree + component`), `CE_PERIODIC(column)`,
//! `CE_RANDOM(word)`, `CE_CONST(slot)`, `CE_XPOW(slot)`, `CE_TABLE(word)`, and the inverse
//! `CE_INV(value)`. For a graph named `NAME` it defines:
//! `__device__ void NAME(const FRAME& f, u64* out)` (`FRAME` the frame's type), writing the main
//! constraints, the auxiliary constraints' components, then the composed value's components to
//! `out`, in that order.

use super::{
    codegen::{self, Dialect, Read},
    graph::{ConstraintGraph, NodeId},
};

/// The CUDA source of `graph` as the module docs describe, named `name` (a C identifier), its
/// functions taking the frame type `frame`, in chunks of at most `max_operations` operations (at
/// least 1). The program defines the frame and the input macros before it.
pub fn cuda_source(
    graph: &ConstraintGraph,
    name: &str,
    frame: &str,
    max_operations: usize,
) -> String {
    codegen::source(graph, name, max_operations, &Cuda { frame })
}

/// CUDA's spelling of the generated functions.
struct Cuda<'a> {
    frame: &'a str,
}

impl Dialect for Cuda<'_> {
    fn read(&self, read: Read) -> String {
        let next = |next: bool| u8::from(next);
        match read {
            Read::Main { column, next: n } => format!("CE_MAIN({column}, {})", next(n)),
            Read::Aux { word, next: n } => format!("CE_AUX({word}, {})", next(n)),
            Read::Periodic(column) => format!("CE_PERIODIC({column})"),
            Read::Random(word) => format!("CE_RANDOM({word})"),
            Read::Const(slot) => format!("CE_CONST({slot})"),
            Read::XPower(slot) => format!("CE_XPOW({slot})"),
            Read::Table(word) => format!("CE_TABLE({word})"),
        }
    }

    fn neg(&self, a: &str) -> String {
        format!("gl_sub(0ull, {a})")
    }

    fn inv(&self, a: &str) -> String {
        format!("CE_INV({a})")
    }

    fn carry(&self, slot: usize) -> String {
        format!("carry[{slot}]")
    }

    fn bind(&self, id: NodeId, value: &str) -> String {
        format!("const u64 v{id} = {value};")
    }

    fn chunk_header(&self, name: &str, index: usize) -> String {
        let frame = self.frame;
        format!("__device__ __noinline__ void {name}_chunk{index}(const {frame}& f, u64* carry) {{")
    }

    fn chunk_call(&self, name: &str, index: usize) -> String {
        format!("{name}_chunk{index}(f, carry);")
    }

    fn top_header(&self, name: &str, carry_len: usize) -> String {
        let frame = self.frame;
        format!(
            "__device__ void {name}(const {frame}& f, u64* out) {{\n    u64 carry[{carry_len}];"
        )
    }

    fn output(&self, i: usize, value: &str) -> String {
        format!("out[{i}] = {value};")
    }
}
