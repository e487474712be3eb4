//! A commitment's Merkle tree as the backend returned it.
//!
//! Winterfell's `MerkleTree` holds every leaf and node as the hasher's digest: building one from a
//! backend's result converts and copies all of them (64 bytes a leaf, on the proof's path). A
//! proof reads only the root and the openings of the queried leaves, so the prover keeps the
//! backend's digests and converts those alone. A batch opening is winter-crypto's own
//! `BatchMerkleProof::from_single_proofs` of the leaves' paths, which equals
//! `MerkleTree::prove_batch` (winter-crypto's tests assert it; so do this crate's).

use std::collections::BTreeSet;

use winter_crypto::{BatchMerkleProof, Hasher, MerkleTreeError};

/// A leaf and its path, as winter-crypto's `MerkleTree::prove` gives them.
type Opening<H> = (<H as Hasher>::Digest, Vec<<H as Hasher>::Digest>);

use crate::{
    hash::{Digest, GpuHasher},
    host::HostBuffer,
};

/// The leaves and nodes of a commitment, in Winterfell's layout.
#[derive(Debug)]
pub(crate) struct CommittedTree {
    leaves: HostBuffer<Digest>,
    nodes: HostBuffer<Digest>,
}

impl CommittedTree {
    /// The tree of `leaves` and `nodes` (as many as the leaves, a power of two and at least two;
    /// `nodes[1]` the root), as a checked commitment has them.
    pub(crate) fn new(leaves: HostBuffer<Digest>, nodes: HostBuffer<Digest>) -> Self {
        debug_assert!(leaves.len() >= 2 && leaves.len().is_power_of_two());
        debug_assert_eq!(leaves.len(), nodes.len());
        Self { leaves, nodes }
    }

    /// The root.
    pub(crate) fn root<H: GpuHasher>(&self) -> H::Digest {
        H::from_digest(self.nodes[1])
    }

    /// The batch opening of the leaves at `indexes`, as `MerkleTree::prove_batch` gives it, with
    /// its errors for no, repeated or out-of-range indexes.
    pub(crate) fn prove_batch<H: GpuHasher>(
        &self,
        indexes: &[usize],
    ) -> Result<BatchMerkleProof<H>, MerkleTreeError> {
        let leaves = self.leaves.len();
        if indexes.is_empty() {
            return Err(MerkleTreeError::TooFewLeafIndexes);
        }
        if let Some(&index) = indexes.iter().find(|&&index| index >= leaves) {
            return Err(MerkleTreeError::LeafIndexOutOfBounds(leaves, index));
        }
        if indexes.iter().collect::<BTreeSet<_>>().len() != indexes.len() {
            return Err(MerkleTreeError::DuplicateLeafIndex);
        }
        let openings: Vec<_> = indexes.iter().map(|&index| self.opening::<H>(index)).collect();
        Ok(BatchMerkleProof::from_single_proofs(&openings, indexes))
    }

    /// The leaf at `index` (below the leaf count) and its path, as `MerkleTree::prove` gives
    /// them: its sibling leaf, then each node's sibling up to the root's children.
    fn opening<H: GpuHasher>(&self, index: usize) -> Opening<H> {
        let mut path = vec![H::from_digest(self.leaves[index ^ 1])];
        let mut node = (index + self.nodes.len()) >> 1;
        while node > 1 {
            path.push(H::from_digest(self.nodes[node ^ 1]));
            node >>= 1;
        }
        (H::from_digest(self.leaves[index]), path)
    }
}

#[cfg(test)]
mod tests {
    use miden_crypto::hash::{blake::Blake3_192, rpo::Rpo256};
    use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
    use winter_crypto::MerkleTree;

    use super::*;

    /// A tree of `leaves` random digests, as Winterfell's type and as this one.
    fn trees<H: GpuHasher>(rng: &mut StdRng, leaves: usize) -> (MerkleTree<H>, CommittedTree) {
        let digests: Vec<Digest> = (0..leaves).map(|_| random_digest::<H>(rng)).collect();
        let winterfell =
            MerkleTree::<H>::new(digests.iter().map(|&d| H::from_digest(d)).collect()).unwrap();
        let nodes: Vec<Digest> = winterfell_nodes(&winterfell);
        (winterfell, CommittedTree::new(digests.into(), nodes.into()))
    }

    /// A digest this hasher has (a hash of random bytes, so every hasher's digest is valid).
    fn random_digest<H: GpuHasher>(rng: &mut StdRng) -> Digest {
        let bytes: [u8; 32] = rng.random();
        H::to_digest(&<H as winter_crypto::Hasher>::hash(&bytes))
    }

    /// Winterfell's nodes in its layout, read back through its own openings: node `i`'s value is
    /// a path element of a leaf below its sibling.
    fn winterfell_nodes<H: GpuHasher>(tree: &MerkleTree<H>) -> Vec<Digest> {
        let leaves = tree.leaves().len();
        let mut nodes = vec![Digest::ZERO; leaves];
        nodes[1] = H::to_digest(tree.root());
        for leaf in 0..leaves {
            let (_, path) = tree.prove(leaf).unwrap();
            let mut node = (leaf + leaves) >> 1;
            for sibling in &path[1..] {
                nodes[node ^ 1] = H::to_digest(sibling);
                node >>= 1;
            }
        }
        nodes
    }

    fn openings_equal_winterfell<H: GpuHasher>() {
        let mut rng = StdRng::seed_from_u64(7);
        for log_leaves in [1, 2, 3, 6, 10] {
            let (winterfell, ours) = trees::<H>(&mut rng, 1 << log_leaves);
            assert_eq!(ours.root::<H>(), *winterfell.root());
            for _ in 0..20 {
                let mut indexes: Vec<usize> = (0..1usize << log_leaves).collect();
                indexes.shuffle(&mut rng);
                indexes.truncate(rng.random_range(1..=indexes.len().min(40)));
                let (_, expected) = winterfell.prove_batch(&indexes).unwrap();
                let actual = ours.prove_batch::<H>(&indexes).unwrap();
                assert!(actual.nodes == expected.nodes, "{indexes:?}");
                assert_eq!(actual.depth, expected.depth);
            }
            let leaves = 1usize << log_leaves;
            for bad in [vec![], vec![0, 0], vec![leaves]] {
                let error =
                    |result: Result<_, MerkleTreeError>| result.err().map(|e| e.to_string());
                let expected = error(winterfell.prove_batch(&bad).map(|_| ()));
                assert!(expected.is_some(), "{bad:?}");
                assert_eq!(error(ours.prove_batch::<H>(&bad).map(|_| ())), expected);
            }
        }
    }

    #[test]
    fn rpo_openings_equal_winterfell() {
        openings_equal_winterfell::<Rpo256>();
    }

    #[test]
    fn blake3_openings_equal_winterfell() {
        openings_equal_winterfell::<Blake3_192>();
    }
}
