// The RPO256 permutation (miden-crypto `Rpo256::apply_permutation`): seven full Rescue
// rounds. Needs rescue.wgsl.

fn permute(state: ptr<function, State>) {
    for (var round = 0u; round < RESCUE_ROUNDS; round = round + 1u) {
        rescue_round(state, round);
    }
}
