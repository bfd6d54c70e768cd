//! A stream's native handle lives as long as anything may still synchronize it: host code that
//! reaches a page-locked buffer of the stream's pending work holds the stream's bookkeeping, and
//! a `Stream` dropped meanwhile on another thread must not destroy the handle under it (on CUDA
//! that is a call on a freed `CUstream`; the simulator answers an invalid handle).
//!
//! The interleaving is forced by a backend that wraps the simulator: the host access's
//! synchronization waits (up to a limit) until the stream's handle has been destroyed. Runs under
//! Miri too (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::backend::{
    DeviceInfo, DevicePtr, Enqueued, EventHandle, Events, HostAllocFlags, HostAllocation,
    HostRegisterFlags, Launch, MemInfo, Memory, StreamHandle, Streams, Transfer,
};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig, Module};
use gpu_mem_core::{Backend, BackendKind, Device, Order, Result};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the gate has seen.
#[derive(Debug, Default)]
struct Seen {
    /// The host access's synchronization has started (it holds the stream's bookkeeping).
    host_waiting: bool,
    /// The stream's handle was destroyed.
    destroyed: bool,
    /// It was destroyed while the host access's synchronization was under way.
    destroyed_under_a_synchronize: bool,
}

/// The simulator, with `stream_synchronize` calls from the thread marked as the host access's
/// held until the handle is destroyed (or 500 ms pass: what the fixed code does, since the
/// handle then outlives the access).
#[derive(Debug)]
struct Gate {
    sim: SimBackend,
    seen: Mutex<Seen>,
    changed: Condvar,
}

thread_local! {
    static IS_HOST_ACCESS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Gate {
    fn update(&self, change: impl FnOnce(&mut Seen)) {
        change(&mut self.seen.lock().unwrap());
        self.changed.notify_all();
    }

    fn wait_until(&self, done: impl Fn(&Seen) -> bool, limit: Duration) {
        let seen = self.seen.lock().unwrap();
        drop(
            self.changed
                .wait_timeout_while(seen, limit, |s| !done(s))
                .unwrap(),
        );
    }
}

// SAFETY: every method forwards to the simulator with the same arguments, so the simulator's
// guarantees hold; the gate only delays some calls.
unsafe impl Backend for Gate {
    fn kind(&self) -> BackendKind {
        self.sim.kind()
    }

    fn device_count(&self) -> usize {
        self.sim.device_count()
    }

    fn device_info(&self, device: usize) -> Result<DeviceInfo> {
        self.sim.device_info(device)
    }

    fn mem_info(&self, device: usize) -> Result<MemInfo> {
        self.sim.mem_info(device)
    }

    fn synchronize(&self, device: usize) -> Result<()> {
        self.sim.synchronize(device)
    }
}

// SAFETY: every method forwards to the simulator with the same arguments.
unsafe impl Memory for Gate {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        self.sim.alloc(device, bytes)
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.free(device, ptr) }
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        self.sim.host_alloc(device, bytes, flags)
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.host_free(device, host) }
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.host_register(device, host, bytes, flags) }
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.host_unregister(device, host) }
    }
}

// SAFETY: every method forwards to the simulator with the same arguments.
unsafe impl Transfer for Gate {
    unsafe fn copy_htod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_htod(device, dst, src, bytes) }
    }

    unsafe fn copy_dtoh(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_dtoh(device, dst, src, bytes) }
    }

    unsafe fn copy_dtod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_dtod(device, dst, src, bytes) }
    }

    unsafe fn memset_d8(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.memset_d8(device, dst, value, bytes) }
    }

    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_htod_async(device, dst, src, bytes, stream) }
    }

    unsafe fn copy_dtoh_async(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_dtoh_async(device, dst, src, bytes, stream) }
    }

    unsafe fn copy_dtod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.copy_dtod_async(device, dst, src, bytes, stream) }
    }

    unsafe fn memset_d8_async(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.memset_d8_async(device, dst, value, bytes, stream) }
    }
}

// SAFETY: every method forwards to the simulator with the same arguments.
unsafe impl Streams for Gate {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        self.sim.stream_create(device)
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        let result = unsafe { self.sim.stream_destroy(device, stream) };
        self.update(|seen| {
            seen.destroyed = true;
            seen.destroyed_under_a_synchronize = seen.host_waiting;
        });
        result
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        if IS_HOST_ACCESS.get() {
            self.update(|seen| seen.host_waiting = true);
            self.wait_until(|seen| seen.destroyed, Duration::from_millis(500));
            let result = {
                // SAFETY: the caller's contract, forwarded (what the test checks is that the
                // core keeps it: the handle is still live here).
                unsafe { self.sim.stream_synchronize(device, stream) }
            };
            self.update(|seen| seen.host_waiting = false);
            return result;
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.stream_synchronize(device, stream) }
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.stream_query(device, stream) }
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.stream_wait_event(device, stream, event) }
    }
}

// SAFETY: every method forwards to the simulator with the same arguments.
unsafe impl Events for Gate {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        self.sim.event_create(device, timing)
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.event_destroy(device, event) }
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.event_record(device, event, stream) }
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.event_query(device, event) }
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.event_synchronize(device, event) }
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.event_elapsed_ms(device, start, end) }
    }
}

// SAFETY: every method forwards to the simulator with the same arguments.
unsafe impl Launch for Gate {
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.sim.launch(device, kernel, config, args, stream) }
    }
    fn module_global(
        &self,
        device: usize,
        module: &Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        self.sim.module_global(device, module, name)
    }
}

/// Big enough that the simulator queues the copy (it runs copies up to 64 KiB at once); just so
/// under Miri, which interprets every byte's check.
const BYTES: usize = if cfg!(miri) { 80 << 10 } else { 256 << 10 };

#[test]
fn a_stream_dropped_during_a_host_access_keeps_its_handle_until_the_access_is_done() {
    let gate = Arc::new(Gate {
        sim: SimBackend::new(SimConfig::uniform(1, 16 << 20)),
        seen: Mutex::new(Seen::default()),
        changed: Condvar::new(),
    });
    let dev = Device::new(gate.clone(), 0).unwrap();
    let d = dev.device_array::<u8>(&[BYTES], Order::C).unwrap();
    let mut pinned = dev.pinned_array::<u8>(&[BYTES]).unwrap();
    let stream = dev.stream().unwrap();
    stream.copy_to_host(&d, &mut pinned).unwrap();
    let access_ok = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let pinned = &pinned;
        let access_ok = &access_ok;
        scope.spawn(move || {
            IS_HOST_ACCESS.set(true);
            // Waits for the copy: synchronizes the stream through its bookkeeping.
            let view = pinned.view();
            access_ok.store(
                view.is_ok_and(|v| v.iter().all(|b| *b == 0)),
                Ordering::SeqCst,
            );
        });
        // Dropped once the access holds the stream's bookkeeping (its synchronize began).
        gate.wait_until(|seen| seen.host_waiting, Duration::from_secs(60));
        drop(stream);
    });
    let seen = gate.seen.lock().unwrap();
    assert!(seen.destroyed, "the stream's handle was never destroyed");
    assert!(
        !seen.destroyed_under_a_synchronize,
        "the handle was destroyed while a host access still synchronized it"
    );
    assert!(
        access_ok.load(Ordering::SeqCst),
        "the host access failed or read wrong data"
    );
}
