// Row hashing with BLAKE3: one invocation hashes one row of a row-major matrix into its Merkle
// leaf, as Winterfell's `commit_to_rows` does with `Blake3_192` / `Blake3_256`. Each element is
// its canonical integer, 8 bytes little-endian, so a 64-byte block holds 8 elements.
//
// A row is hashed as a sequence of blocks ("events"), the same for every row:
// - whole row: the blocks of the row; the leaf is its digest;
// - partitioned: the blocks of each chunk of `partition_size` elements in turn; each chunk's
//   digest is appended to an outer message (`merge_many`: BLAKE3 of the concatenated digests),
//   whose blocks are compressed as they fill, within the event that completes the digest.
// A dispatch runs events [first_event, first_event + num_events), all of them on hardware GPUs,
// a few per dispatch on drivers that cap the loop iterations of an invocation (llvmpipe).
// Between dispatches both trees, the outer message's pending block and its fill wait in
// `saved` (B3_SAVED_WORDS words per row).

struct HashRowsParams {
    /// Rows hashed by this dispatch.
    num_rows: u32,
    /// Elements from one row to the next in `rows`.
    row_width: u32,
    /// Elements hashed per row.
    num_cols: u32,
    /// 0: whole row; otherwise elements per chunk (at most num_cols).
    partition_size: u32,
    /// Element index of the first row in `rows`.
    src_offset: u32,
    /// Digest index of the first row's leaf in `leaves`.
    dst_offset: u32,
    /// First event of this dispatch, events in it, and events in all.
    first_event: u32,
    num_events: u32,
    total_events: u32,
}

@group(0) @binding(0) var<uniform> hash_params: HashRowsParams;
@group(0) @binding(1) var<storage, read> rows: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> leaves: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> saved: array<u32>;

/// Words of one saved tree.
const B3_TREE_WORDS: u32 = 9u + 8u * B3_STACK;

/// `len` (<= 8) elements from `rows[start..]` as a block, each element its canonical integer.
fn load_block(start: u32, len: u32) -> B3Block {
    var block: B3Block;
    for (var k = 0u; k < len; k = k + 1u) {
        let value = gl_canonical(gl_mul(rows[start + k], vec2<u32>(1u, 0u)));
        block[2u * k] = value.x;
        block[2u * k + 1u] = value.y;
    }
    return block;
}

fn save_tree(base: u32, tree: B3Tree) {
    for (var k = 0u; k < 8u; k = k + 1u) {
        saved[base + k] = tree.cv[k];
    }
    for (var d = 0u; d < B3_STACK; d = d + 1u) {
        for (var k = 0u; k < 8u; k = k + 1u) {
            saved[base + 8u + 8u * d + k] = tree.stack[d][k];
        }
    }
    saved[base + B3_TREE_WORDS - 1u] = tree.depth;
}

fn load_tree(base: u32) -> B3Tree {
    var tree: B3Tree;
    for (var k = 0u; k < 8u; k = k + 1u) {
        tree.cv[k] = saved[base + k];
    }
    for (var d = 0u; d < B3_STACK; d = d + 1u) {
        for (var k = 0u; k < 8u; k = k + 1u) {
            tree.stack[d][k] = saved[base + 8u + 8u * d + k];
        }
    }
    tree.depth = saved[base + B3_TREE_WORDS - 1u];
    return tree;
}

@compute @workgroup_size(256)
fn hash_rows(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let row = flat_id(gid, groups);
    if (row >= hash_params.num_rows) {
        return;
    }
    let start = hash_params.src_offset + row * hash_params.row_width;
    let num_cols = hash_params.num_cols;
    let whole = hash_params.partition_size == 0u;
    let size = select(hash_params.partition_size, num_cols, whole);
    let parts = (num_cols + size - 1u) / size;
    let blocks = (size + 7u) / 8u;
    let last_len = num_cols - (parts - 1u) * size;
    let outer_words = parts * B3_DIGEST_WORDS;
    let outer_blocks = (outer_words + 15u) / 16u;

    var inner: B3Tree;
    var outer: B3Tree;
    var pending: B3Block;
    var fill = 0u;
    let first = hash_params.first_event;
    let base = row * B3_SAVED_WORDS;
    if (first > 0u) {
        inner = load_tree(base);
        outer = load_tree(base + B3_TREE_WORDS);
        for (var k = 0u; k < 16u; k = k + 1u) {
            pending[k] = saved[base + 2u * B3_TREE_WORDS + k];
        }
        fill = saved[base + 2u * B3_TREE_WORDS + 16u];
    }

    for (var i = 0u; i < hash_params.num_events; i = i + 1u) {
        let event = first + i;
        let p = min(event / blocks, parts - 1u);
        let b = event - p * blocks;
        let len = select(size, last_len, p == parts - 1u);
        let in_block = min(8u, len - 8u * b);
        let part_blocks = (len + 7u) / 8u;
        b3_absorb(&inner, load_block(start + p * size + 8u * b, in_block), b, part_blocks, 8u * in_block);
        if (whole || b + 1u < part_blocks) {
            continue;
        }
        // A chunk digest is done: append it to the outer message.
        for (var k = 0u; k < B3_DIGEST_WORDS; k = k + 1u) {
            pending[fill] = inner.cv[k];
            fill = fill + 1u;
            let written = p * B3_DIGEST_WORDS + k + 1u;
            if (fill == 16u || written == outer_words) {
                b3_absorb(&outer, pending, (written - 1u) / 16u, outer_blocks, 4u * fill);
                pending = B3Block();
                fill = 0u;
            }
        }
    }

    if (first + hash_params.num_events < hash_params.total_events) {
        save_tree(base, inner);
        save_tree(base + B3_TREE_WORDS, outer);
        for (var k = 0u; k < 16u; k = k + 1u) {
            saved[base + 2u * B3_TREE_WORDS + k] = pending[k];
        }
        saved[base + 2u * B3_TREE_WORDS + 16u] = fill;
    } else {
        var digest = outer.cv;
        if (whole) {
            digest = inner.cv;
        }
        let out = (hash_params.dst_offset + row) * 4u;
        for (var k = 0u; k < 4u; k = k + 1u) {
            var word = vec2<u32>(0u, 0u);
            if (2u * k < B3_DIGEST_WORDS) {
                word = vec2<u32>(digest[2u * k], digest[2u * k + 1u]);
            }
            leaves[out + k] = word;
        }
    }
}
