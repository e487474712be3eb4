// The composition over one coset of the constraint-evaluation (CE) domain: one invocation per
// element t of the coset evaluates the generated `composition_row` over the frame of CE step
// s = t · ce_blowup + coset, read from the coset's evaluations of the main and auxiliary
// columns (needs field.wgsl and common.wgsl). The program defines COMPOSITION_OUTPUTS,
// COMPOSITION_X_SLOTS and COMPOSITION_TABLE_WORDS, the private arrays ce_values, ce_xp and
// ce_table, and the generated functions around this file.
//
// ce_main_lde, ce_aux_lde: the coset's evaluations of the main columns and of the auxiliary
// columns' components, column after column, each bit-reversed (element t of column c at
// c · count + bitrev(t)), as a commitment's coset evaluation leaves them. The next row of a
// frame is element t + 1 (mod count) of the same coset.
//
// ce_words: the u64 words of `CompositionRequest::parameter_words`, whose header of offsets and
// counts says where each part is.

struct CompositionParams {
    /// Elements of the coset (the trace length n).
    count: u32,
    /// log2 of `count`.
    log_n: u32,
    /// CE blowup: the number of cosets of the CE domain.
    ce_blowup: u32,
    /// Index of the coset: CE step s = t · ce_blowup + coset.
    coset: u32,
    /// Words between the components of one step in `composition_out` (the CE domain's size):
    /// component i of step s is at i · out_stride + s, component after component, as the
    /// constraint commitment interpolates them.
    out_stride: u32,
}

@group(0) @binding(0) var<uniform> composition_params: CompositionParams;
@group(0) @binding(1) var<storage, read> ce_main_lde: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> ce_aux_lde: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> ce_words: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> composition_out: array<vec2<u32>>;

var<private> ce_cur: u32;
var<private> ce_nxt: u32;
var<private> ce_constants_at: u32;
var<private> ce_random_at: u32;
var<private> ce_periodic_at: u32;

/// base^e by squaring, as cuda/field.cuh's gl_pow (the same products, so the same words).
fn ce_pow(base: vec2<u32>, e: vec2<u32>) -> vec2<u32> {
    var r = ce_words[0];
    var b = base;
    for (var half = 0u; half < 2u; half++) {
        var bits = select(e.y, e.x, half == 0u);
        for (var i = 0u; i < 32u; i++) {
            if ((bits & 1u) != 0u) {
                r = gl_mul(r, b);
            }
            b = gl_square(b);
            bits = bits >> 1u;
        }
    }
    return r;
}

fn ce_inv(a: vec2<u32>) -> vec2<u32> {
    return ce_pow(a, ce_words[1]);
}

fn ce_main(column: u32, next: bool) -> vec2<u32> {
    let at = column * composition_params.count + select(ce_cur, ce_nxt, next);
    return gl_canonical(ce_main_lde[at]);
}

fn ce_aux(word: u32, next: bool) -> vec2<u32> {
    let at = word * composition_params.count + select(ce_cur, ce_nxt, next);
    return gl_canonical(ce_aux_lde[at]);
}

fn ce_periodic(column: u32) -> vec2<u32> {
    return ce_words[ce_periodic_at + column];
}

fn ce_random(word: u32) -> vec2<u32> {
    return ce_words[ce_random_at + word];
}

fn ce_const(slot: u32) -> vec2<u32> {
    return ce_words[ce_constants_at + slot];
}

@compute @workgroup_size(256)
fn composition(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let t = flat_id(gid, groups);
    let n = composition_params.count;
    if (t >= n) {
        return;
    }
    ce_cur = bit_reverse(t, composition_params.log_n);
    ce_nxt = bit_reverse((t + 1u) & (n - 1u), composition_params.log_n);
    let s = t * composition_params.ce_blowup + composition_params.coset;
    ce_constants_at = ce_words[2].x;
    ce_random_at = ce_words[3].x;
    let periodic_rows = ce_words[5].x;
    ce_periodic_at = ce_words[4].x;
    if (periodic_rows != 0u) {
        ce_periodic_at += (s % periodic_rows) * ce_words[6].x;
    }
    let bases = ce_words[7].x;
    for (var i = 0u; i < COMPOSITION_X_SLOTS; i++) {
        let base = ce_words[bases + 2u * i];
        ce_xp[i] = gl_mul(base, ce_pow(ce_words[bases + 2u * i + 1u], vec2<u32>(s, 0u)));
    }
    let descriptors = ce_words[8].x;
    var word = 0u;
    for (var i = 0u; i < ce_words[9].x; i++) {
        let d = descriptors + 4u * i;
        let width = ce_words[d + 1u].x;
        let entries = ce_words[d + 2u].x;
        let entry = (s % entries + entries - ce_words[d + 3u].x % entries) % entries;
        for (var j = 0u; j < width && word < COMPOSITION_TABLE_WORDS; j++) {
            ce_table[word] = ce_words[ce_words[d].x + entry * width + j];
            word++;
        }
    }
    composition_row();
    for (var i = 0u; i < COMPOSITION_OUTPUTS; i++) {
        composition_out[i * composition_params.out_stride + s] = ce_values[i];
    }
}
