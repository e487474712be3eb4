//! The allocator of the command line, the examples and the benchmarks (feature `tools`):
//! jemalloc, keeping the pages it frees.
//!
//! A proof allocates and frees gigabytes (trace, LDE rows, constraint evaluations). With the
//! system allocator each large block is a fresh mapping whose every page faults on first write,
//! and with several proofs in one process (a [`crate::ProverPool`]) those faults and mappings
//! contend on the process's one address space: on a 4-GPU host a pool of 8 proofs gave 1.4
//! times the proofs per minute on 4 GPUs as on one. jemalloc with decay off hands the freed,
//! already faulted pages to the next proof instead, and the same 8 proofs gave 1.9 times
//! (preloaded into the same build; 2.3 times with 16 proofs). The cost is that the process
//! keeps its peak memory until it exits.
//!
//! On Linux jemalloc also asks for transparent huge pages (`madvise`): a first proof in a fresh
//! process then faults 2 MiB pages instead of 4 KiB ones, which roughly halves Miden's execution
//! of a W2 proof for about 12 % more peak resident memory (BENCHMARKS.md). A kernel set to
//! `never` leaves jemalloc on small pages; elsewhere jemalloc has no such option (it would warn
//! at every start), so it is not asked.
//!
//! A program opts in with [`use_jemalloc!`](crate::use_jemalloc) at its root; the library
//! itself never picks an allocator. Targets where jemalloc does not build (MSVC) keep the system
//! allocator.

#[doc(hidden)]
#[cfg(not(target_env = "msvc"))]
pub use tikv_jemallocator as __jemalloc;

/// jemalloc's options: no decay of dirty or muzzy pages, so that freed memory is reused as it
/// is, and transparent huge pages for its mappings and its metadata (the `MALLOC_CONF` syntax;
/// `_RJEM_MALLOC_CONF` in the environment overrides it at run time).
#[cfg(target_os = "linux")]
pub const JEMALLOC_CONF: &str =
    "dirty_decay_ms:-1,muzzy_decay_ms:-1,thp:always,metadata_thp:always";

/// jemalloc's options: no decay of dirty or muzzy pages, so that freed memory is reused as it
/// is (the `MALLOC_CONF` syntax; `_RJEM_MALLOC_CONF` in the environment overrides it at run
/// time).
#[cfg(not(target_os = "linux"))]
pub const JEMALLOC_CONF: &str = "dirty_decay_ms:-1,muzzy_decay_ms:-1";

#[doc(hidden)]
pub const __MALLOC_CONF_LEN: usize = JEMALLOC_CONF.len() + 1;

/// [`JEMALLOC_CONF`] as the C string jemalloc reads.
#[doc(hidden)]
pub static __MALLOC_CONF: [u8; __MALLOC_CONF_LEN] = {
    let mut out = [0u8; __MALLOC_CONF_LEN];
    let text = JEMALLOC_CONF.as_bytes();
    let mut i = 0;
    while i < text.len() {
        out[i] = text[i];
        i += 1;
    }
    out
};

/// Makes jemalloc, configured as [`JEMALLOC_CONF`], the global allocator of the program that
/// invokes it (at its crate root, once), except on targets where jemalloc does not build (MSVC).
#[macro_export]
macro_rules! use_jemalloc {
    () => {
        #[cfg(not(target_env = "msvc"))]
        #[global_allocator]
        static GLOBAL_ALLOCATOR: $crate::alloc::__jemalloc::Jemalloc =
            $crate::alloc::__jemalloc::Jemalloc;

        /// jemalloc reads its options from this symbol at start-up.
        #[cfg(not(target_env = "msvc"))]
        #[allow(non_upper_case_globals)]
        #[export_name = "_rjem_malloc_conf"]
        pub static malloc_conf: &[u8; $crate::alloc::__MALLOC_CONF_LEN] =
            &$crate::alloc::__MALLOC_CONF;
    };
}
