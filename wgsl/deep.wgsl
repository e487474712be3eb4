// The DEEP composition's linear combination S = Σ k_i T_i over resident polynomials. Needs
// field.wgsl, ext3.wgsl and ext.wgsl.
//
// One dispatch adds one column: S[j] += k T[j] for a run of coefficients j, as winter_math
// computes it (`mul_base` for a base column, the extension product for a column of the
// extension). Columns are added in order by successive dispatches. S holds elements of degree
// D with components interleaved; a column of degree D is D base columns, each bound on its own
// (a base column is bound three times).

struct DeepParams {
    /// Invocations of this dispatch: one per coefficient j of a run.
    count: u32,
    /// Element index in `deep_sum` of the run's first coefficient.
    first: u32,
    /// Element index of coefficient `first` of each component in its binding.
    src0: u32,
    src1: u32,
    src2: u32,
    /// Base components of the column: 1 or D.
    col_degree: u32,
    /// Degree D of S.
    degree: u32,
    /// Whether S starts from zero (the first column) rather than from `deep_sum`.
    init: u32,
    /// The column's coefficient k, one component each (zero past D).
    k0: vec2<u32>,
    k1: vec2<u32>,
    k2: vec2<u32>,
}

@group(0) @binding(0) var<uniform> deep_params: DeepParams;
@group(0) @binding(1) var<storage, read> deep_c0: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> deep_c1: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> deep_c2: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> deep_sum: array<vec2<u32>>;

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
