//! MASM workloads for the Miden benchmarks, example and tests.
//!
//! Each takes the iteration count `n` as its only stack input ([`iteration_inputs`]), so one
//! assembled program (one program hash) serves every trace length, and the cycle count grows
//! linearly with `n` ([`iterations_for_rows`] finds the `n` of a trace length).

use miden_crypto::Felt;
use miden_processor::{
    AdviceInputs, DefaultHost, ExecutionError, ExecutionOptions, Program, StackInputs,
    NUM_RAND_ROWS,
};
use winter_math::FieldElement;

/// Fibonacci in a `while` loop: stack input `[n]`, stack output `[F(n+1), F(n), 0, ...]` (mod p);
/// see [`fibonacci_outputs`]. The core (stack/decoder) trace grows by a constant number of cycles
/// per iteration; the chiplets stay small (the hasher only hashes the program).
pub const FIBONACCI: &str = "
begin
    # [n] -> [n, b = F(1), a = F(0)]
    push.0 push.1 movup.2
    dup neq.0
    while.true
        # [n, b, a] -> [n - 1, a + b, b]
        movdn.2 swap dup.1 add
        movup.2 sub.1
        dup neq.0
    end
    # [0, F(n+1), F(n), 0, 0, ...]: drop the counter and one padding zero (depth back to 16)
    drop movup.2 drop
end
";

/// RPO permutations, merges and memory traffic in a `while` loop: stack input `[n]`, output the
/// top word of the final 12-element state. The counter lives in memory (at `2^25`); each
/// iteration runs `hperm` and `hmerge` (hasher chiplet), stores and reloads the merged word at
/// word address `4n` (`mem_storew_be`, `mem_loadw_be`) and one element at `2^24 + n`
/// (`mem_store`, `mem_load`), nine memory accesses in all, whose address deltas also feed the
/// range checker.
pub const HASH_MEMORY: &str = "
const COUNTER = 33554432
const ELEMENTS = 16777216

begin
    # [n] -> counter = n; [S] with a 12-element state S
    mem_store.COUNTER
    push.1.2.3.4.5.6.7.8.9.10.11.12
    mem_load.COUNTER neq.0
    while.true
        # S' = hperm(S); D = hmerge(S'[4..8], S'[0..4]): [D, S']
        hperm
        dupw dupw.2 hmerge
        # mem[4n..4n+4] = D, then reload it
        mem_load.COUNTER mul.4 mem_storew_be dropw
        padw mem_load.COUNTER mul.4 mem_loadw_be
        # replace the top word of S' with D: [D, S'[4..12]]
        swapw dropw
        # mem[2^24 + n] = s0; s0 += mem[2^24 + n]
        dup mem_load.COUNTER add.ELEMENTS mem_store
        mem_load.COUNTER add.ELEMENTS mem_load add
        # counter -= 1; continue while it is not zero
        mem_load.COUNTER sub.1 dup mem_store.COUNTER
        neq.0
    end
    # [S, 0, ...] -> keep the top word of S (depth back to 16)
    repeat.12 movup.4 drop end
end
";

/// 32-bit arithmetic over advice values in a `while` loop: stack input `[n]`, advice stack of at
/// least `n` values below 2^32; each iteration reads one (`adv_push`, `u32assert`), then
/// `acc = acc·v + n` (wrapping), `acc = (acc / 7) xor acc`, output `[acc]`. The u32 operations
/// decompose their operands into 16-bit limbs, so the range checker grows with `n`.
pub const U32_ADVICE: &str = "
begin
    # [n] -> [n, acc = 1]
    push.1 swap
    dup neq.0
    while.true
        # [n, acc] -> [v, n, acc] with v < 2^32 from the advice stack
        adv_push.1 u32assert
        # acc = acc * v + n (mod 2^32): [acc, n]
        movup.2 u32wrapping_mul dup.1 u32wrapping_add
        # acc = (acc / 7) xor acc
        dup u32div.7 u32xor
        # [n - 1, acc]; continue while n - 1 is not zero
        swap sub.1
        dup neq.0
    end
    # [0, acc, ...] -> [acc, ...] (depth back to 16)
    drop
end
";

/// The top two stack outputs of [`FIBONACCI`] for input `n`: `[F(n+1), F(n)]` in the field.
pub fn fibonacci_outputs(n: u64) -> [Felt; 2] {
    let (mut a, mut b) = (Felt::ZERO, Felt::ONE);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    [b, a]
}

/// The stack inputs of an iteration count `n`: `[n]`, as [`FIBONACCI`] and [`HASH_MEMORY`] take
/// it.
pub fn iteration_inputs(n: u64) -> StackInputs {
    StackInputs::new(vec![Felt::new(n)]).expect("one input is a valid stack")
}

/// The iteration count whose execution trace fills 2^`log_rows` rows, for a program that takes
/// its iteration count as its only input ([`FIBONACCI`], [`HASH_MEMORY`]): the step count is
/// linear in the iterations, so two short executions give its slope and intercept. Room is left
/// for the random rows, and 1/64 of the rows for the range checker's non-linear growth, so the
/// trace is 2^`log_rows` rows and not twice that.
///
/// # Errors
/// The error of a probing execution.
pub fn iterations_for_rows(program: &Program, log_rows: u32) -> Result<u64, ExecutionError> {
    const PROBE: u64 = 64;
    let steps = |iterations| {
        miden_processor::execute(
            program,
            iteration_inputs(iterations),
            AdviceInputs::default(),
            &mut DefaultHost::default(),
            ExecutionOptions::default(),
        )
        .map(|trace| trace.trace_len_summary().trace_len() as u64)
    };
    let (short, long) = (steps(PROBE)?, steps(2 * PROBE)?);
    let per_iteration = (long - short).div_ceil(PROBE).max(1);
    let fixed = short.saturating_sub(PROBE * per_iteration);
    let rows = (1u64 << log_rows) - NUM_RAND_ROWS as u64 - (1u64 << log_rows) / 64;
    Ok((rows.saturating_sub(fixed) / per_iteration).max(1))
}
