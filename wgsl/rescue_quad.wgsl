// The Rescue rounds (RPO256, RPX256) with the state spread over a quad: four consecutive
// invocations of a subgroup, lane q holding state elements 3q, 3q+1, 3q+2 (for RPX, one element
// of the cubic extension). The S-boxes, nearly all of the work, run on 3 elements per invocation
// instead of 12: fewer registers, more resident invocations, and three independent
// multiplication chains in each. The MDS layer gathers the other lanes' elements with subgroup
// shuffles. Each lane applies exactly the operations the one-invocation permutation applies to
// its elements, so the words are the same.
//
// Needs rescue.wgsl (constants, MDS rows, S-boxes) and subgroup operations (wgpu's `SUBGROUP`);
// every quad runs the same code, so the shuffles stay in uniform control flow.

/// The elements of the state one lane holds.
alias Triple = array<vec2<u32>, 3>;

/// A lane's place: `base` is the quad's first lane in the subgroup, `q` the lane's index in it.
struct QuadLane {
    base: u32,
    q: u32,
}

/// The quad lane of subgroup invocation `lane_id`.
fn quad_lane(lane_id: u32) -> QuadLane {
    return QuadLane(lane_id & ~3u, lane_id & 3u);
}

/// The quad index in the whole dispatch of the invocation at `lane_id` of subgroup `subgroup`
/// (of `subgroup_size` lanes, a multiple of 4 that divides WORKGROUP_SIZE) in workgroup `wid`.
fn quad_index(
    wid: vec3<u32>,
    groups: vec3<u32>,
    subgroup: u32,
    subgroup_size: u32,
    lane_id: u32,
) -> u32 {
    return flat_group(wid, groups) * (WORKGROUP_SIZE / 4u) + (subgroup * subgroup_size + lane_id) / 4u;
}

fn add_constants_quad(s: ptr<function, Triple>, table: u32, round: u32, lane: QuadLane) {
    for (var k = 0u; k < 3u; k = k + 1u) {
        (*s)[k] = gl_add((*s)[k], ark(table, round, 3u * lane.q + k));
    }
}

/// The MDS layer on a quad. Lane q gathers y[3m + f] = x[(3q + 3m + f) mod 12] (element f of lane
/// (q + m) mod 4); since the matrix is circulant (checked where the constants are made),
/// out[3q + e] = sum_t MDS[3q + e][(3q + t) mod 12] y[t] = sum_t MDS[e][t] y[t]: row e of the
/// matrix, the same in every lane.
fn apply_mds_quad(s: ptr<function, Triple>, lane: QuadLane) {
    var y: State;
    for (var f = 0u; f < 3u; f = f + 1u) {
        y[f] = (*s)[f];
    }
    for (var m = 1u; m < 4u; m = m + 1u) {
        let source = lane.base + ((lane.q + m) & 3u);
        for (var f = 0u; f < 3u; f = f + 1u) {
            y[3u * m + f] = subgroupShuffle((*s)[f], source);
        }
    }
    for (var e = 0u; e < 3u; e = e + 1u) {
        (*s)[e] = mds_row(&y, e);
    }
}

fn apply_sbox_quad(s: ptr<function, Triple>) {
    for (var k = 0u; k < 3u; k = k + 1u) {
        (*s)[k] = gl_exp7((*s)[k]);
    }
}

fn apply_inv_sbox_quad(s: ptr<function, Triple>) {
    for (var k = 0u; k < 3u; k = k + 1u) {
        (*s)[k] = inv_sbox_element((*s)[k]);
    }
}

/// A full Rescue round on a quad up to its inverse S-box: the two MDS layers, the constants and
/// the forward S-box.
fn rescue_round_quad_linear(s: ptr<function, Triple>, round: u32, lane: QuadLane) {
    apply_mds_quad(s, lane);
    add_constants_quad(s, 0u, round, lane);
    apply_sbox_quad(s);
    apply_mds_quad(s, lane);
    add_constants_quad(s, 1u, round, lane);
}

/// One full Rescue round on a quad with miden-crypto's inverse S-box: RPX's (FB) round.
fn rescue_round_quad(s: ptr<function, Triple>, round: u32, lane: QuadLane) {
    rescue_round_quad_linear(s, round, lane);
    apply_inv_sbox_quad(s);
}

/// Digest element q (state element 4 + q) for lane q: lane 1 holds elements 3..5, lane 2 holds
/// 6..8, so lanes 0 and 3 take their neighbours' middle elements (4 and 7).
fn digest_element_quad(s: ptr<function, Triple>, lane: QuadLane) -> vec2<u32> {
    let middle = subgroupShuffle((*s)[1], lane.base + select(2u, 1u, lane.q == 0u));
    if (lane.q == 1u) {
        return (*s)[2];
    }
    if (lane.q == 2u) {
        return (*s)[0];
    }
    return middle;
}
