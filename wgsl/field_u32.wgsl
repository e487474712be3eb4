// Goldilocks field primitives with 32-bit integers only (the portable default): addition,
// subtraction, Montgomery multiplication and small-coefficient reduction modulo
// p = 2^64 - 2^32 + 1, each returning the word winter_math returns for the same words
// (field.wgsl says how elements are stored and why). WGSL has no high-half multiply, so products
// are built from 16-bit halves.

/// 2^64 mod p = 2^32 - 1: a carry out of 64 bits is worth this much.
const GL_EPSILON: u32 = 0xffffffffu;

/// A 64-bit value and the carry (or borrow) out of the operation that made it.
struct WithCarry {
    value: vec2<u32>,
    carry: u32,
}

/// A 128-bit product `lo + hi * 2^64`.
struct Wide128 {
    lo: vec2<u32>,
    hi: vec2<u32>,
}

// 64-BIT INTEGER HELPERS
// ================================================================================================

/// The full 32 x 32-bit product `a * b` as `vec2(low word, high word)`.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = p01 + p10;
    let mid_carry = select(0u, 0x10000u, mid < p01);
    let lo = p00 + (mid << 16u);
    let lo_carry = select(0u, 1u, lo < p00);
    return vec2<u32>(lo, p11 + (mid >> 16u) + mid_carry + lo_carry);
}


fn add_carry(a: vec2<u32>, b: vec2<u32>) -> WithCarry {
    let lo = a.x + b.x;
    let c0 = select(0u, 1u, lo < a.x);
    let hi1 = a.y + b.y;
    let c1 = select(0u, 1u, hi1 < a.y);
    let hi = hi1 + c0;
    let c2 = select(0u, 1u, hi < hi1);
    return WithCarry(vec2<u32>(lo, hi), c1 | c2);
}

fn sub_borrow(a: vec2<u32>, b: vec2<u32>) -> WithCarry {
    let lo = a.x - b.x;
    let b0 = select(0u, 1u, a.x < b.x);
    let hi1 = a.y - b.y;
    let b1 = select(0u, 1u, a.y < b.y);
    let hi = hi1 - b0;
    let b2 = select(0u, 1u, hi1 < b0);
    return WithCarry(vec2<u32>(lo, hi), b1 | b2);
}

/// The full 128-bit product of two 64-bit values.
fn mul_128(a: vec2<u32>, b: vec2<u32>) -> Wide128 {
    let ll = mul_wide(a.x, b.x);
    let lh = mul_wide(a.x, b.y);
    let hl = mul_wide(a.y, b.x);
    let hh = mul_wide(a.y, b.y);
    let mid = add_carry(lh, hl);
    let lo_hi = ll.y + mid.value.x;
    let c1 = select(0u, 1u, lo_hi < ll.y);
    let hi = add_carry(hh, vec2<u32>(mid.value.y, mid.carry)).value;
    return Wide128(vec2<u32>(ll.x, lo_hi), add_carry(hi, vec2<u32>(c1, 0u)).value);
}

/// The full 128-bit square of a 64-bit value (one partial product fewer than `mul_128`).
fn square_128(a: vec2<u32>) -> Wide128 {
    let ll = mul_wide(a.x, a.x);
    let lh = mul_wide(a.x, a.y);
    let hh = mul_wide(a.y, a.y);
    let mid = add_carry(lh, lh);
    let lo_hi = ll.y + mid.value.x;
    let c1 = select(0u, 1u, lo_hi < ll.y);
    let hi = add_carry(hh, vec2<u32>(mid.value.y, mid.carry)).value;
    return Wide128(vec2<u32>(ll.x, lo_hi), add_carry(hi, vec2<u32>(c1, 0u)).value);
}

// FIELD OPERATIONS
// ================================================================================================

/// Folds a carry out of 64 bits back in: adds `carry * (2^32 - 1)` modulo p.
fn gl_fold_carry(x: WithCarry) -> vec2<u32> {
    let once = add_carry(x.value, vec2<u32>(GL_EPSILON * x.carry, 0u));
    return add_carry(once.value, vec2<u32>(GL_EPSILON * once.carry, 0u)).value;
}

/// says why the very same u64 matters).
fn gl_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let x = sub_borrow(a, sub_borrow(vec2<u32>(1u, 0xffffffffu), b).value);
    return sub_borrow(x.value, vec2<u32>(GL_EPSILON * x.carry, 0u)).value;
}

/// `a - b` as winter_math computes it: minus 2^32 - 1 on a borrow.
fn gl_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let x = sub_borrow(a, b);
    return sub_borrow(x.value, vec2<u32>(GL_EPSILON * x.carry, 0u)).value;
}

/// Montgomery reduction `x / 2^64 mod p` of a product (128 bits): the word of Winterfell's
/// `mont_red_cst`, from fewer operations. With words x0..x3 and e the carry of x0 + x1,
/// `mont_red_cst` computes `(x3, x2) + x1 + e - (A << 32)` for A = x0 + x1 + e mod 2^32, minus
/// 2^32 - 1 on a borrow; for a product of two 64-bit words neither the sum nor A overflows (see
/// `gl_mont_reduce` in cuda/field.cuh). RPO hashing runs faster with it than with the
/// transcription with 64-bit subtractions.
fn gl_mont_reduce(x: Wide128) -> vec2<u32> {
    let s = x.lo.x + x.lo.y;
    let e = select(0u, 1u, s < x.lo.x);
    let a = s + e;
    let low1 = x.hi.x + x.lo.y;
    let low = low1 + e;
    let k = select(0u, 1u, low1 < x.hi.x) | select(0u, 1u, low < low1);
    let t = x.hi.y + k;
    // (t, low) - (a, 0), minus 2^32 - 1 on a borrow: plus 1 on the low word, minus 1 above it
    let c = select(0u, 1u, t < a);
    let r0 = low + c;
    return vec2<u32>(r0, t - a - c + select(0u, 1u, r0 < low));
}

fn gl_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_mont_reduce(mul_128(a, b));
}

fn gl_square(a: vec2<u32>) -> vec2<u32> {
    return gl_mont_reduce(square_128(a));
}

/// Reduces `lo + hi * 2^64` (hi < 2^32) modulo p, as Winterfell's `mul_small` does: used for
/// linear combinations with small integer coefficients, which keep the Montgomery factor.
fn gl_reduce_96(lo: vec2<u32>, hi: u32) -> vec2<u32> {
    // hi * 2^64 = hi * (2^32 - 1) mod p = (hi << 32) - hi, which fits in 64 bits.
    let z = sub_borrow(vec2<u32>(0u, hi), vec2<u32>(hi, 0u)).value;
    return gl_fold_carry(add_carry(lo, z));
}
