//! Help from a stream's waiting thread: while one thread runs a stream's copy, the other party
//! of that stream (its worker, or a host thread synchronizing with it) spins until the copy is
//! done, on a core of its own. Instead of only spinning, it takes chunks of the copy — as a GPU's
//! copy engine moves memory beside the thread that waits for it. No thread is woken for this: the
//! helper is already running, so even copies of a few hundred KiB gain.
//!
//! The thread running a stream's job makes the stream's [`Assist`] current
//! ([`Assist::running`]); `super::movers` offers a large copy-engine copy there
//! ([`offer_current`]); waiters call [`Assist::help`] from their spin loops.
//!
//! Soundness: the work is offered as a pointer to a closure on the offering thread's stack. A
//! helper announces itself (`helpers` up) and only then checks that the same offer still stands
//! before it calls the closure; the offering thread withdraws the offer and then waits until no
//! helper is announced before it returns (it spins a few microseconds, then sleeps until the
//! last helper leaves, so that a helper preempted in the middle of a chunk can have its core).
//! Both sides use sequentially consistent operations, so either the helper sees the withdrawal
//! (and leaves without touching the closure) or the offering thread sees the helper (and waits
//! for it): the closure outlives every call. A helper's writes are visible to the offering
//! thread once it has seen `helpers` back at zero (the helper's decrement is a release the
//! offering thread's load acquires). Both hold when the work unwinds: the offering thread
//! withdraws and waits on the way out, and a helper leaves on its way out.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use gpu_mem_core::sync::{lock, wait};
use std::time::{Duration, Instant};

/// How long the offering thread spins for its helpers to leave the work before it sleeps: a
/// helper finishes its chunk within a few microseconds, unless it was preempted, and then it
/// needs a core, maybe this one.
const SPIN: Duration = Duration::from_micros(5);

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
    /// Whether the offering thread sleeps until `helpers` is zero (on `left`).
    sleeping: AtomicBool,
    lock: Mutex<()>,
    left: Condvar,
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
        /// Withdraws the offer and waits for the helpers also when `work` unwinds: the work
        /// lives on this thread's stack, which the unwinding frees.
        struct Withdraw<'a>(&'a Assist);
        impl Drop for Withdraw<'_> {
            fn drop(&mut self) {
                self.0.withdraw();
            }
        }
        let offered: *const Work<'_> = &work;
        self.offer
            .store(offered.cast_mut().cast(), Ordering::SeqCst);
        let _withdraw = Withdraw(self);
        work();
    }

    /// Withdraws the offer and returns once no helper is inside its work.
    fn withdraw(&self) {
        self.offer.store(std::ptr::null_mut(), Ordering::SeqCst);
        let start = Instant::now();
        while self.helpers.load(Ordering::SeqCst) != 0 {
            if start.elapsed() >= SPIN {
                self.sleep_until_helpers_left();
                return;
            }
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
    }

    /// Sleeps until `helpers` is zero. The flag goes up before the check under the lock, and a
    /// leaving helper lowers `helpers` before it reads the flag (both sequentially consistent),
    /// so either this check sees zero or that helper sees the flag and notifies under the lock.
    #[cold]
    fn sleep_until_helpers_left(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        let mut guard = lock(&self.lock);
        while self.helpers.load(Ordering::SeqCst) != 0 {
            guard = wait(&self.left, guard);
        }
        drop(guard);
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Takes part in the work on offer, if any (called by a thread that waits for this stream).
    pub(crate) fn help(&self) {
        let seen = self.offer.load(Ordering::SeqCst);
        if seen.is_null() {
            return;
        }
        /// Leaves the work also when it unwinds here, so that the offering thread does not wait
        /// for this helper forever.
        struct Leave<'a>(&'a Assist);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave();
            }
        }
        self.helpers.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(self);
        // Still offered (possibly again, at the same address: then it is that offer's work,
        // which waits for this helper just the same).
        if self.offer.load(Ordering::SeqCst) == seen {
            // SAFETY: the offer stands after this helper announced itself, so the offering thread
            // has not yet seen `helpers` at zero and keeps the work alive until it does (module
            // docs); `seen` points to a `Work` it stored.
            let work: Work<'_> = unsafe { *seen.cast::<Work<'_>>() };
            work();
        }
    }

    /// A helper leaves the work (not touched past this point; the assist itself outlives its
    /// stream's jobs), waking the offering thread if it sleeps for the last one.
    fn leave(&self) {
        if self.helpers.fetch_sub(1, Ordering::SeqCst) == 1 && self.sleeping.load(Ordering::SeqCst)
        {
            drop(lock(&self.lock));
            self.left.notify_all();
        }
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
                            // So that the test sees both take parts.
                            wait_for_helper(&helped);
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

    /// The offering thread's part of a test's work: waits (a while) for the helper to join.
    fn wait_for_helper(helped: &AtomicBool) {
        let start = Instant::now();
        while !helped.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(5) {
            std::hint::spin_loop();
        }
    }

    /// Work that unwinds on the offering thread withdraws its offer on the way out: the helper,
    /// which keeps looking for work, never calls the closure whose frame is gone (Miri reports
    /// the use after free if it does), and no helper is left announced.
    #[test]
    fn an_unwinding_offer_is_withdrawn() {
        let assist = Assist::default();
        with_helper(&assist, || {
            let offering = std::thread::current().id();
            for round in 0..if cfg!(miri) { 2 } else { 50 } {
                let calls = AtomicUsize::new(0);
                let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    assist.running(|| {
                        offer_current(&|| {
                            calls.fetch_add(1, Ordering::SeqCst);
                            if std::thread::current().id() == offering {
                                if round % 2 == 0 {
                                    // Sometimes with the helper inside too.
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                                std::panic::panic_any(round);
                            }
                        })
                    })
                }));
                assert!(unwound.is_err());
                assert!(assist.offer.load(Ordering::SeqCst).is_null());
                assert_eq!(assist.helpers.load(Ordering::SeqCst), 0);
                // Reuse the stack the work lay on while the helper keeps polling.
                let start = Instant::now();
                let mut noise = [0u8; 256];
                while start.elapsed() < Duration::from_millis(if cfg!(miri) { 0 } else { 1 }) {
                    noise = std::hint::black_box(noise);
                }
                std::hint::black_box(&noise);
                // The helper calls the work again and again while it stands; never afterwards.
                let seen = calls.load(Ordering::SeqCst);
                assert!(seen >= 1);
                std::thread::sleep(Duration::from_millis(if cfg!(miri) { 0 } else { 1 }));
                assert_eq!(
                    calls.load(Ordering::SeqCst),
                    seen,
                    "called after the offer ended"
                );
            }
        });
    }

    /// Work that unwinds in a helper still lets the helper leave: the offering thread returns.
    #[test]
    fn a_helper_whose_work_unwinds_leaves_it() {
        let assist = Assist::default();
        let offering = std::thread::current().id();
        let helped = AtomicBool::new(false);
        let helper_unwound = std::thread::scope(|scope| {
            let helper = scope.spawn(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    loop {
                        assist.help();
                        std::hint::spin_loop();
                    }
                }))
                .is_err()
            });
            let offered = assist.running(|| {
                offer_current(&|| {
                    if std::thread::current().id() != offering {
                        helped.store(true, Ordering::SeqCst);
                        std::panic::panic_any("the helper's part fails");
                    }
                    wait_for_helper(&helped);
                })
            });
            assert!(offered);
            helper.join().unwrap_or(false)
        });
        assert!(helper_unwound, "the helper never took part");
        assert_eq!(assist.helpers.load(Ordering::SeqCst), 0);
    }

    /// A helper that stays in the work long after the offering thread is done (as a preempted
    /// one does) makes it sleep, and its leaving wakes it; the offer returns only after it left.
    #[test]
    fn the_offering_thread_waits_for_a_slow_helper() {
        let assist = Assist::default();
        with_helper(&assist, || {
            let helped = AtomicBool::new(false);
            let left = AtomicBool::new(false);
            let offering = std::thread::current().id();
            let offered = assist.running(|| {
                offer_current(&|| {
                    if std::thread::current().id() != offering {
                        helped.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        left.store(true, Ordering::SeqCst);
                    } else {
                        wait_for_helper(&helped);
                    }
                })
            });
            assert!(offered);
            assert!(helped.load(Ordering::SeqCst), "the helper never joined");
            assert!(
                left.load(Ordering::SeqCst),
                "the offer returned with a helper inside"
            );
            assert!(!assist.sleeping.load(Ordering::SeqCst));
        });
    }
}
