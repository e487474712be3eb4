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

/// Montgomery reduction `x / 2^64 mod p` of `lo + hi 2^64`: Winterfell's `mont_red_cst`,
/// `a = lo + (lo << 32)` with carry e, `b = a - (a >> 32) - e`, `r = hi - b` (minus 2^32 - 1 on a
/// borrow). With lo = (x0, x1), a is (x0, a1) for a1 = x1 + x0 mod 2^32 and a >> 32 = a1, so b is
/// formed on 32-bit words: (x0, a1) - (a1 + e), where a1 + e < 2^32 (e = 1 only if a1 < x0). The
/// same words as the 64-bit form; on the H200 (Vulkan) RPO hashing ran 10 % faster so.
fn mont_reduce_u64(x: vec2<u64>) -> u64 {
    let x0 = u32(x.x);
    let a1 = u32(x.x >> 32u) + x0;
    let s = a1 + select(0u, 1u, a1 < x0);
    let borrow = select(0u, 1u, x0 < s);
    let b = (u64(a1 - borrow) << 32u) | u64(x0 - s);
    let r = x.y - b;
    return r - select(0lu, GL_EPSILON_64, x.y < b);
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
