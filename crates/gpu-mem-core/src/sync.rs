//! Locks that ignore poisoning, for gpu-mem's own crates (the core, the loader and the
//! backends); not part of the public API.
//!
//! A lock is poisoned when a thread panicked while holding it. gpu-mem's locks guard
//! bookkeeping (streams' kept memory, registries of allocations and modules, a device's
//! queues), and a panic under one of them — in one user's callback, in a kernel's host code on
//! the simulator — must not make the device unusable for every other user: each critical section
//! leaves its data consistent at every point a panic can leave it (an insert, a removal, a single
//! assignment), so the data stays usable and the guard is taken as if nothing happened.

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError,
};

/// Locks `mutex`, poisoned or not.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `mutex` if no one holds it now, poisoned or not; `None` when it is held.
pub fn try_lock<T: ?Sized>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The value in `mutex`, through exclusive access (no locking), poisoned or not.
pub fn get_mut<T: ?Sized>(mutex: &mut Mutex<T>) -> &mut T {
    mutex.get_mut().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` with `guard`'s mutex released (as [`Condvar::wait`]) and locks it again,
/// poisoned or not.
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Locks `lock` for reading, poisoned or not.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `lock` for writing, poisoned or not.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutex poisoned by a panic under it still gives its value.
    #[test]
    fn poisoned_locks_are_taken() {
        let mutex = Mutex::new(1);
        let rw = RwLock::new(2);
        let _ = std::thread::scope(|s| {
            s.spawn(|| {
                let _m = mutex.lock();
                let _w = rw.write();
                panic!("poisons both");
            })
            .join()
        });
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(try_lock(&mutex).map(|g| *g), Some(2));
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 3);
        let held = lock(&mutex);
        assert!(try_lock(&mutex).is_none());
        drop(held);
    }
}
