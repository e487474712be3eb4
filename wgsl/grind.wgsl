// The proof-of-work search on a sponge coin, as miden-crypto's `check_leading_zeros`: nonce
// `n` is added to state[4] as `BaseElement::new(n)`, the state is permuted, and `n` is accepted
// if state[4]'s integer (`mont_to_int`, the same for every word of an element) has at least
// `factor` trailing zeros. The smallest accepted offset of a dispatch goes to `found[0]`.
// Needs a permutation (rpo.wgsl or rpx.wgsl).

struct GrindParams {
    /// The coin's state, two elements per vector.
    state0: vec4<u32>,
    state1: vec4<u32>,
    state2: vec4<u32>,
    state3: vec4<u32>,
    state4: vec4<u32>,
    state5: vec4<u32>,
    /// The first nonce of the dispatch (below p), low and high words.
    start_lo: u32,
    start_hi: u32,
    /// Nonces tried.
    count: u32,
    /// Trailing zero bits an accepted value needs.
    factor: u32,
}

@group(0) @binding(0) var<uniform> grind_params: GrindParams;
@group(0) @binding(1) var<storage, read_write> found: array<atomic<u32>>;

/// `BaseElement::new`'s factor: the Montgomery form of `n` is `n · R2 · 2^-64`.
const GL_R2 = vec2<u32>(0x00000001u, 0xfffffffeu);

@compute @workgroup_size(256)
fn grind(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let i = flat_id(gid, groups);
    if (i >= grind_params.count) {
        return;
    }
    let p = grind_params;
    var state = State(
        p.state0.xy, p.state0.zw, p.state1.xy, p.state1.zw, p.state2.xy, p.state2.zw,
        p.state3.xy, p.state3.zw, p.state4.xy, p.state4.zw, p.state5.xy, p.state5.zw,
    );
    let lo = p.start_lo + i;
    let nonce = vec2<u32>(lo, p.start_hi + select(0u, 1u, lo < i));
    state[4] = gl_add(state[4], gl_mul(nonce, GL_R2));
    permute(&state);
    let value = gl_canonical(gl_mul(state[4], vec2<u32>(1u, 0u)));
    let zeros = select(countTrailingZeros(value.x), 32u + countTrailingZeros(value.y),
        value.x == 0u);
    if (zeros >= p.factor) {
        atomicMin(&found[0], i);
    }
}
