// Batched radix-2 decimation-in-frequency NTT over columns stored one after another.
//
// A transform of size n = 2^log_len takes a column in natural order to its transform in
// bit-reversed order: output position bitrev(k) holds sum_t x_t w^(t k). With the twiddles of
// w^-1 it is the inverse transform without the 1/n factor. `twiddles[i] = w^i` for i < n/2.
// Stages with a half-span of at least TILE/2 run two per dispatch (`ntt_stage_pair`; an odd one
// alone, `ntt_stage`); the remaining stages run in workgroup memory, a tile of TILE elements per
// workgroup (`ntt_tile`). Needs field.wgsl.

const LOG_TILE: u32 = 11u;
const TILE: u32 = 2048u;

struct NttParams {
    /// Element index of the first column in `data`.
    offset: u32,
    /// ntt_stage: butterflies in this dispatch; ntt_tile: elements in this dispatch.
    count: u32,
    /// log2 of the transform size.
    log_len: u32,
    /// ntt_stage: log2 of the half-span of this stage; ntt_tile: of the first (largest) one.
    log_half: u32,
}

@group(0) @binding(0) var<uniform> ntt_params: NttParams;
@group(0) @binding(1) var<storage, read_write> data: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> twiddles: array<vec2<u32>>;

var<workgroup> tile: array<vec2<u32>, TILE>;

/// w_(2h)^k for the butterfly at position k of a half-span h = 2^log_half.
fn twiddle(k: u32, log_half: u32) -> vec2<u32> {
    return twiddles[k << (ntt_params.log_len - 1u - log_half)];
}

/// (a, b) <- (a + b, (a - b) w)
@compute @workgroup_size(256)
fn ntt_stage(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let b = flat_id(gid, groups);
    if (b >= ntt_params.count) {
        return;
    }
    let s = ntt_params.log_half;
    let k = b & ((1u << s) - 1u);
    let i0 = ntt_params.offset + ((b >> s) << (s + 1u)) + k;
    let i1 = i0 + (1u << s);
    let x = data[i0];
    let y = data[i1];
    data[i0] = gl_add(x, y);
    data[i1] = gl_mul(gl_sub(x, y), twiddle(k, s));
}

/// Two stages in one pass over the batch: half-spans 2^log_half, then 2^(log_half - 1). Each
/// invocation takes the four elements those stages combine through both, so the data crosses
/// memory once for the two. The same butterflies as two `ntt_stage` dispatches.
@compute @workgroup_size(256)
fn ntt_stage_pair(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let b = flat_id(gid, groups);
    if (b >= ntt_params.count) {
        return;
    }
    let s = ntt_params.log_half;
    let k = b & ((1u << (s - 1u)) - 1u);
    let i0 = ntt_params.offset + ((b >> (s - 1u)) << (s + 1u)) + k;
    let i1 = i0 + (1u << (s - 1u));
    let i2 = i0 + (1u << s);
    let i3 = i2 + (1u << (s - 1u));
    var x0 = data[i0];
    var x1 = data[i1];
    var x2 = data[i2];
    var x3 = data[i3];
    // half-span 2^s: (i0, i2) and (i1, i3)
    let y0 = gl_add(x0, x2);
    let y2 = gl_mul(gl_sub(x0, x2), twiddle(k, s));
    let y1 = gl_add(x1, x3);
    let y3 = gl_mul(gl_sub(x1, x3), twiddle(k + (1u << (s - 1u)), s));
    // half-span 2^(s - 1): (i0, i1) and (i2, i3)
    let w = twiddle(k, s - 1u);
    data[i0] = gl_add(y0, y1);
    data[i1] = gl_mul(gl_sub(y0, y1), w);
    data[i2] = gl_add(y2, y3);
    data[i3] = gl_mul(gl_sub(y2, y3), w);
}

/// All stages of half-span <= 2^log_half on consecutive tiles of TILE elements. A partial last
/// tile holds whole columns, so its butterflies never reach past the valid elements.
@compute @workgroup_size(256)
fn ntt_tile(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let base = flat_group(wid, groups) * TILE;
    if (base >= ntt_params.count) {
        return;
    }
    let valid = min(TILE, ntt_params.count - base);
    let start = ntt_params.offset + base;
    for (var e = lid; e < valid; e = e + WORKGROUP_SIZE) {
        tile[e] = data[start + e];
    }
    workgroupBarrier();
    for (var step = 0u; step <= ntt_params.log_half; step = step + 1u) {
        let s = ntt_params.log_half - step;
        for (var b = lid; b < TILE / 2u; b = b + WORKGROUP_SIZE) {
            let k = b & ((1u << s) - 1u);
            let i0 = ((b >> s) << (s + 1u)) + k;
            let i1 = i0 + (1u << s);
            if (i1 < valid) {
                let x = tile[i0];
                let y = tile[i1];
                tile[i0] = gl_add(x, y);
                tile[i1] = gl_mul(gl_sub(x, y), twiddle(k, s));
            }
        }
        workgroupBarrier();
    }
    for (var e = lid; e < valid; e = e + WORKGROUP_SIZE) {
        data[start + e] = tile[e];
    }
}
