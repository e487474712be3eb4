// The Poseidon2 permutation (miden-crypto `Poseidon2::apply_permutation`): the external linear
// layer, P2_EXTERNAL_HALF initial external rounds, P2_INTERNAL internal rounds, then
// P2_EXTERNAL_HALF terminal external rounds. Needs field.wgsl and sponge.wgsl.
//
// Nothing numeric is written here: the host prepends the round counts (`P2_EXTERNAL_HALF`,
// `P2_INTERNAL`, `P2_VECTORS`, from `Poseidon2::NUM_EXTERNAL_ROUNDS_HALF` and
// `Poseidon2::NUM_INTERNAL_ROUNDS`) and uploads `Poseidon2::{ARK_EXT_INITIAL, ARK_EXT_TERMINAL,
// ARK_INT, MAT_DIAG}` in Montgomery form into this uniform buffer at start-up. The 4 x 4 block
// of the external layer is miden-crypto's addition chain (`matmul_m4`).

struct Poseidon2Constants {
    /// ARK_EXT_INITIAL (P2_EXTERNAL_HALF x 12), ARK_EXT_TERMINAL (P2_EXTERNAL_HALF x 12),
    /// ARK_INT (P2_INTERNAL), MAT_DIAG (12); two field elements per vector.
    values: array<vec4<u32>, P2_VECTORS>,
}

@group(1) @binding(0) var<uniform> poseidon2: Poseidon2Constants;

/// Element `e` of the constants, in the order above.
fn p2_constant(e: u32) -> vec2<u32> {
    let v = poseidon2.values[e >> 1u];
    return select(v.xy, v.zw, (e & 1u) == 1u);
}

/// The 4 x 4 block of the external layer on state[base..base + 4] (miden-crypto `matmul_m4`,
/// operation for operation: winter_math's additions and doublings depend on the order).
fn p2_matmul_m4(state: ptr<function, State>, base: u32) {
    let a = (*state)[base];
    let b = (*state)[base + 1u];
    let c = (*state)[base + 2u];
    let d = (*state)[base + 3u];
    let t0 = gl_add(a, b);
    let t1 = gl_add(c, d);
    let t2 = gl_add(gl_double(b), t1);
    let t3 = gl_add(gl_double(d), t0);
    let t4 = gl_add(gl_times4(t1), t3);
    let t5 = gl_add(gl_times4(t0), t2);
    (*state)[base] = gl_add(t3, t5);
    (*state)[base + 1u] = t5;
    (*state)[base + 2u] = gl_add(t2, t4);
    (*state)[base + 3u] = t4;
}

/// The external linear layer: the 4 x 4 block on each quarter, then each element plus the sum
/// of its column across the quarters (sums started from zero, as miden-crypto's).
fn p2_matmul_external(state: ptr<function, State>) {
    for (var base = 0u; base < STATE_WIDTH; base = base + 4u) {
        p2_matmul_m4(state, base);
    }
    var sums: array<vec2<u32>, 4>;
    for (var l = 0u; l < 4u; l = l + 1u) {
        sums[l] = gl_add(gl_add(gl_add(vec2<u32>(0u, 0u), (*state)[l]), (*state)[4u + l]), (*state)[8u + l]);
    }
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        (*state)[i] = gl_add((*state)[i], sums[i & 3u]);
    }
}

/// The internal linear layer: state[i] * MAT_DIAG[i] + sum(state), the sum started from zero.
fn p2_matmul_internal(state: ptr<function, State>) {
    var sum = vec2<u32>(0u, 0u);
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        sum = gl_add(sum, (*state)[i]);
    }
    let diag = 2u * P2_EXTERNAL_HALF * STATE_WIDTH + P2_INTERNAL;
    for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
        (*state)[i] = gl_add(gl_mul((*state)[i], p2_constant(diag + i)), sum);
    }
}

/// The initial (`table` 0) or terminal (1) external rounds: add constants, S-box on every element, external layer.
fn p2_external_rounds(state: ptr<function, State>, table: u32) {
    for (var r = 0u; r < P2_EXTERNAL_HALF; r = r + 1u) {
        let base = (table * P2_EXTERNAL_HALF + r) * STATE_WIDTH;
        for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
            (*state)[i] = gl_exp7(gl_add((*state)[i], p2_constant(base + i)));
        }
        p2_matmul_external(state);
    }
}

fn permute(state: ptr<function, State>) {
    p2_matmul_external(state);
    p2_external_rounds(state, 0u);
    let ark_int = 2u * P2_EXTERNAL_HALF * STATE_WIDTH;
    for (var r = 0u; r < P2_INTERNAL; r = r + 1u) {
        (*state)[0] = gl_exp7(gl_add((*state)[0], p2_constant(ark_int + r)));
        p2_matmul_internal(state);
    }
    p2_external_rounds(state, 1u);
}
