//! What a block's first barrier costs on fibers at the least, measured on this machine: the
//! reference the executor benchmark sets the blocking-closure barrier against.
//!
//! The measured schedule is the one a block of closure threads takes at its first barrier, with
//! nothing else: each thread starts on a fiber of its own (a stack from the simulator's pool,
//! laid out as the executor lays out a fresh fiber), arrives at the barrier and switches to the
//! next thread's fresh fiber; the last one to arrive goes on, ends, and switches to the first
//! waiting one, which ends and switches to the next, and so on. Two switches per thread, the
//! executor's own switch and stacks, and no scheduling state beyond two counters, so its time
//! is a floor the executor's bookkeeping adds to. (Fibers left at the end of a block hold
//! nothing and are simply laid out afresh for the next.)

use super::super::stack;
use super::native::{initial_frame, switch_stacks};
use corosensei::stack::Stack;

/// One measurement's state, shared by the fibers through raw pointers only (no reference to it
/// is held across a switch).
struct Floor {
    /// Each thread's saved stack pointer.
    sps: Vec<*mut u8>,
    /// Each thread's fresh stack top.
    tops: Vec<usize>,
    /// What each thread's entry gets.
    starts: Vec<ThreadStart>,
    /// The measuring OS thread's stack pointer while the fibers run.
    main: *mut u8,
    threads: usize,
    arrived: usize,
    done: usize,
}

struct ThreadStart {
    floor: *mut Floor,
    index: usize,
}

/// Runs blocks of `threads` fibers through one barrier each on the calling OS thread, for as
/// long as `next_block` hands it one (so that several OS threads can share a count of blocks,
/// as a launch's workers do). Fewer than 2 threads is an error: one thread never switches.
pub(crate) fn first_barriers(threads: usize, next_block: &dyn Fn() -> bool) -> Result<(), String> {
    if threads < 2 {
        return Err(format!("a block of {threads} thread(s) never switches"));
    }
    // Stacks are taken only by a thread that gets a block.
    let mut more = next_block();
    if !more {
        return Ok(());
    }
    let mut stacks = Vec::with_capacity(threads);
    for _ in 0..threads {
        match stack::take() {
            Ok(stack) => stacks.push(stack),
            Err(error) => {
                stacks.into_iter().for_each(stack::give_back);
                return Err(error);
            }
        }
    }
    // Reached through this raw pointer only, from here until it is freed below.
    let this: *mut Floor = Box::into_raw(Box::new(Floor {
        sps: vec![std::ptr::null_mut(); threads],
        tops: stacks.iter().map(|s| s.base().get()).collect(),
        starts: Vec::with_capacity(threads),
        main: std::ptr::null_mut(),
        threads,
        arrived: 0,
        done: 0,
    }));
    let starts = (0..threads).map(|index| ThreadStart { floor: this, index });
    // SAFETY: `this` is live and no fiber runs yet.
    unsafe { (*this).starts.extend(starts) };
    let mut complete = true;
    while more {
        // SAFETY: no fiber runs; `this` stays valid (boxed) until the loop ends, and the stacks
        // are this call's own. Thread 0 is laid out afresh, and the switch returns once the last
        // thread of the block has ended (`floor_thread`).
        unsafe {
            (*this).arrived = 0;
            (*this).done = 0;
            lay_out(this, 0);
            switch_stacks(&raw mut (*this).main, *(*this).sps.as_ptr());
            complete &= (*this).arrived == threads && (*this).done == threads;
        }
        more = next_block();
    }
    // SAFETY: `this` came from `Box::into_raw` above; no fiber runs any more, and the fibers
    // left suspended are never resumed.
    drop(unsafe { Box::from_raw(this) });
    for stack in stacks {
        stack::give_back(stack);
    }
    if !complete {
        return Err("a block ended before all its threads had".into());
    }
    Ok(())
}

/// Lays thread `index`'s fiber out to start at `floor_thread`. (Its guard page is not recorded
/// for the overflow report, as the executor's are: these frames take a few hundred bytes.)
///
/// # Safety
/// `floor` is live, `index < threads`, and nothing runs on that fiber's stack.
unsafe fn lay_out(floor: *mut Floor, index: usize) {
    // SAFETY: the caller's contract; the vectors have `threads` elements and are not resized
    // while fibers run.
    unsafe {
        let top = *(*floor).tops.as_ptr().add(index);
        let start: *const ThreadStart = (*floor).starts.as_ptr().add(index);
        *(*floor).sps.as_mut_ptr().add(index) =
            initial_frame(top, floor_thread as *const (), start.cast());
    }
}

/// A thread: its "kernel" waits at the barrier; then it ends and hands over as the executor's
/// ended threads do.
extern "C" fn floor_thread(start: *const ThreadStart) -> ! {
    // SAFETY: `start` points into the live `Floor` of `first_barrier`, which waits in its
    // switch until the block's last thread has ended.
    unsafe {
        let (floor, index) = ((*start).floor, (*start).index);
        wait(floor, index);
        (*floor).done += 1;
        let threads = (*floor).threads;
        let save = (*floor).sps.as_mut_ptr().add(index);
        if (*floor).done == threads {
            switch_stacks(save, (*floor).main);
        } else {
            // The last thread to arrive went on first; then they end in index order.
            let next = if index + 1 == threads { 0 } else { index + 1 };
            switch_stacks(save, *(*floor).sps.as_ptr().add(next));
        }
    }
    // Never resumed: the fiber is laid out afresh for the next block.
    super::abort("a finished floor fiber was resumed")
}

/// The barrier: all but the last thread switch to the next thread's fresh fiber.
///
/// # Safety
/// As in `floor_thread`.
#[inline(never)]
unsafe fn wait(floor: *mut Floor, index: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        (*floor).arrived += 1;
        if (*floor).arrived == (*floor).threads {
            return;
        }
        let next = index + 1;
        lay_out(floor, next);
        switch_stacks(
            (*floor).sps.as_mut_ptr().add(index),
            *(*floor).sps.as_ptr().add(next),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    /// A `next_block` that hands out `blocks` blocks, and how many it was asked for.
    fn blocks(blocks: usize) -> (Cell<usize>, impl Fn(&Cell<usize>) -> bool) {
        (Cell::new(0), move |asked: &Cell<usize>| {
            asked.set(asked.get() + 1);
            asked.get() <= blocks
        })
    }

    #[test]
    fn the_floor_runs_every_block_to_its_end() {
        // Every thread of every block arrived and ended (else an error), the last switched
        // back, and blocks were taken until none was left.
        let (asked, next) = blocks(3);
        let ran = super::first_barriers(64, &|| next(&asked));
        assert!(ran.is_ok(), "{ran:?}");
        assert_eq!(asked.get(), 4);
    }

    #[test]
    fn a_block_that_never_switches_is_refused() {
        let (asked, next) = blocks(3);
        assert!(super::first_barriers(1, &|| next(&asked)).is_err());
        assert_eq!(asked.get(), 0);
        let (asked, next) = blocks(0);
        assert!(super::first_barriers(2, &|| next(&asked)).is_ok());
    }
}
