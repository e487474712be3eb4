// The DEEP composition over resident polynomials: the linear combination S = Σ k_i T_i and the
// out-of-domain evaluations. Needs field.wgsl, ext3.wgsl and ext.wgsl.
//
// Combination: one dispatch adds one column: S[j] += k T[j] for a run of coefficients j, as winter_math
// computes it (`mul_base` for a base column, the extension product for a column of the
// extension). Columns are added in order by successive dispatches. S holds elements of degree
// D with components interleaved; a column of degree D is D base columns, each bound on its own
// (a base column is bound three times).

struct DeepParams {
    /// Invocations of this dispatch: one per coefficient j of a run (deep_combine), one per
    /// block (deep_evaluate).
    count: u32,
    /// Element index in `deep_sum` of the run's first coefficient or block value.
    first: u32,
    /// Element index of coefficient `first` of each component in its binding.
    src0: u32,
    src1: u32,
    src2: u32,
    /// Base components of the column: 1 or D.
    col_degree: u32,
    /// Degree D of S.
    degree: u32,
    /// deep_combine: whether S starts from zero (the first column) rather than from `deep_sum`.
    init: u32,
    /// deep_combine: the column's coefficient k; deep_evaluate: the first point. One component
    /// each (zero past D).
    k0: vec2<u32>,
    k1: vec2<u32>,
    k2: vec2<u32>,
    /// deep_evaluate: the second point.
    x1_0: vec2<u32>,
    x1_1: vec2<u32>,
    x1_2: vec2<u32>,
    /// deep_evaluate: coefficients per block.
    block_len: u32,
}

@group(0) @binding(0) var<uniform> deep_params: DeepParams;
@group(0) @binding(1) var<storage, read> deep_c0: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> deep_c1: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> deep_c2: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> deep_sum: array<vec2<u32>>;

// LINEAR COMBINATION
// ================================================================================================


@compute @workgroup_size(256)
fn deep_combine(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let t = flat_id(gid, groups);
    if (t >= deep_params.count) {
        return;
    }
    let d = deep_params.degree;
    let at = (deep_params.first + t) * d;
    var acc = Ext3(EXT_ZERO, EXT_ZERO, EXT_ZERO);
    if (deep_params.init == 0u) {
        acc.c0 = deep_sum[at];
        if (d > 1u) {
            acc.c1 = deep_sum[at + 1u];
        }
        if (d > 2u) {
            acc.c2 = deep_sum[at + 2u];
        }
    }
    let k = Ext3(deep_params.k0, deep_params.k1, deep_params.k2);
    var term: Ext3;
    if (deep_params.col_degree == 1u) {
        term = ext_scale(k, deep_c0[deep_params.src0 + t]);
    } else {
        var c = Ext3(deep_c0[deep_params.src0 + t], EXT_ZERO, EXT_ZERO);
        c.c1 = deep_c1[deep_params.src1 + t];
        if (d > 2u) {
            c.c2 = deep_c2[deep_params.src2 + t];
        }
        term = ext_mul(k, c, d);
    }
    acc = ext_add(acc, term);
    deep_sum[at] = acc.c0;
    if (d > 1u) {
        deep_sum[at + 1u] = acc.c1;
    }
    if (d > 2u) {
        deep_sum[at + 2u] = acc.c2;
    }
}

// OUT-OF-DOMAIN EVALUATION
// ================================================================================================

/// The values at the two points of blocks of `block_len` coefficients of one column, by Horner's
/// rule as winter_math's `polynom::eval` steps (acc x + coefficient, a base coefficient lifted
/// into the extension). Invocation t takes the block of coefficients t block_len ..
/// (t + 1) block_len from `src0`, `src1`, `src2` on and writes its value at point p, D
/// components, at `first + (2 t + p) D` in `deep_sum`.
@compute @workgroup_size(256)
fn deep_evaluate(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let t = flat_id(gid, groups);
    if (t >= deep_params.count) {
        return;
    }
    let d = deep_params.degree;
    let x0 = Ext3(deep_params.k0, deep_params.k1, deep_params.k2);
    let x1 = Ext3(deep_params.x1_0, deep_params.x1_1, deep_params.x1_2);
    var a0 = Ext3(EXT_ZERO, EXT_ZERO, EXT_ZERO);
    var a1 = Ext3(EXT_ZERO, EXT_ZERO, EXT_ZERO);
    let len = deep_params.block_len;
    for (var step = 0u; step < len; step = step + 1u) {
        let j = t * len + len - 1u - step;
        var c = Ext3(deep_c0[deep_params.src0 + j], EXT_ZERO, EXT_ZERO);
        if (deep_params.col_degree > 1u) {
            c.c1 = deep_c1[deep_params.src1 + j];
            if (d > 2u) {
                c.c2 = deep_c2[deep_params.src2 + j];
            }
        }
        a0 = ext_add(ext_mul(a0, x0, d), c);
        a1 = ext_add(ext_mul(a1, x1, d), c);
    }
    let at = deep_params.first + 2u * t * d;
    deep_sum[at] = a0.c0;
    deep_sum[at + d] = a1.c0;
    if (d > 1u) {
        deep_sum[at + 1u] = a0.c1;
        deep_sum[at + d + 1u] = a1.c1;
    }
    if (d > 2u) {
        deep_sum[at + 2u] = a0.c2;
        deep_sum[at + d + 2u] = a1.c2;
    }
}
