// Dispatch helpers shared by every kernel.
//
// Kernels run 256 invocations per workgroup. Large grids are dispatched as 2-D grids of
// workgroups (at most 65535 per dimension), so each kernel flattens its position with
// `flat_id` and returns early past the end of its work.

const WORKGROUP_SIZE: u32 = 256u;

/// The linear index of an invocation in a (possibly 2-D) grid of 1-D workgroups.
fn flat_id(gid: vec3<u32>, num_groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * num_groups.x * WORKGROUP_SIZE;
}

/// The linear index of a workgroup in a (possibly 2-D) grid.
fn flat_group(wid: vec3<u32>, num_groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * num_groups.x;
}

/// `x` with its low `bits` bits reversed (1 <= bits <= 32).
fn bit_reverse(x: u32, bits: u32) -> u32 {
    return reverseBits(x) >> (32u - bits);
}
