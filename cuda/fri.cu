// The FRI commit phase: the DEEP polynomial's evaluation over the LDE domain and the folding of
// layers (needs field.cuh and ext.cuh; the layer leaves and trees use hash.cu's kernels).
//
// Elements of a degree-D extension (D = 1, 2, 3) are D base elements. A layer of R rows and F
// slots per row (F = folding factor) is stored column-major: component d of slot j of row i is
// at (j·D + d)·R + i, so hash_rows reads row i as F·D columns with stride R, in the order
// Winterfell hashes it.

// FIRST LAYER
// ================================================================================================

/// Spreads D component columns of `poly_len` coefficients (already scaled by offset^k) into D
/// zero-padded columns of 2^log_domain in bit-reversed order, ready for the DIT NTT.
extern "C" __global__ void fri_spread(u64* out, const u64* coeffs, u64 poly_len, u32 log_domain,
                                      u64 total) {
    const u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (t >= total) return;
    const u64 domain = 1ull << log_domain;
    const u64 d = t >> log_domain;
    const u64 k = __brevll(t & (domain - 1)) >> (64 - log_domain);
    out[t] = k < poly_len ? coeffs[d * poly_len + k] : 0;
}

/// Rearranges D natural-order component columns of 2^log_domain evaluations into the first
/// layer's column-major slots (see the top of this file) for `rows` rows.
extern "C" __global__ void fri_to_slots(u64* out, const u64* in, u32 log_domain, u64 rows, u32 D,
                                        u64 total) {
    const u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (t >= total) return;
    const u64 d = t >> log_domain;
    const u64 k = t & ((1ull << log_domain) - 1);
    const u64 j = k / rows;
    const u64 i = k - j * rows;
    out[(j * D + d) * rows + i] = gl_canonical(in[t]);
}

// FOLDING
// ================================================================================================

/// Folds row i of a layer into one element, as winter-fri's `apply_drp`: with x_i = offset·g^i
/// (g of order rows·F) and the row's values v_j = P(x_i·ω^j), the result is
/// (1/F)·Σ_k c_k·(alpha/x_i)^k where c_k = Σ_j v_j·ω^-jk.
///
/// `consts` holds: alpha (D words), offset^-1, g^-1, 1/F, one, then ω^-m for m < F. The result
/// is written into the next layer's slots for `next_rows` rows, or in natural order with
/// components interleaved when `next_rows` is 0 (the remainder).
template <int D>
__device__ __forceinline__ void fold_row(u64* out, const u64* in, u64 rows, u32 folding,
                                         const u64* consts, u64 next_rows) {
    const u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const u64* alpha = consts;
    const u64 offset_inv = consts[D], g_inv = consts[D + 1], f_inv = consts[D + 2];
    const u64 one = consts[D + 3];
    const u64* omega_inv = consts + D + 4;

    u64 v[16][D];
    for (u32 j = 0; j < folding; j++) {
#pragma unroll
        for (int d = 0; d < D; d++) v[j][d] = in[(j * D + d) * rows + i];
    }

    u64 beta[D];
    const u64 x_inv = gl_mul(offset_inv, gl_pow(g_inv, i, one));
#pragma unroll
    for (int d = 0; d < D; d++) beta[d] = gl_mul(alpha[d], x_inv);

    // Horner over k = F-1 … 0 of c_k·beta^k
    u64 acc[D];
#pragma unroll
    for (int d = 0; d < D; d++) acc[d] = 0;
    for (int k = (int)folding - 1; k >= 0; k--) {
        u64 c[D];
#pragma unroll
        for (int d = 0; d < D; d++) c[d] = 0;
        for (u32 j = 0; j < folding; j++) {
            const u64 w = omega_inv[(j * (u32)k) & (folding - 1)];
#pragma unroll
            for (int d = 0; d < D; d++) c[d] = gl_add(c[d], gl_mul(v[j][d], w));
        }
        u64 t[D];
        ext_mul<D>(t, acc, beta);
#pragma unroll
        for (int d = 0; d < D; d++) acc[d] = gl_add(t[d], c[d]);
    }

#pragma unroll
    for (int d = 0; d < D; d++) {
        const u64 value = gl_canonical(gl_mul(acc[d], f_inv));
        if (next_rows == 0) {
            out[i * D + d] = value;
        } else {
            const u64 j = i / next_rows;
            out[(j * D + d) * next_rows + (i - j * next_rows)] = value;
        }
    }
}

#define FRI_FOLD_KERNEL(NAME, D)                                                                  \
    extern "C" __global__ void NAME(u64* out, const u64* in, u64 rows, u32 folding,               \
                                    const u64* consts, u64 next_rows) {                           \
        fold_row<D>(out, in, rows, folding, consts, next_rows);                                   \
    }

FRI_FOLD_KERNEL(fri_fold_base, 1)
FRI_FOLD_KERNEL(fri_fold_quadratic, 2)
FRI_FOLD_KERNEL(fri_fold_cubic, 3)

// QUERIES
// ================================================================================================

/// out[t] = src[indices[t]] for t < count: the words of queried rows and their Merkle paths.
extern "C" __global__ void gather_words(u64* out, const u64* src, const u64* indices, u64 count) {
    const u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (t < count) out[t] = src[indices[t]];
}
