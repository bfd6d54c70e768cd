//! The direct runner: a compiled kernel whose threads never wait for each other (its source
//! names no barrier, collective, atomic or spin hint) runs each thread as a plain call, one
//! after another, where any order is a valid schedule. The block stops at its first fault.

use crate::executor::block::Block;
use crate::executor::fiber::{Fiber, Target};
use crate::executor::plan::Calls;
use crate::executor::sim_thread::SimThread;

impl Block<'_> {
    /// Runs the threads on the driver `fiber` ([`Block::run_on_driver`]).
    pub(super) fn drive_direct(&self, calls: Calls<'_>, fiber: *const Fiber) -> Target {
        let count = self.block_dim.count() as u32;
        for linear in 0..count {
            calls.run_thread(&SimThread::new(self, linear, None));
            if self.fault.borrow().is_some() {
                break;
            }
        }
        self.driver_done(Ok(()), fiber)
    }
}
