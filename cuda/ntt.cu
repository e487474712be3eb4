// Batched NTTs, coefficient scaling and the coset evaluation of the LDE (needs field.cuh).
//
// Data is column-major: a batch of contiguous segments of 2^log_n elements each, one NTT per
// segment (a column, or one coset of a column's LDE). Transforms run in place:
// - DIF (Gentleman-Sande): natural order in, bit-reversed order out (interpolation, with inverse
//   twiddles; the 1/n factor is left to the scaling that follows);
// - DIT (Cooley-Tukey): bit-reversed order in, natural order out (evaluation on each coset).
// So neither direction needs a bit-reversal pass: `scale_coefficients` reads the bit-reversed
// coefficients and writes them scaled in natural order for the host, and `coset_ntt_first_pass`
// reads them, scales them by the powers of a coset's base as it loads them, and runs the first
// DIT pass over them; `ntt_pass` runs the others.

// FUSED RADIX-2 PASSES
// ================================================================================================

/// Largest tile a block transforms in shared memory (2^12 elements = 32 KiB).
#define NTT_TILE_LOG 12

// The butterflies multiply with `gl_mul_fma`, which moves the product's carries from the integer
// ALU, which bounds these passes, to the multiply pipe: both the coset LDE and the interpolation
// ran faster for it.

/// Cooley-Tukey butterfly (DIT): (x, y) <- (x + y·w, x - y·w).
__device__ __forceinline__ void ntt_butterfly_dit(u64& x, u64& y, u64 w) {
    const u64 v = gl_mul_fma(y, w);
    y = gl_sub(x, v);
    x = gl_add(x, v);
}

/// Gentleman-Sande butterfly (DIF): (x, y) <- (x + y, (x - y)·w).
__device__ __forceinline__ void ntt_butterfly_dif(u64& x, u64& y, u64 w) {
    const u64 sum = gl_add(x, y);
    y = gl_mul_fma(gl_sub(x, y), w);
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

/// Runs the butterfly stages of bits [b0, b0 + t_bits) of one tile in shared memory (see
/// `ntt_pass`), two at a time where they can be: each thread takes the 4 elements that differ in
/// the two stages' bits through both stages in registers (half the shared-memory traffic and
/// barriers of one stage at a time); an odd last stage runs alone. Starts and ends with a
/// barrier, so the tile may be written before and read after.
__device__ __forceinline__ void ntt_tile_stages(u64* tile, const u64* twiddles, u32 b0,
                                                u32 t_bits, u32 c_bits, u32 low_base, u32 dif) {
    const u32 size = 1u << (t_bits + c_bits);
    __syncthreads();
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
}

/// Runs the butterfly stages of bits [b0, b0 + t_bits) of every segment: stage `b` pairs
/// elements 2^b apart, with twiddle w^(j·2^(log_n-1-b)), j = index mod 2^b: entry 2^b + j of
/// the stage-by-stage table of the segment's root (inverse root for DIF; see
/// `host/twiddles.rs`), so a warp's twiddle reads are consecutive words.
///
/// A block loads a tile of 2^t_bits elements 2^b0 apart (the butterfly groups of these stages)
/// times 2^c_bits consecutive low indices (so global reads and writes are coalesced), runs all
/// t_bits stages in shared memory and writes the tile back. DIT runs the stages upward, DIF
/// downward; the host splits log_n into passes with t_bits + c_bits <= NTT_TILE_LOG.
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
    ntt_tile_stages(tile, twiddles, b0, t_bits, c_bits, low_base, dif);
    for (u32 e = threadIdx.x; e < size; e += blockDim.x) {
        base[((u64)(e >> c_bits) << b0) + (e & c_mask)] = tile[e];
    }
}

// COEFFICIENT SCALING
// ================================================================================================
//
// Output column c reads its coefficients from source column col_src[3c], from offset
// col_src[3c + 1] on at steps of src_stride (a composition column is a strided slice of a
// component's bit-reversed coefficients), and scales them by the powers of its scale group
// col_src[3c + 2]. `pow_tables` holds, per (group, slot), 2^s_bits entries scale·g^i and
// 2^(log_n - s_bits) entries g^(i·2^s_bits), so scale·g^r is one product of a low and a high
// entry (see `power_tables` in src/cuda/tables.rs).

/// Where one output column (in one slot) reads its coefficients and powers.
struct ColumnSource {
    const u64* coefficients;  // bit-reversed position p is coefficients[p·stride]
    u32 stride;
    const u64* powers;  // the (group, slot) power table
};

__device__ __forceinline__ ColumnSource column_source(const u64* in, const u32* col_src,
                                                      const u64* pow_tables, u64 column,
                                                      u32 slot, u32 log_slots, u32 log_n,
                                                      u32 s_bits, u64 src_len, u32 src_stride) {
    const u32* src = col_src + 3 * column;
    const u64 table_len = (1ull << s_bits) + (1ull << (log_n - s_bits));
    ColumnSource source;
    source.coefficients = in + src[0] * src_len + src[1];
    source.stride = src_stride;
    source.powers = pow_tables + ((((u64)src[2]) << log_slots) + slot) * table_len;
    return source;
}

/// The coefficient at bit-reversed position p times the powers' low entry `low` and high entry
/// `high`, canonical.
__device__ __forceinline__ u64 scaled_coefficient(const ColumnSource& source, u32 p, u32 low,
                                                  u32 high, u32 s_bits) {
    const u64 w = gl_mul_fma(source.powers[low], source.powers[(1u << s_bits) + high]);
    return gl_canonical(gl_mul_fma(source.coefficients[(u64)p * source.stride], w));
}

/// Writes the polynomials handed to the host: output element column·2^log_n + r (natural order)
/// is the coefficient at bit-reversed position rev(r) times scale·g^r (the power tables in
/// natural order, one slot).
extern "C" __global__ void scale_coefficients(u64* out, const u64* in, const u32* col_src,
                                              const u64* pow_tables, u32 log_n, u32 s_bits,
                                              u64 src_len, u32 src_stride, u64 total) {
    const u64 n_mask = (1ull << log_n) - 1;
    const u32 s_mask = (1u << s_bits) - 1;
    for (u64 g = blockIdx.x * (u64)blockDim.x + threadIdx.x; g < total;
         g += (u64)gridDim.x * blockDim.x) {
        const u32 r = (u32)(g & n_mask);
        const ColumnSource source =
            column_source(in, col_src, pow_tables, g >> log_n, 0, 0, log_n, s_bits, src_len,
                          src_stride);
        const u32 p = __brev(r) >> (32 - log_n);
        out[g] = scaled_coefficient(source, p, r & s_mask, r >> s_bits, s_bits);
    }
}

// COSET EVALUATION
// ================================================================================================

/// The first DIT pass of the coset LDE, with the coefficient scaling in its loads: segment
/// (column, slot) of `out` is output column `column` over the coset of the slot's base g, and
/// its position q starts as the coefficient at bit-reversed position q (as the interpolation left
/// it) times scale·g^r, r = rev(q). Then the stages of bits [0, t_bits) run as `ntt_pass` runs
/// them (b0 = 0, c_bits = 0: tiles of 2^t_bits consecutive positions). The high part of the power
/// tables is stored at bit-reversed indices here: r >> s_bits = rev(q mod 2^(log_n - s_bits)), so
/// a warp reads consecutive entries.
extern "C" __global__ void __launch_bounds__(256)
    coset_ntt_first_pass(u64* out, const u64* in, const u32* col_src, const u64* pow_tables,
                         const u64* twiddles, u32 log_n, u32 t_bits, u32 log_slots, u32 s_bits,
                         u64 src_len, u32 src_stride) {
    __shared__ u64 tile[1 << NTT_TILE_LOG];
    const u32 tiles_log = log_n - t_bits;  // tiles per segment, log2
    const u64 segment = blockIdx.x >> tiles_log;
    const u32 first = (blockIdx.x & ((1u << tiles_log) - 1)) << t_bits;
    const ColumnSource source =
        column_source(in, col_src, pow_tables, segment >> log_slots,
                      (u32)segment & ((1u << log_slots) - 1), log_slots, log_n, s_bits, src_len,
                      src_stride);
    const u32 size = 1u << t_bits;
    const u32 s_mask = (1u << s_bits) - 1;
    const u32 high_mask = (1u << (log_n - s_bits)) - 1;

    for (u32 e = threadIdx.x; e < size; e += blockDim.x) {
        const u32 q = first + e;
        const u32 r = __brev(q) >> (32 - log_n);
        tile[e] = scaled_coefficient(source, q, r & s_mask, q & high_mask, s_bits);
    }
    ntt_tile_stages(tile, twiddles, 0, t_bits, 0, 0, 0);
    u64* base = out + (segment << log_n) + first;
    for (u32 e = threadIdx.x; e < size; e += blockDim.x) base[e] = tile[e];
}

// ROWS ACROSS GPUS
// ================================================================================================

// Copies `rows` rows of `width` words: row r from src + r * src_pitch to dst + r * dst_pitch.
// `src` may lie on a peer GPU whose memory this one reads directly (NVLink or PCIe peer access):
// one launch moves what would be a copy per row.
extern "C" __global__ void copy_rows(u64* dst, const u64* src, u64 dst_pitch, u64 src_pitch,
                                     u64 width, u64 rows) {
    const u64 total = width * rows;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < total; i += stride) {
        const u64 r = i / width;
        const u64 c = i - r * width;
        dst[r * dst_pitch + c] = src[r * src_pitch + c];
    }
}
