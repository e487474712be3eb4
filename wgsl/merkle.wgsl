// Merkle tree levels: one invocation merges two child digests into their parent
// (`Hasher::merge`: capacity zero, rate = left || right, one permutation, digest = state[4..8]).
// Needs a permutation (rpo.wgsl or rpx.wgsl).
//
// Children of parent x are at `((x >> log_group) << (log_group + 1)) + (x & (2^log_group - 1))`
// relative to `left_offset` and `right_offset`: log_group 0 merges adjacent pairs (a level in
// natural order); log_group g merges the same position of two consecutive groups of 2^g
// digests (a level stored group-major, see src/wgpu/merkle.rs).

struct MergeParams {
    /// Parents computed by this dispatch.
    count: u32,
    log_group: u32,
    /// Digest index of child 0's left input in `left_nodes`.
    left_offset: u32,
    /// Digest index of child 0's right input in `right_nodes`.
    right_offset: u32,
    /// Digest index of parent 0 in `parents`.
    dst_offset: u32,
}

@group(0) @binding(0) var<uniform> merge_params: MergeParams;
@group(0) @binding(1) var<storage, read> left_nodes: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> right_nodes: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> parents: array<vec2<u32>>;

@compute @workgroup_size(256)
fn merge_nodes(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let x = flat_id(gid, groups);
    if (x >= merge_params.count) {
        return;
    }
    let g = merge_params.log_group;
    let child = ((x >> g) << (g + 1u)) + (x & ((1u << g) - 1u));
    let left = (merge_params.left_offset + child) * 4u;
    let right = (merge_params.right_offset + child) * 4u;
    var state: State;
    for (var k = 0u; k < 4u; k = k + 1u) {
        state[4u + k] = left_nodes[left + k];
        state[8u + k] = right_nodes[right + k];
    }
    permute(&state);
    let out = (merge_params.dst_offset + x) * 4u;
    for (var k = 0u; k < 4u; k = k + 1u) {
        parents[out + k] = gl_canonical(state[4u + k]);
    }
}
