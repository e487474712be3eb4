// Goldilocks field arithmetic, p = 2^64 - 2^32 + 1, in Montgomery form (R = 2^64 mod p).
//
// An element is `vec2<u32>(low word, high word)` of the same u64 that Winterfell's
// `BaseElement` stores, so host memory is used byte for byte. Representations need not be
// canonical, and every operation returns the very u64 winter_math's returns for the same inputs,
// not merely the same element: winter_math's addition and doubling are exact only for canonical
// operands (a non-canonical right operand of an addition loses 2^32 - 1), and the hash
// permutations reach such operands now and then (about once in 2^33 doublings). The primitives
// (gl_add, gl_sub, gl_mul, gl_square, gl_reduce_96) come from field_u32.wgsl or field_u64.wgsl;
// this file derives the rest from them.

/// `2a` as winter_math's `double`: the shifted u64, minus p when the shift carried out (the
/// result may be non-canonical).
fn gl_double(a: vec2<u32>) -> vec2<u32> {
    let over = a.y >> 31u;
    let lo = a.x << 1u;
    let hi = (a.y << 1u) | (a.x >> 31u);
    // minus p = (1, 0xffffffff) when `over` is set
    let borrow = select(0u, 1u, lo < over);
    return vec2<u32>(lo - over, hi - over * 0xffffffffu - borrow);
}

/// `4a` as winter_math's `mul_small(4)`: the 66-bit product folded once.
fn gl_times4(a: vec2<u32>) -> vec2<u32> {
    return gl_reduce_96(vec2<u32>(a.x << 2u, (a.y << 2u) | (a.x >> 30u)), a.y >> 30u);
}

/// `a^7`, the Rescue S-box.
fn gl_exp7(a: vec2<u32>) -> vec2<u32> {
    let a2 = gl_square(a);
    let a4 = gl_square(a2);
    return gl_mul(gl_mul(a2, a), a4);
}

/// The Montgomery form of a small integer `k` (k R mod p), as `BaseElement::from(k)`.
fn gl_from_small(k: u32) -> vec2<u32> {
    return gl_reduce_96(vec2<u32>(0u, 0u), k);
}

/// The canonical representative in [0, p), for results the host compares word by word.
fn gl_canonical(a: vec2<u32>) -> vec2<u32> {
    if (a.y == 0xffffffffu && a.x != 0u) {
        return vec2<u32>(a.x - 1u, 0u);
    }
    return a;
}
