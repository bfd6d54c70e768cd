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

/// `hsa_amd_gpu_memory_fault_info_t` (`hsa_ext_amd.h`, ROCm 5.2.3).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpuMemoryFaultInfo {
    /// The agent where the fault occurred.
    pub agent: sys::hsa_agent_t,
    /// The virtual address accessed.
    pub virtual_address: u64,
    /// `hsa_amd_memory_fault_reason_t` bits.
    pub fault_reason_mask: u32,
}

/// `hsa_amd_event_t`: the event type and, for `HSA_AMD_GPU_MEMORY_FAULT_EVENT` (0), the fault
/// (the header's anonymous union has that one member).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AmdEvent {
    /// `hsa_amd_event_type_t`.
    pub event_type: u32,
    /// Valid when `event_type` is [`GPU_MEMORY_FAULT_EVENT`].
    pub memory_fault: GpuMemoryFaultInfo,
}

/// `HSA_AMD_GPU_MEMORY_FAULT_EVENT`.
pub const GPU_MEMORY_FAULT_EVENT: u32 = 0;

/// `hsa_amd_system_event_callback_t`.
pub type SystemEventCallback =
    unsafe extern "C" fn(event: *const AmdEvent, data: *mut c_void) -> sys::hsa_status_t;

type RegisterSystemEventHandler =
    unsafe extern "C" fn(SystemEventCallback, *mut c_void) -> sys::hsa_status_t;

impl Hsa {
    /// An id of the loaded runtime library (loaded once per process, never unloaded).
    pub fn library_id(&self) -> usize {
        std::ptr::from_ref(self.library) as usize
    }

    /// `hsa_amd_register_system_event_handler` (not in the generated declarations; resolved
    /// here by name with the signature of `hsa_ext_amd.h` 5.2.3).
    ///
    /// # Safety
    /// `data` stays valid for as long as the runtime may call `callback` (for ever: there is
    /// no way to unregister).
    pub unsafe fn register_system_event_handler(
        &self,
        callback: SystemEventCallback,
        data: *mut c_void,
    ) -> Result<()> {
        // SAFETY: the symbol, when the library exports it, has the signature above.
        let f = unsafe {
            self.library
                .get::<RegisterSystemEventHandler>(b"hsa_amd_register_system_event_handler")
        }
        .map(|symbol| *symbol)
        .map_err(|_| gpu_mem_core::Error::NotSupportedByBackend {
            backend: gpu_mem_core::BackendKind::Roc,
            feature: "GPU memory fault reporting",
            reason: "the HSA runtime does not export hsa_amd_register_system_event_handler".into(),
        })?;
        // SAFETY: `callback` is a valid function; `data` as the caller guarantees.
        let status = unsafe { f(callback, data) };
        self.check("hsa_amd_register_system_event_handler", status)
    }
}
