// The last step of an interpolation: an inverse NTT leaves len * coefficients in bit-reversed
// order; this writes them in natural order times factor * offset_inv^t, where factor = 1/len
// and offset_inv the inverse of the domain offset (1 for the trace domain), i.e.
//   dst[c][j] = src[c][bitrev(t0 + j)] * factor * offset_inv^(t0 + j).
// A window t0.. of each source column can be taken: the composition polynomial is cut into
// columns this way. Needs field.wgsl and powers.wgsl.

struct InterpolateParams {
    /// Elements written by this dispatch (columns * 2^log_len).
    count: u32,
    /// log2 of the output column length.
    log_len: u32,
    /// Element index of column 0 in `src`.
    src_offset: u32,
    /// Elements from one source column to the next.
    src_stride: u32,
    /// log2 of the source column length (the transform size).
    log_src_len: u32,
    /// Element index of column 0 in `dst` (columns are contiguous there).
    dst_offset: u32,
    /// First coefficient index taken from each source column.
    first: u32,
    /// Start of the power table of offset_inv in `powers`, or 0xffffffff for offset 1.
    offset_table: u32,
    /// `factor` as (low, high) words.
    factor_lo: u32,
    factor_hi: u32,
}

@group(0) @binding(0) var<uniform> interp_params: InterpolateParams;
@group(0) @binding(1) var<storage, read> interp_src: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> interp_dst: array<vec2<u32>>;

@compute @workgroup_size(256)
fn finish_interpolation(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= interp_params.count) {
        return;
    }
    let c = x >> interp_params.log_len;
    let t = interp_params.first + (x & ((1u << interp_params.log_len) - 1u));
    let src = interp_params.src_offset + c * interp_params.src_stride
        + bit_reverse(t, interp_params.log_src_len);
    var scale = vec2<u32>(interp_params.factor_lo, interp_params.factor_hi);
    if (interp_params.offset_table != 0xffffffffu) {
        scale = gl_mul(scale, pow_lookup(interp_params.offset_table, t));
    }
    interp_dst[interp_params.dst_offset + x] = gl_mul(interp_src[src], scale);
}
