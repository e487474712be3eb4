//! Recovery after a failed call: the GPUs drained, or marked lost.

use super::{gpu::Gpu, health::Health};
use crate::error::GpuError;

// RECOVERY
// ================================================================================================

/// After a call that failed with `error`: an error that leaves the GPUs unusable marks them
/// lost, and their work is not waited for; otherwise every stream of `gpus` is drained, so that
/// none of the call's work still runs when its buffers are reused, and a drain that fails marks
/// them lost.
pub(super) fn recover(gpus: &[Gpu], health: &Health, error: &GpuError) {
    health.note(error);
    if health.is_lost() {
        return;
    }
    if let Err(drain) = gpus.iter().try_for_each(Gpu::drain) {
        health.mark_lost(&drain.to_string());
    }
}
