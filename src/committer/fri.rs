//! FRI layer commitments: what a backend is asked for and what it returns.
//!
//! The commit phase of FRI (winter-fri's `FriProver::build_layers`) starts from the DEEP
//! composition polynomial in coefficient form. A backend evaluates it over the LDE domain, then
//! for every layer: arranges the evaluations as rows of `folding_factor` elements (winter-utils'
//! `transpose_slice`: row `i` holds evaluations `i, i + R, i + 2R, …` for `R` rows), hashes each
//! row into a leaf, builds the layer's Merkle tree, hands the root to the caller's channel and
//! receives the folding challenge `alpha`, and folds the rows (winter-fri's `apply_drp`) into the
//! next layer. What is left after the last layer is returned for the remainder polynomial.
//!
//! Extension-field values travel as their base-field components: an element of a degree-`D`
//! extension is `D` consecutive base elements, as `FieldElement::slice_as_base_elements` lays it
//! out.

use miden_crypto::Felt;

use crate::{
    committer::domain::lde_domain_len,
    error::{FriError, GpuError, Result},
    hash::{Digest, HashFunction},
};

// REQUEST
// ================================================================================================

/// Folding factors winter-fri supports.
pub const FOLDING_FACTORS: [usize; 4] = [2, 4, 8, 16];

/// The FRI commit phase of one proof.
#[derive(Debug, Clone, Copy)]
pub struct FriRequest<'a> {
    /// The DEEP composition polynomial's coefficients, one slice per base-field component
    /// (1, 2 or 3 for the base field, the quadratic and the cubic extension), lowest degree first.
    pub components: &'a [&'a [Felt]],
    /// LDE blowup: the first layer has `blowup · components[0].len()` evaluations over the coset
    /// `GENERATOR · <ω>`.
    pub blowup: usize,
    /// Evaluations folded into one at each layer: 2, 4, 8 or 16.
    pub folding_factor: usize,
    /// Number of layers to commit to (winter-fri's `FriOptions::num_fri_layers`), at least 1.
    pub num_layers: usize,
    /// Hash for the layer leaves (`hash_elements` of a row) and Merkle trees.
    pub hash: HashFunction,
    /// Keep the layers in device memory and open them there ([`FriLayers::kept`]) rather than
    /// download them whole, where the backend can.
    pub keep_layers: bool,
}

/// The validated shape of a [`FriRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FriShape {
    /// Base-field components per element (extension degree).
    pub ext_degree: usize,
    /// Coefficients per component.
    pub poly_len: usize,
    /// Evaluations in the first layer.
    pub domain_len: usize,
}

impl FriShape {
    /// Rows of layer `layer`: its evaluations divided by the folding factor (0 for a layer
    /// the domain cannot fold into, or a folding factor of 0).
    pub fn layer_rows(&self, layer: usize, folding_factor: usize) -> usize {
        let folds = u32::try_from(layer).ok().and_then(|layer| layer.checked_add(1));
        folds
            .and_then(|folds| folding_factor.checked_pow(folds))
            .and_then(|divisor| self.domain_len.checked_div(divisor))
            .unwrap_or(0)
    }
}

impl FriRequest<'_> {
    /// Checks the request and returns its shape. Sizes are computed with checked arithmetic: a
    /// domain or a layer count whose powers overflow is a typed error naming it.
    pub fn validate(&self) -> Result<FriShape> {
        let invalid = |error: FriError| Err(GpuError::InvalidFri(error));
        let ext_degree = self.components.len();
        if !(1..=3).contains(&ext_degree) {
            return invalid(FriError::ComponentCount(ext_degree));
        }
        let poly_len = self.components[0].len();
        let differing = self.components.iter().position(|c| c.len() != poly_len);
        if let Some(component) = differing {
            let len = self.components[component].len();
            return invalid(FriError::ComponentLength { component, len, expected: poly_len });
        }
        if poly_len < 2 || !poly_len.is_power_of_two() {
            return Err(GpuError::TraceLengthNotPowerOfTwo(poly_len));
        }
        if self.blowup < 2 || !self.blowup.is_power_of_two() {
            return Err(GpuError::InvalidBlowup(self.blowup));
        }
        if !FOLDING_FACTORS.contains(&self.folding_factor) {
            return invalid(FriError::FoldingFactor(self.folding_factor));
        }
        let domain_len = lde_domain_len(poly_len, self.blowup)?;
        // the layers fold the domain by `folding_factor^num_layers`, which must leave two
        // evaluations (a count beyond `u32` is as far out of reach as an overflowing power)
        let folded = u32::try_from(self.num_layers)
            .ok()
            .and_then(|layers| self.folding_factor.checked_pow(layers));
        if self.num_layers == 0 || folded.is_none_or(|f| f > domain_len / 2) {
            return invalid(FriError::LayerCount {
                layers: self.num_layers,
                folding_factor: self.folding_factor,
                domain_len,
            });
        }
        Ok(FriShape { ext_degree, poly_len, domain_len })
    }
}

// RESULT
// ================================================================================================

/// One committed FRI layer, on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FriLayer {
    /// The layer's evaluations as `folding_factor · ext_degree` columns of `num_rows` base
    /// elements, column-major: component `d` of the element in slot `j` of row `i` is at
    /// `(j · ext_degree + d) · num_rows + i`.
    pub columns: Vec<Felt>,
    /// Rows (Merkle leaves) of the layer.
    pub num_rows: usize,
    /// `hash_elements` of each row.
    pub leaves: Vec<Digest>,
    /// The Merkle tree over the leaves, in `winter_crypto::MerkleTree`'s node layout.
    pub nodes: Vec<Digest>,
}

impl FriLayer {
    /// The root of the layer's Merkle tree.
    pub fn root(&self) -> Digest {
        self.nodes[1]
    }

    /// Row `i` as base elements, slot by slot (the order `hash_elements` reads it in).
    pub fn row(&self, i: usize) -> Vec<Felt> {
        let width = self.columns.len() / self.num_rows;
        (0..width).map(|c| self.columns[c * self.num_rows + i]).collect()
    }

    /// The rows and authentication paths at `positions` (each below `num_rows`).
    pub fn open(&self, positions: &[usize]) -> LayerOpening {
        LayerOpening {
            rows: positions.iter().map(|&p| self.row(p)).collect(),
            paths: positions
                .iter()
                .map(|&p| {
                    let path = path_indices(p, self.num_rows);
                    let mut siblings = vec![self.leaves[p ^ 1]];
                    siblings.extend(path.map(|node| self.nodes[node]));
                    (self.leaves[p], siblings)
                })
                .collect(),
        }
    }
}

/// The committed layers and what remains after the last fold.
pub struct FriLayers {
    /// The layers, first (the DEEP evaluations) first, on the host; empty when they are kept
    /// on the device.
    pub layers: Vec<FriLayer>,
    /// The layers kept in the backend's memory, if the request asked for it and the backend
    /// keeps them.
    pub kept: Option<Box<dyn KeptLayers>>,
    /// The evaluations left after the last fold, in natural order, components interleaved.
    pub remainder: Vec<Felt>,
}

impl FriLayers {
    /// Layer `layer`'s rows and authentication paths at `positions`, from wherever it is.
    pub fn open(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening> {
        match &self.kept {
            Some(kept) => kept.open(layer, positions),
            None => Ok(self.layers[layer].open(positions)),
        }
    }
}

impl std::fmt::Debug for FriLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FriLayers")
            .field("layers", &self.layers.len())
            .field("kept", &self.kept.is_some())
            .field("remainder", &self.remainder.len())
            .finish()
    }
}

// OPENINGS
// ================================================================================================

/// One layer opened at query positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerOpening {
    /// Each position's row, base elements slot by slot.
    pub rows: Vec<Vec<Felt>>,
    /// Each position's leaf and authentication path, as `winter_crypto::MerkleTree::prove`
    /// gives them: the sibling leaf, then the sibling of each node up to the root's children.
    pub paths: Vec<(Digest, Vec<Digest>)>,
}

/// FRI layers in a backend's memory, opened there: only the queried rows and the nodes of
/// their paths come back.
pub trait KeptLayers: Send + Sync {
    /// Layer `layer`'s rows and authentication paths at `positions` (each below its row count).
    fn open(&self, layer: usize, positions: &[usize]) -> Result<LayerOpening>;
}

/// The node indices of position `p`'s authentication path above the leaves, in a tree of
/// `leaves` leaves in Winterfell's layout (node `i`'s children are `2i` and `2i + 1`, the
/// leaves below `leaves`): the sibling of each node from the leaves' parent up to the root's
/// children.
pub(crate) fn path_indices(p: usize, leaves: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some((p + leaves) >> 1), |&i| Some(i >> 1))
        .take_while(|&i| i > 1)
        .map(|i| i ^ 1)
}

/// The verifier's side of the commit phase: takes a layer root, returns `alpha`'s base-field
/// components (as many as the request's extension degree).
pub type FoldingChannel<'a> = dyn FnMut(Digest) -> Vec<Felt> + 'a;
