//! Bounded waits on a device: every wait has a deadline and polls the device with a backoff, so
//! that a device that never finishes its work ends in [`GpuError::Timeout`], never in a hang.
//! Both GPU backends wait through [`poll_until`]; their options hold the deadline.

use std::time::{Duration, Instant};

use crate::{
    backend::Backend,
    error::{GpuError, Result},
};

/// The environment variable that sets the deadline of every device wait, in seconds (read by
/// the GPU backends' options' `from_env`).
pub const WAIT_TIMEOUT_ENV: &str = "MIDEN_GPU_WAIT_TIMEOUT_S";

/// The deadline of a device wait unless the options say otherwise: far longer than any wait of
/// a working device, short enough that a hung one is given up.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Polls answered by yielding the thread before the pauses between polls start.
const YIELDS: u32 = 64;

/// The longest pause between two polls: the most a wait adds to the device's own time.
const MAX_PAUSE: Duration = Duration::from_micros(200);

/// Polls `ready` until it answers `true`: yielding the thread between the first polls, then
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
    let mut polls = 0;
    loop {
        if ready()? {
            return Ok(());
        }
        let waited = start.elapsed();
        if waited >= deadline {
            return Err(GpuError::Timeout { backend, operation, waited, deadline });
        }
        if polls < YIELDS {
            polls += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause.min(deadline - waited));
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

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
