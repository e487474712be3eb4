// Goldilocks field primitives through native 64-bit integers (`SHADER_INT64`), chosen at run
// time where the adapter has them. Same functions and contract as field_u32.wgsl: elements
// stay `vec2<u32>` in memory and at every interface; only the arithmetic inside is 64-bit.

/// 2^64 mod p = 2^32 - 1: a carry out of 64 bits is worth this much.
const GL_EPSILON_64: u64 = 0xfffffffflu;
/// The modulus p.
const GL_P_64: u64 = 0xffffffff00000001lu;
const LOW_32: u64 = 0xfffffffflu;

fn to_u64(a: vec2<u32>) -> u64 {
    return u64(a.x) | (u64(a.y) << 32u);
}

fn from_u64(a: u64) -> vec2<u32> {
    return vec2<u32>(u32(a & LOW_32), u32(a >> 32u));
}

/// The full 128-bit product `x * y` as (low, high) 64-bit words.
fn mul_128_u64(x: u64, y: u64) -> vec2<u64> {
    let x0 = x & LOW_32;
    let x1 = x >> 32u;
    let y0 = y & LOW_32;
    let y1 = y >> 32u;
    let ll = x0 * y0;
    let lh = x0 * y1;
    let hl = x1 * y0;
    let hh = x1 * y1;
    // (2^32 - 1)^2 + 2 (2^32 - 1) < 2^64: no overflow.
    let mid = lh + (ll >> 32u) + (hl & LOW_32);
    return vec2<u64>((mid << 32u) | (ll & LOW_32), hh + (mid >> 32u) + (hl >> 32u));
}

/// Adds `carry * (2^32 - 1)` to `s` modulo p (twice at most, as in field_u32.wgsl).
fn fold_carry_u64(s: u64, carry: bool) -> u64 {
    let once = s + select(0lu, GL_EPSILON_64, carry);
    let again = carry && once < s;
    return once + select(0lu, GL_EPSILON_64, again);
}

/// `a + b` as winter_math computes it: `a - (p - b)`, minus 2^32 - 1 on a borrow.
fn gl_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let x = to_u64(a);
    let t = GL_P_64 - to_u64(b);
    let d = x - t;
    return from_u64(d - select(0lu, GL_EPSILON_64, x < t));
}

/// `a - b` as winter_math computes it: minus 2^32 - 1 on a borrow.
fn gl_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let x = to_u64(a);
    let y = to_u64(b);
    return from_u64((x - y) - select(0lu, GL_EPSILON_64, x < y));
}

/// Montgomery reduction `x / 2^64 mod p` of a product `lo + hi 2^64`: the word of Winterfell's
/// `mont_red_cst`, from fewer operations. With lo = (x0, x1) and e the carry of x0 + x1,
/// `mont_red_cst` computes `hi + x1 + e - (A << 32)` for A = x0 + x1 + e mod 2^32, minus 2^32 - 1
/// on a borrow; for a product of two 64-bit words neither `hi + x1 + e` nor A overflows (see
/// `gl_mont_reduce` in cuda/field.cuh). RPO hashing runs faster with it than with the
/// transcription of `mont_red_cst` on 32-bit words.
fn mont_reduce_u64(x: vec2<u64>) -> u64 {
    let x0 = u32(x.x);
    let x1 = u32(x.x >> 32u);
    let s = x0 + x1;
    let e = select(0u, 1u, s < x0);
    let y = x.y + u64(x1) + u64(e);
    let high = u64(s + e) << 32u;
    return (y - high) - select(0lu, GL_EPSILON_64, y < high);
}

fn gl_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from_u64(mont_reduce_u64(mul_128_u64(to_u64(a), to_u64(b))));
}

fn gl_square(a: vec2<u32>) -> vec2<u32> {
    let x = to_u64(a);
    return from_u64(mont_reduce_u64(mul_128_u64(x, x)));
}

/// Reduces `lo + hi * 2^64` (hi < 2^32) modulo p, as Winterfell's `mul_small` does.
fn gl_reduce_96(lo: vec2<u32>, hi: u32) -> vec2<u32> {
    let h = u64(hi);
    let z = (h << 32u) - h;
    let s = to_u64(lo) + z;
    return from_u64(fold_carry_u64(s, s < z));
}
