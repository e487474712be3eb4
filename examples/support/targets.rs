//! The committers a benchmark times: every backend present, CUDA on each chosen GPU set, each
//! able to report the device times of its last commitment's stages.

use std::{
    cell::RefCell,
    sync::Arc,
    time::{Duration, Instant},
};

use miden_gpu::{Backend, GpuCommitter, Result};

use super::device_times::DeviceTimes;

/// Reads the device times of a committer's last commitment, one entry per GPU that worked.
type TimesReader = Box<dyn Fn() -> Vec<DeviceTimes>>;

/// A committer to time.
pub struct Target {
    /// Name in tables and plots: the backend, with the GPU set where one was chosen
    /// (`cuda:0,1`).
    pub label: String,
    /// The CUDA ordinals where a GPU set was chosen.
    pub gpu_set: Option<Vec<usize>>,
    /// The backend.
    pub backend: Backend,
    /// The device, as the committer names it.
    pub device_name: String,
    /// Time it took to open the device and build the kernels.
    pub startup: Duration,
    cuda: CudaTuning,
    /// The committer and its times' reader while open.
    opened: RefCell<Option<Opened>>,
}

impl Target {
    /// The committer, opened again if [`Target::close`] closed it.
    pub fn committer(&self) -> Result<Arc<dyn GpuCommitter>> {
        let mut opened = self.opened.borrow_mut();
        if let Some((committer, _)) = opened.as_ref() {
            return Ok(committer.clone());
        }
        let (committer, read_times) = open(self.backend, self.gpu_set.as_deref(), &self.cuda)?;
        *opened = Some((committer.clone(), read_times));
        Ok(committer)
    }

    /// Closes the committer (until [`Target::committer`] opens it again), so that it holds no
    /// device memory or buffers beside another committer on the same GPUs: CUDA committers that
    /// share a GPU each free their device buffers after every call.
    pub fn close(&self) {
        self.opened.borrow_mut().take();
    }

    /// Device times of the stages of the last commitment, one entry per GPU that worked; empty
    /// for the CPU backend, for devices that cannot time stages and while closed.
    pub fn device_times(&self) -> Vec<DeviceTimes> {
        self.opened.borrow().as_ref().map_or_else(Vec::new, |(_, read_times)| read_times())
    }
}

/// The committers of every backend present among `wanted`, in the order of
/// [`ALL_BACKENDS`](super::ALL_BACKENDS): CUDA once per set of `gpu_sets` (CUDA ordinals), or
/// once on its default GPUs (`MIDEN_GPU_DEVICES`, else every GPU) if there is none. Those that
/// cannot be opened are reported on stderr and left out.
pub fn targets(wanted: &[Backend], gpu_sets: &[Vec<usize>], cuda: &CudaTuning) -> Vec<Target> {
    let mut chosen: Vec<(String, Backend, Option<&Vec<usize>>)> = Vec::new();
    for backend in super::ALL_BACKENDS.into_iter().filter(|b| wanted.contains(b)) {
        if backend == Backend::Cuda && !gpu_sets.is_empty() {
            for set in gpu_sets {
                let list: Vec<String> = set.iter().map(usize::to_string).collect();
                chosen.push((format!("cuda:{}", list.join(",")), backend, Some(set)));
            }
        } else {
            chosen.push((backend.to_string(), backend, None));
        }
    }
    chosen
        .into_iter()
        .filter_map(|(label, backend, set)| {
            let start = Instant::now();
            match open(backend, set.map(Vec::as_slice), cuda) {
                Ok((committer, read_times)) => Some(Target {
                    label,
                    gpu_set: set.cloned(),
                    backend,
                    device_name: committer.device_name(),
                    startup: start.elapsed(),
                    cuda: *cuda,
                    opened: RefCell::new(Some((committer, read_times))),
                }),
                Err(error) => {
                    eprintln!("skipping {label}: {error}");
                    None
                },
            }
        })
        .collect()
}

// BACKENDS
// ================================================================================================

/// A committer and the reader of its device times.
type Opened = (Arc<dyn GpuCommitter>, TimesReader);

/// The CUDA options a benchmark sets beyond `MIDEN_GPU_*` (default: none).
#[derive(Default, Clone, Copy)]
pub struct CudaTuning {
    /// Bytes of registered host memory for LDE rows (`CudaOptions::pinned_rows_bytes`).
    pub pinned_rows: u64,
    /// The hashing kernels' minimum resident blocks per SM (`CudaOptions::hash_min_blocks`).
    pub hash_min_blocks: Option<u32>,
}

/// Opens `backend`, on the GPUs `set` where one is given and, on CUDA, with `cuda`'s options.
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
fn open(backend: Backend, set: Option<&[usize]>, cuda: &CudaTuning) -> Result<Opened> {
    match backend {
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => Ok(with_reader(
            miden_gpu::wgpu::WgpuCommitter::with_options(miden_gpu::wgpu::WgpuOptions::from_env())?,
            miden_gpu::wgpu::WgpuCommitter::last_stage_times,
        )),
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            use miden_gpu::cuda::{CudaCommitter, CudaOptions};
            let mut options = CudaOptions::from_env()?;
            if let Some(set) = set {
                options.devices = Some(set.to_vec());
            }
            options.pinned_rows_bytes = cuda.pinned_rows;
            options.hash_min_blocks = cuda.hash_min_blocks.or(options.hash_min_blocks);
            let committer = CudaCommitter::with_options(options)?;
            Ok(with_reader(committer, <CudaCommitter as GpuCommitter>::last_stage_times))
        },
        // the CPU backend, and backends this build does not have (the error of `create` says so)
        _ => Ok((backend.create()?, Box::new(Vec::new))),
    }
}

/// `committer`, and a reader of its device times through `read` (its own accessor).
fn with_reader<C, T>(committer: C, read: fn(&C) -> T) -> Opened
where
    C: GpuCommitter + 'static,
    T: IntoIterator<Item: Into<DeviceTimes>> + 'static,
{
    let committer = Arc::new(committer);
    let reader = committer.clone();
    let read_times = move || read(&reader).into_iter().map(Into::into).collect();
    (committer, Box::new(read_times))
}
