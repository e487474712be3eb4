// The FRI commit phase: the first layer's rows from coset evaluations of the DEEP polynomial,
// and the folding of a layer's rows into the next layer (winter-fri's `apply_drp`).
// Needs field.wgsl, powers.wgsl, ext3.wgsl and ext.wgsl.
//
// An element of a degree-D extension (D = 1, 2, 3) is D consecutive base elements. A layer of R
// rows and F slots per row (F = folding factor) holds evaluation k in slot k / R of row k mod R,
// and is stored row-major: component d of slot j of row i is at i F D + j D + d, so a row is the
// F D base elements Winterfell hashes into its leaf. The remainder is a layer of one slot per
// row (evaluations in natural order, components interleaved).

struct FriParams {
    /// Invocations of this dispatch.
    count: u32,
    /// Element index in `fri_src` of the dispatch's source: the coset column (fri_rows), the
    /// first row (fri_fold).
    src_offset: u32,
    /// Element index in `fri_dst` of the dispatch's first destination element.
    dst_offset: u32,
    /// Elements from one destination row (fri_rows) or output (fri_fold) to the next.
    dst_stride: u32,
    /// Slots per row of the layer being written (fri_rows) or folded (fri_fold): F.
    folding: u32,
    /// Components per element: D.
    degree: u32,
    /// fri_rows: the first b of the dispatch. fri_fold: the layer index of its first row.
    first: u32,
    /// fri_rows: log2 of the coset size U.
    log_unit: u32,
    /// fri_rows: positions u from one slot to the next (R / W for W cosets).
    slot_step: u32,
    /// fri_fold: rows R of the layer.
    rows: u32,
    /// fri_fold: the layer's domain size R F minus one.
    domain_mask: u32,
    /// fri_fold: start of the power table of the layer domain's root of unity in `powers`.
    root_table: u32,
    /// fri_fold: alpha divided by the domain offset, one component each (zero past D).
    alpha0: vec2<u32>,
    alpha1: vec2<u32>,
    alpha2: vec2<u32>,
    /// fri_fold: 1 / F.
    f_inv: vec2<u32>,
}

@group(0) @binding(0) var<uniform> fri_params: FriParams;
@group(0) @binding(1) var<storage, read> fri_src: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> fri_dst: array<vec2<u32>>;

const FRI_MAX_FOLDING: u32 = 16u;

// ELEMENTS
// ================================================================================================

/// Component `d` of the element whose first component is at `fri_src[start]`, zero past the
/// degree.
fn load_component(start: u32, d: u32) -> vec2<u32> {
    if (d < fri_params.degree) {
        return fri_src[start + d];
    }
    return EXT_ZERO;
}

fn load_element(start: u32) -> Ext3 {
    return Ext3(load_component(start, 0u), load_component(start, 1u), load_component(start, 2u));
}

/// Writes the `degree` components of `value` from `fri_dst[start]` on.
fn store_element(start: u32, value: Ext3) {
    fri_dst[start] = value.c0;
    if (fri_params.degree > 1u) {
        fri_dst[start + 1u] = value.c1;
    }
    if (fri_params.degree > 2u) {
        fri_dst[start + 2u] = value.c2;
    }
}

// FIRST LAYER
// ================================================================================================

/// Writes one component of a coset's evaluations into the first layer's rows. Coset q of W
/// (W <= R) holds evaluation k = q + W u at bit-reversed position u of its NTT output; with
/// u = j (R / W) + b, that is slot j of row q + W b. Invocation x writes slot j = x mod F of
/// row q + W (first + x / F), at `dst_offset + (x / F) dst_stride + j D` (`dst_stride` = W F D).
@compute @workgroup_size(256)
fn fri_rows(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= fri_params.count) {
        return;
    }
    let j = x % fri_params.folding;
    let b = x / fri_params.folding;
    let u = j * fri_params.slot_step + fri_params.first + b;
    let src = fri_params.src_offset + bit_reverse(u, fri_params.log_unit);
    fri_dst[fri_params.dst_offset + b * fri_params.dst_stride + j * fri_params.degree] =
        fri_src[src];
}

// FOLDING
// ================================================================================================

/// Folds row i of a layer into one element, as winter-fri's `apply_drp`: with x_i = offset g^i
/// (g of order R F), ω = g^R of order F and the row's values v_j = P(x_i ω^j), the result is
/// (1/F) Σ_k c_k (alpha / x_i)^k with c_k = Σ_j v_j ω^(-j k). Invocation x folds row
/// `first + x` (at `src_offset + x F D` in `fri_src`) into `fri_dst[dst_offset + x dst_stride]`.
@compute @workgroup_size(256)
fn fri_fold(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= fri_params.count) {
        return;
    }
    let f = fri_params.folding;
    let d = fri_params.degree;
    let mask = fri_params.domain_mask;
    let row = fri_params.first + x;

    var values: array<Ext3, FRI_MAX_FOLDING>;
    let start = fri_params.src_offset + x * f * d;
    for (var j = 0u; j < f; j = j + 1u) {
        values[j] = load_element(start + j * d);
    }
    // ω^-m = g^(R F - m R), for m < F.
    var weights: array<vec2<u32>, FRI_MAX_FOLDING>;
    for (var m = 0u; m < f; m = m + 1u) {
        weights[m] = pow_lookup(fri_params.root_table, (mask + 1u - m * fri_params.rows) & mask);
    }
    // beta = alpha / x_i = (alpha / offset) g^-i.
    let x_inv = pow_lookup(fri_params.root_table, (mask + 1u - row) & mask);
    let alpha = Ext3(fri_params.alpha0, fri_params.alpha1, fri_params.alpha2);
    let beta = ext_scale(alpha, x_inv);

    // Horner over k = F - 1, ..., 0 of c_k beta^k.
    var acc = Ext3(EXT_ZERO, EXT_ZERO, EXT_ZERO);
    for (var step = 0u; step < f; step = step + 1u) {
        let k = f - 1u - step;
        var c = Ext3(EXT_ZERO, EXT_ZERO, EXT_ZERO);
        for (var j = 0u; j < f; j = j + 1u) {
            c = ext_add(c, ext_scale(values[j], weights[(j * k) & (f - 1u)]));
        }
        acc = ext_add(ext_mul(acc, beta, d), c);
    }
    store_element(fri_params.dst_offset + x * fri_params.dst_stride, ext_scale(acc, fri_params.f_inv));
}
