//! Support for testing backends, behind the `testing` cargo feature (off by default, so nothing
//! here reaches an application): the raw-[`Backend`](crate::Backend) contract, written once and
//! run by each backend's own tests, where they find NVIDIA's pinned wheels, and how a trial runs
//! in a child process of its own.

pub mod child;
pub mod contract;
pub mod wheels;
