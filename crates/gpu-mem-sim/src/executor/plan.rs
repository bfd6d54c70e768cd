//! How a launch's threads run, decided once per launch, here, from its code.
//!
//! | code                                   | plan        | runner              |
//! |----------------------------------------|-------------|---------------------|
//! | compiled, its source names no wait     | `Direct`    | `runner::direct`    |
//! | compiled as regions between barriers   | `Direct`    | `runner::direct`    |
//! | compiled as coroutines (stackless)     | `Stackless` | `runner::stackless` |
//! | compiled as calls that may wait        | `Fibers`    | `runner::fibers`    |
//! | a closure                              | `Fibers`    | `runner::fibers`    |
//! | an async closure                       | `Polled`    | `runner::polled`    |
//!
//! `Direct` runs a block's threads as a loop inside the compiled program, each a plain call:
//! any order is a valid schedule of threads that never wait for each other; a program built as
//! regions runs each block whole there, its threads as loops between its barriers. `Stackless` runs a block round by round, each thread a heap frame
//! of the program's. `Fibers` gives each thread that waits a stack of its own. `Polled` polls
//! each thread's future round by round. All four release barriers and collectives, and report
//! divergence, faults and spinning, by the same rules (`crate::executor::release`,
//! `crate::executor::watchdog`), so the plan changes the cost of a launch, never its outcome;
//! one thing aside: after a fault, `Direct` runs no further thread, the others end the block at
//! its next round, so what later threads wrote differs (on a GPU the faulting thread's
//! warp-mates run beside it; `tests/simulator/every_form.rs` holds every plan to the rest).
//! A compiled program is built as coroutines whenever its source allows it (`crate::source`
//! decides that when it compiles, from the source alone); the plan reads what was built.

use super::args::Parameters;
use crate::abi::{CallsEntry, Entry, GmSimThreads, StacklessEntry};
use crate::config::{Checks, ThreadOrder};
use crate::sanitizer::{GlobalRaces, MemoryMap, ProgramLayout, ShadowGrants};
use crate::thread::{PolledBody, SimKernelFn};
use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicBool;

/// What a launch runs, as the executor receives it (see `crate::launch`).
#[derive(Clone, Copy)]
pub(crate) enum Code<'a> {
    /// A closure kernel.
    Closure(&'a SimKernelFn),
    /// An async closure kernel.
    Async(&'a dyn PolledBody),
    /// A compiled kernel (its parameters already checked against the arguments).
    Compiled(Compiled<'a>),
}

/// A compiled kernel as the executor sees it.
#[derive(Clone, Copy)]
pub(crate) struct Compiled<'a> {
    pub(crate) entry: Entry,
    /// Whether its threads may wait for each other (its source names a barrier, collective,
    /// atomic or spin hint).
    pub(crate) waits: bool,
    /// Per parameter: whether it is a pointer (an array passed to it is its address).
    pub(crate) pointers: &'a [bool],
    /// A checked program's memory (`crate::sanitizer`); `None` for others.
    pub(crate) layout: Option<&'a ProgramLayout>,
}

/// What the accesses of a checked program's threads are checked against.
#[derive(Clone, Copy)]
pub(crate) struct Checked<'a> {
    pub(crate) layout: &'a ProgramLayout,
    pub(crate) memory: &'a MemoryMap,
    /// `[start, end)` of each argument buffer, which the prelude's glue reads parameters from
    /// (through code of the C++ library's, which is instrumented).
    pub(crate) args: &'a [(usize, usize)],
    /// What is looked for besides memcheck's refusals (races, unwritten memory).
    pub(crate) checks: Checks,
    /// initcheck: whether the launch has warned of a read of unwritten shared memory (once
    /// per launch).
    pub(crate) warned: &'a AtomicBool,
    /// racecheck: what the launch's threads did to global memory.
    pub(crate) global_races: &'a GlobalRaces,
    /// A shadowed program's: what its threads were let through in the shadow, until the launch
    /// ends.
    pub(crate) grants: &'a ShadowGrants,
}

/// A compiled entry point run once per thread (`run(args)`).
pub(crate) type CallEntry = unsafe extern "C" fn(*const *mut c_void) -> c_int;

/// A compiled entry point that runs a block's threads as a loop (`run_threads(&threads)`).
pub(crate) type ThreadsEntry = unsafe extern "C" fn(*mut GmSimThreads);

/// How the launch's threads run.
#[derive(Clone, Copy)]
pub(crate) enum Plan<'a> {
    /// Compiled blocks run by the program: threads that never wait as plain calls, one after
    /// another, or a block's regions between barriers, each a loop over its threads.
    Direct(Looped<'a>),
    /// Compiled coroutines, a block round by round.
    Stackless(Rounds<'a>),
    /// Threads on stacks of their own.
    Fibers(OnFibers<'a>),
    /// Futures, a block round by round.
    Polled(&'a dyn PolledBody),
}

/// What a thread on a fiber runs.
#[derive(Clone, Copy)]
pub(crate) enum OnFibers<'a> {
    Closure(&'a SimKernelFn),
    Compiled(Calls<'a>),
}

/// A compiled kernel's entry point for threads as calls, with the launch's argument buffers.
#[derive(Clone, Copy)]
pub(crate) struct Calls<'a> {
    /// One thread (on fibers).
    pub(crate) run: CallEntry,
    pub(crate) args: &'a [*mut c_void],
    /// A checked program's: what its accesses are checked against.
    pub(crate) checked: Option<Checked<'a>>,
}

/// A compiled kernel's entry point for whole blocks run by the program, with the launch's
/// argument buffers.
#[derive(Clone, Copy)]
pub(crate) struct Looped<'a> {
    /// Consecutive blocks, each a loop over its threads (or its regions' loops).
    pub(crate) run_threads: ThreadsEntry,
    pub(crate) args: &'a [*mut c_void],
    /// A checked program's: what its accesses are checked against.
    pub(crate) checked: Option<Checked<'a>>,
}

/// A stackless program's entry points, with the launch's argument buffers.
#[derive(Clone, Copy)]
pub(crate) struct Rounds<'a> {
    pub(crate) entry: StacklessEntry,
    pub(crate) args: &'a [*mut c_void],
}

// SAFETY: the argument buffers are only read (each thread copies its parameters out of them)
// and outlive the launch; a program's functions may be called from any thread.
unsafe impl Send for Calls<'_> {}
// SAFETY: as above.
unsafe impl Sync for Calls<'_> {}
// SAFETY: as above.
unsafe impl Send for Looped<'_> {}
// SAFETY: as above.
unsafe impl Sync for Looped<'_> {}
// SAFETY: as above.
unsafe impl Send for Rounds<'_> {}
// SAFETY: as above.
unsafe impl Sync for Rounds<'_> {}

impl Plan<'_> {
    /// What a checked program's accesses are checked against; `None` for others.
    pub(crate) fn checked(&self) -> Option<Checked<'_>> {
        match self {
            Plan::Direct(looped) => looped.checked,
            Plan::Fibers(OnFibers::Compiled(calls)) => calls.checked,
            Plan::Stackless(_) | Plan::Fibers(OnFibers::Closure(_)) | Plan::Polled(_) => None,
        }
    }

    /// Whether the threads run compiled code (which reads its indices from a `GmSimThread`).
    pub(crate) fn is_compiled(&self) -> bool {
        matches!(
            self,
            Plan::Direct(_) | Plan::Stackless(_) | Plan::Fibers(OnFibers::Compiled(_))
        )
    }

    /// Whether the plan runs without switching stacks, which is all Miri can interpret.
    pub(crate) fn runs_under_miri(&self) -> bool {
        matches!(self, Plan::Polled(_))
    }
}

/// A launch's code with what its plan needs: compiled code receives one buffer per
/// parameter, laid out as the C parameter.
pub(crate) struct Prepared<'a> {
    code: Code<'a>,
    /// The launch's global memory for a checked program, and the device's checks.
    memory: Option<(&'a MemoryMap, Checks)>,
    /// A pointer to each parameter's first word (`void* args[]`).
    args: Vec<*mut c_void>,
    /// Each buffer's `[start, end)`.
    arg_ranges: Vec<(usize, usize)>,
    /// See [`Checked::warned`].
    warned: AtomicBool,
    /// See [`Checked::global_races`] (empty unless the launch is checked with racecheck).
    global_races: GlobalRaces,
    /// See [`Checked::grants`]; forbidden again when the launch's `Prepared` is dropped, after
    /// its last thread.
    grants: ShadowGrants,
}

impl<'a> Prepared<'a> {
    /// `parameters`: a compiled kernel's (empty for closures).
    pub(crate) fn new(
        code: Code<'a>,
        parameters: &'a Parameters,
        memory: Option<(&'a MemoryMap, Checks)>,
    ) -> Prepared<'a> {
        // Compiled code only reads its parameters (each thread copies them out), so pointers
        // made mutable for `void* args[]` are never written through.
        let base = parameters.words.as_ptr().cast_mut();
        let args = parameters
            .spans
            .iter()
            .map(|w| base.wrapping_add(w.start).cast::<c_void>())
            .collect();
        let arg_ranges = parameters
            .spans
            .iter()
            .map(|w| {
                let start = base.wrapping_add(w.start) as usize;
                (start, start + 8 * w.len())
            })
            .collect();
        Prepared {
            code,
            memory,
            warned: AtomicBool::new(false),
            global_races: match memory {
                Some((map, checks)) if checks.racecheck => GlobalRaces::new(map.ranges()),
                _ => GlobalRaces::default(),
            },
            arg_ranges,
            args,
            grants: ShadowGrants::default(),
        }
    }

    /// What a checked program's (`layout`) accesses are checked against.
    fn checked<'p>(&'p self, layout: Option<&'p ProgramLayout>) -> Option<Checked<'p>> {
        layout
            .zip(self.memory)
            .map(|(layout, (memory, checks))| Checked {
                layout,
                memory,
                args: &self.arg_ranges,
                checks,
                warned: &self.warned,
                global_races: &self.global_races,
                grants: &self.grants,
            })
    }

    /// The plan: the one place that decides how the threads run. Threads that never wait run
    /// as a loop in the program only in index order; another `order` puts them on fibers,
    /// whose runner takes them in any order.
    pub(crate) fn plan(&self, order: ThreadOrder) -> Plan<'_> {
        match self.code {
            Code::Closure(closure) => Plan::Fibers(OnFibers::Closure(closure)),
            Code::Async(body) => Plan::Polled(body),
            Code::Compiled(Compiled {
                entry: Entry::Stackless(entry),
                ..
            }) => Plan::Stackless(Rounds {
                entry,
                args: &self.args,
            }),
            // (Built only for threads in index order, `crate::source::Build`.)
            Code::Compiled(Compiled {
                entry: Entry::Regions(run_blocks),
                layout,
                ..
            }) => Plan::Direct(Looped {
                run_threads: run_blocks,
                args: &self.args,
                checked: self.checked(layout),
            }),
            Code::Compiled(Compiled {
                entry: Entry::Calls(CallsEntry { run, run_threads }),
                waits,
                layout,
                ..
            }) => {
                let checked = self.checked(layout);
                if waits || order != ThreadOrder::Index {
                    Plan::Fibers(OnFibers::Compiled(Calls {
                        run,
                        args: &self.args,
                        checked,
                    }))
                } else {
                    Plan::Direct(Looped {
                        run_threads,
                        args: &self.args,
                        checked,
                    })
                }
            }
        }
    }
}
