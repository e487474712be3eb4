//! The host memory of the pool's jobs: what one proof is estimated to hold on the host, and the
//! budget that admits jobs only while their estimates fit beside those of the jobs running.
//!
//! A proof's host memory grows with its LDE domain (`n · blowup` rows): the LDE rows of the
//! main, auxiliary and composition segments, their Merkle trees and the FRI layers, beside the
//! trace and its polynomials. [`proof_host_bytes`] adds these up from the trace's shape and the
//! proof options. It is an upper estimate: the composition is counted with as many columns as
//! the blowup allows (its real count, the constraints' degree, is known only to the AIR).
//!
//! [`HostBudget`] holds the bytes reserved by the jobs running. A job reserves its estimate
//! before its proof starts ([`super::JobContext::reserve_host`]): one that does not fit beside
//! the reservations of the running jobs waits until they end (in the order the jobs asked), and
//! one larger than the whole budget is [`PoolError::OutOfMemory`] at once, since it could not
//! fit even alone. The jobs in flight thus never ask for more host memory together than the
//! budget, where the estimates hold, instead of being killed by the kernel's OOM killer.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use winter_air::{ProofOptions, TraceInfo};

use super::PoolError;

/// Bytes of a base field element.
const FELT_BYTES: u64 = 8;

/// Bytes of a Merkle digest ([`crate::Digest`]).
const DIGEST_BYTES: u64 = 32;

/// Host rows are padded to a multiple of this many elements (Winterfell's `RowMatrix`).
const ROW_ALIGN: u64 = 8;

// ESTIMATE
// ================================================================================================

/// An upper estimate of the host memory, in bytes, of one proof of a trace of shape `info` with
/// `options` (see the module documentation): saturating, so an absurd shape gives `u64::MAX`.
pub fn proof_host_bytes(info: &TraceInfo, options: &ProofOptions) -> u64 {
    let n = info.length() as u64;
    let blowup = options.blowup_factor() as u64;
    let degree = options.field_extension().degree() as u64;
    let domain = n.saturating_mul(blowup);
    let main = info.main_trace_width() as u64;
    let aux = (info.aux_segment_width() as u64).saturating_mul(degree);
    let composition = blowup.saturating_mul(degree);

    // per segment: the LDE rows (padded), the leaves and the nodes of its tree
    let segment = |columns: u64| {
        if columns == 0 {
            return 0;
        }
        let rows = columns.next_multiple_of(ROW_ALIGN).saturating_mul(FELT_BYTES);
        domain.saturating_mul(rows.saturating_add(2 * DIGEST_BYTES))
    };
    let ldes = [main, aux, composition].map(segment).iter().fold(0u64, |a, &b| a.saturating_add(b));
    // the trace and its polynomials (base elements)
    let columns = main.saturating_add(aux).saturating_add(composition);
    let trace = n.saturating_mul(columns).saturating_mul(2 * FELT_BYTES);
    // the FRI layers: the first is the DEEP evaluations over the domain, the rest at most as much
    // again, with their trees
    let fri = domain.saturating_mul(2 * (degree * FELT_BYTES + DIGEST_BYTES));
    ldes.saturating_add(trace).saturating_add(fri)
}

/// The bytes of one copy of the main segment of a trace of shape `info` (saturating): what a
/// Miden proof after the parallel execution holds beyond [`proof_host_bytes`].
#[cfg(feature = "miden")]
pub(super) fn main_segment_bytes(info: &TraceInfo) -> u64 {
    (info.length() as u64).saturating_mul(info.main_trace_width() as u64).saturating_mul(FELT_BYTES)
}

// BUDGET
// ================================================================================================

/// The host memory the pool's running jobs may reserve together, and what they hold.
pub(super) struct HostBudget {
    /// The most bytes reserved at once; `None`: no limit (reservations are only counted).
    limit: Option<u64>,
    state: Mutex<BudgetState>,
    changed: Condvar,
}

#[derive(Default)]
struct BudgetState {
    /// Bytes reserved by the running jobs.
    reserved: u64,
    /// The most bytes reserved at once.
    peak: u64,
    /// The ticket of the next job to ask.
    next_ticket: u64,
    /// The ticket of the job served next: reservations are granted in the order asked, so a
    /// large job is not passed over for ever by small ones.
    serving: u64,
}

impl HostBudget {
    /// A budget of `limit` bytes (`None`: unlimited).
    pub(super) fn new(limit: Option<u64>) -> Self {
        Self { limit, state: Mutex::default(), changed: Condvar::new() }
    }

    /// The most bytes the jobs may reserve together.
    pub(super) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The most bytes reserved at once so far.
    pub(super) fn peak(&self) -> u64 {
        self.lock().peak
    }

    /// Reserves `bytes` for job `job`, waiting (behind the jobs that asked earlier) until the
    /// running jobs' reservations leave room; [`PoolError::OutOfMemory`] if `bytes` exceeds the
    /// whole limit.
    pub(super) fn reserve(
        self: &Arc<Self>,
        job: u64,
        bytes: u64,
    ) -> Result<HostReservation, PoolError> {
        let limit = self.limit.unwrap_or(u64::MAX);
        if bytes > limit {
            return Err(PoolError::OutOfMemory { job, needed: bytes, limit });
        }
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        while state.serving != ticket || state.reserved.saturating_add(bytes) > limit {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.serving += 1;
        state.reserved = state.reserved.saturating_add(bytes);
        state.peak = state.peak.max(state.reserved);
        drop(state);
        // the next ticket may fit too
        self.changed.notify_all();
        Ok(HostReservation { budget: self.clone(), bytes })
    }

    /// No code panics while holding the lock, so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Host memory reserved for one job ([`super::JobContext::reserve_host`]), given back when
/// dropped.
#[must_use = "the reservation is given back when dropped"]
pub struct HostReservation {
    budget: Arc<HostBudget>,
    bytes: u64,
}

impl HostReservation {
    /// The bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for HostReservation {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.reserved = state.reserved.saturating_sub(self.bytes);
        drop(state);
        self.budget.changed.notify_all();
    }
}

impl std::fmt::Debug for HostReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReservation").field("bytes", &self.bytes).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::{thread, time::Duration};

    use winter_air::{BatchingMethod, FieldExtension};

    use super::*;

    #[test]
    fn estimate_grows_with_the_domain_and_saturates() {
        let options = |blowup| {
            ProofOptions::new(
                27,
                blowup,
                0,
                FieldExtension::Quadratic,
                4,
                31,
                BatchingMethod::Linear,
                BatchingMethod::Linear,
            )
        };
        let info = TraceInfo::new(80, 1 << 16);
        let (small, large) =
            (proof_host_bytes(&info, &options(8)), proof_host_bytes(&info, &options(16)));
        // the main segment's LDE rows alone: 80 columns of 2^19 elements
        assert!(small > 80 * (8 << 19), "{small}");
        assert!(large > small);
    }

    #[test]
    fn reservations_wait_for_room_and_refuse_what_cannot_fit() {
        let budget = Arc::new(HostBudget::new(Some(100)));
        match budget.reserve(7, 101) {
            Err(PoolError::OutOfMemory { job: 7, needed: 101, limit: 100 }) => {},
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        let first = budget.reserve(0, 60).expect("fits");
        let waiter = {
            let budget = budget.clone();
            thread::spawn(move || budget.reserve(1, 50).map(|r| r.bytes()))
        };
        thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a reservation beyond the limit did not wait");
        drop(first);
        assert_eq!(waiter.join().expect("waiter").expect("fits once the first is gone"), 50);
        assert_eq!(budget.peak(), 60);
    }
}
