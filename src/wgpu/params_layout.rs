//! The parameter structs of the kernels, checked against their WGSL twins.
//!
//! Each `*Params` struct is written twice: in Rust (`#[repr(C)]`, uploaded as bytes into the
//! uniform arena) and in WGSL, where the kernels read it. Nothing ties the two together at build
//! time, so this test parses every composed shader with naga and compares each WGSL struct's
//! layout (member names, offsets, sizes and scalar types, and its span) with the Rust struct's
//! (`offset_of!`, `size_of`): a field reordered, retyped, added or dropped on either side fails.
//!
//! Names pair a WGSL member with a Rust field: the same name, or, for a Rust array, the field's
//! name with the element index appended (`alpha0` is `alpha[0]`, `x1_2` is `x1[2]`). A Rust
//! field named `_…` is padding that WGSL leaves implicit (the tail up to the struct's
//! alignment).
//!
//! A WGSL twin may also be a prefix of the Rust struct where [`PREFIX_TWINS`] says so: a kernel
//! that needs only the leading fields declares only those, and reads them from the same bytes.

use std::collections::HashMap;

use naga::{proc::GlobalCtx, Scalar, TypeInner};

use super::composed_shaders;

// RUST LAYOUT
// ================================================================================================

/// A parameter struct as Rust lays it out; made by [`describe_params!`].
pub(super) struct ParamsLayout {
    /// The struct's name, which its WGSL twin shares.
    pub name: &'static str,
    /// `size_of` the struct.
    pub size: usize,
    /// Its fields, in declaration order.
    pub fields: Vec<FieldLayout>,
}

/// One field of a [`ParamsLayout`].
pub(super) struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    /// Elements of the outermost array (1 for a scalar).
    pub len: usize,
    /// The scalar every word of the field holds.
    pub scalar: Scalar,
}

impl FieldLayout {
    /// The field `name` at `offset`, of the type `field` reads from the struct.
    pub fn of<S, F: ParamsField>(
        name: &'static str,
        offset: usize,
        _field: impl Fn(&S) -> &F,
    ) -> Self {
        Self { name, offset, size: size_of::<F>(), len: F::LEN, scalar: F::SCALAR }
    }
}

/// The types parameter fields are made of: `u32` words, alone or in (nested) arrays. A field of
/// another type does not compile in [`describe_params!`].
pub(super) trait ParamsField {
    /// The scalar of each word.
    const SCALAR: Scalar;
    /// Elements of the outermost array (1 for a scalar).
    const LEN: usize;
}

impl ParamsField for u32 {
    const SCALAR: Scalar = Scalar::U32;
    const LEN: usize = 1;
}

impl<T: ParamsField, const N: usize> ParamsField for [T; N] {
    const SCALAR: Scalar = T::SCALAR;
    const LEN: usize = N;
}

/// The [`ParamsLayout`] of a struct of the calling module, from the names of all its fields:
/// `describe_params!(NttParams { offset, count, log_half })`. A field left out fails the check
/// (a gap in the struct), one that does not exist does not compile.
macro_rules! describe_params {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        $crate::wgpu::params_layout::ParamsLayout {
            name: stringify!($ty),
            size: ::core::mem::size_of::<$ty>(),
            fields: vec![$(
                $crate::wgpu::params_layout::FieldLayout::of(
                    stringify!($field),
                    ::core::mem::offset_of!($ty, $field),
                    |params: &$ty| &params.$field,
                )
            ),*],
        }
    };
}
pub(super) use describe_params;

/// The structs some shaders declare only the leading fields of: (struct, the composed shaders
/// whose names start with this). BLAKE3's row hashing has no copied or coset rows, so its
/// `HashRowsParams` stops before `copy_offset`.
const PREFIX_TWINS: [(&str, &str); 1] = [("HashRowsParams", "hash_rows_blake3")];

/// Every parameter struct of the kernels.
fn rust_layouts() -> Vec<ParamsLayout> {
    [
        super::ntt::params_layouts(),
        super::lde::params_layouts(),
        super::hash::params_layouts(),
        super::merkle::params_layouts(),
        super::fold::params_layouts(),
        super::deep::params_layouts(),
        super::grind::params_layouts(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

// CHECK
// ================================================================================================

/// Every way `rust` and the WGSL struct `members` (of `span` bytes, types in `ctx`) differ;
/// empty if they agree. A `prefix` twin may end before the Rust struct does: the Rust fields
/// from its span on are not looked for.
fn mismatches(
    rust: &ParamsLayout,
    members: &[naga::StructMember],
    span: u32,
    ctx: GlobalCtx<'_>,
    prefix: bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let span = span as usize;
    if span != rust.size && !(prefix && span < rust.size) {
        errors.push(format!("WGSL span {span} bytes, Rust size {} bytes", rust.size));
    }
    // the Rust fields tile the struct (bytemuck's `Pod` admits no padding but `_` fields)
    let mut by_offset: Vec<&FieldLayout> = rust.fields.iter().collect();
    by_offset.sort_by_key(|field| field.offset);
    let mut end = 0;
    for field in by_offset {
        if field.offset != end {
            errors.push(format!(
                "Rust field `{}` at {} (the fields described end at {end}: one is missing)",
                field.name, field.offset
            ));
        }
        end = field.offset + field.size;
    }
    if end != rust.size {
        errors.push(format!("the Rust fields described end at {end}, the struct at {}", rust.size));
    }

    let mut covered: HashMap<&str, usize> = HashMap::new();
    for member in members {
        let name = member.name.as_deref().unwrap_or("<unnamed>");
        let inner = &ctx.types[member.ty].inner;
        let size = inner.size(ctx) as usize;
        let Some((field, offset, expected_size)) = rust_place(rust, name) else {
            errors.push(format!("WGSL member `{name}` has no Rust field"));
            continue;
        };
        *covered.entry(field.name).or_default() += size;
        if member.offset as usize != offset || size != expected_size {
            errors.push(format!(
                "`{name}`: WGSL at {} ({size} bytes), Rust at {offset} ({expected_size} bytes)",
                member.offset
            ));
        }
        match inner.scalar() {
            Some(scalar) if scalar == field.scalar => {},
            scalar => errors
                .push(format!("`{name}`: WGSL scalar {scalar:?}, Rust scalar {:?}", field.scalar)),
        }
    }
    for field in &rust.fields {
        let bytes = covered.get(field.name).copied().unwrap_or(0);
        let beyond_prefix = prefix && field.offset >= span;
        let wanted = if field.name.starts_with('_') || beyond_prefix { 0 } else { field.size };
        if bytes != wanted {
            errors.push(format!(
                "Rust field `{}`: {wanted} bytes expected in WGSL members, {bytes} found",
                field.name
            ));
        }
    }
    errors
}

/// The Rust field a WGSL member `name` stands for, with the offset and size the member must
/// have: the field of that name, or the element of a Rust array named by an index suffix.
fn rust_place<'r>(rust: &'r ParamsLayout, name: &str) -> Option<(&'r FieldLayout, usize, usize)> {
    if let Some(field) = rust.fields.iter().find(|f| f.name == name) {
        return Some((field, field.offset, field.size));
    }
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let index: usize = name[stem.len()..].parse().ok()?;
    let stem = stem.strip_suffix('_').unwrap_or(stem);
    let field = rust.fields.iter().find(|f| f.name == stem && f.len > 1)?;
    let element = field.size / field.len;
    (index < field.len).then_some((field, field.offset + index * element, element))
}

// TESTS
// ================================================================================================

/// The mismatches of `rust` in a WGSL source declaring its twin.
fn check_source(rust: &ParamsLayout, source: &str) -> Vec<String> {
    let module = naga::front::wgsl::parse_str(source).expect("WGSL parses");
    let members = module.types.iter().find_map(|(_, ty)| match &ty.inner {
        TypeInner::Struct { members, span } if ty.name.as_deref() == Some(rust.name) => {
            Some((members.clone(), *span))
        },
        _ => None,
    });
    let (members, span) = members.expect("the struct is declared");
    mismatches(rust, &members, span, module.to_ctx(), false)
}

#[test]
fn every_params_struct_matches_its_wgsl_twin() {
    let shaders: Vec<(String, naga::Module)> = composed_shaders()
        .into_iter()
        .map(|shader| {
            let module = naga::front::wgsl::parse_str(&shader.source).unwrap_or_else(|e| {
                panic!("{}: {}", shader.name, e.emit_to_string(&shader.source))
            });
            (shader.name, module)
        })
        .collect();
    // each mismatch once, with the shaders it is found in
    let mut failures: Vec<(String, Vec<&str>)> = Vec::new();
    for rust in rust_layouts() {
        let mut declared = 0;
        for (shader, module) in &shaders {
            for (_, ty) in module.types.iter() {
                let TypeInner::Struct { members, span } = &ty.inner else { continue };
                if ty.name.as_deref() != Some(rust.name) {
                    continue;
                }
                declared += 1;
                let prefix = PREFIX_TWINS
                    .iter()
                    .any(|&(name, shaders)| name == rust.name && shader.starts_with(shaders));
                for error in mismatches(&rust, members, *span, module.to_ctx(), prefix) {
                    let error = format!("{}: {error}", rust.name);
                    match failures.iter_mut().find(|(known, _)| *known == error) {
                        Some((_, shaders)) => shaders.push(shader),
                        None => failures.push((error, vec![shader])),
                    }
                }
            }
        }
        if declared == 0 {
            failures.push((format!("{}: no composed shader declares it", rust.name), Vec::new()));
        }
    }
    let lines: Vec<String> = failures
        .iter()
        .map(|(error, shaders)| format!("{error} (in {})", shaders.join(", ")))
        .collect();
    assert!(
        lines.is_empty(),
        "parameter structs differ from their WGSL twins:\n{}",
        lines.join("\n")
    );
}

/// The check itself: swapped fields, a retyped member, a member of an array and a missing field
/// are each reported.
#[test]
fn the_check_finds_reordered_and_retyped_fields() {
    #[repr(C)]
    struct Probe {
        a: u32,
        b: u32,
        c: [[u32; 2]; 2],
    }
    let rust = describe_params!(Probe { a, b, c });
    let agreeing = "struct Probe { a: u32, b: u32, c0: vec2<u32>, c1: vec2<u32> }";
    assert_eq!(check_source(&rust, agreeing), Vec::<String>::new());

    let swapped = "struct Probe { b: u32, a: u32, c0: vec2<u32>, c1: vec2<u32> }";
    assert_eq!(check_source(&rust, swapped).len(), 2, "{:?}", check_source(&rust, swapped));
    let retyped = "struct Probe { a: f32, b: u32, c0: vec2<u32>, c1: vec2<u32> }";
    assert_eq!(check_source(&rust, retyped).len(), 1, "{:?}", check_source(&rust, retyped));
    let short = "struct Probe { a: u32, b: u32, c0: vec2<u32> }";
    assert!(!check_source(&rust, short).is_empty());
    let beyond = "struct Probe { a: u32, b: u32, c0: vec2<u32>, c1: vec2<u32>, c2: vec2<u32> }";
    assert!(!check_source(&rust, beyond).is_empty());
}
