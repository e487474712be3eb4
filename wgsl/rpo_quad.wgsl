// The RPO256 permutation on a quad (rescue_quad.wgsl): seven full Rescue rounds.

/// With `digest_only` (uniform), only the digest is kept: on return element 0 of lane q holds
/// digest element q and the rest is undefined. The last inverse S-box, element by element, then
/// runs on the four digest elements alone, one per lane instead of three.
fn permute_quad(s: ptr<function, Triple>, lane: QuadLane, digest_only: bool) {
    for (var round = 0u; round < RESCUE_ROUNDS; round = round + 1u) {
        rescue_round_quad_linear(s, round, lane);
        if (digest_only && round + 1u == RESCUE_ROUNDS) {
            (*s)[0] = inv_sbox_element_rpo(digest_element_quad(s, lane));
        } else {
            for (var k = 0u; k < 3u; k = k + 1u) {
                (*s)[k] = inv_sbox_element_rpo((*s)[k]);
            }
        }
    }
}
