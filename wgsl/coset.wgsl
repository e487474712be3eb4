// The input of a coset evaluation: column c of the output is
//   dst[c][t] (+)= src[c][t] * s^(e0 + t),   s = GENERATOR * g^coset,
// with g the LDE domain's root of unity, so that a forward NTT of dst evaluates the
// polynomial over the coset s <w_len>. With accumulation over several source blocks
// (e0 = 0, len, 2 len, ...) it evaluates a polynomial longer than the transform: the sum folds
// it modulo x^len - s^len. Needs field.wgsl and powers.wgsl.

struct CosetParams {
    /// Elements written by this dispatch (columns * len).
    count: u32,
    /// log2 of the output column length.
    log_len: u32,
    /// Element index of column 0 in `src`.
    src_offset: u32,
    /// Elements from one source column to the next.
    src_stride: u32,
    /// Element index of column 0 in `dst` (columns are contiguous there).
    dst_offset: u32,
    /// Exponent of the first element (index of src[c][0] in its polynomial).
    exp_offset: u32,
    /// Index of the coset: the power of g in s.
    coset: u32,
    /// 1: add to dst; 0: overwrite it.
    accumulate: u32,
    /// LDE domain size minus one (powers of g are taken modulo the domain size).
    domain_mask: u32,
    /// Start of the power table of GENERATOR in `powers`.
    generator_table: u32,
    /// Start of the power table of g in `powers`.
    root_table: u32,
}

@group(0) @binding(0) var<uniform> coset_params: CosetParams;
@group(0) @binding(1) var<storage, read> coset_src: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> coset_dst: array<vec2<u32>>;

@compute @workgroup_size(256)
fn coset_scale(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= coset_params.count) {
        return;
    }
    let c = x >> coset_params.log_len;
    let t = x & ((1u << coset_params.log_len) - 1u);
    let e = coset_params.exp_offset + t;
    let scale = gl_mul(
        pow_lookup(coset_params.generator_table, e),
        pow_lookup(coset_params.root_table, (coset_params.coset * e) & coset_params.domain_mask),
    );
    var value = gl_mul(coset_src[coset_params.src_offset + c * coset_params.src_stride + t], scale);
    let out = coset_params.dst_offset + x;
    if (coset_params.accumulate != 0u) {
        value = gl_add(coset_dst[out], value);
    }
    coset_dst[out] = value;
}
