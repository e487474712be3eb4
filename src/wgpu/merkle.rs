//! Merkle trees (`merkle.wgsl`, or `merkle_quad.wgsl` for RPO/RPX on a device with subgroups),
//! one level per dispatch, all levels in one submission.
//!
//! Leaves produced coset by coset are stored *group-major*: the leaves of LDE rows
//! `q, q + W, q + 2W, ...` (one coset of the LDE domain, `W` cosets of `U` rows) are contiguous,
//! device index `q U + u` for natural index `q + W u`. Winterfell's tree merges natural
//! neighbours `2p, 2p + 1`, which are the same position `u` of groups `2q', 2q' + 1`: so the
//! first log2(W) levels merge group `2q'` with group `2q' + 1` element-wise and stay
//! group-major with half as many groups; from the level with one group on, the layout is
//! natural and adjacent pairs merge. No level is ever reordered on the device.

use super::kernels::MergeParams;
use super::{
    batch::Batch,
    buffers::{BufferPool, Chunked},
    download::{download_array, DownloadQueue, RecordSink, Sinks, Store, Target},
    kernels::{merge_nodes, merge_nodes_quad},
    shaders::QUAD_HASHES,
    sizes::DIGEST_BYTES,
};
use crate::{
    error::{to_u32, Result},
    hash::HashFunction,
};

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(MergeParams { count, log_group, left_offset, right_offset, dst_offset })]
}

/// The group-major layout of an array of `len` nodes: `groups` groups of `len / groups`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub groups: u64,
    pub group_len: u64,
}

impl Layout {
    /// The layout of `len` leaves stored as `groups` groups.
    pub fn new(len: u64, groups: u64) -> Self {
        Self { groups, group_len: len / groups }
    }

    /// The layout of the parent level.
    pub fn parent(self) -> Self {
        if self.groups >= 2 {
            Self { groups: self.groups / 2, group_len: self.group_len }
        } else {
            Self { groups: 1, group_len: self.group_len / 2 }
        }
    }
}

/// Records every level above `leaves` (stored in `layout`) into `levels`: `levels[0]` gets
/// the parents of the leaves, the last one the root.
pub(super) fn record_tree(
    batch: &mut Batch,
    hash: HashFunction,
    leaves: &Chunked,
    layout: Layout,
    levels: &[Chunked],
) -> Result<()> {
    let mut children = leaves;
    let mut layout = layout;
    for parents in levels {
        record_level(batch, hash, children, layout, parents)?;
        children = parents;
        layout = layout.parent();
    }
    Ok(())
}

/// Records every level above `leaves`, as [`record_tree`] does, and their downloads into the
/// sinks of [`push_level_sinks`] (the first is sink `first_sink`), as [`download_levels`] does.
/// The lowest level, half of the nodes, is submitted with its download by itself: the host takes
/// it while the device merges the levels above.
pub(super) fn record_tree_downloads(
    downloads: &mut DownloadQueue<'_, '_>,
    hash: HashFunction,
    leaves: &Chunked,
    layout: Layout,
    levels: &[Chunked],
    first_sink: usize,
) -> Result<()> {
    let Some((lowest, above)) = levels.split_first() else {
        return Ok(());
    };
    record_tree(downloads.batch(), hash, leaves, layout, std::slice::from_ref(lowest))?;
    download_levels(downloads, std::slice::from_ref(lowest), first_sink)?;
    downloads.flush()?;
    record_tree(downloads.batch(), hash, lowest, layout.parent(), above)?;
    download_levels(downloads, above, first_sink + 1)
}

/// Records one level: `parents` from `children` stored in `layout`.
fn record_level(
    batch: &mut Batch,
    hash: HashFunction,
    children: &Chunked,
    layout: Layout,
    parents: &Chunked,
) -> Result<()> {
    // Merge partners: positions 2^g apart, g = log2 of the group length in group-major layout.
    let log_group = if layout.groups >= 2 { layout.group_len.ilog2() } else { 0 };
    let part = children.part_len.min(parents.part_len);
    // Inputs of one dispatch stay in one part: a run of whole groups (or pairs) if two
    // partners fit in a part, else a run within one group.
    let max = if 2 << log_group <= part { part / 2 } else { part };
    let total = parents.len;
    let mask = (1u64 << log_group) - 1;
    let kernel = if batch.rescue_quads() && QUAD_HASHES.contains(&hash) {
        merge_nodes_quad(hash)
    } else {
        merge_nodes(hash)
    };
    let mut first = 0;
    while first < total {
        let count = max.min(total - first);
        let left = ((first >> log_group) << (log_group + 1)) + (first & mask);
        let (left_buffer, left_offset) = children.locate(left);
        let (right_buffer, right_offset) = children.locate(left + (1 << log_group));
        let (dst_buffer, dst_offset) = parents.locate(first);
        let params = MergeParams {
            count: to_u32(count, "nodes of a tree level")?,
            log_group,
            left_offset,
            right_offset,
            dst_offset,
        };
        batch.dispatch_items(kernel, &params, [left_buffer, right_buffer, dst_buffer], count)?;
        first += count;
    }
    Ok(())
}

// TREE ARRAYS
// ================================================================================================

/// The device arrays of the levels above `len` leaves: `N/2`, `N/4`, ..., 1 nodes.
pub(super) fn tree_levels(
    pool: &BufferPool,
    device: &::wgpu::Device,
    len: u64,
    part: u64,
) -> Vec<Chunked> {
    (1..=len.ilog2())
        .map(|level| Chunked::new(pool, device, len >> level, DIGEST_BYTES, part))
        .collect()
}

/// Appends one record sink per tree level above `len` leaves stored in `leaves`, lowest level
/// first, each writing its part of the nodes in `store` (Winterfell's layout).
pub(super) fn push_level_sinks(sinks: &mut Sinks, store: Store, len: usize, leaves: Layout) {
    let mut layout = leaves;
    // Level 1 is the upper half of the nodes, level 2 the quarter below it, ...
    let mut level_len = len / 2;
    while level_len >= 1 {
        layout = layout.parent();
        sinks.records.push(RecordSink {
            store,
            start: 4 * level_len,
            record_len: 4,
            groups: layout.groups as usize,
            group_len: layout.group_len as usize,
        });
        level_len /= 2;
    }
}

/// Downloads every level recorded by [`tree_levels`] into the sinks of [`push_level_sinks`],
/// the first of which is sink `first_sink`.
pub(super) fn download_levels(
    downloads: &mut DownloadQueue<'_, '_>,
    levels: &[Chunked],
    first_sink: usize,
) -> Result<()> {
    for (i, level) in levels.iter().enumerate() {
        download_array(downloads, level, DIGEST_BYTES, |first| Target::Records {
            sink: first_sink + i,
            first,
        })?;
    }
    Ok(())
}
