// Goldilocks field arithmetic in Montgomery form, for the miden-gpu CUDA kernels.
//
// p = 2^64 - 2^32 + 1. An element is a u64 holding x·R mod p with R = 2^64, exactly as
// winter_math's `BaseElement` stores it, so host `Felt` memory is used byte for byte. Values may
// be non-canonical (in [p, 2^64)), and each operation here returns the very u64 that
// winter_math's returns for the same inputs, not merely the same element: winter_math's addition
// and doubling are exact only for canonical operands (a non-canonical right operand of an
// addition loses 2^32 - 1), and the hash permutations reach such operands now and then (about
// once in 2^33 doublings). `gl_canonical` maps a result into [0, p) before it is written out.
//
// Multiplication is a 64x64->128 product in 32-bit limbs (Hopper has no 64-bit integer
// multiplier) followed by the Goldilocks Montgomery reduction of winter_math's `mont_red_cst`
// (additions and subtractions only, no multiplication). The 128-bit product is the same integer
// whichever way its partial products are formed, so every form below returns the same word.
// RPO, whose digests depend on elements only, could run in the standard form with a reduction of
// fewer instructions; that measured slower: the Montgomery form's mix of multiply-pipe and ALU
// instructions suits the two pipes better.

typedef unsigned long long u64;
typedef unsigned int u32;

#define GL_P 0xFFFFFFFF00000001ull
// 2^64 mod p = 2^32 - 1: what an overflow past 2^64 is worth.
#define GL_EPSILON 0xFFFFFFFFull

// ADDITION AND SUBTRACTION
// ================================================================================================

/// a - b, as winter_math computes it: a - b mod 2^64, minus 2^32 - 1 on a borrow. One borrow
/// chain: the borrow of the 64-bit difference becomes the mask 2^32 - 1 that the same chain
/// subtracts (five instructions where the compare-and-select form took eight).
__device__ __forceinline__ u64 gl_sub(u64 a, u64 b) {
    u32 r0, r1;
    asm("{\n\t"
        ".reg .u32 m;\n\t"
        "sub.cc.u32 %0, %2, %4;\n\t"
        "subc.cc.u32 %1, %3, %5;\n\t"
        "subc.u32 m, 0, 0;\n\t"   // m = 2^32 - 1 on a borrow, else 0
        "sub.cc.u32 %0, %0, m;\n\t"
        "subc.u32 %1, %1, 0;\n\t"
        "}"
        : "=r"(r0), "=r"(r1)
        : "r"((u32)a), "r"((u32)(a >> 32)), "r"((u32)b), "r"((u32)(b >> 32)));
    return ((u64)r1 << 32) | r0;
}

/// a + b, as winter_math computes it: a - (p - b) (p - b mod 2^64), minus 2^32 - 1 on a borrow
/// (exact when b is canonical).
__device__ __forceinline__ u64 gl_add(u64 a, u64 b) {
    return gl_sub(a, GL_P - b);
}

/// 2a, as winter_math's `double`: 2a mod 2^64, minus p when the shift carried out (the result
/// may be non-canonical).
__device__ __forceinline__ u64 gl_double(u64 a) {
    return (a << 1) - ((a >> 63) ? GL_P : 0ull);
}

/// a·k for a small integer k, as winter_math's `mul_small`: the 96-bit product folded once.
__device__ __forceinline__ u64 gl_mul_small(u64 a, u32 k) {
    const u64 lo = a * k;
    const u64 hi = __umul64hi(a, (u64)k);
    const u64 z = (hi << 32) - hi;
    const u64 r = lo + z;
    return r < lo ? r + GL_EPSILON : r;
}

/// The canonical representative in [0, p).
__device__ __forceinline__ u64 gl_canonical(u64 a) {
    return a >= GL_P ? a - GL_P : a;
}

// MULTIPLICATION
// ================================================================================================

/// Montgomery reduction of a product t3:t2:t1:t0 (32-bit limbs) of two 64-bit words: returns
/// t·2^-64 mod p, the very word of winter_math's `mont_red_cst`, which computes
/// a = xl + (xl << 32) with carry e, b = a - (a >> 32) - e, r = xh - b, and on a borrow
/// r -= 2^32 - 1. On limbs, with e the carry of t0 + t1 and A = t0 + t1 + e mod 2^32, that r is
/// (t3:t2) + t1 + e - A·2^32, and its borrow is that of the high word: T = t3 + k < A, where k is
/// the carry of r's low word t2 + t1 + e. Neither T nor A overflows 32 bits:
/// A = t0 + t1 + e - 2^32·e with t0 + t1 ≤ 2^33 - 2, and t3 = 2^32 - 1 only for a product of two
/// words above 2^64 - 2^32, whose low half then leaves k = 0. Eight sm_90 instructions where the
/// transcription of `mont_red_cst` took nine, which made RPO and RPX leaf hashing markedly faster
/// (with the squaring forms mixed as `square_n` says).
///
/// A = (t0 + t1) + e is one `addc` without `.cc`, which reads the carry e and leaves it for r0's
/// sum: ptxas keeps e in a predicate for both. Forming A as r0 - t2 + t0 instead kept t0 alive
/// past the sum, and under the 64-register cap of the row kernels ptxas recomputed a0² on the
/// multiply pipe to get it back, which slowed the RPO and RPX rows and trees.
///
/// Carry chains never mix an addition's carry into a subtraction (ptxas lowers PTX's borrow as an
/// inverted carry, so such a mix computes the wrong value: seen in the sm_90 SASS): the sums
/// carry through `addc`, the difference borrows through `subc`.
__device__ __forceinline__ u64 gl_mont_reduce(u32 t0, u32 t1, u32 t2, u32 t3) {
    u32 r0, r1;
    asm("{\n\t"
        ".reg .u32 x, T, A, m;\n\t"
        "add.cc.u32 x, %2, %3;\n\t"       // carry e of t0 + t1
        "addc.u32 A, x, 0;\n\t"           // A = t0 + t1 + e (the carry flag stays e)
        "addc.cc.u32 %0, %4, %3;\n\t"     // r0 = t2 + t1 + e, carry k
        "addc.u32 T, %5, 0;\n\t"          // T = t3 + k
        "sub.cc.u32 %1, T, A;\n\t"        // r1, borrow c
        "subc.u32 m, 0, 0;\n\t"           // m = -c
        "sub.cc.u32 %0, %0, m;\n\t"       // r - c·(2^32 - 1): r0 + c ...
        "subc.u32 %1, %1, 0;\n\t"         // ... and r1 - c plus its carry
        "}"
        : "=r"(r0), "=r"(r1)
        : "r"(t0), "r"(t1), "r"(t2), "r"(t3));
    return ((u64)r1 << 32) | r0;
}

/// a·b in Montgomery form (the Montgomery product a·b·2^-64 mod p): four wide 32x32->64
/// products (`IMAD.WIDE`), their halves summed with add-with-carry chains on the integer ALU.
__device__ __forceinline__ u64 gl_mul(u64 a, u64 b) {
    const u32 a0 = (u32)a, a1 = (u32)(a >> 32);
    const u32 b0 = (u32)b, b1 = (u32)(b >> 32);
    u32 t0, t1, t2, t3;
    asm("{\n\t"
        ".reg .u32 h00, l01, h01, l10, h10, l11, h11;\n\t"
        ".reg .u64 p;\n\t"
        "mul.wide.u32 p, %4, %6;\n\t"
        "mov.b64 {%0, h00}, p;\n\t"
        "mul.wide.u32 p, %4, %7;\n\t"
        "mov.b64 {l01, h01}, p;\n\t"
        "mul.wide.u32 p, %5, %6;\n\t"
        "mov.b64 {l10, h10}, p;\n\t"
        "mul.wide.u32 p, %5, %7;\n\t"
        "mov.b64 {l11, h11}, p;\n\t"
        "add.cc.u32 %1, h00, l01;\n\t"
        "addc.cc.u32 %2, h01, l11;\n\t"
        "addc.u32 %3, h11, 0;\n\t"
        "add.cc.u32 %1, %1, l10;\n\t"
        "addc.cc.u32 %2, %2, h10;\n\t"
        "addc.u32 %3, %3, 0;\n\t"
        "}"
        : "=r"(t0), "=r"(t1), "=r"(t2), "=r"(t3)
        : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
    return gl_mont_reduce(t0, t1, t2, t3);
}

/// a·b in Montgomery form, the same word as `gl_mul`, its carries on the multiply pipe: the
/// products a0·b0 and a1·b1 are wide, and the cross products are added into them by
/// multiply-add carry chains (`mad.lo.cc`, `madc.hi.cc`), where `gl_mul` adds four halves with
/// the integer ALU. For kernels bound by the ALU rather than the multiply pipe (the NTTs).
__device__ __forceinline__ u64 gl_mul_fma(u64 a, u64 b) {
    const u32 a0 = (u32)a, a1 = (u32)(a >> 32);
    const u32 b0 = (u32)b, b1 = (u32)(b >> 32);
    u32 t0, t1, t2, t3;
    asm("{\n\t"
        ".reg .u32 h00, l11;\n\t"
        ".reg .u64 p;\n\t"
        "mul.wide.u32 p, %4, %6;\n\t"
        "mov.b64 {%0, h00}, p;\n\t"
        "mul.wide.u32 p, %5, %7;\n\t"
        "mov.b64 {l11, %3}, p;\n\t"
        "mad.lo.cc.u32 %1, %4, %7, h00;\n\t"
        "madc.hi.cc.u32 %2, %4, %7, l11;\n\t"
        "addc.u32 %3, %3, 0;\n\t"
        "mad.lo.cc.u32 %1, %5, %6, %1;\n\t"
        "madc.hi.cc.u32 %2, %5, %6, %2;\n\t"
        "addc.u32 %3, %3, 0;\n\t"
        "}"
        : "=r"(t0), "=r"(t1), "=r"(t2), "=r"(t3)
        : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
    return gl_mont_reduce(t0, t1, t2, t3);
}

/// a² in Montgomery form, most of its work on the multiply pipe: the cross product a0·a1 is
/// computed once, doubled by funnel shifts and folded into the a0² and a1² products with
/// multiply-add carry chains (ptxas adds moves and shifts on the same pipe).
__device__ __forceinline__ u64 gl_sqr(u64 a) {
    const u32 a0 = (u32)a, a1 = (u32)(a >> 32);
    u32 t0, t1, t2, t3;
    asm("{\n\t"
        ".reg .u32 m0, m1, d0, d1, d2;\n\t"
        "mul.lo.u32 m0, %4, %5;\n\t"
        "mul.hi.u32 m1, %4, %5;\n\t"
        "shl.b32 d0, m0, 1;\n\t"
        "shf.l.wrap.b32 d1, m0, m1, 1;\n\t"
        "shr.u32 d2, m1, 31;\n\t"
        "mul.lo.u32 %0, %4, %4;\n\t"
        "mad.hi.cc.u32 %1, %4, %4, d0;\n\t"
        "madc.lo.cc.u32 %2, %5, %5, d1;\n\t"
        "madc.hi.u32 %3, %5, %5, d2;\n\t"
        "}"
        : "=r"(t0), "=r"(t1), "=r"(t2), "=r"(t3)
        : "r"(a0), "r"(a1));
    return gl_mont_reduce(t0, t1, t2, t3);
}

/// a² in Montgomery form, most of its work on the integer ALU: three wide products, the doubled
/// cross term's low word added with a shift-and-add (`LEA`), its high words and the carry folded
/// into the a1² product as its addend (`IMAD.WIDE.X`). The same word as `gl_sqr`; the Rescue
/// squaring chains mix the two forms to keep both pipes busy.
__device__ __forceinline__ u64 gl_sqr_alu(u64 a) {
    const u32 a0 = (u32)a, a1 = (u32)(a >> 32);
    u32 t0, t1, t2, t3;
    asm("{\n\t"
        ".reg .u32 m0, m1, d0, d1, d2, s1;\n\t"
        ".reg .u64 p;\n\t"
        "mul.wide.u32 p, %4, %5;\n\t"
        "mov.b64 {m0, m1}, p;\n\t"
        "mul.wide.u32 p, %4, %4;\n\t"
        "mov.b64 {%0, s1}, p;\n\t"
        "shl.b32 d0, m0, 1;\n\t"
        "shf.l.wrap.b32 d1, m0, m1, 1;\n\t"
        "shr.u32 d2, m1, 31;\n\t"
        "add.cc.u32 %1, s1, d0;\n\t"
        "madc.lo.cc.u32 %2, %5, %5, d1;\n\t"
        "madc.hi.u32 %3, %5, %5, d2;\n\t"
        "}"
        : "=r"(t0), "=r"(t1), "=r"(t2), "=r"(t3)
        : "r"(a0), "r"(a1));
    return gl_mont_reduce(t0, t1, t2, t3);
}

/// Reduces hi·2^32 + lo, with lo and hi below 2^48, into a field element: the tail of a dot
/// product of field elements with small integer constants (the MDS layer), as miden-crypto's
/// `apply_mds` folds it. hi·2^32 + lo = k·2^64 + low, with low = lo + (hi mod 2^32)·2^32 mod 2^64
/// and k = (hi >> 32) + that sum's carry < 2^17; k·2^64 ≡ k·(2^32 - 1), a 64-bit product; the
/// sum low + k·(2^32 - 1) is folded once more on a carry (adding 2^32 - 1). Carry chains
/// instead of 64-bit compares and selects: 49 fewer instructions per RPO round and lane.
__device__ __forceinline__ u64 gl_reduce_small_dot(u64 lo, u64 hi) {
    u32 r0, r1;
    asm("{\n\t"
        ".reg .u32 low1, k, e0, e1, c;\n\t"
        ".reg .u64 ke;\n\t"
        "add.cc.u32 low1, %3, %4;\n\t"       // low = lo + (hi mod 2^32)·2^32, carry
        "addc.u32 k, %5, 0;\n\t"             // k = (hi >> 32) + carry
        "mul.wide.u32 ke, k, 0xFFFFFFFF;\n\t"
        "mov.b64 {e0, e1}, ke;\n\t"
        "add.cc.u32 %0, %2, e0;\n\t"         // low + k·(2^32 - 1), carry c
        "addc.cc.u32 %1, low1, e1;\n\t"
        "addc.u32 c, 0, 0;\n\t"
        "sub.u32 c, 0, c;\n\t"               // 2^32 - 1 on a carry, else 0
        "add.cc.u32 %0, %0, c;\n\t"
        "addc.u32 %1, %1, 0;\n\t"
        "}"
        : "=r"(r0), "=r"(r1)
        : "r"((u32)lo), "r"((u32)(lo >> 32)), "r"((u32)hi), "r"((u32)(hi >> 32)));
    return ((u64)r1 << 32) | r0;
}

// POWERS
// ================================================================================================

/// base^e, by squaring (`one` the Montgomery form of 1).
__device__ __forceinline__ u64 gl_pow(u64 base, u64 e, u64 one) {
    u64 r = one;
    while (e) {
        if (e & 1) r = gl_mul(r, base);
        base = gl_sqr(base);
        e >>= 1;
    }
    return r;
}
