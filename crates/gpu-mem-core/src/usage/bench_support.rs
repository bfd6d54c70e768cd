//! What the transfers benchmark measures of the accounting alone (feature `bench-internals`).

use crate::accounting::{DeviceUsage, MemoryKind, Ticket, Tracking};

/// A device's accounting on its own with the given tracking, to measure one setting beside
/// another in the same run (the process's tracking is chosen once).
#[derive(Debug)]
pub struct Accounting(DeviceUsage);

impl Accounting {
    /// An accounting that keeps what `tracking` says.
    pub fn new(tracking: Tracking) -> Accounting {
        Accounting(DeviceUsage::standalone(tracking))
    }

    /// Counts an allocation of `bytes` bytes and its free.
    #[track_caller]
    pub fn count_one_allocation(&self, bytes: usize) {
        let ticket = Ticket::new(&self.0, MemoryKind::Device, bytes, None);
        self.0.release(&ticket);
    }
}
