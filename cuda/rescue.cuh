// The Rescue permutations of miden-crypto: RPO (7 uniform rounds) and RPX (FB, E, FB, E, FB, E, M).
//
// Needs ext.cuh (the cubic extension of the RPX rounds) and the generated prelude
// (src/cuda/program.rs builds it from miden_crypto at start-up): RESCUE_MDS_ROW (the first row of
// the circulant MDS matrix as integers), __constant__ ARK1/ARK2 (7x12 round constants in
// Montgomery form) and SPONGE_LEN (Montgomery forms of 0..7, the capacity word of
// `hash_elements`).
//
// The state lives in 12 registers (static indices only: every loop over the state is unrolled).
// The MDS layer is linear with small integer entries, so it acts on Montgomery forms directly:
// each output is a dot product of 32-bit halves with small constants, reduced once. The round
// loop and the squaring chains of x^(1/7) are kept as loops so the permutation's code stays small
// enough for the instruction cache; each loop body still carries 12 independent chains.
//
// The S-boxes keep the integer pipes busy (the multiply pipe most, the ALU next), so the MDS dot
// products run on the FP64 pipe, which the permutation otherwise leaves idle: a 32-bit half w,
// zero-extended to 64 bits, is the subnormal double w·2^-1074, and every product and partial sum
// is an integer multiple of 2^-1074 below 2^41 of them, so the sums are exact in any order and
// their bits are the integer sums. The FP64 dot products lifted RPO and RPX leaf hashing, and
// reading the halves as subnormals (no bias to add and remove, and a zero high word that shuffles
// need not move) lifted them again.

#define STATE_WIDTH 12
#define NUM_ROUNDS 7

__device__ const u32 MDS_ROW[STATE_WIDTH] = RESCUE_MDS_ROW;

/// A 32-bit integer x as the subnormal double x·2^-1074 (the same 64 bits, zero-extended).
__device__ __forceinline__ double u32_to_f64(u32 x) {
    return __longlong_as_double((long long)x);
}

/// The integer k of a double k·2^-1074 with k < 2^52 (its bits).
__device__ __forceinline__ u64 f64_to_u64(double x) {
    return (u64)__double_as_longlong(x);
}

/// Output `i` of the MDS layer: sum_k MDS_ROW[k]·x[(i+k) mod 12] (the matrix is circulant,
/// checked where the prelude is generated), from the state's low and high 32-bit halves as
/// subnormal doubles (`u32_to_f64`). Each sum is below 12·2^32·2^5 < 2^41 units of 2^-1074, so
/// the FP64 products and sums are exact (subnormals are never flushed in double precision).
__device__ __forceinline__ u64 mds_row_dot(const double lo[STATE_WIDTH],
                                           const double hi[STATE_WIDTH], int i) {
    double acc_lo = 0.0, acc_hi = 0.0;
#pragma unroll
    for (int k = 0; k < STATE_WIDTH; k++) {
        acc_lo = fma(lo[(i + k) % STATE_WIDTH], (double)MDS_ROW[k], acc_lo);
        acc_hi = fma(hi[(i + k) % STATE_WIDTH], (double)MDS_ROW[k], acc_hi);
    }
    return gl_reduce_small_dot(f64_to_u64(acc_lo), f64_to_u64(acc_hi));
}

// LINEAR LAYER
// ================================================================================================

__device__ __forceinline__ void apply_mds(u64 s[STATE_WIDTH]) {
    double lo[STATE_WIDTH], hi[STATE_WIDTH];
#pragma unroll
    for (int j = 0; j < STATE_WIDTH; j++) {
        lo[j] = u32_to_f64((u32)s[j]);
        hi[j] = u32_to_f64((u32)(s[j] >> 32));
    }
#pragma unroll
    for (int i = 0; i < STATE_WIDTH; i++) s[i] = mds_row_dot(lo, hi, i);
}

/// s[i] += ark[i] for the N elements a thread holds (the whole state, or a lane's share).
template <int N = STATE_WIDTH>
__device__ __forceinline__ void add_constants(u64 s[N], const u64* ark) {
#pragma unroll
    for (int i = 0; i < N; i++) s[i] = gl_add(s[i], ark[i]);
}

// S-BOXES
// ================================================================================================

__device__ __forceinline__ u64 exp7(u64 x) {
    const u64 x2 = gl_sqr(x);
    const u64 x4 = gl_sqr(x2);
    return gl_mul(gl_mul(x2, x), x4);
}

template <int N = STATE_WIDTH>
__device__ __forceinline__ void apply_sbox(u64 s[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) s[i] = exp7(s[i]);
}

/// Squares every element `count` times: a loop (the bodies are the hot part of the permutation)
/// unrolled `UNROLL` times. Two elements of three square with `gl_sqr` (mostly multiply pipe), the
/// third with `gl_sqr_alu` (mostly integer ALU), so the two pipes share the work. RPO and RPX
/// leaf hashing measured fastest with this split: the shares reversed, or either form alone, were
/// slower.
template <int N, int UNROLL>
__device__ __forceinline__ void square_n(u64 x[N], int count) {
#pragma unroll UNROLL
    for (int k = 0; k < count; k++) {
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = i % 3 != 2 ? gl_sqr(x[i]) : gl_sqr_alu(x[i]);
    }
}

/// x^10540996611094048183 = x^(1/7), with miden-crypto's addition chain (72 multiplications), so
/// with its very words: RPX's inverse S-box. Its squaring loops are not unrolled (RPX's kernels
/// lose with any unrolling).
template <int N = STATE_WIDTH>
__device__ __forceinline__ void apply_inv_sbox(u64 s[N]) {
    u64 t2[N], t3[N], acc[N], keep[N];
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u64 t1 = gl_sqr(s[i]);  // x^10
        t2[i] = gl_sqr(t1);           // x^100
        s[i] = gl_mul(gl_mul(t1, t2[i]), s[i]);  // the tail factor x^111, computed early
        acc[i] = t2[i];
    }
    square_n<N, 1>(acc, 3);  // t3 = t2^(2^3) * t2
#pragma unroll
    for (int i = 0; i < N; i++) {
        t3[i] = gl_mul(acc[i], t2[i]);
        acc[i] = t3[i];
    }
    square_n<N, 1>(acc, 6);  // t4 = t3^(2^6) * t3
#pragma unroll
    for (int i = 0; i < N; i++) {
        acc[i] = gl_mul(acc[i], t3[i]);
        keep[i] = acc[i];
    }
    square_n<N, 1>(acc, 12);  // t5 = t4^(2^12) * t4
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = gl_mul(acc[i], keep[i]);
    square_n<N, 1>(acc, 6);  // t6 = t5^(2^6) * t3
#pragma unroll
    for (int i = 0; i < N; i++) {
        acc[i] = gl_mul(acc[i], t3[i]);
        keep[i] = acc[i];
    }
    square_n<N, 1>(acc, 31);  // t7 = t6^(2^31) * t6
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u64 t7 = gl_mul(acc[i], keep[i]);
        const u64 a = gl_sqr(gl_sqr(gl_mul(gl_sqr(t7), keep[i])));
        s[i] = gl_mul(a, s[i]);
    }
}

/// x^(1/7) for RPO, in 71 multiplications, 62 of them squarings: one squaring fewer than
/// `apply_inv_sbox`. The element is the same but its word may not be (a non-canonical word now
/// and then), which RPO's later operations (multiplications, the MDS layer, additions of
/// canonical constants) and its canonical digests never see; RPX's extension S-box adds such
/// words, so RPX keeps miden-crypto's chain. In octal the exponent is 1111111111 0 66666666667,
/// that is R10·(2^36 + 48) + 7 with R10 = (8^10 - 1)/7: z = x^R10 is built from x^9 = x^7·x^2
/// (x^7, the tail factor, on the way with two squarings), and x^(1/7) = (z^(2^32)·z^3)^16 · x^7.
/// The squaring loops are unrolled `UNROLL` times, the last (4 squarings) fully.
template <int N = STATE_WIDTH, int UNROLL = 1>
__device__ __forceinline__ void apply_inv_sbox_rpo(u64 s[N]) {
    u64 r2[N], acc[N], keep[N];
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u64 x2 = gl_sqr(s[i]);
        const u64 x7 = gl_mul(gl_sqr(gl_mul(x2, s[i])), s[i]);  // (x^3)^2 · x
        r2[i] = gl_mul(x7, x2);                                 // x^R2 = x^9
        s[i] = x7;
        acc[i] = r2[i];
    }
    square_n<N, UNROLL>(acc, 6);  // x^R4 = (x^R2)^(2^6) · x^R2
#pragma unroll
    for (int i = 0; i < N; i++) {
        acc[i] = gl_mul(acc[i], r2[i]);
        keep[i] = acc[i];
    }
    square_n<N, UNROLL>(acc, 12);  // x^R8 = (x^R4)^(2^12) · x^R4
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = gl_mul(acc[i], keep[i]);
    square_n<N, UNROLL>(acc, 6);  // z = x^R10 = (x^R8)^(2^6) · x^R2
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u64 z = gl_mul(acc[i], r2[i]);
        acc[i] = gl_sqr(z);
        keep[i] = gl_mul(acc[i], z);  // z^3
    }
    square_n<N, UNROLL>(acc, 31);  // z^(2^32)
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = gl_mul(acc[i], keep[i]);
    square_n<N, 4>(acc, 4);  // (z^(2^32 + 3))^16
#pragma unroll
    for (int i = 0; i < N; i++) s[i] = gl_mul(acc[i], s[i]);
}

/// x^7 in the cubic extension of one triple.
__device__ __forceinline__ void ext_sbox(u64 s[3]) {
    const u64 x[3] = {s[0], s[1], s[2]};
    u64 x2[3], x3[3], x4[3];
    ext3_sqr(x2, x);
    ext3_sqr(x4, x2);
    ext3_mul(x3, x2, x);
    ext3_mul(s, x3, x4);
}

/// x^7 in the cubic extension, for each of the 4 triples of the state.
__device__ __forceinline__ void apply_ext_sbox(u64 s[STATE_WIDTH]) {
#pragma unroll
    for (int e = 0; e < 4; e++) ext_sbox(&s[3 * e]);
}

// PERMUTATIONS
// ================================================================================================

#define HASH_RPO 0
#define HASH_RPX 1

/// One full Rescue round (RPO's round; RPX's FB round).
template <int HASH>
__device__ __forceinline__ void rescue_round(u64 s[STATE_WIDTH], int r) {
    apply_mds(s);
    add_constants(s, &ARK1[r * STATE_WIDTH]);
    apply_sbox(s);
    apply_mds(s);
    add_constants(s, &ARK2[r * STATE_WIDTH]);
    if (HASH == HASH_RPO) {
        apply_inv_sbox_rpo(s);
    } else {
        apply_inv_sbox(s);
    }
}

template <int HASH>
__device__ __forceinline__ void permute(u64 s[STATE_WIDTH]);

template <>
__device__ __forceinline__ void permute<HASH_RPO>(u64 s[STATE_WIDTH]) {
#pragma unroll 1
    for (int r = 0; r < NUM_ROUNDS; r++) rescue_round<HASH_RPO>(s, r);
}

template <>
__device__ __forceinline__ void permute<HASH_RPX>(u64 s[STATE_WIDTH]) {
#pragma unroll 1
    for (int r = 0; r < NUM_ROUNDS - 1; r += 2) {
        rescue_round<HASH_RPX>(s, r);                  // FB(r)
        add_constants(s, &ARK1[(r + 1) * STATE_WIDTH]);  // E(r + 1)
        apply_ext_sbox(s);
    }
    apply_mds(s);  // M(6)
    add_constants(s, &ARK1[(NUM_ROUNDS - 1) * STATE_WIDTH]);
}

// PERMUTATIONS ON A QUAD OF LANES
// ================================================================================================
//
// The same permutations with the state spread over RESCUE_LANES = 4 consecutive lanes of a warp
// (a quad): lane q holds elements 3q, 3q+1, 3q+2, so RPX's extension S-box is one triple per
// lane. The S-boxes, the bulk of the work, run on 3 elements per thread instead of 12: a quarter
// of the registers, so four times the resident warps hide the latency of the multiplication
// chains. The MDS layer gathers the other lanes' elements (as doubles) with shuffles; since the
// matrix is circulant, lane q reads them rotated by 3q and every product has a constant
// coefficient. Each lane applies exactly the operations the one-thread permutation applies to its
// elements, so the words are the same. RPO's squaring loops are unrolled three times, which
// measured at least as fast as twice for its leaves and faster for its tree; four times was
// slower, and RPX's loops lose with any unrolling.

static_assert(4 * 3 == STATE_WIDTH, "a quad holds the 12-element state in triples");

/// The MDS layer on a quad: out[3q+e] = sum_k MDS_ROW[k]·x[(3q+e+k) mod 12], where
/// y[3m+f] = x[(3q+3m+f) mod 12] is element f of lane (q+m) mod 4. The halves travel as doubles.
__device__ __forceinline__ void apply_mds_quad(u64 s[3], u32 q, unsigned mask) {
    double lo[STATE_WIDTH], hi[STATE_WIDTH];
#pragma unroll
    for (int f = 0; f < 3; f++) {
        lo[f] = u32_to_f64((u32)s[f]);
        hi[f] = u32_to_f64((u32)(s[f] >> 32));
    }
#pragma unroll
    for (int m = 1; m < 4; m++) {
#pragma unroll
        for (int f = 0; f < 3; f++) {
            lo[3 * m + f] = __shfl_sync(mask, lo[f], (q + m) & 3, 4);
            hi[3 * m + f] = __shfl_sync(mask, hi[f], (q + m) & 3, 4);
        }
    }
#pragma unroll
    for (int e = 0; e < 3; e++) s[e] = mds_row_dot(lo, hi, e);
}

/// A full round on a quad up to its inverse S-box: the two MDS layers, the constants and the
/// forward S-box.
__device__ __forceinline__ void rescue_round_quad_linear(u64 s[3], int r, u32 q, unsigned mask) {
    apply_mds_quad(s, q, mask);
    add_constants<3>(s, &ARK1[r * STATE_WIDTH + 3 * q]);
    apply_sbox<3>(s);
    apply_mds_quad(s, q, mask);
    add_constants<3>(s, &ARK2[r * STATE_WIDTH + 3 * q]);
}

/// A full round on a quad (RPX's FB round; its squaring loops are not unrolled).
__device__ __forceinline__ void rescue_round_quad(u64 s[3], int r, u32 q, unsigned mask) {
    rescue_round_quad_linear(s, r, q, mask);
    apply_inv_sbox<3>(s);
}

/// Digest element q (state element 4 + q) for lane q of the quad: lane 1 holds elements 3..5,
/// lane 2 holds 6..8, so lanes 0 and 3 take their neighbours' middle elements (4 and 7).
__device__ __forceinline__ u64 digest_element_quad(const u64 s[3], u32 q, unsigned mask) {
    const u64 middle = __shfl_sync(mask, s[1], q == 0 ? 1 : 2, 4);
    return q == 1 ? s[2] : q == 2 ? s[0] : middle;
}

/// The permutation on a quad: lane q (of the quad's lanes in `mask`) holds elements 3q..3q+2.
/// With `digest_only` (the same for the whole warp), only the digest is kept: on return s[0] of
/// lane q holds digest element q and the rest of the state is undefined. RPO then runs its last
/// inverse S-box, which acts element by element, on the four digest elements alone, one per lane
/// instead of three: two thirds of one of its seven inverse S-boxes are saved, a tenth of a
/// Merkle node's work, which makes the RPO tree correspondingly faster.
template <int HASH>
__device__ __forceinline__ void permute_quad(u64 s[3], u32 q, unsigned mask, bool digest_only);

template <>
__device__ __forceinline__ void permute_quad<HASH_RPO>(u64 s[3], u32 q, unsigned mask,
                                                       bool digest_only) {
#pragma unroll 1
    for (int r = 0; r < NUM_ROUNDS; r++) {
        rescue_round_quad_linear(s, r, q, mask);
        if (digest_only && r == NUM_ROUNDS - 1) {
            s[0] = digest_element_quad(s, q, mask);
            apply_inv_sbox_rpo<1, 3>(s);
        } else {
            apply_inv_sbox_rpo<3, 3>(s);
        }
    }
}

template <>
__device__ __forceinline__ void permute_quad<HASH_RPX>(u64 s[3], u32 q, unsigned mask,
                                                       bool digest_only) {
#pragma unroll 1
    for (int r = 0; r < NUM_ROUNDS - 1; r += 2) {
        rescue_round_quad(s, r, q, mask);                             // FB(r)
        add_constants<3>(s, &ARK1[(r + 1) * STATE_WIDTH + 3 * q]);  // E(r + 1)
        ext_sbox(s);
    }
    apply_mds_quad(s, q, mask);  // M(6)
    add_constants<3>(s, &ARK1[(NUM_ROUNDS - 1) * STATE_WIDTH + 3 * q]);
    if (digest_only) s[0] = digest_element_quad(s, q, mask);
}
