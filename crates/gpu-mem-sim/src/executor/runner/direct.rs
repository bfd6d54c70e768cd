//! The direct runner: a compiled kernel whose threads never wait for each other (its source
//! names no barrier, collective, atomic or spin hint) has the program run the block's threads
//! as a loop (`gm_sim_run_threads`), each a plain call, one after another, where any order is a
//! valid schedule. Starting a thread is then an index update inside the program, not a call
//! from here, and one `Block` may stand for several consecutive blocks of the grid
//! ([`Block::blocks`]), which the program runs one after another. It stops after the first
//! fault, which names the faulting thread's block.

use crate::abi::GmSimThreads;
use crate::executor::block::Block;
use crate::executor::fiber::{Fiber, Target};
use crate::executor::plan::Looped;
use crate::executor::sim_thread::{SimThread, make_current};

impl Block<'_> {
    /// Runs the threads on the driver `fiber` ([`Block::run_on_driver`]).
    pub(super) fn drive_direct(&self, calls: Looped<'_>, fiber: *const Fiber) -> Target {
        // What compiled code reads through `threadIdx` & co: one for all threads, found by the
        // program as the current thread's and set to each thread before it runs; callbacks
        // (faults) find it there too, as for a stackless block.
        let thread = SimThread::new(self, 0, None);
        make_current(&thread);
        let mut threads = GmSimThreads {
            args: calls.args.as_ptr(),
            faulted: self.faulted_flag(),
            first_block: self.first_linear(),
            blocks: self.blocks,
            count: self.block_dim.count() as u32,
            dim_x: self.block_dim.x,
            dim_y: self.block_dim.y,
            warp_size: self.warp_size,
            status: 0,
        };
        // SAFETY: a program of the prelude's host branch, its parameters checked against the
        // launch's arguments, whose buffers (one per parameter, exact layout) live for the
        // launch; `thread` and the fault flag outlive the call, untouched by anything else.
        unsafe { (calls.run_threads)(&mut threads) };
        if threads.status != 0 {
            // Recorded already through the callbacks; kept in case the program could not.
            // SAFETY: the program is done with `info`.
            let info = unsafe { &*thread.info_ptr() };
            self.record_fault_in(
                info.block_index(),
                info.thread_index(),
                "a C++ exception escaped the kernel".to_string(),
            );
        }
        self.driver_done(self.take_divergence(), fiber)
    }
}
