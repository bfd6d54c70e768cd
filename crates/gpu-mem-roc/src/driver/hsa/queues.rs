//! AQL queues: creation, destruction and the write/read index operations of the packet
//! protocol (reserve a slot with an atomic add, wait until the packet processor has consumed
//! the slot's previous packet, write the packet body, publish the header with a release store,
//! ring the doorbell).

use super::Hsa;
use gpu_mem_core::Result;
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;

/// Callback the runtime calls on an asynchronous queue error.
pub type QueueErrorCallback = unsafe extern "C" fn(
    status: sys::hsa_status_t,
    queue: *mut sys::hsa_queue_t,
    data: *mut c_void,
);

impl Hsa {
    /// `hsa_queue_create(agent, size, type, callback, data, UINT32_MAX, UINT32_MAX, &queue)`:
    /// private and group segment sizes left to the runtime.
    ///
    /// # Safety
    /// `data` stays valid for `callback` until the queue is destroyed.
    pub unsafe fn queue_create(
        &self,
        agent: sys::hsa_agent_t,
        size: u32,
        queue_type: sys::hsa_queue_type32_t,
        callback: Option<QueueErrorCallback>,
        data: *mut c_void,
    ) -> Result<*mut sys::hsa_queue_t> {
        let f = self.get(
            self.functions.hsa_queue_create,
            "hsa_queue_create",
            "AQL queues",
        )?;
        let mut queue: *mut sys::hsa_queue_t = std::ptr::null_mut();
        // SAFETY: `queue` is a valid out-pointer; `data` outlives the queue (caller).
        let status = unsafe {
            f(
                agent,
                size,
                queue_type,
                callback,
                data,
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        };
        self.check("hsa_queue_create", status)?;
        Ok(queue)
    }

    /// `hsa_queue_destroy`.
    ///
    /// # Safety
    /// `queue` came from [`Hsa::queue_create`], is destroyed once, and has no packets in flight.
    pub unsafe fn queue_destroy(&self, queue: *mut sys::hsa_queue_t) -> Result<()> {
        let f = self.get(
            self.functions.hsa_queue_destroy,
            "hsa_queue_destroy",
            "AQL queues",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(queue) };
        self.check("hsa_queue_destroy", status)
    }

    /// `hsa_queue_add_write_index_scacq_screl`: reserves `count` slots, returns the first index.
    ///
    /// # Safety
    /// `queue` is live.
    pub unsafe fn queue_add_write_index_scacq_screl(
        &self,
        queue: *const sys::hsa_queue_t,
        count: u64,
    ) -> Result<u64> {
        let f = self.get(
            self.functions.hsa_queue_add_write_index_scacq_screl,
            "hsa_queue_add_write_index_scacq_screl",
            "AQL queues",
        )?;
        // SAFETY: `queue` is live (caller).
        Ok(unsafe { f(queue, count) })
    }

    /// `hsa_queue_load_read_index_scacquire`: the index of the next packet the packet processor
    /// will consume.
    ///
    /// # Safety
    /// `queue` is live.
    pub unsafe fn queue_load_read_index_scacquire(
        &self,
        queue: *const sys::hsa_queue_t,
    ) -> Result<u64> {
        let f = self.get(
            self.functions.hsa_queue_load_read_index_scacquire,
            "hsa_queue_load_read_index_scacquire",
            "AQL queues",
        )?;
        // SAFETY: `queue` is live (caller).
        Ok(unsafe { f(queue) })
    }
}
