// The RPX256 permutation (miden-crypto `Rpx256::apply_permutation`):
// FB(0) E(1) FB(2) E(3) FB(4) E(5) M(6). Needs rescue.wgsl and ext3.wgsl.

/// (E) round: add ARK1, then raise each consecutive triple of the state to the 7th power in
/// the cubic extension.
fn ext_round(state: ptr<function, State>, round: u32) {
    add_constants(state, 0u, round);
    for (var k = 0u; k < STATE_WIDTH; k = k + 3u) {
        let y = ext3_exp7(Ext3((*state)[k], (*state)[k + 1u], (*state)[k + 2u]));
        (*state)[k] = y.c0;
        (*state)[k + 1u] = y.c1;
        (*state)[k + 2u] = y.c2;
    }
}

/// (M) round: MDS, then ARK1.
fn final_round(state: ptr<function, State>, round: u32) {
    apply_mds(state);
    add_constants(state, 0u, round);
}

fn permute(state: ptr<function, State>) {
    rescue_round(state, 0u);
    ext_round(state, 1u);
    rescue_round(state, 2u);
    ext_round(state, 3u);
    rescue_round(state, 4u);
    ext_round(state, 5u);
    final_round(state, 6u);
}
