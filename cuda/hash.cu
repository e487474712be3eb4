// Row hashing into Merkle leaves, and Merkle tree levels (needs field.cuh, rescue.cuh,
// poseidon2.cuh, blake3.cuh).

// ROW HASHING
// ================================================================================================

/// Where row `item` of a row-hashing launch (item = kk·t_count + tt) is read and written: its
/// absolute row, its first source element and its row-major output (null without `rows_out`).
struct RowSlot {
    u64 row;
    const u64* in;
    u64* out;
};

__device__ __forceinline__ RowSlot row_slot(u64 item, const u64* src, u64 k_stride, u64 t_stride,
                                            u32 log_blowup, u32 k0, u32 log_cosets, u64 t0,
                                            u64 t_count, u64* rows_out, u64 t_base,
                                            u32 row_width) {
    const u64 kk = item / t_count;
    const u64 tt = item - kk * t_count;
    RowSlot slot;
    slot.row = ((t0 + tt) << log_blowup) + k0 + kk;
    slot.in = src + kk * k_stride + tt * t_stride;
    slot.out =
        rows_out ? rows_out + (((t0 + tt - t_base) << log_cosets) + kk) * row_width : nullptr;
    return slot;
}

/// Hashes rows as Winterfell's `commit_to_rows` does, one thread per row.
///
/// Rows are addressed as (k, t) with k = k0 + kk (kk < 2^log_cosets, the cosets at hand) and
/// t = t0 + tt: thread id = kk·t_count + tt, row = t·2^log_blowup + k, and element c of the row
/// is src[kk·k_stride + tt·t_stride + c·c_stride] (`src` points at the chunk). For the device LDE
/// (column major, each column stored coset by coset) consecutive threads read consecutive
/// addresses; for rows uploaded from the host (row-major) log_blowup = log_cosets = 0 and
/// t_stride = row width.
///
/// `part` = 0 hashes the whole row with `hash_elements`; otherwise the row is hashed in chunks of
/// `part` elements and the leaf is `hash_elements` of the concatenated chunk digests. Two sponges
/// share one permutation call site (the chunk sponge and, for partitions, the digest sponge `o`)
/// so the permutation is inlined once.
///
/// With `rows_out` set, the row is also written there row-major (`row_width` elements, canonical,
/// zero padding) at ((t - t_base)·2^log_cosets + kk): with every coset at hand that is row -
/// t_base·2^log_blowup, the layout the host receives, so the LDE never takes a separate
/// transpose pass. Leaves are written at their absolute row.
template <int HASH, bool PARTITIONED>
__device__ __forceinline__ void hash_rows_impl(const u64* src, u64 k_stride, u64 t_stride,
                                               u64 c_stride, u32 num_cols, u32 part,
                                               u32 log_blowup, u32 k0, u32 log_cosets, u64 t0,
                                               u64 t_count, u64* leaves, u64* rows_out,
                                               u64 t_base, u32 row_width) {
    const u64 id = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (id >= (t_count << log_cosets)) return;
    const RowSlot slot = row_slot(id, src, k_stride, t_stride, log_blowup, k0, log_cosets, t0,
                                  t_count, rows_out, t_base, row_width);
    const u64 row = slot.row;
    const u64* in = slot.in;
    u64* out = slot.out;

    u64 s[STATE_WIDTH];
    u64 o[STATE_WIDTH];
    u32 chunk_start = 0;
    u32 chunk_len = PARTITIONED ? min(part, num_cols) : num_cols;
    u32 pos = 0;
    bool second_digest = false;  // o's rate holds one digest
    bool outer_step = false;     // the next permutation is the digest sponge's
#pragma unroll
    for (int i = 0; i < STATE_WIDTH; i++) {
        s[i] = 0;
        o[i] = 0;
    }
    s[0] = SPONGE_LEN[chunk_len % 8];
    if (PARTITIONED) o[0] = SPONGE_LEN[(4 * ((num_cols + part - 1) / part)) % 8];

    while (true) {
        if (PARTITIONED && outer_step) {
#pragma unroll
            for (int i = 0; i < STATE_WIDTH; i++) s[i] = o[i];
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                u64 v = 0;
                if (pos + j < chunk_len) {
                    const u32 c = chunk_start + pos + j;
                    v = in[c * c_stride];
                    if (out) out[c] = gl_canonical(v);
                }
                s[4 + j] = v;
            }
            pos += 8;
        }

        permute<HASH>(s);

        if (PARTITIONED && outer_step) {
#pragma unroll
            for (int i = 0; i < STATE_WIDTH; i++) o[i] = s[i];
            outer_step = false;
            if (chunk_start >= num_cols) break;  // the leaf is in s[4..8]
#pragma unroll
            for (int i = 0; i < STATE_WIDTH; i++) s[i] = 0;
            s[0] = SPONGE_LEN[chunk_len % 8];
            continue;
        }
        if (pos < chunk_len) continue;
        if (!PARTITIONED) break;

        // a chunk digest is done: move it into the digest sponge's rate
        if (!second_digest) {
#pragma unroll
            for (int i = 0; i < 4; i++) o[4 + i] = s[4 + i];
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) o[8 + i] = s[4 + i];
            outer_step = true;
        }
        second_digest = !second_digest;
        chunk_start += chunk_len;
        pos = 0;
        if (chunk_start >= num_cols) {
            if (second_digest) {  // odd number of digests: zero-pad the rate
#pragma unroll
                for (int i = 0; i < 4; i++) o[8 + i] = 0;
            }
            outer_step = true;
        } else {
            chunk_len = min(part, num_cols - chunk_start);
            if (!outer_step) {
#pragma unroll
                for (int i = 0; i < STATE_WIDTH; i++) s[i] = 0;
                s[0] = SPONGE_LEN[chunk_len % 8];
            }
        }
    }

    if (out) {
        for (u32 c = num_cols; c < row_width; c++) out[c] = 0;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) leaves[row * 4 + i] = gl_canonical(s[4 + i]);
}

#define HASH_ROWS_KERNEL(NAME, HASH, PARTITIONED, MIN_BLOCKS)                                     \
    extern "C" __global__ void __launch_bounds__(HASH_BLOCK, MIN_BLOCKS) NAME(                   \
        const u64* src, u64 k_stride, u64 t_stride, u64 c_stride, u32 num_cols, u32 part,         \
        u32 log_blowup, u32 k0, u32 log_cosets, u64 t0, u64 t_count, u64* leaves, u64* rows_out,  \
        u64 t_base, u32 row_width) {                                                              \
        hash_rows_impl<HASH, PARTITIONED>(src, k_stride, t_stride, c_stride, num_cols, part,      \
                                          log_blowup, k0, log_cosets, t0, t_count, leaves,        \
                                          rows_out, t_base, row_width);                           \
    }

/// Whole rows hashed by a Rescue permutation on a quad of lanes (see rescue.cuh), one quad per
/// row: the arguments, row addressing and outputs of `hash_rows_impl`, with lane q loading and
/// writing the row elements its state elements absorb (rate element 4+j takes element j of each
/// block of 8).
template <int HASH>
__device__ __forceinline__ void hash_rows_quad_impl(const u64* src, u64 k_stride, u64 t_stride,
                                                    u64 c_stride, u32 num_cols, u32 log_blowup,
                                                    u32 k0, u32 log_cosets, u64 t0, u64 t_count,
                                                    u64* leaves, u64* rows_out, u64 t_base,
                                                    u32 row_width) {
    const u64 id = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 item = id >> 2;
    const u32 q = (u32)(id & 3);
    if (item >= (t_count << log_cosets)) return;  // a quad's lanes leave together
    const unsigned mask = 0xFu << (threadIdx.x & 28);
    const RowSlot slot = row_slot(item, src, k_stride, t_stride, log_blowup, k0, log_cosets, t0,
                                  t_count, rows_out, t_base, row_width);
    const u64 row = slot.row;
    const u64* in = slot.in;
    u64* out = slot.out;

    u64 s[3] = {0, 0, 0};
    if (q == 0) s[0] = SPONGE_LEN[num_cols % 8];
    for (u32 pos = 0; pos < num_cols; pos += 8) {
#pragma unroll
        for (int e = 0; e < 3; e++) {
            const int j = (int)(3 * q) + e - 4;  // rate position, if this element is in the rate
            if (j >= 0) {
                const u32 c = pos + j;
                u64 v = 0;
                if (c < num_cols) {
                    v = in[c * c_stride];
                    if (out) out[c] = gl_canonical(v);
                }
                s[e] = v;
            }
        }
        // The full state even for the row's last permutation: its digest-only form (see
        // permute_quad) would save a sliver of the work here but costs more in code, and the
        // rows hashed no faster with it.
        permute_quad<HASH>(s, q, mask, false);
    }

    if (out && q == 0) {
        for (u32 c = num_cols; c < row_width; c++) out[c] = 0;
    }
#pragma unroll
    for (int e = 0; e < 3; e++) {
        const int j = (int)(3 * q) + e - 4;  // digest element j = state element 4+j
        if (j >= 0 && j < 4) leaves[row * 4 + j] = gl_canonical(s[e]);
    }
}

// At least ROW_QUAD_MIN_BLOCKS resident blocks per SM (8 unless `CudaOptions::hash_min_blocks`
// tunes it: ROW_QUAD_MIN_BLOCKS in src/cuda/program.rs says why).
#define HASH_ROWS_QUAD_KERNEL(NAME, HASH)                                                         \
    extern "C" __global__ void __launch_bounds__(HASH_BLOCK, ROW_QUAD_MIN_BLOCKS) NAME(          \
        const u64* src, u64 k_stride, u64 t_stride, u64 c_stride, u32 num_cols, u32 part,         \
        u32 log_blowup, u32 k0, u32 log_cosets, u64 t0, u64 t_count, u64* leaves, u64* rows_out,  \
        u64 t_base, u32 row_width) {                                                              \
        hash_rows_quad_impl<HASH>(src, k_stride, t_stride, c_stride, num_cols, log_blowup, k0,   \
                                  log_cosets, t0, t_count, leaves, rows_out, t_base, row_width);  \
    }

#if RESCUE_LANES == 4
HASH_ROWS_QUAD_KERNEL(hash_rows_rpo, HASH_RPO)
HASH_ROWS_QUAD_KERNEL(hash_rows_rpx, HASH_RPX)
#else
HASH_ROWS_KERNEL(hash_rows_rpo, HASH_RPO, false, HASH_MIN_BLOCKS)
HASH_ROWS_KERNEL(hash_rows_rpx, HASH_RPX, false, HASH_MIN_BLOCKS)
#endif
HASH_ROWS_KERNEL(hash_rows_rpo_partitioned, HASH_RPO, true, HASH_MIN_BLOCKS)
HASH_ROWS_KERNEL(hash_rows_rpx_partitioned, HASH_RPX, true, HASH_MIN_BLOCKS)
// POSEIDON2_ROWS_MIN_BLOCKS: src/cuda/program.rs says why it differs
HASH_ROWS_KERNEL(hash_rows_poseidon2, HASH_POSEIDON2, false, POSEIDON2_ROWS_MIN_BLOCKS)
HASH_ROWS_KERNEL(hash_rows_poseidon2_partitioned, HASH_POSEIDON2, true, POSEIDON2_ROWS_MIN_BLOCKS)

/// The (Montgomery-form) elements of block `b` of a row's chunk of `len` columns from column
/// `first`, `c_stride` apart; columns past the chunk are left as they were.
__device__ __forceinline__ void b3_load_block(const u64* in, u64 c_stride, u32 first, u32 len,
                                              u32 b, u64 raw[8]) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (8 * b + j < len) raw[j] = in[(first + 8 * b + j) * c_stride];
    }
}

/// A warp's staging tile for the row-major copies of its 32 rows: one 8-element block of each
/// row, as four 16-byte chunks. Chunk q of row r sits at q ^ ((r >> 1) & 3), so that the lanes'
/// writes of their own rows and the reads of 8 rows' chunks each hit distinct banks.
typedef ulonglong2 B3Tile[32][4];

/// Writes the calling lane's 8 `values` (its row's current block) into the warp's `tile`.
__device__ __forceinline__ void b3_stage_block(B3Tile& tile, const u64 values[8]) {
    const u32 lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        tile[lane][q ^ ((lane >> 1) & 3)] = make_ulonglong2(values[2 * q], values[2 * q + 1]);
    }
}

/// Stores the staged block of the warp's 32 rows at element `col` of each row (`out`: the
/// calling lane's row, null for none), whole rows' 64-byte segments at a time: 4 lanes a row, 8
/// rows a store, so each store writes whole 32-byte sectors where one lane a row writing its
/// own elements touches 32 sectors per 8-byte store. Every lane of the warp calls it together.
__device__ __forceinline__ void b3_store_staged(B3Tile& tile, u64* out, u32 col) {
    const u32 lane = threadIdx.x & 31;
    const u32 q = lane & 3;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const u32 r = 8 * i + (lane >> 2);
        u64* row = (u64*)__shfl_sync(0xFFFFFFFFu, (u64)out, r);
        const ulonglong2 v = tile[r][q ^ ((r >> 1) & 3)];
        if (row) *(ulonglong2*)(row + col + 2 * q) = v;
    }
    __syncwarp();  // the tile is read before the next block overwrites it
}

/// Hashes rows with BLAKE3 (digests of `DW` words: 6 for BLAKE3-192, 8 for BLAKE3-256), with the
/// addressing, partitions and `rows_out` of `hash_rows_impl`. Each element is its canonical
/// integer, 8 bytes little-endian, so a 64-byte block holds 8 elements; partitioned, each chunk's
/// digest is appended to an outer message (`merge_many`: BLAKE3 of the concatenated digests)
/// whose blocks are compressed as they fill.
///
/// Whole rows are copied to `rows_out` a block at a time through a per-warp tile (see
/// `b3_store_staged`), the last block's zeros being the row's padding: this takes `row_width`
/// = 8·ceil(num_cols / 8), Winterfell's segment width. So that the warp stays whole, threads
/// past the last row hash it again and write nothing. Partitioned, chunks do not start on blocks
/// of the row: each thread writes its own row.
template <int DW, bool PARTITIONED>
__device__ __forceinline__ void b3_hash_rows_impl(const u64* src, u64 k_stride, u64 t_stride,
                                                  u64 c_stride, u32 num_cols, u32 part,
                                                  u32 log_blowup, u32 k0, u32 log_cosets, u64 t0,
                                                  u64 t_count, u64* leaves, u64* rows_out,
                                                  u64 t_base, u32 row_width) {
    __shared__ B3Tile tiles[HASH_BLOCK / 32];
    const u64 id = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 total = t_count << log_cosets;
    if (PARTITIONED && id >= total) return;
    const bool active = id < total;
    const RowSlot slot = row_slot(active ? id : total - 1, src, k_stride, t_stride, log_blowup,
                                  k0, log_cosets, t0, t_count, rows_out, t_base, row_width);
    const u64 row = slot.row;
    const u64* in = slot.in;
    u64* out = active ? slot.out : nullptr;
    B3Tile& tile = tiles[threadIdx.x >> 5];

    const u32 size = PARTITIONED ? min(part, num_cols) : num_cols;
    const u32 parts = (num_cols + size - 1) / size;
    const u32 outer_words = parts * DW;
    const u32 outer_blocks = (outer_words + 15) / 16;
    B3Tree inner;
    B3Tree outer;
    inner.depth = 0;
    outer.depth = 0;
    u32 pending[16];
#pragma unroll
    for (int k = 0; k < 16; k++) pending[k] = 0;
    u32 fill = 0;

    for (u32 p = 0; p < parts; p++) {
        const u32 first = p * size;
        const u32 len = min(size, num_cols - first);
        const u32 num_blocks = (len + 7) / 8;
        // The next block's loads are issued before this block is compressed, so each thread
        // keeps two blocks of loads in flight instead of waiting on one.
        u64 raw[8];
        b3_load_block(in, c_stride, first, len, 0, raw);
        for (u32 b = 0; b < num_blocks; b++) {
            u32 block[16];
            u64 canonical[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                u64 v = 0;
                canonical[j] = 0;
                if (8 * b + j < len) {
                    const u64 x = raw[j];
                    canonical[j] = gl_canonical(x);
                    if (PARTITIONED && out) out[first + 8 * b + j] = canonical[j];
                    v = gl_canonical(gl_mont_reduce((u32)x, (u32)(x >> 32), 0, 0));
                }
                block[2 * j] = (u32)v;
                block[2 * j + 1] = (u32)(v >> 32);
            }
            if (!PARTITIONED && rows_out) b3_stage_block(tile, canonical);
            if (b + 1 < num_blocks) b3_load_block(in, c_stride, first, len, b + 1, raw);
            if (!PARTITIONED && rows_out) b3_store_staged(tile, out, 8 * b);
            b3_absorb(inner, block, b, num_blocks, 8 * min(8u, len - 8 * b));
        }
        if (PARTITIONED) {
            // A chunk digest is done: append it to the outer message.
            for (u32 k = 0; k < DW; k++) {
                pending[fill++] = inner.cv[k];
                const u32 written = p * DW + k + 1;
                if (fill == 16 || written == outer_words) {
                    b3_absorb(outer, pending, (written - 1) / 16, outer_blocks, 4 * fill);
#pragma unroll
                    for (int i = 0; i < 16; i++) pending[i] = 0;
                    fill = 0;
                }
            }
        }
    }

    if (PARTITIONED && out) {
        for (u32 c = num_cols; c < row_width; c++) out[c] = 0;
    }
    if (!active) return;
    // 16-byte stores: a leaf is one sector, two stores instead of four
    const u32* digest = PARTITIONED ? outer.cv : inner.cv;
    u64 words[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        words[i] = 2 * i < DW ? ((u64)digest[2 * i + 1] << 32) | digest[2 * i] : 0ull;
    }
    ulonglong2* leaf = (ulonglong2*)(leaves + row * 4);
    leaf[0] = make_ulonglong2(words[0], words[1]);
    leaf[1] = make_ulonglong2(words[2], words[3]);
}

#define B3_HASH_ROWS_KERNEL(NAME, DW, PARTITIONED)                                                \
    extern "C" __global__ void __launch_bounds__(HASH_BLOCK, HASH_MIN_BLOCKS) NAME(              \
        const u64* src, u64 k_stride, u64 t_stride, u64 c_stride, u32 num_cols, u32 part,         \
        u32 log_blowup, u32 k0, u32 log_cosets, u64 t0, u64 t_count, u64* leaves, u64* rows_out,  \
        u64 t_base, u32 row_width) {                                                              \
        b3_hash_rows_impl<DW, PARTITIONED>(src, k_stride, t_stride, c_stride, num_cols, part,     \
                                           log_blowup, k0, log_cosets, t0, t_count, leaves,       \
                                           rows_out, t_base, row_width);                          \
    }

B3_HASH_ROWS_KERNEL(hash_rows_blake3_192, 6, false)
B3_HASH_ROWS_KERNEL(hash_rows_blake3_192_partitioned, 6, true)
B3_HASH_ROWS_KERNEL(hash_rows_blake3_256, 8, false)
B3_HASH_ROWS_KERNEL(hash_rows_blake3_256_partitioned, 8, true)

// MERKLE TREE
// ================================================================================================

/// Parent i of a tree level: parents[i] = merge(children[2i], children[2i+1]) (digests are 4
/// elements). Winterfell's node array stores level `count` at nodes[count..2·count], so a level
/// reads nodes[2·count..4·count] (or the leaves) and writes nodes[count..2·count].
template <int HASH>
__device__ __forceinline__ void merkle_parent(const u64* children, u64* parents, u64 i) {
    u64 s[STATE_WIDTH];
#pragma unroll
    for (int j = 0; j < 4; j++) s[j] = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) s[4 + j] = children[8 * i + j];
    permute<HASH>(s);
#pragma unroll
    for (int j = 0; j < 4; j++) parents[4 * i + j] = gl_canonical(s[4 + j]);
}

/// Lane `id & 3` of parent `id >> 2`, with a Rescue permutation on a quad of lanes (the quad's
/// lanes run together).
template <int HASH>
__device__ __forceinline__ void merkle_parent_quad(const u64* children, u64* parents, u64 id) {
    const u64 i = id >> 2;
    const u32 q = (u32)(id & 3);
    const unsigned mask = 0xFu << (threadIdx.x & 28);
    u64 s[3];
#pragma unroll
    for (int e = 0; e < 3; e++) {
        const int j = (int)(3 * q) + e - 4;
        s[e] = j >= 0 ? children[8 * i + j] : 0;
    }
    permute_quad<HASH>(s, q, mask, true);
    parents[4 * i + q] = gl_canonical(s[0]);  // digest element q
}

/// Parent i with BLAKE3 (digests of `DW` words, stored as 4 u64 with zero padding): the BLAKE3
/// of the bytes of children[2i] and children[2i+1], one block.
template <int DW>
__device__ __forceinline__ void b3_merkle_parent(const u64* children, u64* parents, u64 i) {
    // the two children (64 contiguous bytes) in four 16-byte loads, the parent in two stores:
    // a quarter of the memory instructions of word-sized accesses
    const uint4* pair = (const uint4*)(children + 8 * i);
    u32 words[16];
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const uint4 w = pair[v];
        words[4 * v] = w.x;
        words[4 * v + 1] = w.y;
        words[4 * v + 2] = w.z;
        words[4 * v + 3] = w.w;
    }
    u32 block[16];
#pragma unroll
    for (int k = 0; k < 16; k++) block[k] = 0;
#pragma unroll
    for (int k = 0; k < DW; k++) {
        block[k] = words[k];
        block[DW + k] = words[8 + k];
    }
    u32 cv[8] = B3_IV;
    b3_compress(cv, block, 0, 8 * DW, B3_CHUNK_START | B3_CHUNK_END | B3_ROOT);
    u64 digest[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        digest[k] = 2 * k < DW ? ((u64)cv[2 * k + 1] << 32) | cv[2 * k] : 0ull;
    }
    ulonglong2* parent = (ulonglong2*)(parents + 4 * i);
    parent[0] = make_ulonglong2(digest[0], digest[1]);
    parent[1] = make_ulonglong2(digest[2], digest[3]);
}

/// One level: `count` parents of `LANES` threads each, a thread per lane.
#define MERKLE_LEVEL_KERNEL(NAME, PARENT, LANES)                                                  \
    extern "C" __global__ void __launch_bounds__(HASH_BLOCK, HASH_MIN_BLOCKS)                     \
        NAME(const u64* children, u64* parents, u64 count) {                                     \
        const u64 id = blockIdx.x * (u64)blockDim.x + threadIdx.x;                               \
        if (id < count * LANES) PARENT(children, parents, id);                                   \
    }

/// The top `levels` levels of a tree in one block (they are too small to fill the GPU, and a
/// launch each would leave it waiting on launches). The first level has `count` nodes of which
/// this launch builds `parents` from `first` on, from `children`; each level above halves all
/// three and reads the level below it from `nodes` (the node array up to 2·count).
#define MERKLE_TOP_KERNEL(NAME, PARENT, LANES)                                                    \
    extern "C" __global__ void __launch_bounds__(MERKLE_TOP_BLOCK, 1)                             \
        NAME(const u64* children, u64* nodes, u64 count, u64 first, u64 parents, u32 levels) {   \
        for (u32 l = 0; l < levels; l++) {                                                       \
            const u64 c = count >> l, f = first >> l, n = parents >> l;                          \
            const u64* from = l == 0 ? children : nodes + 4 * (2 * c + 2 * f);                   \
            for (u64 id = threadIdx.x; id < n * LANES; id += blockDim.x)                          \
                PARENT(from, nodes + 4 * (c + f), id);                                           \
            __syncthreads(); /* this level's nodes are visible to the whole block */             \
        }                                                                                        \
    }

// RPO and RPX nodes take a quad of lanes each where the row hashing does
#if RESCUE_LANES == 4
#define RESCUE_PARENT(HASH) merkle_parent_quad<HASH>
#else
#define RESCUE_PARENT(HASH) merkle_parent<HASH>
#endif
MERKLE_LEVEL_KERNEL(merkle_level_rpo, RESCUE_PARENT(HASH_RPO), RESCUE_LANES)
MERKLE_TOP_KERNEL(merkle_top_rpo, RESCUE_PARENT(HASH_RPO), RESCUE_LANES)
MERKLE_LEVEL_KERNEL(merkle_level_rpx, RESCUE_PARENT(HASH_RPX), RESCUE_LANES)
MERKLE_TOP_KERNEL(merkle_top_rpx, RESCUE_PARENT(HASH_RPX), RESCUE_LANES)
MERKLE_LEVEL_KERNEL(merkle_level_poseidon2, merkle_parent<HASH_POSEIDON2>, 1)
MERKLE_TOP_KERNEL(merkle_top_poseidon2, merkle_parent<HASH_POSEIDON2>, 1)
MERKLE_LEVEL_KERNEL(merkle_level_blake3_192, b3_merkle_parent<6>, 1)
MERKLE_TOP_KERNEL(merkle_top_blake3_192, b3_merkle_parent<6>, 1)
MERKLE_LEVEL_KERNEL(merkle_level_blake3_256, b3_merkle_parent<8>, 1)
MERKLE_TOP_KERNEL(merkle_top_blake3_256, b3_merkle_parent<8>, 1)

// PROOF OF WORK
// ================================================================================================

/// `BaseElement::new`'s factor: the Montgomery form of `n` is `n · R2 · 2^-64`.
#define GL_R2 0xFFFFFFFE00000001ull

/// Tries the nonces `start + i` (i < count, each below p) on a sponge coin's `state` as
/// miden-crypto's `check_leading_zeros` does: the nonce's element added to state[4], the
/// permutation, and the trailing zeros of state[4]'s integer (`mont_to_int`, which is the same
/// for every word of an element); the smallest nonce with at least `factor` goes to `found`.
#define GRIND_KERNEL(NAME, HASH)                                                                  \
    extern "C" __global__ void __launch_bounds__(HASH_BLOCK)                                      \
        NAME(u64* found, const u64* state, u64 start, u64 count, u32 factor) {                   \
        const u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;                                \
        if (i >= count) return;                                                                  \
        u64 s[STATE_WIDTH];                                                                      \
        for (int k = 0; k < STATE_WIDTH; k++) s[k] = state[k];                                   \
        const u64 nonce = start + i;                                                             \
        s[4] = gl_add(s[4], gl_mul(nonce, GL_R2));                                               \
        permute<HASH>(s);                                                                        \
        const u64 value = gl_canonical(gl_mul(s[4], 1));                                         \
        const u32 zeros = value == 0 ? 64 : __ffsll((long long)value) - 1;                       \
        if (zeros >= factor) atomicMin(found, nonce);                                            \
    }

GRIND_KERNEL(grind_rpo, HASH_RPO)
GRIND_KERNEL(grind_rpx, HASH_RPX)
