//! Signals: creation, value access, waits, asynchronous handlers.

use super::Hsa;
use gpu_mem_core::Result;
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;

impl Hsa {
    /// `hsa_signal_create(initial, consumers)`; an empty `consumers` means any agent may wait.
    ///
    /// # Safety
    /// Every agent in `consumers` is one handed out by this runtime (from [`Hsa::agents`] / [`Hsa::memory_pools`]) while
    /// it is initialised: ROCr takes handles for object pointers and does not validate them.
    pub unsafe fn signal_create(
        &self,
        initial: sys::hsa_signal_value_t,
        consumers: &[sys::hsa_agent_t],
    ) -> Result<sys::hsa_signal_t> {
        let f = self.get(
            self.functions.hsa_signal_create,
            "hsa_signal_create",
            "signals",
        )?;
        let count = u32::try_from(consumers.len()).unwrap_or(u32::MAX);
        let list = if consumers.is_empty() {
            std::ptr::null()
        } else {
            consumers.as_ptr()
        };
        let mut signal = sys::hsa_signal_t::default();
        // SAFETY: the consumer array is valid for the call; `signal` is a valid out-pointer.
        let status = unsafe { f(initial, count, list, &mut signal) };
        self.check("hsa_signal_create", status)?;
        Ok(signal)
    }

    /// `hsa_amd_signal_create` with `HSA_AMD_SIGNAL_*` attribute bits.
    ///
    /// # Safety
    /// As [`Hsa::signal_create`].
    pub unsafe fn amd_signal_create(
        &self,
        initial: sys::hsa_signal_value_t,
        consumers: &[sys::hsa_agent_t],
        attributes: u64,
    ) -> Result<sys::hsa_signal_t> {
        let f = self.get(
            self.functions.hsa_amd_signal_create,
            "hsa_amd_signal_create",
            "signals",
        )?;
        let count = u32::try_from(consumers.len()).unwrap_or(u32::MAX);
        let list = if consumers.is_empty() {
            std::ptr::null()
        } else {
            consumers.as_ptr()
        };
        let mut signal = sys::hsa_signal_t::default();
        // SAFETY: as in `signal_create`.
        let status = unsafe { f(initial, count, list, attributes, &mut signal) };
        self.check("hsa_amd_signal_create", status)?;
        Ok(signal)
    }

    /// `hsa_signal_destroy`.
    ///
    /// # Safety
    /// `signal` is live, destroyed once, and no pending operation or waiter still uses it.
    pub unsafe fn signal_destroy(&self, signal: sys::hsa_signal_t) -> Result<()> {
        let f = self.get(
            self.functions.hsa_signal_destroy,
            "hsa_signal_destroy",
            "signals",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(signal) };
        self.check("hsa_signal_destroy", status)
    }

    /// `hsa_signal_load_scacquire`.
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn signal_load_scacquire(
        &self,
        signal: sys::hsa_signal_t,
    ) -> Result<sys::hsa_signal_value_t> {
        let f = self.get(
            self.functions.hsa_signal_load_scacquire,
            "hsa_signal_load_scacquire",
            "signals",
        )?;
        // SAFETY: `signal` is live (caller).
        Ok(unsafe { f(signal) })
    }

    /// `hsa_signal_store_screlease`.
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn signal_store_screlease(
        &self,
        signal: sys::hsa_signal_t,
        value: sys::hsa_signal_value_t,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_signal_store_screlease,
            "hsa_signal_store_screlease",
            "signals",
        )?;
        // SAFETY: `signal` is live (caller).
        unsafe { f(signal, value) };
        Ok(())
    }

    /// `hsa_signal_store_relaxed` (used for queue doorbells, whose ordering the packet header's
    /// release store already provides).
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn signal_store_relaxed(
        &self,
        signal: sys::hsa_signal_t,
        value: sys::hsa_signal_value_t,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_signal_store_relaxed,
            "hsa_signal_store_relaxed",
            "signals",
        )?;
        // SAFETY: `signal` is live (caller).
        unsafe { f(signal, value) };
        Ok(())
    }

    /// `hsa_signal_wait_scacquire(signal, condition, compare, timeout, wait_state)`: returns the
    /// observed value, which may not satisfy the condition (spurious wake-up or timeout).
    ///
    /// # Safety
    /// `signal` is live for the whole wait.
    pub unsafe fn signal_wait_scacquire(
        &self,
        signal: sys::hsa_signal_t,
        condition: sys::hsa_signal_condition_t,
        compare: sys::hsa_signal_value_t,
        timeout_hint: u64,
        wait_state: sys::hsa_wait_state_t,
    ) -> Result<sys::hsa_signal_value_t> {
        let f = self.get(
            self.functions.hsa_signal_wait_scacquire,
            "hsa_signal_wait_scacquire",
            "waiting for signals",
        )?;
        // SAFETY: `signal` is live (caller).
        Ok(unsafe { f(signal, condition, compare, timeout_hint, wait_state) })
    }

    /// `hsa_amd_signal_async_handler`: runs `handler(value, arg)` on a runtime thread once
    /// `signal` satisfies the condition; the handler returns `true` to stay registered.
    ///
    /// # Safety
    /// `signal` stays live until the handler ran; `arg` stays valid for the handler.
    pub unsafe fn signal_async_handler(
        &self,
        signal: sys::hsa_signal_t,
        condition: sys::hsa_signal_condition_t,
        value: sys::hsa_signal_value_t,
        handler: unsafe extern "C" fn(sys::hsa_signal_value_t, *mut c_void) -> bool,
        arg: *mut c_void,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_signal_async_handler,
            "hsa_amd_signal_async_handler",
            "completion callbacks",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(signal, condition, value, Some(handler), arg) };
        self.check("hsa_amd_signal_async_handler", status)
    }
}
