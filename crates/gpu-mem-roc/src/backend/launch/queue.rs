//! One AQL queue per device and the packet submission protocol.
//!
//! Submission follows the HSA runtime specification ("Queues", "Architected Queuing Language
//! packets", "Packet header"):
//!
//! 1. reserve slots with `hsa_queue_add_write_index_scacq_screl` (a multi-producer queue);
//! 2. wait until the packet processor consumed what those slots held before: a slot for index
//!    `i` is free once `i - read_index < size`;
//! 3. write every packet body (bytes 4..64) while the slot's header still says INVALID;
//! 4. publish each packet by storing its first 32 bits (header | setup << 16) atomically with
//!    release semantics, so the processor never sees a valid header before the body;
//! 5. ring the doorbell with the highest index written so far: several threads submit to the
//!    same queue at once, and one that reserved earlier slots may finish writing after one that
//!    reserved later slots. Under a small lock the doorbell is stored only when the index is
//!    above the highest one rung, so its value never goes down. (`hsa.h` allows any value on a
//!    MULTI queue's doorbell, but a lower value after a higher one tells the packet processor
//!    less work is ready than it already knew; ROCr's own producers never do it.) Packets
//!    below the rung index whose headers are still INVALID are waited for by the packet
//!    processor, which never launches a packet before its header is valid.
//!
//! Packets carry system-scope acquire and release fences (host-written kernargs and
//! host-visible results need system scope). The barrier bit, which makes a packet wait for
//! every earlier packet of the queue, is set only where the caller asks for it (see the launch
//! module's ordering rules), so dispatches of different streams can overlap.
//!
//! The runtime's reports about a queue (asynchronous errors, GPU memory faults) are recorded in
//! its [`QueueHealth`] (the `queue_health` module, which the signals of its dispatches consult
//! too); the queue hands the health record to `hsa_queue_create` as its callback's data.

use crate::backend::queue_health::{QueueHealth, on_queue_error};
use crate::driver::Hsa;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Packets a queue is asked to hold (the runtime may give more, never fewer than its minimum).
const PREFERRED_PACKETS: u32 = 1024;
/// Dependencies one barrier-AND packet holds.
pub const BARRIER_DEPS: usize = 5;
/// Every AQL packet is 64 bytes.
const PACKET_BYTES: usize = 64;
/// How often a writer waiting for room in a full queue checks whether it waits forever.
const STUCK_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);

/// A packet's first 32 bits and the rest of its 64 bytes.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// header | setup << 16, stored last with release semantics.
    pub first_word: u32,
    /// Bytes 4..64.
    pub body: [u8; PACKET_BYTES - 4],
}

/// A packet header: the type, the barrier bit when asked for, system-scope fences.
fn header(packet_type: u32, barrier: bool) -> u16 {
    let bits = packet_type << sys::HSA_PACKET_HEADER_TYPE
        | u32::from(barrier) << sys::HSA_PACKET_HEADER_BARRIER
        | sys::HSA_FENCE_SCOPE_SYSTEM << sys::HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE
        | sys::HSA_FENCE_SCOPE_SYSTEM << sys::HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
    bits as u16
}

fn split<T: Copy>(packet: &T) -> Packet {
    const { assert!(std::mem::size_of::<T>() == PACKET_BYTES) };
    // SAFETY: `T` is one of the 64-byte `#[repr(C)]` AQL packet structs, plain integers only
    // (no padding: their layout tests in the -sys crate check every offset).
    let bytes: [u8; PACKET_BYTES] = unsafe { std::mem::transmute_copy(packet) };
    let mut body = [0u8; PACKET_BYTES - 4];
    body.copy_from_slice(&bytes[4..]);
    Packet {
        first_word: u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        body,
    }
}

/// A kernel dispatch packet, header included (published by [`AqlQueue::write`]); `barrier`:
/// wait for every earlier packet of the queue to complete first.
pub fn dispatch_packet(mut packet: sys::hsa_kernel_dispatch_packet_t, barrier: bool) -> Packet {
    packet.header = header(sys::HSA_PACKET_TYPE_KERNEL_DISPATCH, barrier);
    split(&packet)
}

/// Barrier-AND packets waiting for `deps` (at most [`BARRIER_DEPS`] each), without
/// completion signals or barrier bit: the packet processor launches nothing after a barrier-AND
/// packet until its dependencies are met, and nothing more is needed.
pub fn barrier_packets(deps: &[sys::hsa_signal_t]) -> Vec<Packet> {
    deps.chunks(BARRIER_DEPS)
        .map(|chunk| {
            let mut packet = sys::hsa_barrier_and_packet_t {
                header: header(sys::HSA_PACKET_TYPE_BARRIER_AND, false),
                ..Default::default()
            };
            packet.dep_signal[..chunk.len()].copy_from_slice(chunk);
            split(&packet)
        })
        .collect()
}

/// A device's AQL queue.
#[derive(Debug)]
pub struct AqlQueue {
    hsa: Arc<Hsa>,
    /// The `hsa_queue_t*` (an address, so the queue is `Send + Sync`; the runtime's queue
    /// structure is read-only and its packet ring is shared by design).
    raw: usize,
    size: u32,
    base: usize,
    doorbell: sys::hsa_signal_t,
    /// The highest packet index the doorbell was rung with (`None` before the first ring).
    rung: Mutex<Option<u64>>,
    health: Arc<QueueHealth>,
}

impl AqlQueue {
    /// `hsa_queue_create(agent, min(1024, max), MULTI, callback, health)`.
    pub fn create(hsa: &Arc<Hsa>, agent: sys::hsa_agent_t) -> Result<AqlQueue> {
        // SAFETY: HSA_AGENT_INFO_QUEUE_MAX_SIZE is a uint32_t.
        let max: u32 =
            unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_QUEUE_MAX_SIZE, 0u32) }?;
        if max == 0 {
            return Err(Error::NotSupportedByBackend {
                backend: gpu_mem_core::BackendKind::Roc,
                feature: "kernel launch",
                reason: "the GPU agent reports no AQL queue capacity".into(),
            });
        }
        // A power of two (HSA requires it) no larger than the agent's maximum.
        let size = PREFERRED_PACKETS.min(1 << max.ilog2());
        let health = QueueHealth::watched(hsa, agent);
        // SAFETY: `health` outlives the queue: the returned `AqlQueue` keeps it and destroys
        // the queue before dropping it.
        let raw = unsafe {
            hsa.queue_create(
                agent,
                size,
                sys::HSA_QUEUE_TYPE_MULTI,
                Some(on_queue_error),
                Arc::as_ptr(&health).cast_mut().cast(),
            )
        }?;
        // SAFETY: a successful hsa_queue_create returns a valid queue structure the runtime
        // does not change while the queue lives.
        let view = unsafe { *raw };
        let queue = AqlQueue {
            hsa: Arc::clone(hsa),
            raw: raw as usize,
            size: view.size,
            base: view.base_address as usize,
            doorbell: view.doorbell_signal,
            rung: Mutex::new(None),
            health,
        };
        if !queue.size.is_power_of_two()
            || queue.base == 0
            || !queue.base.is_multiple_of(PACKET_BYTES)
        {
            return Err(Error::NotSupportedByBackend {
                backend: gpu_mem_core::BackendKind::Roc,
                feature: "kernel launch",
                reason: format!(
                    "hsa_queue_create returned a queue of {} packets at {:#x}",
                    queue.size, queue.base
                ),
            });
        }
        tracing::debug!(
            id = queue.health.id(),
            runtime_id = view.id,
            packets = queue.size,
            "created an AQL queue"
        );
        Ok(queue)
    }
}

impl AqlQueue {
    /// The `hsa_queue_t*`, which a kernel's `hidden_queue_ptr` argument receives.
    pub fn address(&self) -> u64 {
        self.raw as u64
    }

    /// The health record signals of this queue's dispatches consult.
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.health
    }

    /// Reserves `count` consecutive slots (an atomic add on the write index) and returns the
    /// first index. Every reserved slot must then be written ([`AqlQueue::write`]): the packet
    /// processor stops at a slot whose header stays INVALID.
    ///
    /// # Safety
    /// The queue is live.
    pub unsafe fn reserve(&self, count: usize) -> Result<u64> {
        let count = count as u64;
        if count == 0 || count > u64::from(self.size) {
            return Err(Error::InvalidArgument {
                name: "packets",
                reason: format!("{count} packets for a queue of {}", self.size),
            });
        }
        let queue = self.raw as *const sys::hsa_queue_t;
        // SAFETY: the queue is live (caller).
        unsafe { self.hsa.queue_add_write_index_scacq_screl(queue, count) }
    }

    /// Writes `packets` into the slots reserved from `first` on, publishes them and rings the
    /// doorbell (module docs); returns the index of the last one.
    ///
    /// # Safety
    /// Every signal, kernel object and kernarg address the packets name stays valid until the
    /// packets completed; the queue is live; `first` came from [`AqlQueue::reserve`] for
    /// `packets.len()` slots.
    /// While the queue is full, `stuck` is asked now and then whether the packets ahead wait for
    /// work that failed (they then never drain): if it names that work, the queue is marked
    /// blocked ([`QueueHealth::block`]) and the write fails instead of waiting forever. The
    /// reserved slots stay INVALID then, behind the stuck packet, on a queue no longer used.
    pub unsafe fn write(
        &self,
        first: u64,
        packets: &[Packet],
        stuck: &dyn Fn() -> Option<String>,
    ) -> Result<u64> {
        let count = packets.len() as u64;
        let queue = self.raw as *const sys::hsa_queue_t;
        let last = first + count.max(1) - 1;
        let mut next_check = std::time::Instant::now();
        loop {
            // SAFETY: as above.
            let read = unsafe { self.hsa.queue_load_read_index_scacquire(queue) }?;
            if last.wrapping_sub(read) < u64::from(self.size) {
                break;
            }
            if let Some(status) = self.health.failure() {
                return Err(self
                    .hsa
                    .native_error("hsa_queue_create (queue error callback)", status));
            }
            if std::time::Instant::now() >= next_check {
                if let Some(failed) = stuck() {
                    self.health.block();
                    return Err(Error::AsyncFailure {
                        operation: "kernel launch",
                        stream: 0,
                        reason: format!(
                            "the device's queue is full behind a packet that waits for failed \
                             work ({failed}); later launches use a new queue"
                        ),
                    });
                }
                next_check = std::time::Instant::now() + STUCK_CHECK_INTERVAL;
            }
            std::thread::yield_now();
        }
        let mask = u64::from(self.size) - 1;
        let slot = |index: u64| (self.base + ((index & mask) as usize) * PACKET_BYTES) as *mut u8;
        for (index, packet) in (first..).zip(packets) {
            // Bytes 4..64 are written here; the header word is published last, below.
            // SAFETY: the slot is inside the ring (index masked by its power-of-two size), reserved
            // for this packet above, consumed before (read index checked), and ignored by the
            // packet processor while its header says INVALID.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    packet.body.as_ptr(),
                    slot(index).add(4),
                    packet.body.len(),
                )
            };
        }
        for (index, packet) in (first..).zip(packets) {
            // SAFETY: packets are 64-byte aligned in the ring (checked at creation), so the
            // header word is an aligned u32 that the packet processor only accesses atomically.
            let word = unsafe { AtomicU32::from_ptr(slot(index).cast::<u32>()) };
            word.store(packet.first_word, Ordering::Release);
        }
        self.ring(last)?;
        Ok(last)
    }

    /// Rings the doorbell with `index` unless a higher index was rung already (module docs).
    fn ring(&self, index: u64) -> Result<()> {
        let mut rung = lock(&self.rung);
        if rung.is_some_and(|r| r >= index) {
            return Ok(());
        }
        // SAFETY: the doorbell signal belongs to the live queue.
        unsafe { self.hsa.signal_store_screlease(self.doorbell, index as i64) }?;
        *rung = Some(index);
        Ok(())
    }
}

impl Drop for AqlQueue {
    fn drop(&mut self) {
        // SAFETY: created by `create`, destroyed once; the owner drops the queue only when no
        // packet is in flight (it leaks the queue otherwise). `health` is dropped after this.
        if let Err(e) = unsafe { self.hsa.queue_destroy(self.raw as *mut sys::hsa_queue_t) } {
            tracing::warn!(error = %e, "hsa_queue_destroy failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{barrier_packets, dispatch_packet};
    use gpu_mem_hsa_sys as sys;

    #[test]
    fn headers_carry_type_barrier_and_system_fences() {
        let d = dispatch_packet(
            sys::hsa_kernel_dispatch_packet_t {
                setup: 2,
                workgroup_size_x: 16,
                ..Default::default()
            },
            true,
        );
        // type 2 | barrier (bit 8) | acquire system (2 << 9) | release system (2 << 11), setup 2.
        assert_eq!(d.first_word, (2 | 1 << 8 | 2 << 9 | 2 << 11) | 2 << 16);
        assert_eq!(&d.body[..2], &16u16.to_ne_bytes());
        let deps: Vec<sys::hsa_signal_t> =
            (1..=7).map(|h| sys::hsa_signal_t { handle: h }).collect();
        let b = barrier_packets(&deps);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].first_word, 3 | 2 << 9 | 2 << 11);
        let unordered = dispatch_packet(Default::default(), false);
        assert_eq!(unordered.first_word, 2 | 2 << 9 | 2 << 11);
        // dep_signal[0] sits at byte 8, i.e. body offset 4; the second packet holds 6 and 7.
        assert_eq!(&b[1].body[4..12], &6u64.to_ne_bytes());
        assert_eq!(&b[1].body[12..20], &7u64.to_ne_bytes());
        assert_eq!(&b[1].body[20..28], &0u64.to_ne_bytes());
    }
}
