//! Calls back into the simulator from inside a simulated kernel.
//!
//! A kernel body is ordinary Rust (or C++) running on a simulator thread, so nothing stops it
//! from calling gpu-mem: `Device::synchronize()`, `copy_to_host()`, dropping an array. On a GPU
//! such calls cannot be made from device code; in the simulator a blocking one would wait for the
//! very kernel that makes it (a stream launch counts as device work in flight) and never return,
//! and every later synchronous call on the device would hang behind it.
//!
//! Each thread running kernel blocks is marked with [`enter_kernel`] for as long as it runs them;
//! every blocking entry point of the backend first calls [`refuse_in_kernel`], which turns such a
//! call into [`Error::CalledFromKernel`] naming the call and the kernel.

use gpu_mem_core::{Error, Result};
use std::cell::RefCell;

thread_local! {
    /// The kernel this thread is running blocks of, if any.
    static RUNNING_KERNEL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Marks the current thread as running blocks of `kernel` until the guard is dropped (which
/// restores whatever was marked before, so nested marks unwind correctly).
#[derive(Debug)]
#[must_use = "the thread is marked only while the guard lives"]
pub(crate) struct KernelGuard {
    previous: Option<String>,
}

/// Marks the current thread as running `kernel` (see [`KernelGuard`]).
pub(crate) fn enter_kernel(kernel: &str) -> KernelGuard {
    let previous = RUNNING_KERNEL
        .try_with(|slot| slot.replace(Some(kernel.to_owned())))
        .ok()
        .flatten();
    KernelGuard { previous }
}

impl Drop for KernelGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        // During thread teardown the slot may be gone already; nothing is left to restore then.
        let _ = RUNNING_KERNEL.try_with(|slot| *slot.borrow_mut() = previous);
    }
}

/// `Err(Error::CalledFromKernel)` when the current thread is running a simulated kernel: `call`
/// would block on work that includes that kernel.
pub(crate) fn refuse_in_kernel(call: &'static str) -> Result<()> {
    let kernel = RUNNING_KERNEL
        .try_with(|slot| slot.borrow().clone())
        .ok()
        .flatten();
    match kernel {
        Some(kernel) => Err(Error::CalledFromKernel { call, kernel }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_nest_and_unwind() {
        assert!(refuse_in_kernel("synchronize").is_ok());
        {
            let _outer = enter_kernel("outer");
            {
                let _inner = enter_kernel("inner");
                let err = refuse_in_kernel("synchronize").unwrap_err();
                assert!(
                    matches!(&err, Error::CalledFromKernel { kernel, .. } if kernel == "inner")
                );
            }
            let err = refuse_in_kernel("memset").unwrap_err().to_string();
            assert!(err.contains("memset") && err.contains("outer"), "{err}");
        }
        assert!(refuse_in_kernel("synchronize").is_ok());
        // Other threads are not marked.
        let _guard = enter_kernel("k");
        assert!(
            std::thread::spawn(|| refuse_in_kernel("synchronize").is_ok())
                .join()
                .unwrap()
        );
    }
}
