//! The shared parity harness on the CPU backend, and proof that the harness can fail: a
//! committer that corrupts one element of any output must be caught.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use miden_gpu::{
    Backend, CommitRequest, Commitment, CpuCommitter, Digest, GpuCommitter, HashFunction, LdeRows,
    Result, RowHashing,
};
use winter_math::FieldElement;

#[test]
fn cpu_backend_matches_winterfell() {
    common::run_parity_suite(&CpuCommitter::new(), 0xC0FFEE, 60, &HashFunction::ALL);
}

/// The CPU backend's proof-of-work search (the GPU backends' oracle) against miden-crypto's
/// coins.
#[test]
fn cpu_grinding_matches_the_coins() {
    common::check_grind(&CpuCommitter::new(), 0x6A1D, 12, 0..=12);
}

// HARNESS SELF-TEST
// ================================================================================================

/// Which output a [`Corrupting`] committer damages.
#[derive(Debug, Clone, Copy)]
enum Damage {
    Polynomial,
    LdeElement,
    Leaf,
    InnerNode,
    RootByte,
}

/// The CPU backend with one element of its output changed.
struct Corrupting(Damage);

impl GpuCommitter for Corrupting {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }

    fn device_name(&self) -> String {
        format!("corrupting {:?}", self.0)
    }

    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
        let mut c = CpuCommitter::new().commit(request)?;
        let last = c.nodes.len() - 1;
        match self.0 {
            Damage::Polynomial => c.polys[0][0] += miden_gpu::Felt::ONE,
            Damage::LdeElement => {
                let i = c.lde.data.len() / 2 / c.lde.row_width * c.lde.row_width;
                c.lde.data[i] += miden_gpu::Felt::ONE
            },
            Damage::Leaf => c.leaves[1] = flip_bit(c.leaves[1], 2, 17),
            Damage::InnerNode => c.nodes[last] = flip_bit(c.nodes[last], 0, 40),
            Damage::RootByte => c.nodes[1] = flip_bit(c.nodes[1], 2, 8),
        }
        Ok(c)
    }

    fn hash_rows(&self, lde: &LdeRows, h: RowHashing, f: HashFunction) -> Result<Vec<Digest>> {
        CpuCommitter::new().hash_rows(lde, h, f)
    }

    fn build_tree(&self, leaves: &[Digest], f: HashFunction) -> Result<Vec<Digest>> {
        CpuCommitter::new().build_tree(leaves, f)
    }
}

/// `digest` with one bit of one word flipped (words 0-2 are meaningful for every hash function).
fn flip_bit(digest: Digest, word: usize, bit: u32) -> Digest {
    let mut words = digest.words();
    words[word] ^= 1 << bit;
    Digest::from_words(words)
}

#[test]
fn harness_catches_every_kind_of_difference() {
    for damage in
        [Damage::Polynomial, Damage::LdeElement, Damage::Leaf, Damage::InnerNode, Damage::RootByte]
    {
        for case in common::random_cases(7, 15, &HashFunction::ALL) {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                common::check_case(&Corrupting(damage), &case, 1)
            }));
            assert!(outcome.is_err(), "harness accepted {damage:?} in {case:?}");
        }
    }
}

/// The CPU backend's commitments of wide, short LDEs on 32 threads equal those on one.
#[test]
fn cpu_commitments_do_not_depend_on_thread_counts() {
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let many = rayon::ThreadPoolBuilder::new().num_threads(32).build().unwrap();
    let found = many.install(|| {
        struct OnOneThread(rayon::ThreadPool);
        impl GpuCommitter for OnOneThread {
            fn backend(&self) -> Backend {
                Backend::Cpu
            }
            fn device_name(&self) -> String {
                "CPU on one thread".into()
            }
            fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment> {
                self.0.install(|| CpuCommitter::new().commit(request))
            }
            fn hash_rows(
                &self,
                l: &LdeRows,
                h: RowHashing,
                f: HashFunction,
            ) -> Result<Vec<Digest>> {
                self.0.install(|| CpuCommitter::new().hash_rows(l, h, f))
            }
            fn build_tree(&self, leaves: &[Digest], f: HashFunction) -> Result<Vec<Digest>> {
                self.0.install(|| CpuCommitter::new().build_tree(leaves, f))
            }
        }
        common::wide_short_lde_differences(&OnOneThread(one), 0x51DE)
    });
    assert!(found.is_empty(), "{} shapes differ:\n{}", found.len(), found.join("\n"));
}
