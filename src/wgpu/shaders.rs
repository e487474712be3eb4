//! The WGSL kernels, composed at load time by concatenating the files under `wgsl/`: each
//! file has one job (field arithmetic, extension arithmetic, a permutation, an algorithm) and
//! is written once; a module is the list of files its entry points need.

use std::fmt::Write;

use miden_crypto::hash::poseidon2::Poseidon2;

use crate::{
    committer::grind::GRIND_HASHES,
    hash::{
        blake3_tables::{self, CV_STACK},
        HashFunction,
    },
};

/// The hash functions the WGSL kernels implement.
pub(super) const HASHES: [HashFunction; 5] = HashFunction::ALL;

/// The hash functions that also have kernels on quads of a subgroup (`rescue_quad.wgsl`).
pub(super) const QUAD_HASHES: [HashFunction; 2] = [HashFunction::Rpo256, HashFunction::Rpx256];

// SOURCES
// ================================================================================================

const COMMON: &str = include_str!("../../wgsl/common.wgsl");
const FIELD_U32: &str = include_str!("../../wgsl/field_u32.wgsl");
const FIELD_U64: &str = include_str!("../../wgsl/field_u64.wgsl");
const FIELD: &str = include_str!("../../wgsl/field.wgsl");
const EXT3: &str = include_str!("../../wgsl/ext3.wgsl");
const EXT: &str = include_str!("../../wgsl/ext.wgsl");
const SPONGE: &str = include_str!("../../wgsl/sponge.wgsl");
const RESCUE: &str = include_str!("../../wgsl/rescue.wgsl");
const RPO: &str = include_str!("../../wgsl/rpo.wgsl");
const RPX: &str = include_str!("../../wgsl/rpx.wgsl");
const RESCUE_QUAD: &str = include_str!("../../wgsl/rescue_quad.wgsl");
const RPO_QUAD: &str = include_str!("../../wgsl/rpo_quad.wgsl");
const RPX_QUAD: &str = include_str!("../../wgsl/rpx_quad.wgsl");
const POSEIDON2: &str = include_str!("../../wgsl/poseidon2.wgsl");
const BLAKE3: &str = include_str!("../../wgsl/blake3.wgsl");
const BLAKE3_ROWS: &str = include_str!("../../wgsl/blake3_rows.wgsl");
const BLAKE3_MERKLE: &str = include_str!("../../wgsl/blake3_merkle.wgsl");
const POWERS: &str = include_str!("../../wgsl/powers.wgsl");
const NTT: &str = include_str!("../../wgsl/ntt.wgsl");
const COSET: &str = include_str!("../../wgsl/coset.wgsl");
const INTERPOLATE: &str = include_str!("../../wgsl/interpolate.wgsl");
const ROWS: &str = include_str!("../../wgsl/rows.wgsl");
const HASH_ROWS: &str = include_str!("../../wgsl/hash_rows.wgsl");
const MERKLE: &str = include_str!("../../wgsl/merkle.wgsl");
const HASH_ROWS_QUAD: &str = include_str!("../../wgsl/hash_rows_quad.wgsl");
const MERKLE_QUAD: &str = include_str!("../../wgsl/merkle_quad.wgsl");
const FRI: &str = include_str!("../../wgsl/fri.wgsl");
const DEEP: &str = include_str!("../../wgsl/deep.wgsl");
const GRIND: &str = include_str!("../../wgsl/grind.wgsl");
const COMPOSITION: &str = include_str!("../../wgsl/composition.wgsl");

// MODULES
// ================================================================================================

/// Which integers the field arithmetic of the kernels uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arithmetic {
    /// 32-bit integers only (16-bit partial products): runs everywhere.
    U32,
    /// Native 64-bit integers (`wgpu::Features::SHADER_INT64`).
    U64,
}

/// A shader module: the entry points that share one list of WGSL files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Module {
    /// `ntt_stage`, `ntt_stage_pair`, `ntt_tile`.
    Ntt,
    /// `coset_scale`.
    Coset,
    /// `finish_interpolation`.
    Interpolate,
    /// `to_rows`.
    Rows,
    /// `hash_rows` of a hash function (and `hash_rows_quad`, where it has quad kernels and they
    /// are built).
    HashRows(HashFunction),
    /// `merge_nodes` of a hash function (and `merge_nodes_quad`, as for `HashRows`).
    Merkle(HashFunction),
    /// `fri_rows`, `fri_fold`.
    Fri,
    /// `deep_combine`, `deep_evaluate`.
    Deep,
    /// `grind` of a sponge coin's hash function (RPO, RPX).
    Grind(HashFunction),
}

impl Module {
    /// Every module.
    pub fn all() -> Vec<Module> {
        let mut modules = vec![Module::Ntt, Module::Coset, Module::Interpolate, Module::Rows];
        modules.extend(HASHES.map(Module::HashRows));
        modules.extend(HASHES.map(Module::Merkle));
        modules.extend([Module::Fri, Module::Deep]);
        modules.extend(GRIND_HASHES.map(Module::Grind));
        modules
    }

    /// A short name, for labels.
    pub fn name(self) -> String {
        match self {
            Module::Ntt => "ntt".into(),
            Module::Coset => "coset".into(),
            Module::Interpolate => "interpolate".into(),
            Module::Rows => "rows".into(),
            Module::HashRows(hash) => format!("hash_rows_{}", hash.ident()),
            Module::Merkle(hash) => format!("merkle_{}", hash.ident()),
            Module::Fri => "fri".into(),
            Module::Deep => "deep".into(),
            Module::Grind(hash) => format!("grind_{}", hash.ident()),
        }
    }

    /// Whether the module does field arithmetic (and so has a 64-bit-integer variant).
    fn uses_field(self) -> bool {
        self != Module::Rows
    }

    /// Whether the module has entry points on quads of a subgroup.
    fn has_quad_kernels(self) -> bool {
        matches!(self, Module::HashRows(hash) | Module::Merkle(hash) if QUAD_HASHES.contains(&hash))
    }

    /// The module's source, in the given arithmetic; with the quad entry points too if `quads`
    /// (they need subgroup operations) and the module has them.
    pub fn source(self, arithmetic: Arithmetic, quads: bool) -> String {
        let field = [COMMON, primitives(arithmetic), FIELD];
        let quads = quads && self.has_quad_kernels();
        let parts: Vec<&str> = match self {
            Module::Ntt => [&field[..], &[NTT]].concat(),
            Module::Coset => [&field[..], &[POWERS, COSET]].concat(),
            Module::Interpolate => [&field[..], &[POWERS, INTERPOLATE]].concat(),
            Module::Rows => vec![COMMON, ROWS],
            Module::HashRows(hash) | Module::Merkle(hash) => {
                let (kernel, quad_kernel) = match (self, hash.is_algebraic()) {
                    (Module::HashRows(_), true) => (HASH_ROWS, HASH_ROWS_QUAD),
                    (Module::HashRows(_), false) => (BLAKE3_ROWS, ""),
                    (_, true) => (MERKLE, MERKLE_QUAD),
                    (_, false) => (BLAKE3_MERKLE, ""),
                };
                let mut parts = vec![field.join("\n"), hash_core(hash), kernel.into()];
                if quads {
                    parts.extend([quad_core(hash), quad_kernel.into()]);
                }
                return parts.join("\n");
            },
            Module::Fri => [&field[..], &[POWERS, EXT3, EXT, FRI]].concat(),
            Module::Deep => [&field[..], &[EXT3, EXT, DEEP]].concat(),
            Module::Grind(hash) => {
                return [field.join("\n"), hash_core(hash), GRIND.into()].join("\n")
            },
        };
        parts.join("\n")
    }
}

/// The field primitives of an arithmetic.
fn primitives(arithmetic: Arithmetic) -> &'static str {
    match arithmetic {
        Arithmetic::U32 => FIELD_U32,
        Arithmetic::U64 => FIELD_U64,
    }
}

/// The Goldilocks field functions every field module starts with (`gl_mul`, `gl_square`,
/// `gl_add`, `gl_sub`, ...) in the given arithmetic, without entry points: lets tests run them
/// in kernels of their own against `Felt`.
pub fn field_source(arithmetic: Arithmetic) -> String {
    [COMMON, primitives(arithmetic), FIELD].join("\n")
}

/// The permutation of a hash function on quads, after its one-invocation source.
fn quad_core(hash: HashFunction) -> String {
    let permutation = if hash == HashFunction::Rpx256 { RPX_QUAD } else { RPO_QUAD };
    [RESCUE_QUAD, permutation].join("\n")
}

/// The source of a hash function: a permutation's or BLAKE3's files, after the constants they
/// are generated with.
fn hash_core(hash: HashFunction) -> String {
    match hash {
        HashFunction::Rpo256 => [SPONGE, RESCUE, RPO].join("\n"),
        HashFunction::Rpx256 => [SPONGE, EXT3, RESCUE, RPX].join("\n"),
        HashFunction::Poseidon2 => [SPONGE, &poseidon2_counts(), POSEIDON2].join("\n"),
        HashFunction::Blake3_192 | HashFunction::Blake3_256 => {
            [blake3_constants(hash), BLAKE3.into()].join("\n")
        },
    }
}

/// The generated part of `blake3.wgsl` (see `blake3_tables`): the initial value, the message
/// permutation, the tree stack's depth, the digest's words and the saved words of a row.
fn blake3_constants(hash: HashFunction) -> String {
    let words = |values: &[String]| values.join(", ");
    let iv: Vec<String> = blake3_tables::iv().iter().map(|w| format!("0x{w:08x}u")).collect();
    let permuted: Vec<String> =
        blake3_tables::PERMUTATION.iter().map(|i| format!("m[{i}]")).collect();
    let mut out = String::new();
    let _ = writeln!(out, "const B3_IV = array<u32, 8>({});", words(&iv));
    let _ = writeln!(out, "const B3_STACK: u32 = {}u;", blake3_tables::CV_STACK);
    let _ = writeln!(out, "const B3_DIGEST_WORDS: u32 = {}u;", blake3_tables::digest_words(hash));
    let _ = writeln!(out, "const B3_SAVED_WORDS: u32 = {}u;", saved_words(hash));
    let _ = writeln!(
        out,
        "fn b3_permute(m: array<u32, 16>) -> array<u32, 16> {{\n    \
         return array<u32, 16>({});\n}}",
        words(&permuted)
    );
    out
}

/// The round counts of `poseidon2.wgsl`, from miden-crypto, and the vectors its constants take.
fn poseidon2_counts() -> String {
    let half = Poseidon2::NUM_EXTERNAL_ROUNDS_HALF;
    let internal = Poseidon2::NUM_INTERNAL_ROUNDS;
    let elements = 2 * half * Poseidon2::STATE_WIDTH + internal + Poseidon2::STATE_WIDTH;
    format!(
        "const P2_EXTERNAL_HALF: u32 = {half}u;\nconst P2_INTERNAL: u32 = {internal}u;\n\
         const P2_VECTORS: u32 = {}u;\n",
        elements.div_ceil(2)
    )
}

// COMPOSITION PROGRAMS
// ================================================================================================

/// The sizes a composition program is made for.
pub(super) struct CompositionSizes {
    /// Words the row writes: the extension degree.
    pub outputs: usize,
    /// Exponent slots of `x`.
    pub x_slots: usize,
    /// Words of the step tables' entries.
    pub table_words: usize,
}

/// A composition program (`composition.wgsl`) in `arithmetic`: the field code, the sizes and the
/// private arrays the generated `functions` (`constraints::wgsl_source`, named
/// `composition_row`) read and write, the fixed kernel and the functions.
pub(super) fn composition_source(
    sizes: &CompositionSizes,
    functions: &str,
    arithmetic: Arithmetic,
) -> String {
    let CompositionSizes { outputs, x_slots, table_words } = sizes;
    let declarations = format!(
        "const COMPOSITION_OUTPUTS: u32 = {outputs}u;\n\
         const COMPOSITION_X_SLOTS: u32 = {x_slots}u;\n\
         const COMPOSITION_TABLE_WORDS: u32 = {table_words}u;\n\
         var<private> ce_values: array<vec2<u32>, {outputs}>;\n\
         var<private> ce_xp: array<vec2<u32>, {}>;\n\
         var<private> ce_table: array<vec2<u32>, {}>;\n",
        x_slots + 1,
        table_words + 1
    );
    [field_source(arithmetic), declarations, COMPOSITION.into(), functions.into()].join("\n")
}

// PUBLIC LISTING
// ================================================================================================

/// One composed WGSL module, as handed to the device.
#[derive(Debug, Clone)]
pub struct ComposedShader {
    /// Module name (`ntt`, `hash_rows_rpo`, ...), with `_int64` for the 64-bit variant and
    /// `_quads` for the variant with the quad entry points.
    pub name: String,
    /// The WGSL source.
    pub source: String,
    /// Whether it needs 64-bit integers (`SHADER_INT64` / naga's `Capabilities::SHADER_INT64`).
    pub needs_int64: bool,
    /// Whether it needs subgroup operations (`SUBGROUP` / naga's `Capabilities::SUBGROUP`).
    pub needs_subgroups: bool,
}

/// Every module the backend can load, in both arithmetics, with and without the quad entry
/// points: lets the sources be validated and translated offline (e.g. with naga) without an
/// adapter.
pub fn composed_shaders() -> Vec<ComposedShader> {
    let mut shaders = Vec::new();
    for module in Module::all() {
        for arithmetic in [Arithmetic::U32, Arithmetic::U64] {
            if arithmetic == Arithmetic::U64 && !module.uses_field() {
                continue;
            }
            for quads in [false, true] {
                if quads && !module.has_quad_kernels() {
                    continue;
                }
                let int64 = arithmetic == Arithmetic::U64;
                let suffix = format!(
                    "{}{}",
                    if int64 { "_int64" } else { "" },
                    if quads { "_quads" } else { "" }
                );
                shaders.push(ComposedShader {
                    name: format!("{}{suffix}", module.name()),
                    source: module.source(arithmetic, quads),
                    needs_int64: int64,
                    needs_subgroups: quads,
                });
            }
        }
    }
    shaders
}

// SAVED HASHING STATE
// ================================================================================================

/// Words of one row's saved state between dispatches: two sponges of 12 field elements, or
/// two BLAKE3 trees (`B3Tree`: chaining value, stack, depth) plus the pending outer block and
/// its fill.
pub(super) fn saved_words(hash: HashFunction) -> usize {
    if hash.is_algebraic() {
        2 * 12 * 2
    } else {
        2 * (8 + 8 * CV_STACK + 1) + 16 + 1
    }
}

/// Bytes of one row's saved state between dispatches.
pub(super) fn saved_bytes(hash: HashFunction) -> u64 {
    4 * saved_words(hash) as u64
}
