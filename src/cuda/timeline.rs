//! Per-GPU stage times of a commitment, from CUDA events on each compute stream.

use super::{
    driver::{DriverResult, Event},
    gpu::Gpu,
};
use crate::committer::StageTimes;

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

    /// The stage times of GPU `ordinal` over `passes` passes, once the work is done; with
    /// `exchanged` (several GPUs) the gathering of rows from the other GPUs is timed too.
    pub(super) fn stage_times(
        &self,
        ordinal: usize,
        passes: usize,
        exchanged: bool,
    ) -> DriverResult<StageTimes> {
        let mut times = StageTimes {
            device: format!("cuda:{ordinal}"),
            passes,
            upload_lde_ms: Some(0.0),
            exchange_ms: exchanged.then_some(0.0),
            ..StageTimes::default()
        };
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
                Stage::Exchange => {
                    if let Some(exchange) = &mut times.exchange_ms {
                        *exchange += ms;
                    }
                },
                Stage::Hash => times.hash_ms += ms,
                Stage::Tree => times.tree_ms += ms,
                Stage::Wait => {},
            }
            if i + 1 == self.first_lde {
                times.upload_lde_ms = Some(mark.elapsed_since(&self.start)?);
            }
            previous = mark;
        }
        Ok(times)
    }
}
