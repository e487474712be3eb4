// Whole rows hashed by RPO or RPX on quads (rescue_quad.wgsl): one quad per row, with the
// parameters, bindings and dispatch splitting of hash_rows.wgsl (an event is one 8-element
// block; between dispatches lane q keeps its elements at positions 3q..3q+2 of the inner sponge
// state). Partitioned rows take `hash_rows`. Lane q absorbs the row elements its state elements
// take (rate element 4 + j takes element j of each block) and writes leaf element q. Quads past
// the last row hash the last row again and write nothing, so that every lane of a subgroup
// reaches every shuffle.
//
// Where `copy_rows` is 1, the first dispatch of a block also copies the workgroup's rows to
// `row_copies`, a staging buffer the host reads, row-major with zero padding: consecutive
// invocations write consecutive elements, and the writes travel to host memory while the
// permutations run, with no copy on the device's queue. Where `coset_rows` is 1 the rows are read
// from the NTT's output itself (see `row_element`), so no transposition pass runs before.

/// The rows' copies for the host, `row_width` elements per row from `copy_offset` on.
@group(0) @binding(4) var<storage, read_write> row_copies: array<vec2<u32>>;

/// Element c of row `row` of the dispatch: row-major from `src_offset` on, or, where `coset_rows`
/// is 1, of the columns of a coset evaluation in bit-reversed order.
fn row_element(row: u32, c: u32) -> vec2<u32> {
    if (hash_params.coset_rows == 1u) {
        let position = bit_reverse(hash_params.row0 + row, hash_params.log_len);
        return rows[hash_params.src_offset + (c << hash_params.log_len) + position];
    }
    return rows[hash_params.src_offset + row * hash_params.row_width + c];
}

@compute @workgroup_size(256)
fn hash_rows_quad(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) subgroup_size: u32,
    @builtin(subgroup_invocation_id) lane_id: u32,
) {
    let lane = quad_lane(lane_id);
    let item = quad_index(wid, groups, subgroup, subgroup_size, lane_id);
    let valid = item < hash_params.num_rows;
    let row = min(item, hash_params.num_rows - 1u);
    let num_cols = hash_params.num_cols;
    let first = hash_params.first_event;
    let saved = row * 2u * STATE_WIDTH + 3u * lane.q;

    if (hash_params.copy_rows == 1u && first == 0u) {
        let width = hash_params.row_width;
        let first_row = flat_group(wid, groups) * (WORKGROUP_SIZE / 4u);
        let num_rows = min(WORKGROUP_SIZE / 4u, max(hash_params.num_rows, first_row) - first_row);
        let dst = hash_params.copy_offset + first_row * width;
        let index = subgroup * subgroup_size + lane_id;
        if (hash_params.coset_rows == 1u) {
            for (var i = index; i < num_rows * width; i = i + WORKGROUP_SIZE) {
                let r = i / width;
                let c = i - r * width;
                var value = vec2<u32>(0u, 0u);
                if (c < num_cols) {
                    value = row_element(first_row + r, c);
                }
                row_copies[dst + i] = value;
            }
        } else {
            let src = hash_params.src_offset + first_row * width;
            for (var i = index; i < num_rows * width; i = i + WORKGROUP_SIZE) {
                row_copies[dst + i] = rows[src + i];
            }
        }
    }

    var s: Triple;
    if (first > 0u) {
        for (var k = 0u; k < 3u; k = k + 1u) {
            s[k] = sponges[saved + k];
        }
    } else if (lane.q == 0u) {
        s[0] = gl_from_small(num_cols % 8u);
    }

    for (var b = first; b < first + hash_params.num_events; b = b + 1u) {
        for (var k = 0u; k < 3u; k = k + 1u) {
            let i = 3u * lane.q + k;
            if (i >= 4u) {
                let c = 8u * b + i - 4u;
                var value = vec2<u32>(0u, 0u);
                if (c < num_cols) {
                    value = row_element(row, c);
                }
                s[k] = value;
            }
        }
        permute_quad(&s, lane, b + 1u == hash_params.total_events);
    }

    if (!valid) {
        return;
    }
    if (first + hash_params.num_events < hash_params.total_events) {
        for (var k = 0u; k < 3u; k = k + 1u) {
            sponges[saved + k] = s[k];
        }
    } else {
        // the last permutation left digest element q
        leaves[(hash_params.dst_offset + row) * 4u + lane.q] = gl_canonical(s[0]);
    }
}
