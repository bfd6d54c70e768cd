//! What the transfers benchmark measures of the accounting alone (feature `bench-internals`).

use crate::accounting::{MemoryKind, Ticket};
use crate::device::Device;

/// Counts an allocation of `bytes` bytes on `device` and its free, as every allocation and free
/// does: the accounting's whole cost per allocation.
#[track_caller]
pub fn count_one_allocation(device: &Device, bytes: usize) {
    let usage = device.usage();
    let ticket = Ticket::new(usage, MemoryKind::Device, bytes, None);
    usage.release(&ticket);
}
