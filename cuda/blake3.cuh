// BLAKE3 (hash mode) over 32-bit words: the compression function and the tree of chunks and
// parent nodes, for messages whose length is known before their first block (needs field.cuh
// and the generated B3_IV, B3_STACK and b3_permute).

#define B3_CHUNK_START 1u
#define B3_CHUNK_END 2u
#define B3_PARENT 4u
#define B3_ROOT 8u
// Blocks of 64 bytes per chunk of 1024 bytes.
#define B3_CHUNK_BLOCKS 16u

/// The state of one message: the chaining value of the chunk being hashed (the digest once the
/// last block is in), and the chaining values of the complete subtrees to its left.
struct B3Tree {
    u32 cv[8];
    u32 stack[B3_STACK][8];
    u32 depth;
};

__device__ __forceinline__ u32 b3_rotr(u32 x, u32 n) {
    return __funnelshift_r(x, x, n);
}

__device__ __forceinline__ void b3_g(u32 s[16], int a, int b, int c, int d, u32 x, u32 y) {
    s[a] = s[a] + s[b] + x;
    s[d] = b3_rotr(s[d] ^ s[a], 16);
    s[c] = s[c] + s[d];
    s[b] = b3_rotr(s[b] ^ s[c], 12);
    s[a] = s[a] + s[b] + y;
    s[d] = b3_rotr(s[d] ^ s[a], 8);
    s[c] = s[c] + s[d];
    s[b] = b3_rotr(s[b] ^ s[c], 7);
}

/// The compression function, truncated to the new chaining value, written over `cv`.
__device__ __forceinline__ void b3_compress(u32 cv[8], const u32 block[16], u32 counter, u32 len,
                                            u32 flags) {
    const u32 iv[8] = B3_IV;
    u32 s[16] = {cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
                 iv[0], iv[1], iv[2], iv[3], counter, 0u,    len,   flags};
    u32 m[16];
#pragma unroll
    for (int i = 0; i < 16; i++) m[i] = block[i];
#pragma unroll
    for (int r = 0; r < 7; r++) {
        b3_g(s, 0, 4, 8, 12, m[0], m[1]);
        b3_g(s, 1, 5, 9, 13, m[2], m[3]);
        b3_g(s, 2, 6, 10, 14, m[4], m[5]);
        b3_g(s, 3, 7, 11, 15, m[6], m[7]);
        b3_g(s, 0, 5, 10, 15, m[8], m[9]);
        b3_g(s, 1, 6, 11, 12, m[10], m[11]);
        b3_g(s, 2, 7, 8, 13, m[12], m[13]);
        b3_g(s, 3, 4, 9, 14, m[14], m[15]);
        b3_permute(m);
    }
#pragma unroll
    for (int i = 0; i < 8; i++) cv[i] = s[i] ^ s[i + 8];
}

/// `right` becomes the chaining value of the parent node over `left` and `right`.
__device__ __forceinline__ void b3_parent(const u32 left[8], u32 right[8], u32 flags) {
    u32 block[16];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        block[i] = left[i];
        block[8 + i] = right[i];
    }
    const u32 iv[8] = B3_IV;
#pragma unroll
    for (int i = 0; i < 8; i++) right[i] = iv[i];
    b3_compress(right, block, 0, 64, B3_PARENT | flags);
}

/// Adds block `j` (of `len` bytes, zero-padded) of a message of `num_blocks` blocks. After the
/// last block, `tree.cv` is the message's digest.
__device__ __forceinline__ void b3_absorb(B3Tree& tree, const u32 block[16], u32 j, u32 num_blocks,
                                          u32 len) {
    const u32 i = j % B3_CHUNK_BLOCKS;
    const u32 chunk = j / B3_CHUNK_BLOCKS;
    const bool last = j + 1 == num_blocks;
    const bool chunk_end = last || i + 1 == B3_CHUNK_BLOCKS;
    u32 flags = (i == 0 ? B3_CHUNK_START : 0u) | (chunk_end ? B3_CHUNK_END : 0u);
    if (last && num_blocks <= B3_CHUNK_BLOCKS) flags |= B3_ROOT;
    if (i == 0) {
        const u32 iv[8] = B3_IV;
#pragma unroll
        for (int k = 0; k < 8; k++) tree.cv[k] = iv[k];
    }
    b3_compress(tree.cv, block, chunk, len, flags);
    if (!chunk_end) return;
    if (!last) {
        // Merge the complete subtrees this chunk closes, then push the result.
        for (u32 total = chunk + 1; (total & 1) == 0; total >>= 1) {
            tree.depth--;
            b3_parent(tree.stack[tree.depth], tree.cv, 0);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) tree.stack[tree.depth][k] = tree.cv[k];
        tree.depth++;
    } else if (num_blocks > B3_CHUNK_BLOCKS) {
        // The last chunk: fold the stack from the right, the final parent being the root.
        while (tree.depth > 0) {
            tree.depth--;
            b3_parent(tree.stack[tree.depth], tree.cv, tree.depth == 0 ? B3_ROOT : 0u);
        }
    }
}
