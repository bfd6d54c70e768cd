//! Soak test: many streams doing random asynchronous copies and fills, checked byte for byte.
//!
//! A seeded generator drives thousands of operations over a set of device buffers and
//! page-locked host buffers on several streams: host-to-device copies from pinned memory (and
//! from pageable memory, which is staged), device-to-device copies, device-to-host copies into
//! pinned memory, fills, and copies through short-lived device arrays dropped while the stream
//! still uses them. A host-side model holds what every byte must be.
//!
//! Work on one buffer moves between streams only through an event (recorded on the stream that
//! used the buffer last, waited for by the next one), so the model's program order is the only
//! correct result; a lost ordering, a host access that does not wait for in-flight copies, or
//! memory released under running work shows up as a wrong byte. Pinned buffers are checked at
//! random points without any explicit synchronization (reading one must wait for the copies
//! that write it), device buffers through synchronous copies (which follow all stream work),
//! and everything at the end.
//!
//! Runs on the simulator, or on the backend named by `GPU_MEM_BACKEND` (an unavailable backend
//! named there is a failure, not a skip). `GPU_MEM_SOAK_SEED` and `GPU_MEM_SOAK_OPS` change the
//! seed and length.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{Backend, BackendKind};
use ndarray::Array1;
use std::collections::VecDeque;
use std::sync::Arc;

/// splitmix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

const STREAMS: usize = if cfg!(miri) { 2 } else { 8 };
const DEVICE_BUFFERS: usize = if cfg!(miri) { 2 } else { 6 };
const DEVICE_BYTES: usize = if cfg!(miri) { 512 } else { 128 << 10 };
const PINNED_BUFFERS: usize = if cfg!(miri) { 2 } else { 8 };
const MAX_PINNED_BYTES: usize = if cfg!(miri) { 128 } else { 32 << 10 };
const DEFAULT_OPS: usize = if cfg!(miri) { 40 } else { 10_000 };
const DEFAULT_SEED: u64 = 0x5eed_50a6;

/// A buffer an operation uses, for handing work over between streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Device(usize),
    Pinned(usize),
}

struct Soak {
    seed: u64,
    rng: Rng,
    device: Device,
    streams: Vec<Stream>,
    buffers: Vec<DeviceArray<u8>>,
    buffer_model: Vec<Vec<u8>>,
    pinned: Vec<PinnedArray<u8>>,
    pinned_model: Vec<Vec<u8>>,
    /// The stream that used each device buffer / pinned buffer last.
    buffer_owner: Vec<Option<usize>>,
    pinned_owner: Vec<Option<usize>>,
    /// The last operations, for the failure message.
    recent: VecDeque<String>,
    op: usize,
    events: usize,
}

impl Soak {
    fn new(device: Device, seed: u64) -> Soak {
        let mut rng = Rng(seed);
        let streams = (0..STREAMS).map(|_| device.stream().unwrap()).collect();
        let mut buffers = Vec::new();
        let mut buffer_model = Vec::new();
        for _ in 0..DEVICE_BUFFERS {
            let mut model = vec![0u8; DEVICE_BYTES];
            rng.fill(&mut model);
            let mut buffer = device
                .device_array::<u8>(&[DEVICE_BYTES], Order::C)
                .unwrap();
            buffer.copy_from_host(&Array1::from(model.clone())).unwrap();
            buffers.push(buffer);
            buffer_model.push(model);
        }
        let mut pinned = Vec::new();
        let mut pinned_model = Vec::new();
        for i in 0..PINNED_BUFFERS {
            // Cover the small and odd sizes as well as large ones.
            let len = match i {
                0 => 1,
                1 => 7,
                _ => rng.between(1, MAX_PINNED_BYTES),
            };
            let mut array = device.pinned_array::<u8>(&[len]).unwrap();
            let mut model = vec![0u8; len];
            rng.fill(&mut model);
            array
                .view_mut()
                .unwrap()
                .iter_mut()
                .zip(&model)
                .for_each(|(slot, byte)| *slot = *byte);
            pinned.push(array);
            pinned_model.push(model);
        }
        Soak {
            seed,
            rng,
            device,
            streams,
            buffers,
            buffer_model,
            pinned,
            pinned_model,
            buffer_owner: vec![None; DEVICE_BUFFERS],
            pinned_owner: vec![None; PINNED_BUFFERS],
            recent: VecDeque::new(),
            op: 0,
            events: 0,
        }
    }

    fn log(&mut self, what: String) {
        if self.recent.len() == 24 {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("#{} {what}", self.op));
    }

    fn fail(&self, what: &str) -> ! {
        let recent: Vec<&str> = self.recent.iter().map(String::as_str).collect();
        panic!(
            "soak failed at operation #{} (seed {:#x}, backend {}): {what}\nlast operations:\n  {}",
            self.op,
            self.seed,
            self.device.kind(),
            recent.join("\n  ")
        );
    }

    /// Makes `stream` wait for the streams that used `resources` last, and takes them over.
    fn hand_over(&mut self, stream: usize, resources: &[Resource]) {
        let mut waited = Vec::new();
        for resource in resources {
            let owner = match *resource {
                Resource::Device(i) => &mut self.buffer_owner[i],
                Resource::Pinned(i) => &mut self.pinned_owner[i],
            };
            let previous = owner.replace(stream);
            if let Some(previous) = previous
                && previous != stream
                && !waited.contains(&previous)
            {
                waited.push(previous);
            }
        }
        for previous in waited {
            // Only ordering is needed: no timing.
            let event = self.streams[previous].record_event_with(false).unwrap();
            self.streams[stream].wait_event(&event).unwrap();
            self.events += 1;
        }
    }

    /// A random range of `len` bytes inside a device buffer.
    fn offset_for(&mut self, len: usize) -> usize {
        self.rng.below(DEVICE_BYTES - len + 1)
    }

    fn step(&mut self) {
        let stream = self.rng.below(STREAMS);
        match self.rng.below(100) {
            0..=21 => self.htod_pinned(stream),
            22..=39 => self.dtoh_pinned(stream),
            40..=59 => self.dtod(stream),
            60..=71 => self.memset(stream),
            72..=79 => self.through_temporary(stream),
            80..=85 => self.htod_pageable(stream),
            86..=90 => self.check_pinned(),
            91..=93 => self.check_device_buffer(),
            94..=96 => self.write_pinned_from_host(),
            97 => {
                self.log(format!("synchronize stream {stream}"));
                self.streams[stream].synchronize().unwrap();
            }
            98 => {
                self.log(format!("query stream {stream}"));
                self.streams[stream].query().unwrap();
            }
            _ => {
                self.log("synchronize the device".into());
                self.device.synchronize().unwrap();
            }
        }
    }

    fn htod_pinned(&mut self, stream: usize) {
        let p = self.rng.below(PINNED_BUFFERS);
        let d = self.rng.below(DEVICE_BUFFERS);
        let len = self.pinned_model[p].len();
        let at = self.offset_for(len);
        self.log(format!(
            "s{stream}: H2D pinned {p} ({len} B) -> buffer {d}[{at}..]"
        ));
        self.hand_over(stream, &[Resource::Device(d), Resource::Pinned(p)]);
        let mut dst = self.buffers[d].slice(ndarray::s![at..at + len]).unwrap();
        self.streams[stream]
            .copy_from_host(&mut dst, &self.pinned[p])
            .unwrap();
        self.buffer_model[d][at..at + len].copy_from_slice(&self.pinned_model[p]);
    }

    fn dtoh_pinned(&mut self, stream: usize) {
        let p = self.rng.below(PINNED_BUFFERS);
        let d = self.rng.below(DEVICE_BUFFERS);
        let len = self.pinned_model[p].len();
        let at = self.offset_for(len);
        self.log(format!(
            "s{stream}: D2H buffer {d}[{at}..] -> pinned {p} ({len} B)"
        ));
        self.hand_over(stream, &[Resource::Device(d), Resource::Pinned(p)]);
        let src = self.buffers[d].slice(ndarray::s![at..at + len]).unwrap();
        self.streams[stream]
            .copy_to_host(&src, &mut self.pinned[p])
            .unwrap();
        let (model, pinned) = (&self.buffer_model[d], &mut self.pinned_model[p]);
        pinned.copy_from_slice(&model[at..at + len]);
    }

    fn dtod(&mut self, stream: usize) {
        let from = self.rng.below(DEVICE_BUFFERS);
        let to = self.rng.below(DEVICE_BUFFERS);
        // At most a third of a buffer, so a copy within one buffer can always avoid overlap.
        let len = self.rng.between(1, 16 << 10).min(DEVICE_BYTES / 3);
        let src_at = self.offset_for(len);
        let mut dst_at = self.offset_for(len);
        if from == to && src_at.abs_diff(dst_at) < len {
            // Overlapping copies are undefined on GPUs; move the destination clear of the source.
            dst_at = if src_at >= len { 0 } else { DEVICE_BYTES - len };
        }
        self.log(format!(
            "s{stream}: D2D buffer {from}[{src_at}..] -> buffer {to}[{dst_at}..] ({len} B)"
        ));
        self.hand_over(stream, &[Resource::Device(from), Resource::Device(to)]);
        let src = self.buffers[from]
            .slice(ndarray::s![src_at..src_at + len])
            .unwrap();
        let mut dst = self.buffers[to]
            .slice(ndarray::s![dst_at..dst_at + len])
            .unwrap();
        self.streams[stream]
            .copy_from_device(&mut dst, &src)
            .unwrap();
        let bytes = self.buffer_model[from][src_at..src_at + len].to_vec();
        self.buffer_model[to][dst_at..dst_at + len].copy_from_slice(&bytes);
    }

    fn memset(&mut self, stream: usize) {
        let d = self.rng.below(DEVICE_BUFFERS);
        let len = self.rng.between(1, 32 << 10).min(DEVICE_BYTES);
        let at = self.offset_for(len);
        let value = self.rng.next() as u8;
        self.log(format!(
            "s{stream}: memset buffer {d}[{at}..] ({len} B) = {value:#04x}"
        ));
        self.hand_over(stream, &[Resource::Device(d)]);
        let mut dst = self.buffers[d].slice(ndarray::s![at..at + len]).unwrap();
        self.streams[stream].memset(&mut dst, value).unwrap();
        self.buffer_model[d][at..at + len].fill(value);
    }

    /// `stream.to_device(pinned)` into a new array, copied on into a buffer, and the new array
    /// dropped at once, while both copies may still be running.
    fn through_temporary(&mut self, stream: usize) {
        let p = self.rng.below(PINNED_BUFFERS);
        let d = self.rng.below(DEVICE_BUFFERS);
        let len = self.pinned_model[p].len();
        let at = self.offset_for(len);
        self.log(format!(
            "s{stream}: pinned {p} -> temporary -> buffer {d}[{at}..] ({len} B), temporary dropped"
        ));
        self.hand_over(stream, &[Resource::Device(d), Resource::Pinned(p)]);
        let temporary = self.streams[stream].to_device(&self.pinned[p]).unwrap();
        let mut dst = self.buffers[d].slice(ndarray::s![at..at + len]).unwrap();
        self.streams[stream]
            .copy_from_device(&mut dst, &temporary)
            .unwrap();
        drop(temporary);
        self.buffer_model[d][at..at + len].copy_from_slice(&self.pinned_model[p]);
    }

    /// A pageable source is staged: overwriting it right after the call must not matter.
    fn htod_pageable(&mut self, stream: usize) {
        let d = self.rng.below(DEVICE_BUFFERS);
        let len = self.rng.between(1, 8 << 10).min(DEVICE_BYTES);
        let at = self.offset_for(len);
        let mut bytes = vec![0u8; len];
        self.rng.fill(&mut bytes);
        self.log(format!(
            "s{stream}: H2D pageable ({len} B) -> buffer {d}[{at}..]"
        ));
        self.hand_over(stream, &[Resource::Device(d)]);
        let mut host = Array1::from(bytes.clone());
        let mut dst = self.buffers[d].slice(ndarray::s![at..at + len]).unwrap();
        self.streams[stream]
            .copy_from_host(&mut dst, &host)
            .unwrap();
        host.fill(0xEE);
        drop(host);
        self.buffer_model[d][at..at + len].copy_from_slice(&bytes);
    }

    /// Host writes to a pinned buffer: must wait for every in-flight copy that reads it.
    fn write_pinned_from_host(&mut self) {
        let p = self.rng.below(PINNED_BUFFERS);
        let mut bytes = vec![0u8; self.pinned_model[p].len()];
        self.rng.fill(&mut bytes);
        self.log(format!("host writes pinned {p}"));
        let mut view = self.pinned[p].view_mut().unwrap();
        view.iter_mut()
            .zip(&bytes)
            .for_each(|(slot, byte)| *slot = *byte);
        drop(view);
        self.pinned_model[p] = bytes;
    }

    /// Reads a pinned buffer without synchronizing: the read waits for copies into it.
    fn check_pinned(&mut self) {
        let p = self.rng.below(PINNED_BUFFERS);
        self.log(format!("check pinned {p} (no explicit sync)"));
        self.verify_pinned(p);
    }

    fn verify_pinned(&self, p: usize) {
        let view = self.pinned[p].view().unwrap();
        let got = view.as_slice().expect("pinned arrays are contiguous");
        if let Some(i) = first_difference(got, &self.pinned_model[p]) {
            self.fail(&format!(
                "pinned {p}: byte {i} is {:#04x}, expected {:#04x}",
                got[i], self.pinned_model[p][i]
            ));
        }
    }

    /// Reads a device buffer synchronously: the copy follows all stream work on the device.
    fn check_device_buffer(&mut self) {
        let d = self.rng.below(DEVICE_BUFFERS);
        self.log(format!("check buffer {d} (synchronous copy)"));
        self.verify_buffer(d);
    }

    fn verify_buffer(&self, d: usize) {
        let got = self.buffers[d].copy_to_host().unwrap();
        let got = got.as_slice().expect("contiguous");
        if let Some(i) = first_difference(got, &self.buffer_model[d]) {
            self.fail(&format!(
                "buffer {d}: byte {i} is {:#04x}, expected {:#04x}",
                got[i], self.buffer_model[d][i]
            ));
        }
    }

    fn verify_all(&mut self) {
        self.log("final check of every byte".into());
        for p in 0..PINNED_BUFFERS {
            self.verify_pinned(p);
        }
        for d in 0..DEVICE_BUFFERS {
            self.verify_buffer(d);
        }
    }
}

fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    if got.len() != want.len() {
        return Some(got.len().min(want.len()));
    }
    got.iter().zip(want).position(|(a, b)| a != b)
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    let value = value.trim();
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

/// The backend under test: `GPU_MEM_BACKEND` when set, else a simulator this test owns (so it
/// can also check that nothing leaked).
fn backend_under_test() -> (Runtime, Option<Arc<SimBackend>>) {
    match std::env::var("GPU_MEM_BACKEND") {
        Ok(name) if !name.trim().is_empty() => {
            let runtime = Runtime::from_env().unwrap_or_else(|e| {
                panic!("GPU_MEM_BACKEND={name} names a backend that cannot be opened: {e}")
            });
            (runtime, None)
        }
        _ => {
            let sim = Arc::new(SimBackend::new(SimConfig::uniform(1, 64 << 20)));
            let backend: Arc<dyn Backend> = sim.clone();
            (Runtime::with_backend(backend), Some(sim))
        }
    }
}

#[test]
fn random_async_copies_on_many_streams_keep_every_byte() {
    let seed = env_number("GPU_MEM_SOAK_SEED").unwrap_or(DEFAULT_SEED);
    let ops = env_number("GPU_MEM_SOAK_OPS").map_or(DEFAULT_OPS, |n| n as usize);
    let (runtime, sim) = backend_under_test();
    let device = runtime.device(0).unwrap();
    let started = std::time::Instant::now();
    let mut soak = Soak::new(device.clone(), seed);
    for op in 0..ops {
        soak.op = op;
        soak.step();
    }
    soak.op = ops;
    soak.verify_all();
    let events = soak.events;
    drop(soak);
    eprintln!(
        "soak: {ops} operations on {STREAMS} streams ({events} event hand-overs) on {} in {:.2?}, seed {seed:#x}",
        runtime.kind(),
        started.elapsed()
    );
    device.check_release_errors().unwrap();
    if let Some(sim) = sim {
        assert_eq!(runtime.kind(), BackendKind::Sim);
        assert_eq!(sim.live_allocations(0).unwrap(), 0, "device memory leaked");
        assert_eq!(
            sim.live_host_memory(0).unwrap(),
            (0, 0),
            "host memory leaked"
        );
        let mem = device.mem_info().unwrap();
        assert_eq!(mem.free, mem.total);
    }
}
