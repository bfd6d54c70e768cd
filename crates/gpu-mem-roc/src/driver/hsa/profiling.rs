//! Timestamps of asynchronous copies and dispatches (the HSA side of event timing).

use super::Hsa;
use gpu_mem_core::Result;
use gpu_mem_hsa_sys as sys;

impl Hsa {
    /// `hsa_amd_profiling_async_copy_enable`: process-wide; copies started afterwards record
    /// start/end timestamps on their completion signals.
    pub fn profiling_async_copy_enable(&self, enable: bool) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_profiling_async_copy_enable,
            "hsa_amd_profiling_async_copy_enable",
            "event timing",
        )?;
        // SAFETY: no pointer arguments.
        let status = unsafe { f(enable) };
        self.check("hsa_amd_profiling_async_copy_enable", status)
    }

    /// `hsa_amd_profiling_get_async_copy_time`: `(start, end)` in system-timestamp ticks
    /// (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`) of the copy that completed `signal`.
    ///
    /// # Safety
    /// `signal` is live and was the completion signal of a copy that has completed.
    pub unsafe fn profiling_get_async_copy_time(
        &self,
        signal: sys::hsa_signal_t,
    ) -> Result<(u64, u64)> {
        let f = self.get(
            self.functions.hsa_amd_profiling_get_async_copy_time,
            "hsa_amd_profiling_get_async_copy_time",
            "event timing",
        )?;
        let mut time = sys::hsa_amd_profiling_async_copy_time_t::default();
        // SAFETY: `time` is a valid out-pointer; `signal` is live (caller).
        let status = unsafe { f(signal, &mut time) };
        self.check("hsa_amd_profiling_get_async_copy_time", status)?;
        Ok((time.start, time.end))
    }
}
