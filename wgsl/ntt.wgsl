// Batched radix-2 decimation-in-frequency NTT over columns stored one after another.
//
// A transform of size n = 2^log_len takes a column in natural order to its transform in
// bit-reversed order: output position bitrev(k) holds sum_t x_t w^(t k). With the twiddles of
// w^-1 it is the inverse transform without the 1/n factor. `twiddles` holds them stage by stage:
// entry 2^s + k is w_(2h)^k for the butterfly at position k of half-span h = 2^s, so the
// butterflies of neighbouring invocations read consecutive words.
// Stages with a half-span of at least TILE/2 run two per dispatch (`ntt_stage_pair`; an odd one
// alone, `ntt_stage`); the remaining stages run in workgroup memory, a tile of TILE elements per
// workgroup (`ntt_tile`), also two at a time. Needs field.wgsl.

const LOG_TILE: u32 = 11u;
const TILE: u32 = 2048u;

struct NttParams {
    /// Element index of the first column in `data`.
    offset: u32,
    /// ntt_stage: butterflies in this dispatch; ntt_tile: elements in this dispatch.
    count: u32,
    /// ntt_stage: log2 of the half-span of this stage; ntt_tile: of the first (largest) one.
    log_half: u32,
}

@group(0) @binding(0) var<uniform> ntt_params: NttParams;
@group(0) @binding(1) var<storage, read_write> data: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> twiddles: array<vec2<u32>>;

var<workgroup> tile: array<vec2<u32>, TILE>;

/// w_(2h)^k for the butterfly at position k of a half-span h = 2^log_half.
fn twiddle(k: u32, log_half: u32) -> vec2<u32> {
    return twiddles[(1u << log_half) + k];
}

/// The DIF (Gentleman-Sande) butterfly: (x + y, (x - y)·w).
fn butterfly(x: vec2<u32>, y: vec2<u32>, w: vec2<u32>) -> array<vec2<u32>, 2> {
    return array(gl_add(x, y), gl_mul(gl_sub(x, y), w));
}

/// One stage: (a, b) <- (a + b, (a - b) w)
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
    let y = butterfly(data[i0], data[i1], twiddle(k, s));
    data[i0] = y[0];
    data[i1] = y[1];
}

/// Two DIF stages, half-spans 2^s then 2^(s - 1), on the four elements at positions i0,
/// i0 + 2^(s - 1), i0 + 2^s and i0 + 3·2^(s - 1) of a block, butterfly position k < 2^(s - 1) of
/// the first stage: the same butterflies as the two stages one after the other.
fn butterfly_pair(x: array<vec2<u32>, 4>, k: u32, s: u32) -> array<vec2<u32>, 4> {
    // half-span 2^s: (0, 2) and (1, 3)
    let a = butterfly(x[0], x[2], twiddle(k, s));
    let b = butterfly(x[1], x[3], twiddle(k + (1u << (s - 1u)), s));
    // half-span 2^(s - 1): (0, 1) and (2, 3)
    let w = twiddle(k, s - 1u);
    let c = butterfly(a[0], b[0], w);
    let d = butterfly(a[1], b[1], w);
    return array(c[0], c[1], d[0], d[1]);
}

/// The first position i0 of group g of four elements for `butterfly_pair` with half-span 2^s,
/// and its butterfly position k.
fn pair_group(g: u32, s: u32) -> vec2<u32> {
    let k = g & ((1u << (s - 1u)) - 1u);
    return vec2<u32>(((g >> (s - 1u)) << (s + 1u)) + k, k);
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
    let group = pair_group(b, s);
    let i0 = ntt_params.offset + group.x;
    let h = 1u << (s - 1u);
    let y = butterfly_pair(array(data[i0], data[i0 + h], data[i0 + 2u * h], data[i0 + 3u * h]), group.y, s);
    data[i0] = y[0];
    data[i0 + h] = y[1];
    data[i0 + 2u * h] = y[2];
    data[i0 + 3u * h] = y[3];
}

/// All stages of half-span <= 2^log_half on consecutive tiles of TILE elements, two at a time
/// (the largest alone first where their number is odd), so a tile crosses a barrier once per two
/// stages. A partial last tile holds whole columns, so a block of butterflies is either wholly
/// among the valid elements or wholly past them.
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
    var s = ntt_params.log_half;
    var stages = s + 1u;
    if ((stages & 1u) == 1u) {
        for (var b = lid; b < TILE / 2u; b = b + WORKGROUP_SIZE) {
            let k = b & ((1u << s) - 1u);
            let i0 = ((b >> s) << (s + 1u)) + k;
            let i1 = i0 + (1u << s);
            if (i1 < valid) {
                let y = butterfly(tile[i0], tile[i1], twiddle(k, s));
                tile[i0] = y[0];
                tile[i1] = y[1];
            }
        }
        workgroupBarrier();
        stages = stages - 1u;
        s = s - 1u;
    }
    for (; stages > 0u; stages = stages - 2u) {
        for (var g = lid; g < TILE / 4u; g = g + WORKGROUP_SIZE) {
            let group = pair_group(g, s);
            let i0 = group.x;
            let h = 1u << (s - 1u);
            if (i0 < valid) {
                let y = butterfly_pair(array(tile[i0], tile[i0 + h], tile[i0 + 2u * h], tile[i0 + 3u * h]), group.y, s);
                tile[i0] = y[0];
                tile[i0 + h] = y[1];
                tile[i0 + 2u * h] = y[2];
                tile[i0 + 3u * h] = y[3];
            }
        }
        workgroupBarrier();
        s = s - 2u;
    }
    for (var e = lid; e < valid; e = e + WORKGROUP_SIZE) {
        data[start + e] = tile[e];
    }
}
