// The DEEP composition over resident polynomials: the out-of-domain evaluations of every
// column, and the linear combination S = Σ k_i·T_i (needs field.cuh and ext.cuh).
//
// S (poly_len elements of degree D, components interleaved) accumulates one segment's columns per
// launch, in column order, each term as winter_math computes it: k·c component by component
// (`mul_base`) for a base column, the extension product for a column of degree D. The columns
// are base columns of poly_len words, one after another; a column of degree D is D of them.

template <int D>
__device__ __forceinline__ void combine(u64* acc, const u64* polys, const u64* coeffs, u64 poly_len,
                                        u32 num_cols, u32 col_degree, u32 init) {
    const u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (j >= poly_len) return;
    u64 a[D];
#pragma unroll
    for (int d = 0; d < D; d++) a[d] = init ? 0 : acc[j * D + d];
    for (u32 i = 0; i < num_cols; i++) {
        const u64* k = coeffs + (u64)i * D;
        u64 t[D];
        if (col_degree == 1) {
            const u64 c = polys[(u64)i * poly_len + j];
#pragma unroll
            for (int d = 0; d < D; d++) t[d] = gl_mul(k[d], c);
        } else {
            u64 c[D];
#pragma unroll
            for (int d = 0; d < D; d++) c[d] = polys[((u64)i * D + d) * poly_len + j];
            ext_mul<D>(t, k, c);
        }
#pragma unroll
        for (int d = 0; d < D; d++) a[d] = gl_add(a[d], t[d]);
    }
#pragma unroll
    for (int d = 0; d < D; d++) acc[j * D + d] = a[d];
}

#define DEEP_COMBINE_KERNEL(NAME, D)                                                              \
    extern "C" __global__ void NAME(u64* acc, const u64* polys, const u64* coeffs, u64 poly_len,   \
                                    u32 num_cols, u32 col_degree, u32 init) {                     \
        combine<D>(acc, polys, coeffs, poly_len, num_cols, col_degree, init);                     \
    }

DEEP_COMBINE_KERNEL(deep_combine_base, 1)
DEEP_COMBINE_KERNEL(deep_combine_quadratic, 2)
DEEP_COMBINE_KERNEL(deep_combine_cubic, 3)

// OUT-OF-DOMAIN EVALUATION
// ================================================================================================

// Every column at two points x0, x1 (degree D), by Horner's rule over blocks of `block_len`
// coefficients: thread (column c, block b) computes Σ_{j<block_len} T_c[b·block_len + j]·x^j for
// both points, as winter_math's `polynom::eval` steps (acc·x + coefficient, a base coefficient
// lifted into the extension); the host joins the blocks. Output: for column c, block b, point p,
// D words at ((c·blocks + b)·2 + p)·D.

template <int D>
__device__ __forceinline__ void evaluate(u64* out, const u64* polys, const u64* points, u64 poly_len,
                                         u32 num_cols, u32 col_degree, u32 block_len) {
    const u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 blocks = poly_len / block_len;
    if (t >= (u64)num_cols * blocks) return;
    const u64 col = t / blocks, b = t - col * blocks;
    u64 x0[D], x1[D], a0[D], a1[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        x0[d] = points[d];
        x1[d] = points[D + d];
        a0[d] = 0;
        a1[d] = 0;
    }
    const u64* column = polys + col * col_degree * poly_len;
    for (u64 j = (b + 1) * block_len; j-- > b * block_len;) {
        u64 c[D];
#pragma unroll
        for (int d = 0; d < D; d++) c[d] = (col_degree == 1 && d > 0) ? 0 : column[d * poly_len + j];
        u64 t0[D], t1[D];
        ext_mul<D>(t0, a0, x0);
        ext_mul<D>(t1, a1, x1);
#pragma unroll
        for (int d = 0; d < D; d++) {
            a0[d] = gl_add(t0[d], c[d]);
            a1[d] = gl_add(t1[d], c[d]);
        }
    }
#pragma unroll
    for (int d = 0; d < D; d++) {
        out[(t * 2) * D + d] = a0[d];
        out[(t * 2 + 1) * D + d] = a1[d];
    }
}

#define DEEP_EVALUATE_KERNEL(NAME, D)                                                             \
    extern "C" __global__ void NAME(u64* out, const u64* polys, const u64* points, u64 poly_len,   \
                                    u32 num_cols, u32 col_degree, u32 block_len) {                \
        evaluate<D>(out, polys, points, poly_len, num_cols, col_degree, block_len);               \
    }

DEEP_EVALUATE_KERNEL(deep_evaluate_base, 1)
DEEP_EVALUATE_KERNEL(deep_evaluate_quadratic, 2)
DEEP_EVALUATE_KERNEL(deep_evaluate_cubic, 3)
