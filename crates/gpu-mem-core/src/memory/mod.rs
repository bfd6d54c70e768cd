//! Ownership of device and host memory, and the tracking that keeps it alive and untouched while
//! asynchronous work uses it (the book's soundness chapter).

mod device_alloc;
mod foreign;
mod host_buffer;
mod host_vec;
mod pending;

pub(crate) use device_alloc::DeviceAlloc;
pub(crate) use foreign::{ForeignMemory, Release};
pub(crate) use host_buffer::{HostBuffer, HostBufferKind};
pub(crate) use host_vec::{try_collect, zeroed_vec};
pub(crate) use pending::{Access, PendingUses};
