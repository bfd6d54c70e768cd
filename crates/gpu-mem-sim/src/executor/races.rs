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

use super::plan::Checked;
use crate::sanitizer::{Hazard, Stamp, source_line};
use gpu_mem_core::kernel::Dim3;
use std::cell::{Cell, RefCell};

/// The most bytes of a write kept to compare (a 16-byte vector); larger writes (a copy of a
/// range) are reported at once.
const KEPT: usize = 16;

/// A hazard, where its byte lies, and what was missing between its accesses.
pub(crate) struct Report {
    pub(crate) hazard: Hazard,
    /// The byte's address as the kernel sees it, and where it lies (`the shared array `s`,
    /// byte 4`).
    pub(crate) at: (u64, String),
    pub(crate) unordered: &'static str,
}

/// A hazard met at a write that has not landed yet.
struct PendingRace {
    report: Report,
    /// The host address and size of the write, and what its bytes held before it.
    bytes: (usize, usize),
    before: [u8; KEPT],
}

/// A block's hazards met at writes not settled yet.
#[derive(Default)]
pub(crate) struct PendingRaces {
    pending: RefCell<Vec<PendingRace>>,
    /// Whether a hazard of identical data was logged.
    identical_logged: Cell<bool>,
}

impl PendingRaces {
    /// A hazard met at an access of `size` bytes at host `address`: `Some` when it is a fault
    /// now (a read, or a write too large to compare), else kept until [`PendingRaces::settle`].
    pub(super) fn hold(&self, report: Report, (address, size): (usize, usize)) -> Option<Report> {
        if !report.hazard.later.write || size > KEPT {
            return Some(report);
        }
        self.pending.borrow_mut().push(PendingRace {
            report,
            bytes: (address, size),
            before: bytes_at(address, size),
        });
        None
    }

    /// Whether hazards wait to be settled (asked before every access: inlined).
    #[inline]
    pub(super) fn any(&self) -> bool {
        !self.pending.borrow().is_empty()
    }

    /// The hazards kept whose writes have landed and changed their bytes: the faults. Those
    /// that left their bytes as they were are logged (once per block) and dropped.
    pub(super) fn settle(&self, kernel: &str) -> Vec<Report> {
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        let mut faults = Vec::new();
        for race in pending {
            let (address, size) = race.bytes;
            if bytes_at(address, size) != race.before {
                faults.push(race.report);
            } else if !self.identical_logged.replace(true) {
                tracing::debug!(
                    kernel,
                    "racecheck: a write racing with another access left the bytes at {:#x} as they were (identical data): not reported",
                    race.report.at.0
                );
            }
        }
        faults
    }
}

/// compute-sanitizer's words for a race, with both accesses' lines and threads: `thread` and
/// `block` give a stamp's thread and block indices.
pub(super) fn message(
    checked: Checked<'_>,
    report: &Report,
    thread: impl Fn(u32) -> Dim3,
    block: impl Fn(u64) -> Dim3,
) -> String {
    let hazard = &report.hazard;
    let line = |pc| source_line(checked.layout, pc).unwrap_or_else(|| "?".into());
    let kind = |stamp: &Stamp| match (stamp.atomic, stamp.write) {
        (true, _) => "Atomic",
        (false, true) => "Write",
        (false, false) => "Read",
    };
    let across = hazard.earlier.block != hazard.later.block;
    let who = |stamp: &Stamp| {
        let t = thread(stamp.thread);
        let index = format!("({}, {}, {})", t.x, t.y, t.z);
        if across {
            let b = block(stamp.block);
            format!("{index} of block ({}, {}, {})", b.x, b.y, b.z)
        } else {
            index
        }
    };
    format!(
        "racecheck: Race reported between {} access at {} by thread {} and {} access at {} by thread {} at {:#x} ({}), {}",
        kind(&hazard.earlier),
        line(hazard.earlier.pc),
        who(&hazard.earlier),
        kind(&hazard.later),
        line(hazard.later.pc),
        who(&hazard.later),
        report.at.0,
        report.at.1,
        report.unordered,
    )
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
