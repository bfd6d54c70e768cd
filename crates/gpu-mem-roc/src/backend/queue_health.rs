//! What the runtime reported about an AQL queue: its [`QueueHealth`], which the queue
//! (`launch::queue`) creates and the signals of its dispatches (`signal`) consult. A leaf of the
//! backend: it knows neither queues nor signals, so the dependency runs one way, from `launch`
//! to `signal` and from both to this module, never back.
//!
//! The runtime reports asynchronous queue errors (an invalid packet, an aperture violation)
//! through the callback given to `hsa_queue_create` ([`on_queue_error`]), and GPU memory faults
//! through the process-wide handler of `hsa_amd_register_system_event_handler` (registered once
//! per loaded runtime; without it ROCr prints the fault and aborts the process). A fault names
//! the agent and address, not the queue, so it marks every queue of this backend on that agent.
//! Either is recorded in the queue's [`QueueHealth`], which waits on the queue's signals
//! consult, since such a dispatch never completes its signal; the launcher then replaces the
//! queue.

use crate::driver::Hsa;
use crate::driver::hsa::{AmdEvent, GPU_MEMORY_FAULT_EVENT};
use gpu_mem_core::sync::lock;
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Ids told apart by [`QueueHealth::id`] (process-wide, never reused).
static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(1);

/// What the runtime reported about a queue.
#[derive(Debug)]
pub struct QueueHealth {
    id: u64,
    /// The GPU agent's handle (memory faults name the agent, not the queue).
    agent: u64,
    /// 0, or the `hsa_status_t` of the first asynchronous error.
    error: AtomicU32,
    /// For a memory fault: the address accessed and the reason bits.
    fault_address: AtomicU64,
    fault_reason: AtomicU32,
    /// Set once a packet on the queue is known to wait for work that failed: the packet
    /// processor launches in order and a barrier-AND packet completes only when its signals
    /// reach 0, so nothing after that packet runs (see [`QueueHealth::block`]).
    blocked: AtomicBool,
}

/// Every live queue's health, for the process-wide memory fault handler.
static WATCHED: Mutex<Vec<Weak<QueueHealth>>> = Mutex::new(Vec::new());
/// The runtime libraries (`Hsa::library_id`) the fault handler is registered with.
static REGISTERED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// `hsa_amd_register_system_event_handler`'s callback. A GPU memory fault cannot be tied to one
/// dispatch (the event names the agent and the address only), so it fails every queue this
/// backend has on that agent: their dispatches in flight never complete and report the fault,
/// and the next launch gets a new queue. Returns SUCCESS only when a queue of this backend was
/// on the agent, so ROCr's default report-and-abort still applies to other faults.
unsafe extern "C" fn on_system_event(
    event: *const AmdEvent,
    _data: *mut c_void,
) -> sys::hsa_status_t {
    if event.is_null() {
        return sys::HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: the runtime passes a valid event for the duration of the call.
    let event = unsafe { *event };
    if event.event_type != GPU_MEMORY_FAULT_EVENT {
        return sys::HSA_STATUS_ERROR;
    }
    let fault = event.memory_fault;
    let mut hit = false;
    let mut watched = lock(&WATCHED);
    watched.retain(|w| w.strong_count() > 0);
    for health in watched.iter().filter_map(Weak::upgrade) {
        if health.agent != fault.agent.handle {
            continue;
        }
        hit = true;
        if health
            .error
            .compare_exchange(
                0,
                sys::HSA_STATUS_ERROR_MEMORY_FAULT,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            health
                .fault_address
                .store(fault.virtual_address, Ordering::Release);
            health
                .fault_reason
                .store(fault.fault_reason_mask, Ordering::Release);
        }
    }
    tracing::error!(
        address = format_args!("{:#x}", fault.virtual_address),
        reason = format_args!("{:#x}", fault.fault_reason_mask),
        handled = hit,
        "GPU memory fault"
    );
    if hit {
        sys::HSA_STATUS_SUCCESS
    } else {
        sys::HSA_STATUS_ERROR
    }
}

/// Registers [`on_system_event`] with `hsa`'s runtime once per process and library; a runtime
/// without the call keeps its default (a fault aborts the process), with a warning.
fn watch_faults(hsa: &Hsa) {
    let mut registered = lock(&REGISTERED);
    if registered.contains(&hsa.library_id()) {
        return;
    }
    // SAFETY: the callback uses no data (null) and only process-wide statics.
    match unsafe { hsa.register_system_event_handler(on_system_event, std::ptr::null_mut()) } {
        Ok(()) => registered.push(hsa.library_id()),
        Err(e) => tracing::warn!(
            error = %e,
            "cannot register a GPU memory fault handler: a kernel's memory fault will abort \
             the process (ROCr's default)"
        ),
    }
}

/// The names of the `hsa_amd_memory_fault_reason_t` bits set in `mask`.
fn fault_reasons(mask: u32) -> String {
    const NAMES: [(u32, &str); 8] = [
        (1 << 0, "page not present"),
        (1 << 1, "write to a read-only page"),
        (1 << 2, "execute on a no-execute page"),
        (1 << 3, "host-only page"),
        (1 << 4, "DRAM ECC error"),
        (1 << 5, "imprecise address"),
        (1 << 6, "SRAM ECC error"),
        (1 << 31, "GPU reset after a hang"),
    ];
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        format!("reason bits {mask:#x}")
    } else {
        names.join(", ")
    }
}

impl QueueHealth {
    /// A new queue's health record on `agent`, watched for the memory faults `hsa`'s runtime
    /// reports from now on (the fault handler is registered with that runtime if it is not
    /// yet). Its address is the data of the queue's [`on_queue_error`] callback.
    pub fn watched(hsa: &Hsa, agent: sys::hsa_agent_t) -> Arc<QueueHealth> {
        let health = Arc::new(QueueHealth {
            id: NEXT_QUEUE_ID.fetch_add(1, Ordering::Relaxed),
            agent: agent.handle,
            error: AtomicU32::new(0),
            fault_address: AtomicU64::new(0),
            fault_reason: AtomicU32::new(0),
            blocked: AtomicBool::new(false),
        });
        watch_faults(hsa);
        lock(&WATCHED).push(Arc::downgrade(&health));
        health
    }

    /// The queue's id, for log messages (process-wide, never reused).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What went wrong, for error messages and to replace the queue: the memory fault's address
    /// and reasons, the status the queue callback reported, or a packet stuck behind failed work.
    pub fn describe(&self) -> Option<String> {
        let Some(status) = self.failure() else {
            return self.is_blocked().then(|| {
                "a packet on the device's queue waits for work that failed, so nothing after \
                 it would run"
                    .to_string()
            });
        };
        if status == sys::HSA_STATUS_ERROR_MEMORY_FAULT {
            return Some(format!(
                "a GPU memory fault at address {:#x} ({}) on the device's queue",
                self.fault_address.load(Ordering::Acquire),
                fault_reasons(self.fault_reason.load(Ordering::Acquire))
            ));
        }
        Some(format!(
            "the runtime reported {} ({status:#x}) on the device's queue",
            crate::driver::hsa::status_name(status).unwrap_or("an error")
        ))
    }

    /// Records that a packet on this queue waits for work that failed (a dependency's signal
    /// went negative): later launches go to a new queue instead of waiting behind it forever.
    pub fn block(&self) {
        if !self.blocked.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                queue = self.id,
                "a packet on the AQL queue waits for failed work; later launches use a new queue"
            );
        }
    }

    /// Whether [`QueueHealth::block`] was called.
    pub fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    /// The first asynchronous error status the runtime reported, if any.
    pub fn failure(&self) -> Option<u32> {
        match self.error.load(Ordering::Acquire) {
            0 => None,
            status => Some(status),
        }
    }
}

/// `hsa_queue_create`'s callback: records the first error. `data` is the queue's
/// `QueueHealth` (or null).
///
/// # Safety
/// A non-null `data` points to a live `QueueHealth` for the duration of the call.
pub unsafe extern "C" fn on_queue_error(
    status: sys::hsa_status_t,
    _queue: *mut sys::hsa_queue_t,
    data: *mut c_void,
) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the `QueueHealth` the `AqlQueue` keeps alive (an `Arc`) until after
    // `hsa_queue_destroy`, after which the runtime no longer calls back.
    let health = unsafe { &*data.cast::<QueueHealth>() };
    let _ = health
        .error
        .compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire);
    tracing::error!(
        status = format_args!("{status:#x}"),
        name = crate::driver::hsa::status_name(status).unwrap_or("unknown status"),
        "the HSA runtime reported an error on a kernel dispatch queue"
    );
}
