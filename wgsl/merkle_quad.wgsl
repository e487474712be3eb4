// Merkle levels with RPO or RPX on quads (rescue_quad.wgsl): one quad per parent, with the
// parameters, bindings and child addressing of merkle.wgsl. Lane q loads the state elements it
// holds (rate 4..8 the left child, 8..12 the right one) and writes digest element q. Quads past
// the last parent merge the last one again and write nothing, so that every lane of a subgroup
// reaches every shuffle.

@compute @workgroup_size(256)
fn merge_nodes_quad(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) subgroup_size: u32,
    @builtin(subgroup_invocation_id) lane_id: u32,
) {
    let lane = quad_lane(lane_id);
    let item = quad_index(wid, groups, subgroup, subgroup_size, lane_id);
    let valid = item < merge_params.count;
    let x = min(item, merge_params.count - 1u);
    let g = merge_params.log_group;
    let child = ((x >> g) << (g + 1u)) + (x & ((1u << g) - 1u));
    let left = (merge_params.left_offset + child) * 4u;
    let right = (merge_params.right_offset + child) * 4u;
    var s: Triple;
    for (var k = 0u; k < 3u; k = k + 1u) {
        let i = 3u * lane.q + k;
        if (i >= 8u) {
            s[k] = right_nodes[right + i - 8u];
        } else if (i >= 4u) {
            s[k] = left_nodes[left + i - 4u];
        }
    }
    permute_quad(&s, lane, true);
    if (valid) {
        parents[(merge_params.dst_offset + x) * 4u + lane.q] = gl_canonical(s[0]);
    }
}
