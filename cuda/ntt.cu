// Batched NTTs and coefficient scaling for the LDE (needs field.cuh).
//
// Data is column-major: a batch of contiguous segments of 2^log_n elements each, one NTT per
// segment (a column, or one coset of a column's LDE). Transforms run in place:
// - DIF (Gentleman-Sande): natural order in, bit-reversed order out (interpolation, with inverse
//   twiddles; the 1/n factor is left to `scale_coefficients`);
// - DIT (Cooley-Tukey): bit-reversed order in, natural order out (evaluation on each coset).
// So neither direction needs a bit-reversal pass: `scale_coefficients` reads the bit-reversed
// coefficients and writes them scaled, either still bit-reversed for the coset DITs or in natural
// order for the host.

// FUSED RADIX-2 PASSES
// ================================================================================================

/// Largest tile a block transforms in shared memory (2^12 elements = 32 KiB).
#define NTT_TILE_LOG 12

/// Cooley-Tukey butterfly (DIT): (x, y) <- (x + y·w, x - y·w).
__device__ __forceinline__ void ntt_butterfly_dit(u64& x, u64& y, u64 w) {
    const u64 v = gl_mul(y, w);
    y = gl_sub(x, v);
    x = gl_add(x, v);
}

/// Gentleman-Sande butterfly (DIF): (x, y) <- (x + y, (x - y)·w).
__device__ __forceinline__ void ntt_butterfly_dif(u64& x, u64& y, u64 w) {
    const u64 sum = gl_add(x, y);
    y = gl_mul(gl_sub(x, y), w);
    x = sum;
}

/// Butterfly group `u` of a tile (see `ntt_pass`) for the stages of tile bits [t, t + span): its
/// first element's tile index `e` (the group's 2^span elements follow at steps of 2^(t + c_bits))
/// and that element's global index mod 2^(b0 + t), `j`, which picks the stage-t twiddle.
struct ButterflyGroup {
    u32 e;
    u32 j;
};

__device__ __forceinline__ ButterflyGroup butterfly_group(u32 u, u32 t, u32 span, u32 c_bits,
                                                          u32 b0, u32 low_base) {
    const u32 low = u & ((1u << c_bits) - 1);
    const u32 x = u >> c_bits;
    const u32 x_low = x & ((1u << t) - 1);
    ButterflyGroup group;
    group.e = ((((x >> t) << (t + span)) | x_low) << c_bits) | low;
    group.j = low_base + low + (x_low << b0);
    return group;
}

/// Runs the butterfly stages of bits [b0, b0 + t_bits) of every segment: stage `b` pairs
/// elements 2^b apart, with twiddle w^(j·2^(log_n-1-b)), j = index mod 2^b: entry 2^b + j of
/// the stage-by-stage table of the segment's root (inverse root for DIF; see
/// `host/twiddles.rs`), so a warp's twiddle reads are consecutive words.
///
/// A block loads a tile of 2^t_bits elements 2^b0 apart (the butterfly groups of these stages)
/// times 2^c_bits consecutive low indices (so global reads and writes are coalesced), runs all
/// t_bits stages in shared memory, two at a time, and writes the tile back. DIT runs the stages
/// upward, DIF downward; the host splits log_n into passes with t_bits + c_bits <= NTT_TILE_LOG.
extern "C" __global__ void __launch_bounds__(256) ntt_pass(u64* data, const u64* twiddles,
                                                           u32 log_n, u32 b0, u32 t_bits,
                                                           u32 c_bits, u32 dif) {
    __shared__ u64 tile[1 << NTT_TILE_LOG];
    const u32 tile_log = t_bits + c_bits;
    const u32 tiles_log = log_n - tile_log;  // tiles per segment, log2
    const u64 segment = blockIdx.x >> tiles_log;
    const u32 tile_id = blockIdx.x & ((1u << tiles_log) - 1);
    const u32 low_groups_log = b0 - c_bits;
    const u32 low_base = (tile_id & ((1u << low_groups_log) - 1)) << c_bits;
    const u32 high = tile_id >> low_groups_log;
    u64* base = data + (segment << log_n) + low_base + ((u64)high << (b0 + t_bits));
    const u32 size = 1u << tile_log;
    const u32 c_mask = (1u << c_bits) - 1;

    for (u32 e = threadIdx.x; e < size; e += blockDim.x) {
        tile[e] = base[((u64)(e >> c_bits) << b0) + (e & c_mask)];
    }
    __syncthreads();

    // stages two at a time where they can be: each thread takes the 4 elements that differ in
    // the two stages' bits through both stages in registers (half the shared-memory traffic and
    // barriers of one stage at a time); an odd last stage runs alone
    for (u32 step = 0; step < t_bits;) {
        if (step + 1 < t_bits) {
            const u32 t = dif ? t_bits - 2 - step : step;  // the lower of the two stages' bits
            for (u32 u = threadIdx.x; u < size / 4; u += blockDim.x) {
                const ButterflyGroup g = butterfly_group(u, t, 2, c_bits, b0, low_base);
                const u32 e00 = g.e;
                const u32 e01 = e00 | (1u << (t + c_bits));
                const u32 e10 = e00 | (2u << (t + c_bits));
                const u32 e11 = e01 | e10;
                const u32 j = g.j;
                const u64 w_low = twiddles[(1u << (b0 + t)) + j];
                const u64 w_high0 = twiddles[(2u << (b0 + t)) + j];
                const u64 w_high1 = twiddles[(2u << (b0 + t)) + j + (1u << (b0 + t))];
                u64 a = tile[e00], b = tile[e01], c = tile[e10], d = tile[e11];
                if (dif) {
                    ntt_butterfly_dif(a, c, w_high0);
                    ntt_butterfly_dif(b, d, w_high1);
                    ntt_butterfly_dif(a, b, w_low);
                    ntt_butterfly_dif(c, d, w_low);
                } else {
                    ntt_butterfly_dit(a, b, w_low);
                    ntt_butterfly_dit(c, d, w_low);
                    ntt_butterfly_dit(a, c, w_high0);
                    ntt_butterfly_dit(b, d, w_high1);
                }
                tile[e00] = a;
                tile[e01] = b;
                tile[e10] = c;
                tile[e11] = d;
            }
            step += 2;
        } else {
            const u32 t = dif ? t_bits - 1 - step : step;
            for (u32 u = threadIdx.x; u < size / 2; u += blockDim.x) {
                const ButterflyGroup g = butterfly_group(u, t, 1, c_bits, b0, low_base);
                const u32 e0 = g.e;
                const u32 e1 = e0 | (1u << (t + c_bits));
                const u32 j = g.j;
                const u64 w = twiddles[(1u << (b0 + t)) + j];
                u64 x = tile[e0], y = tile[e1];
                if (dif) {
                    ntt_butterfly_dif(x, y, w);
                } else {
                    ntt_butterfly_dit(x, y, w);
                }
                tile[e0] = x;
                tile[e1] = y;
            }
            step += 1;
        }
        __syncthreads();
    }

    for (u32 e = threadIdx.x; e < size; e += blockDim.x) {
        base[((u64)(e >> c_bits) << b0) + (e & c_mask)] = tile[e];
    }
}

// COEFFICIENT SCALING
// ================================================================================================

/// Reads bit-reversed (unnormalized) coefficients and writes them scaled by scale·g^r, where r is
/// the coefficient's index, for 2^log_slots slots per output column (the cosets of the LDE, or
/// one slot for the polynomials handed to the host).
///
/// Output element g = ((column << log_slots) + slot) << log_n | q. With `natural_out` the output
/// is in natural order (q = r, read from bit-reversed position p = rev(r)); otherwise it stays
/// bit-reversed (q = p) for the DIT that follows.
///
/// `col_src` holds, per output column: source column, offset within it, scale group; the source
/// index is column·src_len + p·src_stride + offset (a composition column is a strided slice of a
/// component's bit-reversed coefficients). `pow_tables` holds, per (group, slot), 2^s_bits
/// entries scale·g^i and 2^(log_n - s_bits) entries g^(i·2^s_bits), so scale·g^r is one product;
/// where the output stays bit-reversed the second part is stored at bit-reversed indices (see
/// `power_tables` in src/cuda/tables.rs), so that a warp reads consecutive entries of it.
extern "C" __global__ void scale_coefficients(u64* out, const u64* in, const u32* col_src,
                                              const u64* pow_tables, u32 log_n, u32 log_slots,
                                              u32 s_bits, u64 src_len, u32 src_stride,
                                              u32 natural_out, u64 total) {
    const u64 n_mask = (1ull << log_n) - 1;
    const u32 s_mask = (1u << s_bits) - 1;
    const u64 table_len = (1ull << s_bits) + (1ull << (log_n - s_bits));
    for (u64 g = blockIdx.x * (u64)blockDim.x + threadIdx.x; g < total;
         g += (u64)gridDim.x * blockDim.x) {
        const u32 q = (u32)(g & n_mask);
        const u64 column_slot = g >> log_n;
        const u32 slot = (u32)(column_slot & ((1u << log_slots) - 1));
        const u64 column = column_slot >> log_slots;
        const u32 rev = __brev(q) >> (32 - log_n);
        const u32 p = natural_out ? rev : q;
        const u32 r = natural_out ? q : rev;
        const u32* src = col_src + 3 * column;
        const u64 v = in[src[0] * src_len + (u64)p * src_stride + src[1]];
        const u64* table = pow_tables + ((((u64)src[2]) << log_slots) + slot) * table_len;
        // r >> s_bits = rev(q mod 2^(log_n - s_bits)) when r = rev(q)
        const u32 high = natural_out ? r >> s_bits : q & ((1u << (log_n - s_bits)) - 1);
        const u64 w = gl_mul(table[r & s_mask], table[(1ull << s_bits) + high]);
        out[g] = gl_canonical(gl_mul(v, w));
    }
}
