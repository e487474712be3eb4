// The state of the algebraic sponges (RPO256, RPX256, Poseidon2 in miden-crypto): 12 field
// elements, capacity [0, 4), rate [4, 12), digest [4, 8).

const STATE_WIDTH: u32 = 12u;

/// The sponge state.
alias State = array<vec2<u32>, 12>;
