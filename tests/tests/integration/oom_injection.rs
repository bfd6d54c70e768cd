//! Out-of-memory injection on small simulated devices.
//!
//! Random sequences of allocations, transfers, stream work, drops and stream lifetimes run on a
//! simulator with a few KiB to a few hundred KiB of device memory, so many allocations fail.
//! Checked on every step:
//! * an operation that allocates device memory either succeeds or fails with
//!   `Error::OutOfMemory` naming the simulator, device 0, the capacity, and a request larger than
//!   what was free; every other error, and any error from an operation that allocates nothing,
//!   fails the test (a panic fails it too);
//! * a failed operation changes no data: every array's bytes still match a host-side model;
//! * at checkpoints (all streams synchronized) the device's used memory is exactly the bytes of
//!   the arrays still held, a request of exactly the free bytes succeeds and one byte more fails.
//!
//! After each sequence everything is dropped, and then no device allocation, page-locked
//! allocation or host registration may remain, `mem_info().free == total`, and no error may have
//! been recorded while releasing resources (`Device::check_release_errors`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{Backend, BackendKind};
use ndarray::Array1;
use std::sync::Arc;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A small simulated device, with the concrete backend kept for its leak counters.
struct SmallDevice {
    sim: Arc<SimBackend>,
    device: Device,
    capacity: u64,
}

fn small_device(capacity: u64) -> SmallDevice {
    let sim = Arc::new(SimBackend::new(SimConfig::uniform(1, capacity)));
    let backend: Arc<dyn Backend> = sim.clone();
    let runtime = Runtime::with_backend(backend);
    let device = runtime.device(0).unwrap();
    SmallDevice {
        sim,
        device,
        capacity,
    }
}

impl SmallDevice {
    /// Asserts that `error` is the simulator's out-of-memory error for a request of at least
    /// `bytes` bytes.
    fn expect_oom(&self, error: &Error, bytes: usize, context: &str) {
        match error {
            Error::OutOfMemory {
                backend,
                device,
                requested,
                free,
                total,
                report,
            } => {
                assert!(
                    report.is_some(),
                    "{context}: the error says what holds the memory"
                );
                assert_eq!(*backend, BackendKind::Sim, "{context}: {error}");
                assert_eq!(*device, 0, "{context}: {error}");
                assert_eq!(*total, self.capacity, "{context}: {error}");
                assert!(*requested >= bytes as u64, "{context}: {error}");
                assert!(
                    requested > free,
                    "{context}: out of memory reported although the request fit: {error}"
                );
            }
            other => panic!("{context}: expected OutOfMemory, got {other:?} ({other})"),
        }
    }

    fn used(&self) -> u64 {
        let mem = self.device.mem_info().unwrap();
        assert_eq!(mem.total, self.capacity);
        assert!(mem.free <= mem.total);
        mem.total - mem.free
    }

    /// Everything was dropped: nothing may remain allocated or registered.
    fn assert_nothing_leaked(&self, context: &str) {
        assert_eq!(
            self.sim.live_allocations(0).unwrap(),
            0,
            "{context}: device memory leaked"
        );
        assert_eq!(
            self.sim.live_host_memory(0).unwrap(),
            (0, 0),
            "{context}: page-locked or registered host memory leaked"
        );
        let mem = self.device.mem_info().unwrap();
        assert_eq!(
            mem.free, mem.total,
            "{context}: mem_info after dropping all"
        );
        self.device
            .check_release_errors()
            .unwrap_or_else(|e| panic!("{context}: errors while releasing: {e}"));
    }
}

/// A device array the sequence holds, with what its bytes must be.
struct Held {
    array: DeviceArray<u8>,
    model: Vec<u8>,
}

struct Sequence<'a> {
    small: &'a SmallDevice,
    rng: Rng,
    context: String,
    held: Vec<Held>,
    streams: Vec<Stream>,
    pinned: Vec<(PinnedArray<u8>, Vec<u8>)>,
    ooms: usize,
}

impl Sequence<'_> {
    fn dev(&self) -> &Device {
        &self.small.device
    }

    /// A size that sometimes fits, sometimes does not, sometimes is zero.
    fn size(&mut self) -> usize {
        let capacity = self.small.capacity as usize;
        match self.rng.below(10) {
            0 => 0,
            1 => capacity + 1 + self.rng.below(capacity),
            2..=4 => 1 + self.rng.below(capacity),
            _ => 1 + self.rng.below(capacity / 4 + 1),
        }
    }

    /// Records an allocating operation's result.
    fn allocated(&mut self, result: Result<DeviceArray<u8>>, model: Vec<u8>, what: &str) {
        let bytes = model.len();
        match result {
            Ok(array) => {
                assert_eq!(array.shape(), [bytes], "{}: {what}", self.context);
                self.held.push(Held { array, model });
            }
            Err(error) => {
                self.small
                    .expect_oom(&error, bytes, &format!("{}: {what}", self.context));
                self.ooms += 1;
            }
        }
    }

    fn step(&mut self, step: usize) {
        self.context = format!("{} step {step}", self.context_base());
        match self.rng.below(15) {
            0 | 1 => {
                let bytes = self.size();
                let data = self.rng.bytes(bytes);
                let result = self.dev().to_device(&Array1::from(data.clone()));
                self.allocated(result, data, &format!("to_device({bytes} B)"));
            }
            2 => {
                let bytes = self.size();
                let value = self.rng.next() as u8;
                let result = self
                    .dev()
                    .device_array::<u8>(&[bytes], Order::C)
                    .and_then(|mut array| array.memset(value).map(|()| array));
                self.allocated(
                    result,
                    vec![value; bytes],
                    &format!("device_array({bytes} B) + memset"),
                );
            }
            3 if !self.streams.is_empty() => {
                let bytes = self.size();
                let data = self.rng.bytes(bytes);
                let s = self.rng.below(self.streams.len());
                let result = self.streams[s].to_device(&Array1::from(data.clone()));
                self.allocated(
                    result,
                    data,
                    &format!("stream.to_device(pageable {bytes} B)"),
                );
            }
            4 if !self.streams.is_empty() && !self.pinned.is_empty() => {
                let p = self.rng.below(self.pinned.len());
                let s = self.rng.below(self.streams.len());
                let result = self.streams[s].to_device(&self.pinned[p].0);
                let model = self.pinned[p].1.clone();
                self.allocated(result, model, &format!("stream.to_device(pinned {p})"));
            }
            5 if !self.held.is_empty() => {
                let h = self.rng.below(self.held.len());
                let result = self.dev().device_array_like(&self.held[h].array);
                let bytes = self.held[h].model.len();
                // The content of a fresh array is undefined on GPUs; zero it to model it.
                let result = result.and_then(|mut array| array.memset(0).map(|()| array));
                self.allocated(
                    result,
                    vec![0; bytes],
                    &format!("device_array_like({bytes} B)"),
                );
            }
            6 | 7 if !self.held.is_empty() => {
                // Dropped possibly while a stream still uses it.
                let h = self.rng.below(self.held.len());
                self.held.swap_remove(h);
            }
            8 if self.held.len() >= 2 && !self.streams.is_empty() => self.copy_between_arrays(),
            9 if !self.held.is_empty() && !self.streams.is_empty() => {
                let h = self.rng.below(self.held.len());
                let s = self.rng.below(self.streams.len());
                let value = self.rng.next() as u8;
                let context = format!("{}: stream memset", self.context);
                // Another stream may still be writing the array (its upload, a fill): two
                // unordered writers race on a GPU too, so order after all earlier work.
                self.dev().synchronize().unwrap();
                let held = &mut self.held[h];
                self.streams[s]
                    .memset(&mut held.array, value)
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
                held.model.fill(value);
            }
            10 if !self.held.is_empty() && !self.streams.is_empty() && !self.pinned.is_empty() => {
                self.copy_into_pinned()
            }
            11 => {
                if self.streams.len() < 4 {
                    let stream = self.dev().stream().unwrap();
                    self.streams.push(stream);
                } else {
                    let s = self.rng.below(self.streams.len());
                    self.streams.swap_remove(s);
                }
            }
            12 if !self.held.is_empty() => {
                let h = self.rng.below(self.held.len());
                let got = self.held[h].array.copy_to_host().unwrap();
                assert_eq!(
                    got.as_slice().unwrap(),
                    &self.held[h].model[..],
                    "{}: array {h} content",
                    self.context
                );
            }
            13 => self.checkpoint(),
            _ => {
                if self.pinned.len() < 3 {
                    let len = 1 + self.rng.below(512);
                    let data = self.rng.bytes(len);
                    let mut pinned = self.dev().pinned_array::<u8>(&[len]).unwrap();
                    pinned
                        .view_mut()
                        .unwrap()
                        .iter_mut()
                        .zip(&data)
                        .for_each(|(slot, b)| *slot = *b);
                    self.pinned.push((pinned, data));
                } else {
                    let p = self.rng.below(self.pinned.len());
                    self.pinned.swap_remove(p);
                }
            }
        }
    }

    fn context_base(&self) -> String {
        self.context
            .split(" step ")
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// An asynchronous device-to-device copy between two held arrays (allocates nothing).
    fn copy_between_arrays(&mut self) {
        let a = self.rng.below(self.held.len());
        let b = self.rng.below(self.held.len());
        if a == b {
            return;
        }
        let len = self.held[a].model.len().min(self.held[b].model.len());
        if len == 0 {
            return;
        }
        let s = self.rng.below(self.streams.len());
        let src = self.held[a].array.slice(ndarray::s![..len]).unwrap();
        let mut dst = self.held[b].array.slice(ndarray::s![..len]).unwrap();
        // Another stream may still be writing the source or the destination: order after it.
        self.dev().synchronize().unwrap();
        self.streams[s]
            .copy_from_device(&mut dst, &src)
            .unwrap_or_else(|e| panic!("{}: D2D copy: {e}", self.context));
        let bytes = self.held[a].model[..len].to_vec();
        self.held[b].model[..len].copy_from_slice(&bytes);
    }

    /// An asynchronous device-to-host copy into a pinned array of the same length.
    fn copy_into_pinned(&mut self) {
        let p = self.rng.below(self.pinned.len());
        let len = self.pinned[p].1.len();
        let Some(h) = self.held.iter().position(|h| h.model.len() >= len) else {
            return;
        };
        let s = self.rng.below(self.streams.len());
        let src = self.held[h].array.slice(ndarray::s![..len]).unwrap();
        self.dev().synchronize().unwrap();
        self.streams[s]
            .copy_to_host(&src, &mut self.pinned[p].0)
            .unwrap_or_else(|e| panic!("{}: D2H into pinned: {e}", self.context));
        self.pinned[p].1 = self.held[h].model[..len].to_vec();
        // Reading waits for the copy.
        let got = self.pinned[p].0.view().unwrap().to_owned();
        assert_eq!(
            got.as_slice().unwrap(),
            &self.pinned[p].1[..],
            "{}: pinned {p} after D2H",
            self.context
        );
    }

    /// With every stream synchronized, used memory is exactly what the held arrays own, the free
    /// bytes can be allocated, and one byte more cannot.
    fn checkpoint(&mut self) {
        for stream in &self.streams {
            stream.synchronize().unwrap();
        }
        let held: u64 = self.held.iter().map(|h| h.model.len() as u64).sum();
        assert_eq!(
            self.small.used(),
            held,
            "{}: used memory vs. held arrays",
            self.context
        );
        let free = (self.small.capacity - held) as usize;
        let too_big = self.dev().device_array::<u8>(&[free + 1], Order::C);
        match too_big {
            Ok(_) => panic!(
                "{}: {} B allocated with {free} B free",
                self.context,
                free + 1
            ),
            Err(error) => self.small.expect_oom(
                &error,
                free + 1,
                &format!("{}: free + 1 bytes", self.context),
            ),
        }
        if free > 0 {
            let exact = self.dev().device_array::<u8>(&[free], Order::C);
            assert!(
                exact.is_ok(),
                "{}: exactly the free {free} B could not be allocated: {:?}",
                self.context,
                exact.err()
            );
            assert_eq!(self.small.used(), self.small.capacity);
        }
        assert_eq!(self.small.used(), held, "{}: after the probe", self.context);
    }
}

fn run_sequence(capacity: u64, seed: u64, steps: usize) -> usize {
    let small = small_device(capacity);
    let mut sequence = Sequence {
        small: &small,
        rng: Rng(seed),
        context: format!("capacity {capacity} B, seed {seed:#x}"),
        held: Vec::new(),
        streams: Vec::new(),
        pinned: Vec::new(),
        ooms: 0,
    };
    for step in 0..steps {
        sequence.step(step);
    }
    sequence.checkpoint();
    let ooms = sequence.ooms;
    let context = sequence.context_base();
    drop(sequence);
    small.assert_nothing_leaked(&context);
    ooms
}

const STEPS: usize = if cfg!(miri) { 30 } else { 300 };
const SEEDS: u64 = if cfg!(miri) { 1 } else { 6 };

#[test]
fn random_sequences_report_out_of_memory_and_leak_nothing() {
    let mut ooms = 0;
    for capacity in [4096u64, 3 * 1024 + 7, 64 << 10, 1_000_003] {
        for seed in 0..SEEDS {
            ooms += run_sequence(capacity, 0x00f0_0d00 + seed * 7919, STEPS);
        }
    }
    // The sequences are meant to run out of memory; if none did, they tested nothing.
    assert!(ooms > 0, "no allocation ran out of memory");
    eprintln!("oom_injection: {ooms} out-of-memory errors, all reported and recovered from");
}

#[test]
fn requests_past_the_capacity_fail_cleanly_and_exact_fits_succeed() {
    let capacity = 8192u64;
    let small = small_device(capacity);
    let dev = &small.device;
    let too_big = Array1::from(vec![7u8; capacity as usize + 1]);
    let error = dev.to_device(&too_big).unwrap_err();
    small.expect_oom(&error, capacity as usize + 1, "to_device");
    let stream = dev.stream().unwrap();
    let error = stream.to_device(&too_big).unwrap_err();
    small.expect_oom(&error, capacity as usize + 1, "stream.to_device");
    let error = dev
        .device_array::<f64>(&[capacity as usize], Order::F)
        .unwrap_err();
    small.expect_oom(&error, capacity as usize * 8, "device_array::<f64>");
    // An overflowing size is not an out-of-memory condition but must still be an error.
    let error = dev.device_array::<u64>(&[usize::MAX / 4], Order::C);
    assert!(error.is_err(), "usize::MAX / 4 u64 elements were allocated");
    // Nothing was taken by the failures: the whole capacity is still there.
    let full = dev
        .to_device(&Array1::from(vec![9u8; capacity as usize]))
        .unwrap();
    assert_eq!(small.used(), capacity);
    let error = dev.device_array::<u8>(&[1], Order::C).unwrap_err();
    small.expect_oom(&error, 1, "one byte on a full device");
    // Zero-size arrays need no memory, even on a full device.
    let empty = dev.device_array::<u8>(&[0], Order::C).unwrap();
    assert_eq!(empty.size(), 0);
    assert_eq!(full.copy_to_host().unwrap()[[100]], 9);
    drop((full, empty, stream));
    small.assert_nothing_leaked("explicit cases");
}

#[test]
fn memory_held_by_in_flight_work_is_returned_after_the_stream_finishes() {
    let capacity = 16 << 10;
    let small = small_device(capacity);
    let dev = &small.device;
    let stream = dev.stream().unwrap();
    let mut pinned = dev.pinned_array::<u8>(&[capacity as usize]).unwrap();
    let a = stream.to_device(&pinned).unwrap();
    stream.copy_to_host(&a, &mut pinned).unwrap();
    // Dropped while the stream may still use it: the stream keeps it until it synchronizes.
    drop(a);
    stream.synchronize().unwrap();
    assert_eq!(small.used(), 0, "memory returned after the stream finished");
    let b = dev
        .device_array::<u8>(&[capacity as usize], Order::C)
        .unwrap();
    drop((b, pinned, stream));
    small.assert_nothing_leaked("in-flight drop");
}
