//! How the backends take host memory for their results, as a value.

/// Host-memory options shared by every backend: how result vectors are reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOptions {
    /// Ask Linux for transparent huge pages for large result vectors (default `true`). Results
    /// are gigabytes of fresh memory: faulted in 2 MiB at a time instead of 4 KiB, the copies
    /// that fill them spend far less time in the kernel. No effect elsewhere.
    pub huge_pages: bool,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self { huge_pages: true }
    }
}
