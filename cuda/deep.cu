// The DEEP composition's linear combination S = Σ k_i·T_i over resident polynomials (needs
// field.cuh and ext.cuh).
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
