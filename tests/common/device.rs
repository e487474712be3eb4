//! Tests that need a device.
//!
//! They run where the device is present, and there any error fails them. Where this machine has
//! no such device (no NVIDIA driver, no GPU, no adapter, no NVRTC) each is reported as ignored
//! with the reason, never as passed, unless `MIDEN_GPU_REQUIRE` names the backend
//! (`MIDEN_GPU_REQUIRE=cuda,wgpu`): then a missing device fails them.
//!
//! A test file using this sets `harness = false` and hands its tests to [`DeviceTests`] from
//! `main`; libtest's command line (filters, `--ignored`, `--nocapture`) and report still apply.

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// The environment variable naming the backends whose absence fails the tests.
pub const REQUIRE_ENV: &str = "MIDEN_GPU_REQUIRE";

/// Tests by name: `tests![first, second]`.
#[allow(unused_macros)]
macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        &[$((stringify!($test), $test as fn())),*]
    };
}
#[allow(unused_imports)]
pub(crate) use tests;

/// The tests of one file, for one backend.
pub struct DeviceTests {
    backend: &'static str,
    absent: Option<String>,
    required: bool,
    trials: Vec<Trial>,
}

impl DeviceTests {
    /// Tests for `backend`; `absent` says why this machine has no device for it (`None` when it
    /// has one).
    pub fn new(backend: &'static str, absent: Option<String>) -> Self {
        let required = std::env::var(REQUIRE_ENV).is_ok_and(|list| {
            list.split(',').any(|name| name.trim().eq_ignore_ascii_case(backend))
        });
        if let Some(reason) = &absent {
            let verdict = if required { "fail" } else { "are ignored" };
            eprintln!("{backend} device tests {verdict}: {reason}");
        }
        Self { backend, absent, required, trials: Vec::new() }
    }

    /// Tests that need the device.
    pub fn on_device(mut self, tests: &[(&'static str, fn())]) -> Self {
        for &(name, test) in tests {
            let trial = self.device_trial(name, test);
            self.trials.push(trial);
        }
        self
    }

    /// Tests that need the device and are left out unless asked for (`--ignored`): timings.
    pub fn on_device_when_asked(mut self, tests: &[(&'static str, fn())]) -> Self {
        for &(name, test) in tests {
            let trial = self.device_trial(name, test).with_ignored_flag(true);
            self.trials.push(trial);
        }
        self
    }

    /// Tests that need no device.
    pub fn on_host(mut self, tests: &[(&'static str, fn())]) -> Self {
        self.trials.extend(tests.iter().map(|&(name, test)| {
            Trial::test(name, move || {
                test();
                Ok(())
            })
        }));
        self
    }

    /// Tests that need no device but cannot run in this build where `reason` is `Some`: then
    /// each is reported as ignored with it.
    pub fn on_host_unless(
        mut self,
        reason: Option<&'static str>,
        tests: &[(&'static str, fn())],
    ) -> Self {
        self.trials.extend(tests.iter().map(|&(name, test)| {
            Trial::ignorable_test(name, move || match reason {
                None => {
                    test();
                    Ok(Completion::Completed)
                },
                Some(reason) => Ok(Completion::ignored_with(reason)),
            })
        }));
        self
    }

    /// These tests and those of `other` (another backend's), run together.
    pub fn and(mut self, other: DeviceTests) -> Self {
        self.trials.extend(other.trials);
        self
    }

    /// Runs the tests and exits with libtest's status.
    pub fn run(self) -> ! {
        libtest_mimic::run(&Arguments::from_args(), self.trials).exit()
    }

    /// Runs the tests as [`Self::run`] does, one at a time (tests that start servers and
    /// processes, and time what they do).
    pub fn run_one_at_a_time(self) -> ! {
        let args = Arguments { test_threads: Some(1), ..Arguments::from_args() };
        libtest_mimic::run(&args, self.trials).exit()
    }

    fn device_trial(&self, name: &'static str, test: fn()) -> Trial {
        let (backend, absent, required) = (self.backend, self.absent.clone(), self.required);
        Trial::ignorable_test(name, move || match absent {
            None => {
                test();
                Ok(Completion::Completed)
            },
            Some(reason) if required => {
                Err(Failed::from(format!("{REQUIRE_ENV} names {backend}, but {reason}")))
            },
            Some(reason) => Ok(Completion::ignored_with(reason)),
        })
    }
}
