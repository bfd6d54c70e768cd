//! racecheck's reports (`crate::sanitizer`): what a block does with a hazard its threads made.
//!
//! A hazard whose later access is a read is the block's fault at once. One whose later access
//! writes waits until the write has landed (the hook runs before it: the next access any
//! thread of the block asks about, or the block's end, comes after it): a write that left the
//! bytes as they were, as when every thread stores the same flag (Rodinia's bfs), is what
//! compute-sanitizer classes as an INFO hazard ("identical data") and prints only on request;
//! here it is logged at `debug` and the launch goes on. Any other write is the block's fault.
//! Only the block's first fault is reported: its message is built (with the source lines, a
//! run of `addr2line`) only then.

use super::block::{Block, block_index};
use super::plan::Checked;
use crate::sanitizer::{Hazard, Stamp, source_line};

/// The most bytes of a write kept to compare (a 16-byte vector); larger writes (a copy of a
/// range) are reported at once.
const KEPT: usize = 16;

/// A hazard met at a write that has not landed yet.
pub(crate) struct PendingRace {
    report: Report,
    /// The host address and size of the write, and what its bytes held before it.
    bytes: (usize, usize),
    before: [u8; KEPT],
}

/// A hazard, where its byte lies, and what was missing between its accesses.
pub(crate) struct Report {
    pub(crate) hazard: Hazard,
    /// The byte's address as the kernel sees it, and where it lies (`the shared array `s`,
    /// byte 4`).
    pub(crate) at: (u64, String),
    pub(crate) unordered: &'static str,
}

impl Block<'_> {
    /// racecheck found `report`'s hazard at an access of `size` bytes at host `address`.
    pub(super) fn race(&self, report: Report, (address, size): (usize, usize)) {
        if self.fault.borrow().is_some() {
            return;
        }
        if !report.hazard.later.write || size > KEPT {
            return self.race_fault(&report);
        }
        self.pending_races.borrow_mut().push(PendingRace {
            report,
            bytes: (address, size),
            before: bytes_at(address, size),
        });
    }

    /// Settles the hazards met at writes that have landed since (see the module's docs).
    pub(super) fn settle_races(&self) {
        let pending = std::mem::take(&mut *self.pending_races.borrow_mut());
        for race in pending {
            let (address, size) = race.bytes;
            let same = bytes_at(address, size) == race.before;
            if same {
                if !self.identical_logged.replace(true) {
                    tracing::debug!(
                        kernel = self.kernel,
                        "racecheck: a write racing with another access left the bytes at {:#x} as they were (identical data): not reported",
                        race.report.at.0
                    );
                }
            } else {
                self.race_fault(&race.report);
            }
        }
    }

    /// Records the report as the block's fault, naming the later access's thread.
    fn race_fault(&self, report: &Report) {
        if self.fault.borrow().is_some() {
            return;
        }
        let Some(checked) = self.plan.checked() else {
            return;
        };
        let later = &report.hazard.later;
        let message = self.race_message(checked, report);
        self.record_fault_in(
            block_index(later.block, self.grid_dim),
            self.thread_index(later.thread),
            message,
        );
    }

    /// compute-sanitizer's words for a race, with both accesses' lines and threads.
    fn race_message(&self, checked: Checked<'_>, report: &Report) -> String {
        let hazard = &report.hazard;
        let layout = checked.layout;
        let line = |pc| source_line(layout, pc).unwrap_or_else(|| "?".into());
        let kind = |write| if write { "Write" } else { "Read" };
        let across = hazard.earlier.block != hazard.later.block;
        let who = |stamp: &Stamp| {
            let t = self.thread_index(stamp.thread);
            let thread = format!("({}, {}, {})", t.x, t.y, t.z);
            if across {
                let b = block_index(stamp.block, self.grid_dim);
                format!("{thread} of block ({}, {}, {})", b.x, b.y, b.z)
            } else {
                thread
            }
        };
        format!(
            "racecheck: Race reported between {} access at {} by thread {} and {} access at {} by thread {} at {:#x} ({}), {}",
            kind(hazard.earlier.write),
            line(hazard.earlier.pc),
            who(&hazard.earlier),
            kind(hazard.later.write),
            line(hazard.later.pc),
            who(&hazard.later),
            report.at.0,
            report.at.1,
            report.unordered,
        )
    }
}

/// The `size` (at most [`KEPT`]) bytes at host `address`, which the executor granted a thread
/// of a running launch (the rest zero).
fn bytes_at(address: usize, size: usize) -> [u8; KEPT] {
    let mut bytes = [0u8; KEPT];
    for (i, b) in bytes.iter_mut().enumerate().take(size) {
        let at = std::ptr::with_exposed_provenance::<u8>(address + i);
        // SAFETY: the executor granted the access: the bytes lie in a live allocation or the
        // block's shared memory for the whole launch. Read volatile: other threads' accesses of
        // them are what racecheck reports.
        *b = unsafe { std::ptr::read_volatile(at) };
    }
    bytes
}
