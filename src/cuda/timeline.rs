//! Per-GPU stage times of a commitment, from CUDA events on each compute stream.

use super::{
    driver::{DriverResult, Event},
    gpu::Gpu,
};

/// Device times of one commitment's stages on one GPU, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes {
    /// CUDA ordinal of the GPU.
    pub device: usize,
    /// Passes over the LDE: 1, or more where the LDE was streamed in coset groups to fit the
    /// device memory budget.
    pub passes: usize,
    /// Wall time of upload, interpolation and the first pass's LDE (the transforms overlap the
    /// upload).
    pub upload_lde_ms: f32,
    /// Kernel time of the inverse NTTs and the polynomials' scaling.
    pub interpolate_ms: f32,
    /// Kernel time of the coset scaling and forward NTTs (all passes).
    pub lde_ms: f32,
    /// Gathering all columns of this GPU's rows from the other GPUs (0 with one GPU).
    pub exchange_ms: f32,
    /// Row hashing (leaves) and the row-major copy of the LDE.
    pub hash_ms: f32,
    /// Merkle levels.
    pub tree_ms: f32,
}

// TIMELINE
// ================================================================================================

/// What a span of a GPU's compute stream did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Waiting: for a group's upload, or for the other GPUs to have gathered from this one.
    Wait,
    Interpolate,
    Lde,
    Exchange,
    Hash,
    Tree,
}

/// Timing events on one GPU's compute stream: each mark ends a span of one stage, which began
/// at the previous mark.
pub(super) struct Timeline {
    start: Event,
    marks: Vec<(Stage, Event)>,
    /// Marks up to the end of the first pass's LDE.
    first_lde: usize,
}

impl Timeline {
    pub(super) fn new(gpu: &Gpu) -> DriverResult<Self> {
        Ok(Self { start: gpu.mark()?, marks: Vec::new(), first_lde: 0 })
    }

    /// Ends the current span as `stage`.
    pub(super) fn mark(&mut self, gpu: &Gpu, stage: Stage) -> DriverResult<()> {
        self.marks.push((stage, gpu.mark()?));
        Ok(())
    }

    /// Notes that the first pass's LDE is enqueued.
    pub(super) fn first_lde_done(&mut self) {
        self.first_lde = self.marks.len();
    }

    /// The stage times, once the work is done.
    pub(super) fn stage_times(&self, device: usize, passes: usize) -> DriverResult<StageTimes> {
        let mut times = StageTimes { device, passes, ..StageTimes::default() };
        let Some((_, end)) = self.marks.last() else {
            return Ok(times);
        };
        end.synchronize()?;
        let mut previous = &self.start;
        for (i, (stage, mark)) in self.marks.iter().enumerate() {
            let ms = mark.elapsed_since(previous)?;
            match stage {
                Stage::Interpolate => times.interpolate_ms += ms,
                Stage::Lde => times.lde_ms += ms,
                Stage::Exchange => times.exchange_ms += ms,
                Stage::Hash => times.hash_ms += ms,
                Stage::Tree => times.tree_ms += ms,
                Stage::Wait => {},
            }
            if i + 1 == self.first_lde {
                times.upload_lde_ms = mark.elapsed_since(&self.start)?;
            }
            previous = mark;
        }
        Ok(times)
    }
}
