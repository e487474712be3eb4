//! A commitment's Merkle tree as the backend returned it: on the host, or kept in the backend's
//! memory.
//!
//! Winterfell's `MerkleTree` holds every leaf and node as the hasher's digest: building one from a
//! backend's result converts and copies all of them (64 bytes a leaf, on the proof's path). A
//! proof reads only the root and the openings of the queried leaves, so the prover keeps the
//! backend's digests, on the host or where the backend left them ([`KeptTree`]), and reads and
//! converts those alone. A batch opening is winter-crypto's own
//! `BatchMerkleProof::from_single_proofs` of the leaves' paths, which equals
//! `MerkleTree::prove_batch` (winter-crypto's tests assert it; so do this crate's).

use std::{collections::BTreeSet, sync::Arc};

use winter_crypto::{BatchMerkleProof, Hasher, MerkleTreeError};

use crate::{
    committer::KeptTree,
    error::{GpuError, Result},
    hash::{Digest, GpuHasher},
    host::HostBuffer,
};

/// A leaf and its path, as winter-crypto's `MerkleTree::prove` gives them.
type Opening<H> = (<H as Hasher>::Digest, Vec<<H as Hasher>::Digest>);

/// The leaves and nodes of a commitment, in Winterfell's layout.
#[derive(Debug)]
pub(crate) enum CommittedTree {
    /// Every leaf and node on the host.
    Host { leaves: HostBuffer<Digest>, nodes: HostBuffer<Digest> },
    /// The root on the host, the rest in the backend's memory.
    Kept { root: Digest, tree: Arc<dyn KeptTree> },
}

impl CommittedTree {
    /// The tree of a checked commitment: `kept` where the backend kept it (`nodes[1]` its
    /// root), else `leaves` and `nodes` (as many as the leaves, a power of two and at least two;
    /// `nodes[1]` the root).
    pub(crate) fn new(
        leaves: HostBuffer<Digest>,
        nodes: HostBuffer<Digest>,
        kept: Option<Arc<dyn KeptTree>>,
    ) -> Self {
        if let Some(tree) = kept {
            return Self::Kept { root: nodes[1], tree };
        }
        debug_assert!(leaves.len() >= 2 && leaves.len().is_power_of_two());
        debug_assert_eq!(leaves.len(), nodes.len());
        Self::Host { leaves, nodes }
    }

    /// The root.
    pub(crate) fn root<H: GpuHasher>(&self) -> H::Digest {
        H::from_digest(match self {
            Self::Host { nodes, .. } => nodes[1],
            Self::Kept { root, .. } => *root,
        })
    }

    /// The tree where it is on the host (`None`, and the backend's memory freed, where it was
    /// kept there).
    pub(crate) fn into_host(self) -> Option<Self> {
        matches!(self, Self::Host { .. }).then_some(self)
    }

    fn num_leaves(&self) -> usize {
        match self {
            Self::Host { leaves, .. } => leaves.len(),
            Self::Kept { tree, .. } => tree.num_leaves(),
        }
    }

    /// The batch opening of the leaves at `indexes`, as `MerkleTree::prove_batch` gives it; no,
    /// repeated or out-of-range indexes are [`GpuError::InvalidOpening`] with winter-crypto's
    /// words, and a failed read of a kept tree is the backend's error.
    pub(crate) fn prove_batch<H: GpuHasher>(
        &self,
        indexes: &[usize],
    ) -> Result<BatchMerkleProof<H>> {
        let leaves = self.num_leaves();
        let invalid = |error: MerkleTreeError| GpuError::InvalidOpening(error.to_string());
        if indexes.is_empty() {
            return Err(invalid(MerkleTreeError::TooFewLeafIndexes));
        }
        if let Some(&index) = indexes.iter().find(|&&index| index >= leaves) {
            return Err(invalid(MerkleTreeError::LeafIndexOutOfBounds(leaves, index)));
        }
        if indexes.iter().collect::<BTreeSet<_>>().len() != indexes.len() {
            return Err(invalid(MerkleTreeError::DuplicateLeafIndex));
        }
        // each opening reads its leaf, its sibling leaf, then each node's sibling up to the
        // root's children (as `MerkleTree::prove`)
        let leaf_indexes: Vec<usize> = indexes.iter().flat_map(|&i| [i, i ^ 1]).collect();
        let node_indexes: Vec<usize> =
            indexes.iter().flat_map(|&i| path_siblings(i, leaves)).collect();
        let (leaf_digests, node_digests) = match self {
            Self::Host { leaves, nodes } => (
                leaf_indexes.iter().map(|&i| leaves[i]).collect(),
                node_indexes.iter().map(|&i| nodes[i]).collect(),
            ),
            Self::Kept { tree, .. } => tree.read(&leaf_indexes, &node_indexes)?,
        };
        if (leaf_digests.len(), node_digests.len()) != (leaf_indexes.len(), node_indexes.len()) {
            return Err(GpuError::InvalidOpening(format!(
                "the kept tree returned {} leaves and {} nodes for {} and {}",
                leaf_digests.len(),
                node_digests.len(),
                leaf_indexes.len(),
                node_indexes.len()
            )));
        }
        let path_len = leaves.ilog2() as usize - 1;
        let openings: Vec<Opening<H>> = leaf_digests
            .chunks(2)
            .enumerate()
            .map(|(k, leaf)| {
                let path = &node_digests[k * path_len..(k + 1) * path_len];
                let mut opening = vec![H::from_digest(leaf[1])];
                opening.extend(path.iter().map(|&d| H::from_digest(d)));
                (H::from_digest(leaf[0]), opening)
            })
            .collect();
        Ok(BatchMerkleProof::from_single_proofs(&openings, indexes))
    }
}

/// The nodes whose values the path of leaf `index` (of `leaves`) holds above the leaves: each
/// ancestor's sibling, from the leaf's parent's up to the root's children.
fn path_siblings(index: usize, leaves: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some((index + leaves) >> 1), |&node| Some(node >> 1))
        .take_while(|&node| node > 1)
        .map(|node| node ^ 1)
}

#[cfg(test)]
mod tests {
    use miden_crypto::hash::{blake::Blake3_192, rpo::Rpo256};
    use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
    use winter_crypto::MerkleTree;

    use super::*;

    /// A tree of `leaves` random digests, as Winterfell's type and as this one: on the host,
    /// and kept ([`Kept`]).
    fn trees<H: GpuHasher>(rng: &mut StdRng, leaves: usize) -> (MerkleTree<H>, [CommittedTree; 2]) {
        let digests: Vec<Digest> = (0..leaves).map(|_| random_digest::<H>(rng)).collect();
        let winterfell =
            MerkleTree::<H>::new(digests.iter().map(|&d| H::from_digest(d)).collect()).unwrap();
        let nodes: Vec<Digest> = winterfell_nodes(&winterfell);
        let kept = Arc::new(Kept { leaves: digests.clone(), nodes: nodes.clone() });
        let root = vec![Digest::ZERO, nodes[1]];
        let host = CommittedTree::new(digests.into(), nodes.into(), None);
        (winterfell, [host, CommittedTree::new(Vec::new().into(), root.into(), Some(kept))])
    }

    /// A tree "kept" in vectors, read through [`KeptTree::read`].
    #[derive(Debug)]
    struct Kept {
        leaves: Vec<Digest>,
        nodes: Vec<Digest>,
    }

    impl KeptTree for Kept {
        fn num_leaves(&self) -> usize {
            self.leaves.len()
        }

        fn read(&self, leaves: &[usize], nodes: &[usize]) -> Result<(Vec<Digest>, Vec<Digest>)> {
            assert!(nodes.iter().all(|&i| (1..self.nodes.len()).contains(&i)), "{nodes:?}");
            let leaves = leaves.iter().map(|&i| self.leaves[i]).collect();
            Ok((leaves, nodes.iter().map(|&i| self.nodes[i]).collect()))
        }
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
            let leaves = 1usize << log_leaves;
            let (winterfell, both) = trees::<H>(&mut rng, leaves);
            for ours in &both {
                assert_eq!(ours.root::<H>(), *winterfell.root());
                for _ in 0..20 {
                    let mut indexes: Vec<usize> = (0..leaves).collect();
                    indexes.shuffle(&mut rng);
                    indexes.truncate(rng.random_range(1..=leaves.min(40)));
                    let (_, expected) = winterfell.prove_batch(&indexes).unwrap();
                    let actual = ours.prove_batch::<H>(&indexes).unwrap();
                    assert!(actual.nodes == expected.nodes, "{indexes:?}");
                    assert_eq!(actual.depth, expected.depth);
                }
                for bad in [vec![], vec![0, 0], vec![leaves]] {
                    let expected = winterfell.prove_batch(&bad).err().map(|e| e.to_string());
                    assert!(expected.is_some(), "{bad:?}");
                    let actual = match ours.prove_batch::<H>(&bad) {
                        Err(GpuError::InvalidOpening(words)) => Some(words),
                        other => panic!("{bad:?}: {:?}", other.err()),
                    };
                    assert_eq!(actual, expected);
                }
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
