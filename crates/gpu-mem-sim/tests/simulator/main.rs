//! The simulator's behaviour tests, one module per concern, in one test binary: one build and
//! one link for all of them, and under Miri one interpreter start. Tests that change the
//! process's environment (`source_compiler`) or whose child processes die of a stack overflow on
//! purpose (`stack_overflow`) stay binaries of their own.
//!
//! Run one concern with a filter: `cargo test -p gpu-mem-sim --test simulator stackless::`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod async_kernels;
mod async_random;
mod backend;
#[cfg_attr(miri, allow(dead_code))]
mod common;
mod contract;
mod copy_engine;
mod direct;
mod every_form;
mod fibers;
mod global_races;
mod initcheck;
mod kept_memory;
mod mapped_race;
mod memcheck;
mod memory_reuse;
mod pinned_limit;
mod real_mistakes;
mod refusals;
mod regions;
mod settled_streams;
mod shared_arrays;
mod shared_reads;
mod stackless;
mod stream_handoff;
mod stream_lifetime;
mod thread_order;
