//! Support for testing backends, behind the `testing` cargo feature (off by default, so nothing
//! here reaches an application): the raw-[`Backend`](crate::Backend) contract, written once and
//! run by each backend's own tests, and where they find NVIDIA's pinned wheels.

pub mod contract;
pub mod wheels;
