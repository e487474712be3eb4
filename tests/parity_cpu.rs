//! The shared parity harness on the CPU backend, and proof that the harness can fail: a
//! committer that corrupts one element of any output must be caught.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use miden_gpu::{
    Backend, CommitRequest, Commitment, CpuCommitter, GpuCommitter, HashFunction, LdeRows, Result,
    RowHashing,
};
use winter_math::FieldElement;

#[test]
fn cpu_backend_matches_winterfell() {
    common::run_parity_suite(&CpuCommitter::new(), 0xC0FFEE, 60);
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
            Damage::Leaf => c.leaves[1][2] += miden_gpu::Felt::ONE,
            Damage::InnerNode => c.nodes[last][0] += miden_gpu::Felt::ONE,
            // One bit of the canonical encoding of the root's last element.
            Damage::RootByte => {
                let v = c.nodes[1][3].as_int() ^ 1;
                c.nodes[1][3] = miden_gpu::Felt::new(v);
            },
        }
        Ok(c)
    }

    fn hash_rows(
        &self,
        lde: &LdeRows,
        h: RowHashing,
        f: HashFunction,
    ) -> Result<Vec<[miden_gpu::Felt; 4]>> {
        CpuCommitter::new().hash_rows(lde, h, f)
    }

    fn build_tree(
        &self,
        leaves: &[[miden_gpu::Felt; 4]],
        f: HashFunction,
    ) -> Result<Vec<[miden_gpu::Felt; 4]>> {
        CpuCommitter::new().build_tree(leaves, f)
    }
}

#[test]
fn harness_catches_every_kind_of_difference() {
    for damage in
        [Damage::Polynomial, Damage::LdeElement, Damage::Leaf, Damage::InnerNode, Damage::RootByte]
    {
        for case in common::random_cases(7, 12) {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                common::check_case(&Corrupting(damage), &case, 1)
            }));
            assert!(outcome.is_err(), "harness accepted {damage:?} in {case:?}");
        }
    }
}
