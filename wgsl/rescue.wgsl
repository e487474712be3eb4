// The parts of the Rescue permutations shared by RPO256 and RPX256 (miden-crypto): the
// 12-element state, the MDS layer, round constants, the x^7 S-box and its inverse.
// Needs field.wgsl and sponge.wgsl.
//
// The constants are not written here: the host uploads `Rpo256::ARK1`, `Rpo256::ARK2` (both
// in Montgomery form) and `Rpo256::MDS` (as the small integers it holds) into this uniform
// buffer at start-up (RPX uses the same tables).

const RESCUE_ROUNDS: u32 = 7u;

struct RescueConstants {
    /// ARK1 (7 x 12) then ARK2 (7 x 12); two field elements per vector.
    ark: array<vec4<u32>, 84>,
    /// MDS[i][j] at flat index 12 i + j as an integer (row sums < 2^16); four per vector.
    mds: array<vec4<u32>, 36>,
}

@group(1) @binding(0) var<uniform> rescue: RescueConstants;

/// Element `i` of round `round` of ARK1 (`table` 0) or ARK2 (`table` 1).
fn ark(table: u32, round: u32, i: u32) -> vec2<u32> {
    let e = (table * RESCUE_ROUNDS + round) * STATE_WIDTH + i;
    let v = rescue.ark[e >> 1u];
    return select(v.xy, v.zw, (e & 1u) == 1u);
}

fn add_constants(state: ptr<function, State>, table: u32, round: u32) {
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        (*state)[i] = gl_add((*state)[i], ark(table, round, i));
    }
}

/// Row `i` of the MDS layer applied to `state`: sum_j MDS[i][j] state[j]. The coefficients are
/// small integers, so the output is an exact integer combination of 16-bit digits, reduced once
/// (Montgomery form is kept: the layer is linear).
fn mds_row(state: ptr<function, State>, i: u32) -> vec2<u32> {
    var acc0 = 0u;
    var acc1 = 0u;
    var acc2 = 0u;
    var acc3 = 0u;
    for (var j = 0u; j < STATE_WIDTH; j = j + 1u) {
        let e = i * STATE_WIDTH + j;
        let m = rescue.mds[e >> 2u][e & 3u];
        let v = (*state)[j];
        acc0 = acc0 + (v.x & 0xffffu) * m;
        acc1 = acc1 + (v.x >> 16u) * m;
        acc2 = acc2 + (v.y & 0xffffu) * m;
        acc3 = acc3 + (v.y >> 16u) * m;
    }
    // acc0 + acc1 2^16 + acc2 2^32 + acc3 2^48 as three words w0, w1, w2.
    let w0 = acc0 + (acc1 << 16u);
    let c0 = select(0u, 1u, w0 < acc0);
    let t = acc2 + (acc1 >> 16u) + c0;
    let c1 = select(0u, 1u, t < acc2);
    let w1 = t + (acc3 << 16u);
    let c2 = select(0u, 1u, w1 < t);
    return gl_reduce_96(vec2<u32>(w0, w1), (acc3 >> 16u) + c1 + c2);
}

/// state <- MDS * state.
fn apply_mds(state: ptr<function, State>) {
    var result: State;
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        result[i] = mds_row(state, i);
    }
    *state = result;
}

fn apply_sbox(state: ptr<function, State>) {
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        (*state)[i] = gl_exp7((*state)[i]);
    }
}

// Repeated squarings for the inverse S-box, written out rather than looped: some drivers
// (llvmpipe) cap the loop iterations of one invocation.
fn square3(x: vec2<u32>) -> vec2<u32> {
    return gl_square(gl_square(gl_square(x)));
}

fn square6(x: vec2<u32>) -> vec2<u32> {
    return square3(square3(x));
}

fn square12(x: vec2<u32>) -> vec2<u32> {
    return square6(square6(x));
}

/// x^10540996611094048183 = x^(1/7), with miden-crypto's addition chain (72 multiplications), so
/// with its very words.
fn inv_sbox_element(x: vec2<u32>) -> vec2<u32> {
    let t1 = gl_square(x);
    let t2 = gl_square(t1);
    let t3 = gl_mul(square3(t2), t2);
    let t4 = gl_mul(square6(t3), t3);
    let t5 = gl_mul(square12(t4), t4);
    let t6 = gl_mul(square6(t5), t3);
    // t6^(2^31) = t6^(2^(1 + 6 + 12 + 12))
    let t7 = gl_mul(square12(square12(square6(gl_square(t6)))), t6);
    let a = gl_square(gl_square(gl_mul(gl_square(t7), t6)));
    let b = gl_mul(gl_mul(t1, t2), x);
    return gl_mul(a, b);
}

fn apply_inv_sbox(state: ptr<function, State>) {
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        (*state)[i] = inv_sbox_element((*state)[i]);
    }
}

/// A full Rescue round up to its inverse S-box: the two MDS layers, the constants and the
/// forward S-box.
fn rescue_round_linear(state: ptr<function, State>, round: u32) {
    apply_mds(state);
    add_constants(state, 0u, round);
    apply_sbox(state);
    apply_mds(state);
    add_constants(state, 1u, round);
}

/// One full Rescue round with miden-crypto's inverse S-box: RPX's (FB) round (RPO's round has a
/// shorter inverse S-box, rpo.wgsl).
fn rescue_round(state: ptr<function, State>, round: u32) {
    rescue_round_linear(state, round);
    apply_inv_sbox(state);
}
