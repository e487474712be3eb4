// Row hashing: one invocation hashes one row of a row-major matrix into its Merkle leaf, as
// Winterfell's `commit_to_rows` does. Needs a permutation (rpo.wgsl or rpx.wgsl).
//
// A row is hashed as a sequence of permutations ("events"), the same for every row:
// - whole row: one event per 8-element block of `hash_elements(row)`; the leaf is its digest;
// - partitioned: for each chunk p of `partition_size` elements, one event per block of
//   `hash_elements(chunk)`; the chunk digest then fills half of the rate of an outer sponge
//   (`merge_many` = `hash_elements` of the concatenated digests), which takes one more event
//   after every second chunk and after the last one (zero-padded when the count is odd).
// A dispatch runs events [first_event, first_event + num_events): all of them in one dispatch
// on hardware GPUs, a few per dispatch on drivers that cap the loop iterations of an
// invocation (llvmpipe). Between dispatches the two sponge states wait in `sponges`.

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
    /// hash_rows_quad: element index in `row_copies` of the first row's copy, and whether the
    /// rows are copied there (1) or not (0).
    copy_offset: u32,
    copy_rows: u32,
    /// hash_rows_quad: 1 where `rows` holds a coset evaluation instead of row-major rows: column
    /// c from element src_offset + c * 2^log_len on, in bit-reversed order, the dispatch's row r
    /// at position bitrev(row0 + r).
    coset_rows: u32,
    log_len: u32,
    row0: u32,
}

@group(0) @binding(0) var<uniform> hash_params: HashRowsParams;
@group(0) @binding(1) var<storage, read> rows: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> leaves: array<vec2<u32>>;
/// Per row of the dispatch: the inner sponge state, then the outer one.
@group(0) @binding(3) var<storage, read_write> sponges: array<vec2<u32>>;

/// Overwrites the rate with `len` (<= 8) elements from `rows[start..]`, zero-padded.
fn load_block(state: ptr<function, State>, start: u32, len: u32) {
    for (var k = 0u; k < 8u; k = k + 1u) {
        var value = vec2<u32>(0u, 0u);
        if (k < len) {
            value = rows[start + k];
        }
        (*state)[4u + k] = value;
    }
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
    let last_blocks = (last_len + 7u) / 8u;

    var inner: State;
    var outer: State;
    let first = hash_params.first_event;
    let saved = row * 2u * STATE_WIDTH;
    if (first > 0u) {
        for (var k = 0u; k < STATE_WIDTH; k = k + 1u) {
            inner[k] = sponges[saved + k];
            outer[k] = sponges[saved + STATE_WIDTH + k];
        }
    }

    // The position of event `first`: chunk p, block b, or the outer permutation after p.
    var p = 0u;
    var b = first;
    var outer_next = false;
    if (!whole) {
        // Every pair of full chunks takes 2 blocks + 1 events.
        let pair = 2u * blocks + 1u;
        let r = first % pair;
        p = 2u * (first / pair) + select(0u, 1u, r >= blocks);
        b = select(r, r - blocks, r >= blocks);
        outer_next = r == 2u * blocks;
        if (p >= parts - 1u) {
            p = parts - 1u;
            b = first - (p * blocks + p / 2u);
            outer_next = b >= last_blocks;
        }
    }

    for (var i = 0u; i < hash_params.num_events; i = i + 1u) {
        if (outer_next) {
            if ((p & 1u) == 0u) {
                // An odd number of digests: the last one fills half of the rate.
                for (var k = 8u; k < STATE_WIDTH; k = k + 1u) {
                    outer[k] = vec2<u32>(0u, 0u);
                }
            }
            permute(&outer);
            p = p + 1u;
            b = 0u;
            outer_next = false;
        } else {
            let len = select(size, last_len, p == parts - 1u);
            if (b == 0u) {
                inner = State();
                inner[0] = gl_from_small(len % 8u);
                if (p == 0u && !whole) {
                    outer = State();
                    outer[0] = gl_from_small((4u * parts) % 8u);
                }
            }
            load_block(&inner, start + p * size + b * 8u, min(8u, len - b * 8u));
            permute(&inner);
            b = b + 1u;
            if (!whole && b * 8u >= len) {
                let slot = 4u + 4u * (p & 1u);
                for (var k = 0u; k < 4u; k = k + 1u) {
                    outer[slot + k] = inner[4u + k];
                }
                if ((p & 1u) == 1u || p == parts - 1u) {
                    outer_next = true;
                } else {
                    p = p + 1u;
                    b = 0u;
                }
            }
        }
    }

    if (first + hash_params.num_events < hash_params.total_events) {
        for (var k = 0u; k < STATE_WIDTH; k = k + 1u) {
            sponges[saved + k] = inner[k];
            sponges[saved + STATE_WIDTH + k] = outer[k];
        }
    } else {
        let out = (hash_params.dst_offset + row) * 4u;
        for (var k = 0u; k < 4u; k = k + 1u) {
            leaves[out + k] = gl_canonical(select(outer[4u + k], inner[4u + k], whole));
        }
    }
}
