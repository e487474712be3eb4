// The RPX256 permutation on a quad (rescue_quad.wgsl): FB(0) E(1) FB(2) E(3) FB(4) E(5) M(6).
// Lane q's triple is the q-th element of the cubic extension that the (E) rounds raise to the
// 7th power. Needs ext3.wgsl.

fn ext_round_quad(s: ptr<function, Triple>, round: u32, lane: QuadLane) {
    add_constants_quad(s, 0u, round, lane);
    let y = ext3_exp7(Ext3((*s)[0], (*s)[1], (*s)[2]));
    (*s)[0] = y.c0;
    (*s)[1] = y.c1;
    (*s)[2] = y.c2;
}

/// With `digest_only` (uniform), element 0 of lane q holds digest element q on return and the
/// rest is undefined.
fn permute_quad(s: ptr<function, Triple>, lane: QuadLane, digest_only: bool) {
    rescue_round_quad(s, 0u, lane);
    ext_round_quad(s, 1u, lane);
    rescue_round_quad(s, 2u, lane);
    ext_round_quad(s, 3u, lane);
    rescue_round_quad(s, 4u, lane);
    ext_round_quad(s, 5u, lane);
    apply_mds_quad(s, lane);
    add_constants_quad(s, 0u, 6u, lane);
    if (digest_only) {
        (*s)[0] = digest_element_quad(s, lane);
    }
}
