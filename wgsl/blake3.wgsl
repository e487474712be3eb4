// BLAKE3 (hash mode) over 32-bit words: the compression function and the tree of chunks and
// parent nodes, for messages whose length is known before their first block.
// Generated before this file (src/wgpu/shaders.rs): B3_IV, B3_STACK (chaining values the tree
// stack holds), B3_DIGEST_WORDS (6 or 8) and b3_permute (the message permutation).

const B3_CHUNK_START: u32 = 1u;
const B3_CHUNK_END: u32 = 2u;
const B3_PARENT: u32 = 4u;
const B3_ROOT: u32 = 8u;
/// Blocks of 64 bytes per chunk of 1024 bytes.
const B3_CHUNK_BLOCKS: u32 = 16u;

alias B3Words = array<u32, 8>;
alias B3Block = array<u32, 16>;

/// The state of one message: the chaining value of the chunk being hashed (the digest once the
/// last block is in), and the chaining values of the complete subtrees to its left.
struct B3Tree {
    cv: B3Words,
    stack: array<B3Words, B3_STACK>,
    depth: u32,
}

fn b3_g(s: ptr<function, B3Block>, a: u32, b: u32, c: u32, d: u32, x: u32, y: u32) {
    (*s)[a] = (*s)[a] + (*s)[b] + x;
    (*s)[d] = (*s)[d] ^ (*s)[a];
    (*s)[d] = ((*s)[d] >> 16u) | ((*s)[d] << 16u);
    (*s)[c] = (*s)[c] + (*s)[d];
    (*s)[b] = (*s)[b] ^ (*s)[c];
    (*s)[b] = ((*s)[b] >> 12u) | ((*s)[b] << 20u);
    (*s)[a] = (*s)[a] + (*s)[b] + y;
    (*s)[d] = (*s)[d] ^ (*s)[a];
    (*s)[d] = ((*s)[d] >> 8u) | ((*s)[d] << 24u);
    (*s)[c] = (*s)[c] + (*s)[d];
    (*s)[b] = (*s)[b] ^ (*s)[c];
    (*s)[b] = ((*s)[b] >> 7u) | ((*s)[b] << 25u);
}

/// The compression function, truncated to the new chaining value (the first 32 output bytes).
fn b3_compress(cv: B3Words, block: B3Block, counter: u32, len: u32, flags: u32) -> B3Words {
    var s = B3Block(
        cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
        B3_IV[0], B3_IV[1], B3_IV[2], B3_IV[3], counter, 0u, len, flags,
    );
    var m = block;
    for (var r = 0u; r < 7u; r = r + 1u) {
        b3_g(&s, 0u, 4u, 8u, 12u, m[0], m[1]);
        b3_g(&s, 1u, 5u, 9u, 13u, m[2], m[3]);
        b3_g(&s, 2u, 6u, 10u, 14u, m[4], m[5]);
        b3_g(&s, 3u, 7u, 11u, 15u, m[6], m[7]);
        b3_g(&s, 0u, 5u, 10u, 15u, m[8], m[9]);
        b3_g(&s, 1u, 6u, 11u, 12u, m[10], m[11]);
        b3_g(&s, 2u, 7u, 8u, 13u, m[12], m[13]);
        b3_g(&s, 3u, 4u, 9u, 14u, m[14], m[15]);
        m = b3_permute(m);
    }
    var out: B3Words;
    for (var k = 0u; k < 8u; k = k + 1u) {
        out[k] = s[k] ^ s[k + 8u];
    }
    return out;
}

/// The chaining value of a parent node over two children.
fn b3_parent(left: B3Words, right: B3Words, flags: u32) -> B3Words {
    var block: B3Block;
    for (var k = 0u; k < 8u; k = k + 1u) {
        block[k] = left[k];
        block[8u + k] = right[k];
    }
    return b3_compress(B3_IV, block, 0u, 64u, B3_PARENT | flags);
}

/// Adds block `j` (of `len` bytes, zero-padded) of a message of `num_blocks` blocks. After the
/// last block, `tree.cv` is the message's digest.
fn b3_absorb(tree: ptr<function, B3Tree>, block: B3Block, j: u32, num_blocks: u32, len: u32) {
    let i = j % B3_CHUNK_BLOCKS;
    let chunk = j / B3_CHUNK_BLOCKS;
    let last = j + 1u == num_blocks;
    let chunk_end = last || i + 1u == B3_CHUNK_BLOCKS;
    var flags = select(0u, B3_CHUNK_START, i == 0u) | select(0u, B3_CHUNK_END, chunk_end);
    if (last && num_blocks <= B3_CHUNK_BLOCKS) {
        flags = flags | B3_ROOT;
    }
    if (i == 0u) {
        (*tree).cv = B3_IV;
    }
    (*tree).cv = b3_compress((*tree).cv, block, chunk, len, flags);
    if (!chunk_end) {
        return;
    }
    if (!last) {
        // Merge the complete subtrees this chunk closes, then push the result.
        let closed = countTrailingZeros(chunk + 1u);
        for (var k = 0u; k < closed; k = k + 1u) {
            (*tree).depth = (*tree).depth - 1u;
            (*tree).cv = b3_parent((*tree).stack[(*tree).depth], (*tree).cv, 0u);
        }
        (*tree).stack[(*tree).depth] = (*tree).cv;
        (*tree).depth = (*tree).depth + 1u;
    } else if (num_blocks > B3_CHUNK_BLOCKS) {
        // The last chunk: fold the stack from the right, the final parent being the root.
        for (var k = 0u; k < B3_STACK && (*tree).depth > 0u; k = k + 1u) {
            (*tree).depth = (*tree).depth - 1u;
            let root = select(0u, B3_ROOT, (*tree).depth == 0u);
            (*tree).cv = b3_parent((*tree).stack[(*tree).depth], (*tree).cv, root);
        }
    }
}
