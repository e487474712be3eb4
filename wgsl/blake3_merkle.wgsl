// Merkle tree levels with BLAKE3: one invocation merges two child digests into their parent
// (`Hasher::merge`: BLAKE3 of the two digests' bytes, B3_DIGEST_WORDS words each, one block).
//
// Children of parent x are at `((x >> log_group) << (log_group + 1)) + (x & (2^log_group - 1))`
// relative to `left_offset` and `right_offset`, as in merkle.wgsl.

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
@group(0) @binding(1) var<storage, read> left_nodes: array<u32>;
@group(0) @binding(2) var<storage, read> right_nodes: array<u32>;
@group(0) @binding(3) var<storage, read_write> parents: array<u32>;

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
    let left = (merge_params.left_offset + child) * 8u;
    let right = (merge_params.right_offset + child) * 8u;
    var block: B3Block;
    for (var k = 0u; k < B3_DIGEST_WORDS; k = k + 1u) {
        block[k] = left_nodes[left + k];
        block[B3_DIGEST_WORDS + k] = right_nodes[right + k];
    }
    let flags = B3_CHUNK_START | B3_CHUNK_END | B3_ROOT;
    let digest = b3_compress(B3_IV, block, 0u, 8u * B3_DIGEST_WORDS, flags);
    let out = (merge_params.dst_offset + x) * 8u;
    for (var k = 0u; k < 8u; k = k + 1u) {
        parents[out + k] = select(0u, digest[k], k < B3_DIGEST_WORDS);
    }
}
