//! The size of an LDE domain, checked: a foundation of the commitment and FRI requests.

use crate::error::{GpuError, Result};

/// The largest LDE domain is `2^MAX_LOG_DOMAIN` rows: the two-adicity of the Goldilocks field.
const MAX_LOG_DOMAIN: u32 = 32;

/// `poly_len · blowup` (both powers of two), or [`GpuError::DomainTooLarge`] with the domain's
/// log2 if that exceeds the field's two-adic subgroup: computed from the logs, so that no product
/// can wrap.
pub(crate) fn lde_domain_len(poly_len: usize, blowup: usize) -> Result<usize> {
    let log_len = poly_len.ilog2() + blowup.ilog2();
    if log_len > MAX_LOG_DOMAIN {
        return Err(GpuError::DomainTooLarge(log_len));
    }
    Ok(1 << log_len)
}
