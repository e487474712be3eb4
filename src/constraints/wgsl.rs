//! WGSL source for a [`ConstraintGraph`], over the Goldilocks field code of `wgsl/field.wgsl`
//! (either arithmetic: the primitives of `field_u32.wgsl` and `field_u64.wgsl` return the same
//! words), in the chunks of `codegen`.
//!
//! The functions take no arguments: they read the frame through functions and private
//! variables the including program defines, `ce_main(column, next)`, `ce_aux(word, next)` (an
//! auxiliary column's base component, `column · degree + component`), `ce_periodic(column)`,
//! `ce_random(word)`, `ce_const(slot)`, the arrays `ce_xp` (the powers of `x`) and `ce_table`
//! (the step tables' words), and the inverse `ce_inv(value)`. For a graph named `NAME` the
//! source defines `fn NAME()`, writing the main constraints, the auxiliary constraints'
//! components, then the composed value's components to the private array `ce_values`, in that
//! order, and declares the private carry array `ce_carry` its functions share.

use super::{
    codegen::{self, Dialect, Read},
    graph::{ConstraintGraph, NodeId},
};

/// The WGSL source of `graph` as the module docs describe, named `name` (an identifier), in
/// chunks of at most `max_operations` operations (at least 1). The program defines the reads and
/// `ce_values` around it.
pub fn wgsl_source(graph: &ConstraintGraph, name: &str, max_operations: usize) -> String {
    codegen::source(graph, name, max_operations, &Wgsl)
}

/// WGSL's spelling of the generated functions.
struct Wgsl;

impl Dialect for Wgsl {
    fn read(&self, read: Read) -> String {
        match read {
            Read::Main { column, next } => format!("ce_main({column}u, {next})"),
            Read::Aux { word, next } => format!("ce_aux({word}u, {next})"),
            Read::Periodic(column) => format!("ce_periodic({column}u)"),
            Read::Random(word) => format!("ce_random({word}u)"),
            Read::Const(slot) => format!("ce_const({slot}u)"),
            Read::XPower(slot) => format!("ce_xp[{slot}]"),
            Read::Table(word) => format!("ce_table[{word}]"),
        }
    }

    fn neg(&self, a: &str) -> String {
        format!("gl_sub(vec2<u32>(0u, 0u), {a})")
    }

    fn inv(&self, a: &str) -> String {
        format!("ce_inv({a})")
    }

    fn carry(&self, slot: usize) -> String {
        format!("ce_carry[{slot}]")
    }

    fn bind(&self, id: NodeId, value: &str) -> String {
        format!("let v{id} = {value};")
    }

    fn chunk_header(&self, name: &str, index: usize) -> String {
        format!("fn {name}_chunk{index}() {{")
    }

    fn chunk_call(&self, name: &str, index: usize) -> String {
        format!("{name}_chunk{index}();")
    }

    fn top_header(&self, name: &str, carry_len: usize) -> String {
        format!("var<private> ce_carry: array<vec2<u32>, {carry_len}>;\n\nfn {name}() {{")
    }

    fn output(&self, i: usize, value: &str) -> String {
        format!("ce_values[{i}] = {value};")
    }
}
