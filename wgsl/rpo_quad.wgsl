// The RPO256 permutation on a quad (rescue_quad.wgsl): seven full Rescue rounds.

fn permute_quad(s: ptr<function, Triple>, lane: QuadLane) {
    for (var round = 0u; round < RESCUE_ROUNDS; round = round + 1u) {
        rescue_round_quad(s, round, lane);
    }
}
