//! The expression graph of an AIR's transition constraints, over base field operations only.
//!
//! Extension arithmetic is lowered at capture time (see `symbolic`), operation for operation as
//! winter-math computes it, so every node is one Goldilocks operation and a GPU kernel needs only
//! base-field code. Nodes are numbered in creation order: every operand precedes its user.
//!
//! Constants are not part of the structure: a `Const` node names a slot of the constants table,
//! which the evaluation takes as input. Values that change per proof (public inputs baked into the
//! AIR, folded products of them) therefore change the table, never the graph, and
//! [`ConstraintGraph::structural_hash`] is equal for every proof of one AIR shape.

use std::collections::HashMap;

use winter_math::FieldElement;

use crate::Felt;

// ================================================================================================
// NODES
// ================================================================================================

/// The index of a node in its graph.
pub type NodeId = u32;

/// A value the evaluation of one frame reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Input {
    /// Main trace column `column`, at the current row or (`next`) the next one.
    Main {
        /// Main column index.
        column: u32,
        /// Whether the value is from the next row.
        next: bool,
    },
    /// Base component `component` of auxiliary column `column`, current or next row.
    Aux {
        /// Aux column index.
        column: u32,
        /// Base component of the extension element.
        component: u8,
        /// Whether the value is from the next row.
        next: bool,
    },
    /// Periodic column `0` at the evaluated step.
    Periodic(u32),
    /// Base component `component` of auxiliary random element `index`.
    Random {
        /// Random element index.
        index: u32,
        /// Base component of the extension element.
        component: u8,
    },
    /// `x^e` at the evaluated point `x` of the CE domain, for the exponent `e` of slot `0` (a
    /// parameter of the composition, so that the structure does not depend on the trace length).
    XPower(u32),
    /// Word `0` of the step tables' entries at the evaluated step, the tables concatenated.
    Table(u32),
}

/// One node: an input, a constant slot or one base-field operation of earlier nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Slot of the constants table.
    Const(u32),
    /// A frame input.
    Input(Input),
    /// `a + b`.
    Add(NodeId, NodeId),
    /// `a - b`.
    Sub(NodeId, NodeId),
    /// `a * b`.
    Mul(NodeId, NodeId),
    /// `-a`.
    Neg(NodeId),
    /// `a.double()` (winter-math's own, which may leave a non-canonical word).
    Double(NodeId),
    /// `1 / a` (`Felt::inv`: zero for zero); only the composition's divisors use it, an AIR's own
    /// inversions are not captured.
    Inv(NodeId),
}

impl Op {
    /// The operation's value from its operands' values, exactly as `Felt` computes it.
    pub(crate) fn apply(self, at: impl Fn(NodeId) -> Felt) -> Option<Felt> {
        Some(match self {
            Op::Const(_) | Op::Input(_) => return None,
            Op::Add(a, b) => at(a) + at(b),
            Op::Sub(a, b) => at(a) - at(b),
            Op::Mul(a, b) => at(a) * at(b),
            Op::Neg(a) => -at(a),
            Op::Double(a) => at(a).double(),
            Op::Inv(a) => at(a).inv(),
        })
    }

    /// The operand ids of the node.
    pub(crate) fn operands(self) -> impl Iterator<Item = NodeId> {
        let (first, second) = match self {
            Op::Const(_) | Op::Input(_) => (None, None),
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) => (Some(a), Some(b)),
            Op::Neg(a) | Op::Double(a) | Op::Inv(a) => (Some(a), None),
        };
        first.into_iter().chain(second)
    }

    /// The node with every operand renamed.
    fn renamed(self, map: &[NodeId]) -> Op {
        let m = |id: NodeId| map[id as usize];
        match self {
            Op::Const(_) | Op::Input(_) => self,
            Op::Add(a, b) => Op::Add(m(a), m(b)),
            Op::Sub(a, b) => Op::Sub(m(a), m(b)),
            Op::Mul(a, b) => Op::Mul(m(a), m(b)),
            Op::Neg(a) => Op::Neg(m(a)),
            Op::Double(a) => Op::Double(m(a)),
            Op::Inv(a) => Op::Inv(m(a)),
        }
    }
}

// ================================================================================================
// GRAPH
// ================================================================================================

/// The constraints of one AIR shape: nodes, the constants table and the outputs.
///
/// A capture ([`crate::constraints::capture`]) has the transition constraints as outputs; a
/// composition ([`crate::constraints::Composition`]) has only the composed value's components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintGraph {
    pub(crate) nodes: Vec<Op>,
    pub(crate) constants: Vec<Felt>,
    pub(crate) main_outputs: Vec<NodeId>,
    pub(crate) aux_outputs: Vec<NodeId>,
    pub(crate) composition: Vec<NodeId>,
    pub(crate) extension_degree: usize,
}

impl ConstraintGraph {
    /// The nodes, operands first.
    pub fn nodes(&self) -> &[Op] {
        &self.nodes
    }

    /// The constants table the `Const` nodes index (an input of the evaluation).
    pub fn constants(&self) -> &[Felt] {
        &self.constants
    }

    /// One node per main transition constraint.
    pub fn main_outputs(&self) -> &[NodeId] {
        &self.main_outputs
    }

    /// `extension_degree` nodes per auxiliary transition constraint (its base components).
    pub fn aux_outputs(&self) -> &[NodeId] {
        &self.aux_outputs
    }

    /// `extension_degree` nodes: the composed value's base components (a composition's only
    /// outputs; empty for a capture).
    pub fn composition_outputs(&self) -> &[NodeId] {
        &self.composition
    }

    /// The extension degree of the auxiliary values (1, 2 or 3).
    pub fn extension_degree(&self) -> usize {
        self.extension_degree
    }

    /// The number of operation nodes (neither input nor constant).
    pub fn num_operations(&self) -> usize {
        self.nodes.iter().filter(|op| !matches!(op, Op::Const(_) | Op::Input(_))).count()
    }

    /// A hash of the graph's structure, constants' values excluded: equal for every proof of one
    /// AIR shape, so one compiled kernel can serve all of them. FNV-1a over a fixed encoding,
    /// stable across builds and platforms.
    pub fn structural_hash(&self) -> u64 {
        let mut hash = Fnv::default();
        hash.word(self.extension_degree as u64);
        hash.word(self.nodes.len() as u64);
        for op in &self.nodes {
            match *op {
                Op::Const(_) => hash.word(1),
                Op::Input(input) => {
                    let (tag, a, b, c) = match input {
                        Input::Main { column, next } => (2, column, 0, next as u32),
                        Input::Aux { column, component, next } => {
                            (3, column, component as u32, next as u32)
                        },
                        Input::Periodic(column) => (4, column, 0, 0),
                        Input::Random { index, component } => (5, index, component as u32, 0),
                        Input::XPower(slot) => (11, slot, 0, 0),
                        Input::Table(word) => (12, word, 0, 0),
                    };
                    hash.words(&[tag, a as u64, b as u64, c as u64]);
                },
                Op::Add(a, b) => hash.words(&[6, a as u64, b as u64]),
                Op::Sub(a, b) => hash.words(&[7, a as u64, b as u64]),
                Op::Mul(a, b) => hash.words(&[8, a as u64, b as u64]),
                Op::Neg(a) => hash.words(&[9, a as u64]),
                Op::Double(a) => hash.words(&[10, a as u64]),
                Op::Inv(a) => hash.words(&[13, a as u64]),
            }
        }
        for outputs in [&self.main_outputs, &self.aux_outputs, &self.composition] {
            hash.word(outputs.len() as u64);
            outputs.iter().for_each(|&id| hash.word(id as u64));
        }
        hash.0
    }

    /// The graph with only the nodes the outputs reach, renumbered in the same order, and the
    /// constants table compacted to the live slots.
    pub(crate) fn without_dead_nodes(&self) -> ConstraintGraph {
        let mut live = vec![false; self.nodes.len()];
        let outputs = self.main_outputs.iter().chain(&self.aux_outputs).chain(&self.composition);
        outputs.for_each(|&id| live[id as usize] = true);
        for id in (0..self.nodes.len()).rev() {
            if live[id] {
                self.nodes[id].operands().for_each(|operand| live[operand as usize] = true);
            }
        }
        let mut map = vec![NodeId::MAX; self.nodes.len()];
        let (mut nodes, mut constants) = (Vec::new(), Vec::new());
        for (id, op) in self.nodes.iter().enumerate().filter(|(id, _)| live[*id]) {
            map[id] = nodes.len() as NodeId;
            nodes.push(match *op {
                Op::Const(slot) => {
                    constants.push(self.constants[slot as usize]);
                    Op::Const(constants.len() as u32 - 1)
                },
                op => op.renamed(&map),
            });
        }
        let rename = |outputs: &[NodeId]| outputs.iter().map(|&id| map[id as usize]).collect();
        ConstraintGraph {
            nodes,
            constants,
            main_outputs: rename(&self.main_outputs),
            aux_outputs: rename(&self.aux_outputs),
            composition: rename(&self.composition),
            extension_degree: self.extension_degree,
        }
    }
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn word(&mut self, word: u64) {
        for byte in word.to_le_bytes() {
            self.0 = (self.0 ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn words(&mut self, words: &[u64]) {
        words.iter().for_each(|&word| self.word(word));
    }
}

// ================================================================================================
// BUILDER
// ================================================================================================

/// The outputs of a recording.
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    /// One node per main transition constraint.
    pub main: Vec<NodeId>,
    /// The auxiliary transition constraints' base components.
    pub aux: Vec<NodeId>,
    /// The composed value's base components.
    pub composition: Vec<NodeId>,
}

/// The node reserved for the constant zero.
pub(crate) const ZERO_NODE: NodeId = 0;
/// The node reserved for the constant one.
pub(crate) const ONE_NODE: NodeId = 1;

/// Records nodes: hash-conses structurally equal operations and folds operations of constants.
///
/// Only operations whose operands are all constants are folded (with `Felt`'s own arithmetic);
/// algebraic identities such as `x + 0 = x` are not applied, because winter-math's words for
/// them can differ (a non-canonical `x` comes out reduced), and later operations see the words.
#[derive(Debug)]
pub(crate) struct GraphBuilder {
    nodes: Vec<Op>,
    constants: Vec<Felt>,
    shared: HashMap<Op, NodeId>,
}

impl Default for GraphBuilder {
    fn default() -> Self {
        let mut builder = Self { nodes: Vec::new(), constants: Vec::new(), shared: HashMap::new() };
        builder.constant(Felt::ZERO);
        builder.constant(Felt::ONE);
        builder
    }
}

impl GraphBuilder {
    /// A new constant slot holding `value` (constants are never shared: their values are
    /// parameters, and sharing equal ones would make the structure depend on them).
    pub(crate) fn constant(&mut self, value: Felt) -> NodeId {
        self.constants.push(value);
        self.push_node(Op::Const(self.constants.len() as u32 - 1))
    }

    /// The node of `op`: an existing equal node, a folded constant or a new node.
    pub(crate) fn node(&mut self, op: Op) -> NodeId {
        if let Some(&id) = self.shared.get(&op) {
            return id;
        }
        if op.operands().all(|id| matches!(self.nodes[id as usize], Op::Const(_))) {
            if let Some(value) = op.apply(|id| self.constant_value(id)) {
                return self.constant(value);
            }
        }
        let id = self.push_node(op);
        self.shared.insert(op, id);
        id
    }

    /// The graph of the recorded nodes with these outputs, dead nodes removed.
    pub(crate) fn finish(self, outputs: Outputs, extension_degree: usize) -> ConstraintGraph {
        ConstraintGraph {
            nodes: self.nodes,
            constants: self.constants,
            main_outputs: outputs.main,
            aux_outputs: outputs.aux,
            composition: outputs.composition,
            extension_degree,
        }
        .without_dead_nodes()
    }

    fn push_node(&mut self, op: Op) -> NodeId {
        self.nodes.push(op);
        self.nodes.len() as NodeId - 1
    }

    /// The value of a constant node (zero for any other: folding asks only for constants).
    fn constant_value(&self, id: NodeId) -> Felt {
        match self.nodes[id as usize] {
            Op::Const(slot) => self.constants[slot as usize],
            _ => Felt::ZERO,
        }
    }
}
