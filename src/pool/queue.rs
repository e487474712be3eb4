//! The bounded queue between the pool's submitters and its workers.
//!
//! A `Mutex<VecDeque>` with two condition variables rather than `std::sync::mpsc::sync_channel`:
//! a refused [`JobQueue::try_push`] hands the caller's job back unboxed (a channel's
//! `TrySendError` returns only the boxed task), and closing wakes every worker at once while
//! the jobs already queued are still handed out.

use std::{
    collections::VecDeque,
    sync::{Condvar, Mutex, MutexGuard, PoisonError},
};

/// Items waiting for a worker: at most `capacity`; [`Self::push`] waits for room,
/// [`Self::try_push`] refuses, [`Self::pop`] waits for an item until the queue is closed and
/// empty.
pub(super) struct JobQueue<T> {
    state: Mutex<QueueState<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
}

struct QueueState<T> {
    items: VecDeque<T>,
    open: bool,
}

impl<T> JobQueue<T> {
    /// An open, empty queue of `capacity` items (at least 1).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(QueueState { items: VecDeque::with_capacity(capacity), open: true }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity,
        }
    }

    /// The most items it holds.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The items waiting now.
    pub(super) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Queues `item`, first waiting until there is room.
    pub(super) fn push(&self, item: T) {
        let mut state = self.lock();
        while state.items.len() >= self.capacity {
            state = self.not_full.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.items.push_back(item);
        drop(state);
        self.not_empty.notify_one();
    }

    /// Queues the item `make` builds from `input` if there is room now, returning what `make`
    /// returns beside it; otherwise gives `input` back untouched.
    pub(super) fn try_push<I, R>(&self, input: I, make: impl FnOnce(I) -> (T, R)) -> Result<R, I> {
        let mut state = self.lock();
        if state.items.len() >= self.capacity {
            return Err(input);
        }
        let (item, made) = make(input);
        state.items.push_back(item);
        drop(state);
        self.not_empty.notify_one();
        Ok(made)
    }

    /// The oldest item, waiting for one while the queue is open; `None` once it is closed and
    /// empty.
    pub(super) fn pop(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                drop(state);
                self.not_full.notify_one();
                return Some(item);
            }
            if !state.open {
                return None;
            }
            state = self.not_empty.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Stops the waiting in [`Self::pop`] once the queued items are taken.
    pub(super) fn close(&self) {
        self.lock().open = false;
        self.not_empty.notify_all();
    }

    /// No code panics while holding the lock, so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
