// The RPO256 permutation (miden-crypto `Rpo256::apply_permutation`): seven full Rescue
// rounds. Needs rescue.wgsl.

fn square4(x: vec2<u32>) -> vec2<u32> {
    return gl_square(gl_square(gl_square(gl_square(x))));
}

/// x^(1/7) for RPO, in 71 multiplications, 62 of them squarings: one squaring fewer than
/// `inv_sbox_element`. The element is the same but its word may not be (a non-canonical word
/// now and then), which RPO's later operations (multiplications, the MDS layer, additions of
/// canonical constants) and its canonical digests never see; RPX's extension S-box adds such
/// words, so RPX keeps miden-crypto's chain. In octal the exponent is 1111111111 0 66666666667,
/// that is R10 (2^36 + 48) + 7 with R10 = (8^10 - 1) / 7: z = x^R10 is built from
/// x^9 = x^7 x^2, and x^(1/7) = (z^(2^32) z^3)^16 x^7.
fn inv_sbox_element_rpo(x: vec2<u32>) -> vec2<u32> {
    let x2 = gl_square(x);
    let x7 = gl_mul(gl_square(gl_mul(x2, x)), x);
    let r2 = gl_mul(x7, x2);
    let r4 = gl_mul(square6(r2), r2);
    let r8 = gl_mul(square12(r4), r4);
    let z = gl_mul(square6(r8), r2);
    let z2 = gl_square(z);
    // z^(2^32) = z2^(2^31) = z2^(2^(1 + 6 + 12 + 12))
    let a = gl_mul(square12(square12(square6(gl_square(z2)))), gl_mul(z2, z));
    return gl_mul(square4(a), x7);
}

fn permute(state: ptr<function, State>) {
    for (var round = 0u; round < RESCUE_ROUNDS; round = round + 1u) {
        rescue_round_linear(state, round);
        for (var i = 0u; i < STATE_WIDTH; i = i + 1u) {
            (*state)[i] = inv_sbox_element_rpo((*state)[i]);
        }
    }
}
