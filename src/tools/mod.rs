//! Tooling of the command line, the examples, the benchmarks and the tests (feature `tools`):
//! stage times and progress read from `tracing` spans, and the programs' allocator.

pub mod alloc;
pub mod progress;
pub mod timing;
