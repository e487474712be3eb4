//! Device times of a commitment's stages, in one form for every backend.
//!
//! CUDA times each stage per GPU with events on its compute stream; wgpu times the compute
//! passes of each stage with timestamp queries. Both count kernel time and both have the
//! interpolation, LDE, hash and tree stages; the fields a backend does not have are `None`.

/// Device times of one commitment's stages on one device, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageTimes {
    /// The device, as its backend names it: `cuda:<ordinal>`, or `wgpu`.
    pub device: String,
    /// Passes over the LDE: 1, or more where the LDE was streamed in coset groups to fit the
    /// device memory budget.
    pub passes: usize,
    /// Inverse NTTs and scaling into coefficients (0 where the columns were interpolated on the
    /// host).
    pub interpolate_ms: f32,
    /// Coset scaling and forward NTTs of every coset (all passes).
    pub lde_ms: f32,
    /// Row hashing into the leaves, with the row-major copy of the LDE where the backend does
    /// not time it apart ([`Self::rows_ms`]).
    pub hash_ms: f32,
    /// Every Merkle level.
    pub tree_ms: f32,
    /// The transposition of each coset's evaluations into rows, where timed apart from the
    /// hashing.
    pub rows_ms: Option<f32>,
    /// Wall time of the upload, the interpolation and the first pass's LDE, which overlap, where
    /// the backend times it (with several CUDA GPUs, the first pass's gathering overlaps them
    /// too and is part of it).
    pub upload_lde_ms: Option<f32>,
    /// Gathering all columns of this device's rows from the other devices, where several split
    /// a commitment (the time the device spent on it, wherever it overlapped other stages).
    pub exchange_ms: Option<f32>,
}

impl StageTimes {
    /// Logs these times at info level: the one record of a commitment's stage times that every
    /// GPU backend writes.
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    pub(crate) fn log(&self) {
        tracing::info!(
            device = %self.device,
            passes = self.passes,
            upload_lde_ms = self.upload_lde_ms,
            interpolate_ms = self.interpolate_ms,
            lde_ms = self.lde_ms,
            exchange_ms = self.exchange_ms,
            rows_ms = self.rows_ms,
            hash_ms = self.hash_ms,
            tree_ms = self.tree_ms,
            "stage times"
        );
    }
}
