//! The simulator's worker threads, started once per process: they help the launching thread run
//! the blocks of a grid (`crate::executor`), and the copying thread move the chunks of a large
//! copy-engine copy (`crate::copy`), so neither spawns a thread or asks the system anything.
//!
//! `GPU_MEM_SIM_WORKERS` sets how many threads run blocks (default: the number of cores, read
//! once); the launching thread is one of them. One piece of work at a time gets helpers; work
//! that starts while another has them runs on its own thread.
//!
//! Soundness: the work is handed to helpers as a pointer to a closure on the caller's stack.
//! A helper only dereferences it after registering itself (under the pool's lock) while the
//! caller still offers it, and the caller withdraws the offer and waits until every registered
//! helper is done before it returns (also when the work unwinds on the caller's thread), so the
//! closure outlives every use. The helpers' writes are visible to the caller when it returns
//! (each helper's count goes down under the same lock).

use gpu_mem_core::sync::{lock, wait};
use std::sync::{Condvar, Mutex, OnceLock};

/// The variable that sets the number of threads running blocks.
pub(crate) const VARIABLE: &str = "GPU_MEM_SIM_WORKERS";

/// Threads that run blocks and copy chunks, the calling one included (at least 1).
pub(crate) fn worker_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let from_env = std::env::var(VARIABLE)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 1);
        match from_env {
            Some(n) => n.min(1024),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    })
}

/// The work on offer, with its lifetime erased (see the module's soundness note).
#[derive(Clone, Copy)]
struct Offer {
    work: *const (dyn Fn() + Sync + 'static),
    generation: u64,
}

// SAFETY: the pointee is `Sync` and outlives every helper's use of it (module docs).
unsafe impl Send for Offer {}

struct State {
    offer: Option<Offer>,
    /// Helpers the current offer still wants.
    wanted: usize,
    /// Helpers running the current offer's work.
    running: usize,
    generation: u64,
    /// Set when the pool's threads are to end (only a test's own pool ends).
    closing: bool,
}

struct Pool {
    state: Mutex<State>,
    /// Helpers wait here for an offer.
    offered: Condvar,
    /// The caller waits here for its helpers to finish.
    finished: Condvar,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// The process's pool, with `worker_count() - 1` helper threads.
fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::start(worker_count() - 1))
}

impl Pool {
    /// A pool with `threads` helper threads, which live as long as the process.
    fn start(threads: usize) -> &'static Pool {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            state: Mutex::new(State {
                offer: None,
                wanted: 0,
                running: 0,
                generation: 0,
                closing: false,
            }),
            offered: Condvar::new(),
            finished: Condvar::new(),
            threads: Mutex::new(Vec::new()),
        }));
        for index in 1..=threads {
            let spawned = std::thread::Builder::new()
                .name(format!("gpu-mem-sim-worker-{index}"))
                .spawn(move || helper(pool));
            match spawned {
                Ok(thread) => lock(&pool.threads).push(thread),
                Err(error) => tracing::warn!(
                    "cannot start simulator worker {index}: {error}; fewer threads run blocks"
                ),
            }
        }
        pool
    }

    /// Ends the pool's threads once they are idle, and waits for them.
    #[cfg(test)]
    fn shut_down(&self) {
        lock(&self.state).closing = true;
        self.offered.notify_all();
        for thread in std::mem::take(&mut *lock(&self.threads)) {
            let _ = thread.join();
        }
    }
}

fn helper(pool: &'static Pool) {
    let mut seen = 0u64;
    loop {
        let offer = {
            let mut state = lock(&pool.state);
            loop {
                match state.offer {
                    Some(offer) if offer.generation != seen && state.wanted > 0 => {
                        state.wanted -= 1;
                        state.running += 1;
                        seen = offer.generation;
                        break offer;
                    }
                    _ if state.closing => return,
                    _ => {
                        state = wait(&pool.offered, state);
                    }
                }
            }
        };
        // SAFETY: registered as running while the offer stood, so the caller waits for this
        // call to end before the closure goes away (module docs).
        let work = unsafe { &*offer.work };
        // A panic cannot escape `work` (the executor catches kernel panics per thread); if it
        // did, the count must still go down or the caller would wait forever.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        let mut state = lock(&pool.state);
        state.running -= 1;
        if state.running == 0 {
            pool.finished.notify_all();
        }
    }
}

/// Runs `work` on this thread and on up to `helpers` worker threads at once; returns when every
/// run of it has returned. `work` is expected to take its share of a common queue and return
/// when the queue is empty.
pub(crate) fn run_parallel(helpers: usize, work: &(dyn Fn() + Sync)) {
    let helpers = helpers.min(worker_count() - 1);
    if helpers == 0 {
        work();
    } else {
        pool().run(helpers, work);
    }
}

impl Pool {
    /// [`run_parallel`] on this pool, with up to `helpers` of its threads.
    fn run(&self, helpers: usize, work: &(dyn Fn() + Sync)) {
        /// Withdraws the offer and waits for the helpers, also when `work` unwinds here: the
        /// closure goes away with this frame, and the pool must be free for the next offer.
        struct Withdraw<'a>(&'a Pool);
        impl Drop for Withdraw<'_> {
            fn drop(&mut self) {
                let mut state = lock(&self.0.state);
                state.offer = None;
                state.wanted = 0;
                while state.running > 0 {
                    state = wait(&self.0.finished, state);
                }
            }
        }
        let offered = {
            let mut state = lock(&self.state);
            if state.offer.is_none() && state.running == 0 {
                state.generation += 1;
                // SAFETY: only the lifetime is erased; see the module docs for why the pointer
                // is never used after this function returns.
                let work: *const (dyn Fn() + Sync + 'static) = unsafe {
                    std::mem::transmute::<
                        *const (dyn Fn() + Sync + '_),
                        *const (dyn Fn() + Sync + 'static),
                    >(work)
                };
                state.offer = Some(Offer {
                    work,
                    generation: state.generation,
                });
                state.wanted = helpers;
                self.offered.notify_all();
                true
            } else {
                false
            }
        };
        let _withdraw = offered.then_some(Withdraw(self));
        work();
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// Work that unwinds on the calling thread withdraws its offer on the way out: no helper
    /// calls it afterwards (Miri reports the use after free if one does), and the next work gets
    /// helpers again.
    #[test]
    fn unwinding_work_is_withdrawn_and_the_pool_stays_usable() {
        // A pool of its own, whatever the machine's core count (one core under Miri); kept in
        // a static, as the process's pool is, and ended with the test.
        static POOL: OnceLock<&'static Pool> = OnceLock::new();
        let pool = POOL.get_or_init(|| Pool::start(1));
        struct End(&'static Pool);
        impl Drop for End {
            fn drop(&mut self) {
                self.0.shut_down();
            }
        }
        let _end = End(pool);
        let caller = std::thread::current().id();
        let calls = AtomicUsize::new(0);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(1, &|| {
                calls.fetch_add(1, Ordering::SeqCst);
                if std::thread::current().id() == caller {
                    std::panic::panic_any("the caller's part fails");
                }
            });
        }));
        assert!(unwound.is_err());
        let seen = calls.load(Ordering::SeqCst);
        // A helper keeps running until the next work: give it time to (wrongly) call this one.
        std::thread::sleep(Duration::from_millis(if cfg!(miri) { 0 } else { 5 }));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            seen,
            "called after the offer ended"
        );

        // The pool is free again: a helper takes part in the next work.
        let helped = AtomicUsize::new(0);
        let start = Instant::now();
        pool.run(1, &|| {
            if std::thread::current().id() != caller {
                helped.fetch_add(1, Ordering::SeqCst);
            } else {
                while helped.load(Ordering::SeqCst) == 0 && start.elapsed() < Duration::from_secs(5)
                {
                    std::hint::spin_loop();
                }
            }
        });
        assert_eq!(
            helped.load(Ordering::SeqCst),
            1,
            "no helper took the next work"
        );
    }
}
