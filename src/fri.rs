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
    error::{GpuError, Result},
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
    /// Rows of layer `layer`: its evaluations divided by the folding factor.
    pub fn layer_rows(&self, layer: usize, folding_factor: usize) -> usize {
        self.domain_len / folding_factor.pow(layer as u32 + 1)
    }
}

impl FriRequest<'_> {
    /// Checks the request and returns its shape.
    pub fn validate(&self) -> Result<FriShape> {
        let invalid = |reason: String| Err(GpuError::InvalidFri(reason));
        let ext_degree = self.components.len();
        if !(1..=3).contains(&ext_degree) {
            return invalid(format!("{ext_degree} components; expected 1, 2 or 3"));
        }
        let poly_len = self.components[0].len();
        if self.components.iter().any(|c| c.len() != poly_len) {
            return invalid("components of different lengths".into());
        }
        if poly_len < 2 || !poly_len.is_power_of_two() {
            return Err(GpuError::TraceLengthNotPowerOfTwo(poly_len));
        }
        if self.blowup < 2 || !self.blowup.is_power_of_two() {
            return Err(GpuError::InvalidBlowup(self.blowup));
        }
        if !FOLDING_FACTORS.contains(&self.folding_factor) {
            return invalid(format!(
                "folding factor {}; expected 2, 4, 8 or 16",
                self.folding_factor
            ));
        }
        let domain_len = poly_len * self.blowup;
        if domain_len.ilog2() > 32 {
            return Err(GpuError::DomainTooLarge(domain_len.ilog2()));
        }
        let folded = self.folding_factor.checked_pow(self.num_layers as u32);
        if self.num_layers == 0 || folded.is_none_or(|f| f > domain_len / 2) {
            return invalid(format!(
                "{} layers of folding by {} do not fit a domain of {domain_len}",
                self.num_layers, self.folding_factor
            ));
        }
        Ok(FriShape { ext_degree, poly_len, domain_len })
    }
}

// RESULT
// ================================================================================================

/// One committed FRI layer.
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
}

/// The committed layers and what remains after the last fold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FriLayers {
    /// The layers, first (the DEEP evaluations) first.
    pub layers: Vec<FriLayer>,
    /// The evaluations left after the last fold, in natural order, components interleaved.
    pub remainder: Vec<Felt>,
}

/// The verifier's side of the commit phase: takes a layer root, returns `alpha`'s base-field
/// components (as many as the request's extension degree).
pub type FoldingChannel<'a> = dyn FnMut(Digest) -> Vec<Felt> + 'a;
