//! Periodic column values over the constraint-evaluation domain, as Winterfell tabulates them.

use winter_air::Air;
use winter_math::{fft, FieldElement};

use crate::Felt;

// ================================================================================================
// PERIODIC TABLE
// ================================================================================================

/// The periodic columns' values, row-major, `p_max · ce_blowup` rows (winter-prover's
/// `PeriodicValueTable`): column j's polynomial (period p) is evaluated with the offset
/// `offset^(n / p)` over `p · ce_blowup` points, and row i reads entry `i mod (p · ce_blowup)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeriodicTable {
    values: Vec<Felt>,
    length: usize,
    width: usize,
}

impl PeriodicTable {
    /// The table of `air`'s periodic columns (empty when it has none).
    pub(crate) fn new<A: Air<BaseField = Felt>>(air: &A) -> Self {
        let polys = air.get_periodic_column_polys();
        let Some(max_size) = polys.iter().map(Vec::len).max() else {
            return Self::default();
        };
        let columns: Vec<Vec<Felt>> = polys
            .iter()
            .map(|poly| {
                let num_cycles = (air.trace_length() / poly.len()) as u64;
                let offset = air.domain_offset().exp(num_cycles);
                let twiddles = fft::get_twiddles::<Felt>(poly.len());
                fft::evaluate_poly_with_offset(poly, &twiddles, offset, air.ce_blowup_factor())
            })
            .collect();
        let length = max_size * air.ce_blowup_factor();
        let values = (0..length)
            .flat_map(|i| columns.iter().map(move |column| column[i % column.len()]))
            .collect();
        Self { values, length, width: columns.len() }
    }

    /// The values (row-major), the row count and the width.
    pub(crate) fn parts(&self) -> (&[Felt], usize, usize) {
        (&self.values, self.length, self.width)
    }

    /// The values at CE step `step`.
    pub(crate) fn row(&self, step: usize) -> &[Felt] {
        if self.width == 0 {
            return &[];
        }
        let start = (step % self.length) * self.width;
        &self.values[start..start + self.width]
    }
}
