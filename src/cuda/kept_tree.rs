//! Merkle trees kept on the GPUs after a commitment, read at the queried paths alone.
//!
//! A commitment that keeps its tree downloads no leaf and no node below the Merkle blocks' roots:
//! each GPU keeps its `leaves` and `nodes` buffers instead (both indexed as the whole tree's, the
//! leaves and subtrees of its own blocks filled), and the host keeps the nodes from the root down
//! to the block roots, which it merged itself. A read gathers the asked digests' words on the
//! GPUs that hold them (`gather_words`) and downloads them alone.

use std::{
    ops::Range,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use super::{buffer::DeviceBuffer, fri::gather_to_host, gpu::Gpu, recovery::recover};
use crate::{
    committer::KeptTree,
    error::{GpuError, Result},
    hash::Digest,
    host::HostBuffer,
};

/// One GPU's part of a kept tree: the leaves and subtrees of its blocks.
pub(super) struct TreeShare {
    /// Index of the GPU in its committer.
    pub gpu: usize,
    /// The Merkle blocks whose leaves and subtrees this GPU built.
    pub blocks: Range<usize>,
    /// The tree's leaves, indexed as the whole tree's.
    pub leaves: DeviceBuffer<Digest>,
    /// The tree's nodes in Winterfell's layout, indexed as the whole tree's.
    pub nodes: DeviceBuffer<Digest>,
    held: Arc<AtomicU64>,
}

impl TreeShare {
    /// Takes `leaves` and `nodes` as GPU `gpu`'s share of `blocks`, counting their bytes in
    /// `held`.
    pub fn new(
        gpu: usize,
        blocks: Range<usize>,
        leaves: DeviceBuffer<Digest>,
        nodes: DeviceBuffer<Digest>,
        held: Arc<AtomicU64>,
    ) -> Self {
        held.fetch_add((leaves.bytes() + nodes.bytes()) as u64, Ordering::SeqCst);
        Self { gpu, blocks, leaves, nodes, held }
    }
}

impl Drop for TreeShare {
    fn drop(&mut self) {
        let bytes = self.leaves.bytes() + self.nodes.bytes();
        self.held.fetch_sub(bytes as u64, Ordering::SeqCst);
    }
}

/// A commitment's Merkle tree on the GPUs of one committer.
pub(super) struct CudaKeptTree {
    pub gpus: Arc<Vec<Gpu>>,
    /// Each GPU's share, in block order.
    pub shares: Vec<TreeShare>,
    /// Nodes 0 to `2·blocks` (the unused node 0, the root, down to the block roots).
    pub top: HostBuffer<Digest>,
    /// Merkle blocks (a power of two).
    pub blocks: usize,
    /// Leaves of the tree.
    pub num_leaves: usize,
}

impl std::fmt::Debug for CudaKeptTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKeptTree")
            .field("leaves", &self.num_leaves)
            .field("gpus", &self.shares.len())
            .finish_non_exhaustive()
    }
}

/// Where a digest of a kept tree is read.
enum Place {
    /// Node `i` of the host's top.
    Top(usize),
    /// Leaf or node `index` of the GPU holding `block`.
    Gpu { block: usize, leaf: bool, index: usize },
}

impl KeptTree for CudaKeptTree {
    fn num_leaves(&self) -> usize {
        self.num_leaves
    }

    /// The digests, gathered on each GPU that holds some of them; refused at once where the
    /// GPUs are lost; after an error the GPUs are drained as after a failed call of the
    /// committer.
    fn read(&self, leaves: &[usize], nodes: &[usize]) -> Result<(Vec<Digest>, Vec<Digest>)> {
        let health = &self.gpus[0].health;
        health.usable()?;
        let n = self.num_leaves;
        let out_of_range =
            leaves.iter().find(|&&i| i >= n).or(nodes.iter().find(|&&i| i == 0 || i >= n));
        if let Some(&index) = out_of_range {
            return Err(GpuError::RowOutOfRange { row: index, rows: n });
        }
        let _span =
            tracing::info_span!("cuda.read_tree", leaves = leaves.len(), nodes = nodes.len())
                .entered();
        let places: Vec<Place> = leaves
            .iter()
            .map(|&i| self.leaf_place(i))
            .chain(nodes.iter().map(|&i| self.node_place(i)))
            .collect();
        let mut digests = vec![Digest::ZERO; places.len()];
        for (g, share) in self.shares.iter().enumerate() {
            let mine: Vec<(usize, bool, usize)> = places
                .iter()
                .enumerate()
                .filter_map(|(slot, place)| match *place {
                    Place::Gpu { block, leaf, index } if share.blocks.contains(&block) => {
                        Some((slot, leaf, index))
                    },
                    _ => None,
                })
                .collect();
            if mine.is_empty() {
                continue;
            }
            let gpu = &self.gpus[share.gpu];
            // the gathered words are allocated within the GPU's budget, as a call's are
            let _turn = gpu.device.turn();
            let words = match gather(gpu, share, &mine) {
                Ok(words) => words,
                Err(error) => {
                    recover(std::slice::from_ref(gpu), health, &error);
                    tracing::warn!(gpu = g, %error, "cuda: reading a kept tree failed");
                    return Err(error);
                },
            };
            let leaf_count = mine.iter().filter(|(_, leaf, _)| *leaf).count();
            let (leaf_words, node_words) = words.split_at(leaf_count * 4);
            let (mut leaf_words, mut node_words) = (leaf_words.chunks(4), node_words.chunks(4));
            for &(slot, leaf, _) in &mine {
                let w = if leaf { leaf_words.next() } else { node_words.next() };
                let w = w.expect("one digest gathered for each index");
                digests[slot] = Digest::from_words([w[0], w[1], w[2], w[3]]);
            }
        }
        for (slot, place) in places.iter().enumerate() {
            if let Place::Top(i) = *place {
                digests[slot] = self.top[i];
            }
        }
        let nodes_out = digests.split_off(leaves.len());
        Ok((digests, nodes_out))
    }
}

impl CudaKeptTree {
    /// Where leaf `i` (below the leaf count) is.
    fn leaf_place(&self, i: usize) -> Place {
        Place::Gpu { block: i / (self.num_leaves / self.blocks), leaf: true, index: i }
    }

    /// Where node `i` (1 to below the leaf count) is: in the host's top above the blocks' own
    /// levels, else on the GPU of its block (a level of `count` nodes gives each block
    /// `count / blocks` of them).
    fn node_place(&self, i: usize) -> Place {
        if i < 2 * self.blocks {
            return Place::Top(i);
        }
        let count = 1usize << i.ilog2();
        Place::Gpu { block: (i - count) / (count / self.blocks), leaf: false, index: i }
    }
}

/// The words of the digests `mine` lists (leaves first, then nodes, each in list order) on
/// `share`'s GPU.
fn gather(gpu: &Gpu, share: &TreeShare, mine: &[(usize, bool, usize)]) -> Result<Vec<u64>> {
    let words = |leaf: bool| -> Vec<u64> {
        mine.iter()
            .filter(|(_, l, _)| *l == leaf)
            .flat_map(|&(_, _, index)| (0..4).map(move |w| (index * 4 + w) as u64))
            .collect()
    };
    gather_to_host(
        gpu,
        &[
            (share.leaves.as_slice().as_words(), words(true)),
            (share.nodes.as_slice().as_words(), words(false)),
        ],
    )
}
