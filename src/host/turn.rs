//! [`PriorityTurn`]: a device's turn, given to the waiting call of the oldest job first.
//!
//! Several proofs in flight on one GPU take turns at it. Served in arrival order, their stages
//! interleave and the proofs end together, so the jobs queued behind them start together and
//! the GPU idles while the first of them executes. Served oldest job first, one proof ends
//! while the others still have GPU work, and the next job executes under it. A thread states
//! its job's rank with [`with_turn_priority`]; calls from threads that state none (outside a
//! pool) rank after every job, in arrival order among themselves.
// only the GPU backends take turns; the pool states its jobs' ranks in every build
#![cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]

use std::{
    cell::Cell,
    sync::{Condvar, Mutex, MutexGuard, PoisonError},
    thread::{self, ThreadId},
};

// PRIORITY OF THE CALLING THREAD
// ================================================================================================

thread_local! {
    static PRIORITY: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Runs `work` with this thread's calls ranked `priority` at every [`PriorityTurn`] (lower goes
/// first), then restores the rank it had.
pub(crate) fn with_turn_priority<T>(priority: u64, work: impl FnOnce() -> T) -> T {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            PRIORITY.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PRIORITY.with(|p| p.replace(priority)));
    work()
}

/// This thread's rank, for work it hands to another thread (a rayon join) to state again.
pub(crate) fn turn_priority() -> u64 {
    PRIORITY.with(Cell::get)
}

// THE TURN
// ================================================================================================

/// A lock that, when released, goes to the waiter of the lowest priority value (then the
/// earliest to arrive).
#[derive(Debug, Default)]
pub(crate) struct PriorityTurn {
    state: Mutex<TurnState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct TurnState {
    /// The thread holding the turn, and how many of its guards are alive.
    holder: Option<(ThreadId, usize)>,
    /// The waiters, as (priority, arrival).
    waiting: Vec<(u64, u64)>,
    arrivals: u64,
}

/// A held [`PriorityTurn`]: released when the holder's last guard drops.
#[derive(Debug)]
pub(crate) struct TurnGuard<'a> {
    turn: &'a PriorityTurn,
}

impl PriorityTurn {
    /// Waits for the turn, ranked by the calling thread's [`with_turn_priority`]; at once where
    /// this thread holds it already (a call made under a [`DeviceHold`]).
    pub(crate) fn take(&self) -> TurnGuard<'_> {
        // the state is consistent between any two statements: a panic elsewhere leaves it usable
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let thread = thread::current().id();
        if let Some((holder, guards)) = &mut state.holder {
            if *holder == thread {
                *guards += 1;
                return TurnGuard { turn: self };
            }
        }
        let me = (turn_priority(), state.arrivals);
        state.arrivals += 1;
        state.waiting.push(me);
        let first = |state: &MutexGuard<'_, TurnState>| state.waiting.iter().min() == Some(&me);
        while state.holder.is_some() || !first(&state) {
            state = self.released.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.waiting.retain(|waiter| *waiter != me);
        state.holder = Some((thread, 1));
        TurnGuard { turn: self }
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let mut state = self.turn.state.lock().unwrap_or_else(PoisonError::into_inner);
        let released = match &mut state.holder {
            Some((_, guards)) if *guards > 1 => {
                *guards -= 1;
                false
            },
            _ => true,
        };
        if released {
            state.holder = None;
            drop(state);
            self.turn.released.notify_all();
        }
    }
}

// A HOLD OVER A BURST OF CALLS
// ================================================================================================

/// A committer's devices held for one thread ([`crate::GpuCommitter::hold_devices`]): until it
/// drops, that thread's calls take their turns at once and other threads' calls wait.
#[derive(Debug, Default)]
#[must_use = "the devices are released when the hold drops"]
pub struct DeviceHold<'a> {
    _turns: Vec<TurnGuard<'a>>,
}

impl<'a> DeviceHold<'a> {
    /// Holds `turns` until the hold drops.
    pub(crate) fn new(turns: Vec<TurnGuard<'a>>) -> Self {
        Self { _turns: turns }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };

    use super::*;

    /// While one call holds the turn, calls of priorities 5, 1, 3 and none arrive in that order;
    /// they are served 1, 3, 5, then the one without a priority.
    #[test]
    fn the_lowest_priority_value_goes_first() {
        let turn = Arc::new(PriorityTurn::default());
        let served = Arc::new(Mutex::new(Vec::new()));
        let held = turn.take();
        let waiters: Vec<_> = [Some(5), Some(1), Some(3), None]
            .into_iter()
            .enumerate()
            .map(|(arrived, priority)| {
                let (its_turn, served) = (Arc::clone(&turn), served.clone());
                let waiter = thread::spawn(move || {
                    let call = || {
                        let _guard = its_turn.take();
                        served.lock().unwrap().push(priority);
                    };
                    match priority {
                        Some(p) => with_turn_priority(p, call),
                        None => call(),
                    }
                });
                // each waits before the next arrives
                while turn.state.lock().unwrap().waiting.len() <= arrived {
                    thread::sleep(Duration::from_millis(1));
                }
                waiter
            })
            .collect();
        drop(held);
        waiters.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(*served.lock().unwrap(), [Some(1), Some(3), Some(5), None]);
    }

    /// The holder takes the turn again at once; another thread gets it only when the holder's
    /// last guard drops.
    #[test]
    fn a_holder_takes_its_turn_again_and_others_wait() {
        let turn = Arc::new(PriorityTurn::default());
        let hold = DeviceHold::new(vec![turn.take()]);
        let nested = turn.take();
        let other = thread::spawn({
            let turn = Arc::clone(&turn);
            move || drop(turn.take())
        });
        while turn.state.lock().unwrap().waiting.is_empty() {
            thread::sleep(Duration::from_millis(1));
        }
        drop(nested);
        thread::sleep(Duration::from_millis(20));
        assert!(!other.is_finished(), "the turn was given away while the hold lived");
        drop(hold);
        other.join().unwrap();
        assert!(turn.state.lock().unwrap().holder.is_none());
    }

    #[test]
    fn the_priority_is_restored_after_the_work() {
        with_turn_priority(7, || {
            with_turn_priority(2, || assert_eq!(turn_priority(), 2));
            assert_eq!(turn_priority(), 7);
        });
        assert_eq!(turn_priority(), u64::MAX);
    }
}
