// The Poseidon2 permutation (miden-crypto `Poseidon2::apply_permutation`): the external linear
// layer, P2_EXTERNAL_HALF initial external rounds, P2_INTERNAL internal rounds, then
// P2_EXTERNAL_HALF terminal external rounds (needs field.cuh, rescue.cuh for the state width,
// `exp7` and `permute`).
//
// Nothing numeric is written here: the prelude (src/cuda/program.rs) defines the round counts
// and P2_ARK_EXT (initial then terminal rounds), P2_ARK_INT and P2_MAT_DIAG from miden-crypto,
// in Montgomery form. The 4 x 4 block of the external layer is miden-crypto's addition chain
// (`matmul_m4`).

#define HASH_POSEIDON2 2

/// The 4 x 4 block of the external layer on s[0..4] (miden-crypto `matmul_m4`, operation for
/// operation: the additions and doublings are winter_math's, whose results depend on the order).
__device__ __forceinline__ void p2_matmul_m4(u64* s) {
    const u64 t0 = gl_add(s[0], s[1]);
    const u64 t1 = gl_add(s[2], s[3]);
    const u64 t2 = gl_add(gl_double(s[1]), t1);
    const u64 t3 = gl_add(gl_double(s[3]), t0);
    const u64 t4 = gl_add(gl_mul_small(t1, 4), t3);
    const u64 t5 = gl_add(gl_mul_small(t0, 4), t2);
    s[0] = gl_add(t3, t5);
    s[1] = t5;
    s[2] = gl_add(t2, t4);
    s[3] = t4;
}

/// The external linear layer: the 4 x 4 block on each quarter, then each element plus the sum
/// of its column across the quarters (sums started from zero, as miden-crypto's).
__device__ __forceinline__ void p2_matmul_external(u64 s[STATE_WIDTH]) {
#pragma unroll
    for (int b = 0; b < STATE_WIDTH; b += 4) p2_matmul_m4(&s[b]);
#pragma unroll
    for (int l = 0; l < 4; l++) {
        const u64 sum = gl_add(gl_add(gl_add(0ull, s[l]), s[4 + l]), s[8 + l]);
#pragma unroll
        for (int b = 0; b < STATE_WIDTH; b += 4) s[b + l] = gl_add(s[b + l], sum);
    }
}

/// The internal linear layer: s[i] * P2_MAT_DIAG[i] + sum(s), the sum started from zero.
__device__ __forceinline__ void p2_matmul_internal(u64 s[STATE_WIDTH]) {
    u64 sum = 0ull;
#pragma unroll
    for (int i = 0; i < STATE_WIDTH; i++) sum = gl_add(sum, s[i]);
#pragma unroll
    for (int i = 0; i < STATE_WIDTH; i++) s[i] = gl_add(gl_mul(s[i], P2_MAT_DIAG[i]), sum);
}

/// External rounds [first, first + P2_EXTERNAL_HALF) of P2_ARK_EXT.
__device__ __forceinline__ void p2_external_rounds(u64 s[STATE_WIDTH], int first) {
#pragma unroll 1
    for (int r = first; r < first + P2_EXTERNAL_HALF; r++) {
#pragma unroll
        for (int i = 0; i < STATE_WIDTH; i++) s[i] = exp7(gl_add(s[i], P2_ARK_EXT[r * STATE_WIDTH + i]));
        p2_matmul_external(s);
    }
}

template <>
__device__ __forceinline__ void permute<HASH_POSEIDON2>(u64 s[STATE_WIDTH]) {
    p2_matmul_external(s);
    p2_external_rounds(s, 0);
#pragma unroll 1
    for (int r = 0; r < P2_INTERNAL; r++) {
        s[0] = exp7(gl_add(s[0], P2_ARK_INT[r]));
        p2_matmul_internal(s);
    }
    p2_external_rounds(s, P2_EXTERNAL_HALF);
}
