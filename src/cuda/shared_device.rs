//! What every committer of the process shares on one GPU: the gauge of the device memory all
//! their buffers hold, and the turn their calls take (see `memory` for how budgets use them).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, PoisonError, Weak},
};

use super::buffer::Gauge;
use crate::host::{PriorityTurn, TurnGuard};

/// What every committer of the process holds on one GPU, and the turn its calls take.
#[derive(Debug, Default)]
pub(super) struct SharedDevice {
    /// The device bytes all committers' buffers on this GPU hold (each committer's gauge counts
    /// into it).
    pub gauge: Arc<Gauge>,
    turn: PriorityTurn,
}

impl SharedDevice {
    /// The shared state of GPU `ordinal`, made by the first committer that opens it and dropped
    /// with the last.
    pub(super) fn of(ordinal: usize) -> Arc<Self> {
        static DEVICES: OnceLock<Mutex<HashMap<usize, Weak<SharedDevice>>>> = OnceLock::new();
        let mut devices =
            DEVICES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(device) = devices.get(&ordinal).and_then(Weak::upgrade) {
            return device;
        }
        let device = Arc::new(Self::default());
        devices.insert(ordinal, Arc::downgrade(&device));
        device
    }

    /// This GPU's turn: held from a call's budget check to its end, and while kept FRI layers
    /// allocate their openings. A call takes the turns of its GPUs in the order of their
    /// ordinals, before its committer's state; nothing that holds a turn waits for another.
    /// Waiting calls are served oldest job first ([`PriorityTurn`]).
    pub(super) fn turn(&self) -> TurnGuard<'_> {
        self.turn.take()
    }
}
