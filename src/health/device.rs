//! The health of a GPU committer's device, shared by both GPU backends: whether it is lost, and
//! bounded waits on it.
//!
//! Every wait has a deadline and polls the device with a backoff ([`poll_until`]), so that a
//! device that never finishes its work ends in [`GpuError::Timeout`], never in a hang; the
//! backends' options hold the deadline. A timeout, or an error after which the device is
//! unusable ([`GpuError::DeviceLost`]), marks the device lost ([`DeviceHealth`]): the committer
//! refuses every later call at once. With feature `fault-injection` the health also holds the
//! committer's [`Injector`].

use std::{
    sync::OnceLock,
    time::{Duration, Instant},
};

#[cfg(feature = "fault-injection")]
use crate::health::inject::{Injection, Injector, Operation};
use crate::{
    backend::Backend,
    error::{GpuError, LossCause, Result},
};

/// The environment variable that sets the deadline of every device wait, in seconds (read by
/// the GPU backends' options' `from_env`).
pub const WAIT_TIMEOUT_ENV: &str = "MIDEN_GPU_WAIT_TIMEOUT_S";

/// The deadline of a device wait unless the options say otherwise: far longer than any wait of
/// a working device, short enough that a hung one is given up.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a wait polls without sleeping, yielding the thread between polls: a transfer piece
/// (one pinned slot's worth) or a short kernel ends within it and is seen at once,
/// where a sleep could leave the copy engine idle for its length.
const SPIN: Duration = Duration::from_millis(2);

/// The longest pause between two polls after [`SPIN`]: the most a wait adds to the device's own
/// time.
const MAX_PAUSE: Duration = Duration::from_micros(50);

// WAITS
// ================================================================================================

/// Polls `ready` until it answers `true`: yielding the thread between polls for [`SPIN`], then
/// sleeping, each pause twice the last up to [`MAX_PAUSE`]. An error of `ready` ends the wait;
/// once `deadline` has passed it is [`GpuError::Timeout`] for `operation` of `backend`.
pub(crate) fn poll_until(
    backend: Backend,
    operation: &'static str,
    deadline: Duration,
    mut ready: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(2);
    loop {
        if ready()? {
            return Ok(());
        }
        let waited = start.elapsed();
        if waited >= deadline {
            return Err(GpuError::Timeout { backend, operation, waited, deadline });
        }
        if waited < SPIN {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause.min(deadline - waited));
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

// DEVICE HEALTH
// ================================================================================================

/// Whether a committer's device is lost, the deadline of its waits and (feature
/// `fault-injection`) its fault injector.
#[derive(Debug)]
pub(crate) struct DeviceHealth {
    backend: Backend,
    /// Why the device was given up, once it is.
    lost: OnceLock<String>,
    /// The deadline of every wait.
    wait_timeout: Duration,
    #[cfg(feature = "fault-injection")]
    injector: std::sync::Arc<Injector>,
}

impl DeviceHealth {
    /// A usable device of `backend` whose waits end after `wait_timeout`.
    pub(crate) fn new(backend: Backend, wait_timeout: Duration) -> Self {
        Self {
            backend,
            lost: OnceLock::new(),
            wait_timeout,
            #[cfg(feature = "fault-injection")]
            injector: Default::default(),
        }
    }

    /// [`GpuError::DeviceLost`] once the device is lost.
    pub(crate) fn usable(&self) -> Result<()> {
        match self.lost.get() {
            Some(reason) => Err(GpuError::DeviceLost {
                backend: self.backend,
                cause: LossCause::Earlier { reason: reason.clone() },
            }),
            None => Ok(()),
        }
    }

    /// Whether the device is lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// Gives the device up for `reason` (the first reason is kept).
    pub(crate) fn mark_lost(&self, reason: &str) {
        if self.lost.set(reason.to_string()).is_ok() {
            tracing::error!(backend = %self.backend, %reason,
                "device lost; the committer refuses further work");
        }
    }

    /// Marks the device lost if `error` says it is (a lost device, an exceeded deadline).
    pub(crate) fn note(&self, error: &GpuError) {
        if matches!(error, GpuError::DeviceLost { .. } | GpuError::Timeout { .. }) {
            self.mark_lost(&error.to_string());
        }
    }

    /// Polls `ready` within the wait deadline ([`poll_until`]); `hang` makes it never ready (an
    /// injected hang). A timeout marks the device lost.
    pub(crate) fn wait(
        &self,
        operation: &'static str,
        hang: bool,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let waited = poll_until(self.backend, operation, self.wait_timeout, || {
            if hang {
                Ok(false)
            } else {
                ready()
            }
        });
        if let Err(error) = &waited {
            self.note(error);
        }
        waited
    }
}

#[cfg(feature = "fault-injection")]
impl DeviceHealth {
    /// The committer's injector.
    pub(crate) fn injector(&self) -> &std::sync::Arc<Injector> {
        &self.injector
    }

    /// Counts one operation of kind `operation`; the injection it gets, if the injector strikes
    /// it.
    pub(crate) fn injected(&self, operation: Operation) -> Option<Injection> {
        self.injector.hit(operation)
    }
}

// DEADLINES
// ================================================================================================

/// A wait deadline from [`WAIT_TIMEOUT_ENV`]'s text: a positive number of seconds (fractions
/// allowed); `None` for anything else.
pub(crate) fn parse_wait_timeout(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds > 0.0).then(|| Duration::try_from_secs_f64(seconds).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_timeouts_are_positive_seconds() {
        assert_eq!(parse_wait_timeout(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse_wait_timeout("0.25"), Some(Duration::from_millis(250)));
        for bad in ["0", "-1", "x", "", "inf", "NaN", "1e300"] {
            assert_eq!(parse_wait_timeout(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_wait_that_never_completes_times_out_at_its_deadline() {
        let deadline = Duration::from_millis(50);
        let start = Instant::now();
        let error = poll_until(Backend::Wgpu, "a test wait", deadline, || Ok(false)).unwrap_err();
        let elapsed = start.elapsed();
        assert!(elapsed >= deadline && elapsed < deadline * 10, "{elapsed:?}");
        assert!(matches!(error, GpuError::Timeout { operation: "a test wait", .. }), "{error}");
        let mut polls = 0;
        poll_until(Backend::Cuda, "a test wait", deadline, || {
            polls += 1;
            Ok(polls == 3)
        })
        .unwrap();
    }
}
