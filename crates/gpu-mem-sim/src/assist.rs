//! Help from a stream's waiting thread: while one thread runs a stream's copy, the other party
//! of that stream (its worker, or a host thread synchronizing with it) spins until the copy is
//! done, on a core of its own. Instead of only spinning, it takes chunks of the copy — as a GPU's
//! copy engine moves memory beside the thread that waits for it. No thread is woken for this: the
//! helper is already running, so even copies of a few hundred KiB gain.
//!
//! The thread running a stream's job makes the stream's [`Assist`] current
//! ([`Assist::running`]); `crate::bytes` offers a large copy-engine copy there
//! ([`offer_current`]); waiters call [`Assist::help`] from their spin loops.
//!
//! Soundness: the work is offered as a pointer to a closure on the offering thread's stack. A
//! helper announces itself (`helpers` up) and only then checks that the same offer still stands
//! before it calls the closure; the offering thread withdraws the offer and then waits until no
//! helper is announced before it returns. Both sides use sequentially consistent operations, so
//! either the helper sees the withdrawal (and leaves without touching the closure) or the
//! offering thread sees the helper (and waits for it): the closure outlives every call. A
//! helper's writes are visible to the offering thread once it has seen `helpers` back at zero
//! (the helper's decrement is a release the offering thread's load acquires).

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Work on offer: a closure that takes parts of a job until none is left, called by the
/// offering thread and by any helper.
type Work<'a> = &'a (dyn Fn() + Sync + 'a);

/// Where one stream's running copy asks its waiting thread for help.
#[derive(Debug, Default)]
pub(crate) struct Assist {
    /// The offered work (a pointer to a [`Work`] on the offering thread's stack), or null.
    offer: AtomicPtr<()>,
    /// Helpers that announced themselves and may be calling the offered work.
    helpers: AtomicUsize,
}

thread_local! {
    /// The assist of the stream whose job this thread runs now (null outside one).
    static CURRENT: Cell<*const Assist> = const { Cell::new(std::ptr::null()) };
}

impl Assist {
    /// Runs `job` with this assist current, so that the copies it makes may be helped.
    pub(crate) fn running<R>(&self, job: impl FnOnce() -> R) -> R {
        /// Restores the previous assist, also when `job` unwinds.
        struct Restore(*const Assist);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.set(self.0);
            }
        }
        let _restore = Restore(CURRENT.replace(std::ptr::from_ref(self)));
        job()
    }

    /// Calls `work` here and offers it to a helper meanwhile; returns once every helper that
    /// took part has returned from it. `work` must take parts until none is left and be safe to
    /// call from several threads at once.
    fn offer(&self, work: Work<'_>) {
        let offered: *const Work<'_> = &work;
        self.offer
            .store(offered.cast_mut().cast(), Ordering::SeqCst);
        work();
        self.offer.store(std::ptr::null_mut(), Ordering::SeqCst);
        // A helper still in the work finishes its part soon; one that was preempted may need
        // this core back, so after a short spin the thread yields between looks.
        let mut looks = 0u32;
        while self.helpers.load(Ordering::SeqCst) != 0 {
            if looks < 1 << 12 {
                looks += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Takes part in the work on offer, if any (called by a thread that waits for this stream).
    pub(crate) fn help(&self) {
        let seen = self.offer.load(Ordering::SeqCst);
        if seen.is_null() {
            return;
        }
        self.helpers.fetch_add(1, Ordering::SeqCst);
        // Still offered (possibly again, at the same address: then it is that offer's work,
        // which waits for this helper just the same).
        if self.offer.load(Ordering::SeqCst) == seen {
            // SAFETY: the offer stands after this helper announced itself, so the offering thread
            // has not yet seen `helpers` at zero and keeps the work alive until it does (module
            // docs); `seen` points to a `Work` it stored.
            let work: Work<'_> = unsafe { *seen.cast::<Work<'_>>() };
            work();
        }
        self.helpers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Calls `work` on this thread, offering it to the waiting thread of the stream whose job this
/// thread runs, if any; `false` (without calling it) outside a stream's job.
pub(crate) fn offer_current(work: Work<'_>) -> bool {
    let current = CURRENT.get();
    if current.is_null() {
        return false;
    }
    // SAFETY: `running` sets the pointer to an assist borrowed for the whole job, which is
    // running now on this thread.
    unsafe { &*current }.offer(work);
    true
}

/// Runs `f` while another thread helps with whatever `assist` offers, as a stream's waiting
/// thread does; the helper stops when `f` returns or panics.
#[cfg(test)]
pub(crate) fn with_helper(assist: &Assist, f: impl FnOnce()) {
    use std::sync::atomic::AtomicBool;
    /// Stops the helper also when `f` panics (the scope waits for it).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                assist.help();
                std::hint::spin_loop();
            }
        });
        let _stop = Stop(&stop);
        f();
    });
}

#[cfg(test)]
mod tests {
    use super::{Assist, offer_current, with_helper};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn nothing_is_offered_outside_a_job() {
        let called = AtomicBool::new(false);
        assert!(!offer_current(&|| called.store(true, Ordering::SeqCst)));
        assert!(!called.load(Ordering::SeqCst));
        let assist = Assist::default();
        assist.running(|| {});
        assert!(!offer_current(&|| called.store(true, Ordering::SeqCst)));
        assist.help();
        assert!(!called.load(Ordering::SeqCst));
    }

    #[test]
    fn a_waiting_thread_takes_part_and_the_offer_outlives_it() {
        let assist = Assist::default();
        with_helper(&assist, || {
            for _ in 0..if cfg!(miri) { 3 } else { 200 } {
                let parts = AtomicUsize::new(0);
                let done = AtomicUsize::new(0);
                let helped = AtomicBool::new(false);
                // Threads inside the work right now.
                let inside = AtomicUsize::new(0);
                let offering = std::thread::current().id();
                let offered = assist.running(|| {
                    offer_current(&|| {
                        inside.fetch_add(1, Ordering::SeqCst);
                        if std::thread::current().id() != offering {
                            helped.store(true, Ordering::SeqCst);
                        } else {
                            // The offering thread waits (a while) for the helper to join, so
                            // the test sees both take parts.
                            let start = Instant::now();
                            while !helped.load(Ordering::SeqCst)
                                && start.elapsed() < Duration::from_secs(5)
                            {
                                std::hint::spin_loop();
                            }
                        }
                        while parts.fetch_add(1, Ordering::SeqCst) < 64 {
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                });
                assert!(offered);
                // Every part was taken exactly once, the helper took part, and nobody is still
                // in the work (whose captures go away now).
                assert_eq!(done.load(Ordering::SeqCst), 64);
                assert!(helped.load(Ordering::SeqCst));
                assert_eq!(inside.load(Ordering::SeqCst), 0);
            }
        });
    }
}
