//! Device times of a GPU commitment's stages in one form for every GPU backend, and the kernel
//! rates they give.
//!
//! CUDA times each stage per GPU with events on its compute stream
//! (`CudaCommitter::last_stage_times`); wgpu times the compute passes of each stage with
//! timestamp queries (`WgpuCommitter::last_stage_times`). Both count kernel time, and both have
//! the interpolation, LDE, hash and tree stages; the rest is backend-specific.

use serde::Serialize;

use super::Workload;

// DEVICE TIMES
// ================================================================================================

/// Device times of one commitment's stages on one GPU, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceTimes {
    /// The GPU: `cuda:<ordinal>`, or `wgpu`.
    pub gpu: String,
    /// Inverse NTTs and scaling into coefficients (0 where wgpu interpolates columns longer than
    /// one binding on the host).
    pub interpolate_ms: f64,
    /// Coset scaling and forward NTTs of every coset.
    pub lde_ms: f64,
    /// Row hashing into the leaves; CUDA counts the row-major copy of the LDE here too.
    pub hash_ms: f64,
    /// Every Merkle level.
    pub tree_ms: f64,
    /// wgpu: transposition of each coset's evaluations into rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_ms: Option<f64>,
    /// CUDA: wall time of the upload, interpolation and first pass's LDE (overlapping).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_lde_ms: Option<f64>,
    /// CUDA: gathering all columns of this GPU's rows from the other GPUs (0 with one GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange_ms: Option<f64>,
    /// CUDA: passes over the LDE (more than 1 where it was streamed to fit device memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<usize>,
}

/// One device's entry of `GpuCommitter::last_stage_times`.
impl From<miden_gpu::StageTimes> for DeviceTimes {
    fn from(t: miden_gpu::StageTimes) -> Self {
        Self {
            gpu: t.device,
            interpolate_ms: t.interpolate_ms.into(),
            lde_ms: t.lde_ms.into(),
            hash_ms: t.hash_ms.into(),
            tree_ms: t.tree_ms.into(),
            rows_ms: t.rows_ms.map(Into::into),
            upload_lde_ms: t.upload_lde_ms.map(Into::into),
            exchange_ms: t.exchange_ms.map(Into::into),
            passes: Some(t.passes),
        }
    }
}

impl DeviceTimes {
    /// The stages this GPU timed, by name, in pipeline order.
    pub fn stages(&self) -> Vec<(&'static str, f64)> {
        [
            ("upload+LDE wall", self.upload_lde_ms),
            ("interpolate", Some(self.interpolate_ms)),
            ("LDE", Some(self.lde_ms)),
            ("rows", self.rows_ms),
            ("exchange", self.exchange_ms),
            ("hash", Some(self.hash_ms)),
            ("tree", Some(self.tree_ms)),
        ]
        .into_iter()
        .filter_map(|(name, ms)| Some((name, ms?)))
        .collect()
    }

    /// The kernel rates of this GPU in a commitment of `workload` done by `gpus` GPUs, each
    /// taking an even share: the GPUs split the columns for the interpolation and LDE and the
    /// rows for the hashing and the tree (one GPU does it all with wgpu, or with one CUDA GPU).
    pub fn rates(&self, workload: &Workload, gpus: usize) -> KernelRates {
        let share = |work: usize| work as f64 / gpus as f64;
        let per_s = |work: f64, ms: f64| (ms > 0.0).then(|| work / (ms / 1e3));
        KernelRates {
            hash_permutations_per_s: per_s(share(workload.leaf_permutations()), self.hash_ms),
            tree_permutations_per_s: per_s(share(workload.tree_permutations()), self.tree_ms),
            lde_elements_per_s: per_s(share(workload.cols * workload.lde_rows()), self.lde_ms),
            interpolation_elements_per_s: per_s(
                share(workload.cols * workload.rows()),
                self.interpolate_ms,
            ),
        }
    }
}

// KERNEL RATES
// ================================================================================================

/// Throughput of one GPU's kernels, from its [`DeviceTimes`]; `None` where a stage took no
/// device time.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRates {
    /// Row-hash permutations per second (CUDA: with the row-major copy of the LDE).
    pub hash_permutations_per_s: Option<f64>,
    /// Merkle-tree permutations per second.
    pub tree_permutations_per_s: Option<f64>,
    /// LDE elements (columns x LDE rows) per second of the coset NTTs.
    pub lde_elements_per_s: Option<f64>,
    /// Trace elements per second of the interpolation.
    pub interpolation_elements_per_s: Option<f64>,
}

impl KernelRates {
    /// The rates, by name, with their units (`M perm/s`, `G elem/s`).
    pub fn describe(&self) -> String {
        [
            ("hash", self.hash_permutations_per_s, 1e6, "M perm/s"),
            ("tree", self.tree_permutations_per_s, 1e6, "M perm/s"),
            ("LDE", self.lde_elements_per_s, 1e9, "G elem/s"),
            ("interpolation", self.interpolation_elements_per_s, 1e9, "G elem/s"),
        ]
        .into_iter()
        .filter_map(|(name, rate, unit, units)| {
            let value = rate? / unit;
            // four significant digits
            let decimals = (3 - value.log10().floor() as i32).clamp(0, 6) as usize;
            Some(format!("{name} {value:.decimals$} {units}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
    }
}

// STAGE REPORT
// ================================================================================================

/// One GPU's device times with the kernel rates they give.
#[derive(Debug, Clone, Serialize)]
pub struct GpuStages {
    /// The device times.
    #[serde(flatten)]
    pub times: DeviceTimes,
    /// The rates.
    #[serde(flatten)]
    pub rates: KernelRates,
}

impl GpuStages {
    /// The device times of every GPU that worked on a commitment of `workload`, with their rates.
    pub fn of(times: Vec<DeviceTimes>, workload: &Workload) -> Vec<Self> {
        let gpus = times.len();
        times.into_iter().map(|times| Self { rates: times.rates(workload, gpus), times }).collect()
    }

    /// Two lines: the stage times, and the kernel rates.
    pub fn describe(&self) -> String {
        let stages: Vec<String> = self
            .times
            .stages()
            .into_iter()
            .map(|(name, ms)| format!("{name} {ms:.2} ms"))
            .collect();
        let passes = match self.times.passes {
            Some(passes) if passes > 1 => format!(", {passes} passes"),
            _ => String::new(),
        };
        format!(
            "{:<8} {}{passes}\n{:<8} {}",
            self.times.gpu,
            stages.join(", "),
            "",
            self.rates.describe()
        )
    }
}
