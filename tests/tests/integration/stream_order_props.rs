//! Property tests of the simulator's stream ordering, through the public API.
//!
//! * Operations enqueued on one stream take effect in the order they were enqueued: any
//!   sequence of fills, device-to-device copies, uploads from pinned memory and downloads into
//!   pinned memory leaves exactly the bytes that applying the same sequence on the host leaves,
//!   and every download sees the state at its place in the sequence.
//! * Events order two streams: the same kind of sequence spread over two streams, where each
//!   switch of stream makes the new stream wait for an event recorded on the old one, also has
//!   the sequential result, although the two streams' workers run concurrently.
//!
//! Uploads use pinned arrays that are dropped right after the call, and downloads are read
//! without an explicit synchronization, so the lifetime and host-wait rules are exercised too.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{Backend, Device};
use proptest::prelude::*;
use std::sync::Arc;

/// Bytes in each of the device buffers the operations work on.
const LEN: usize = 64;
/// Number of device buffers.
const BUFFERS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// `buffer[start..start+len] = value` on the device.
    Fill {
        buffer: usize,
        start: usize,
        len: usize,
        value: u8,
    },
    /// `dst[dst_start..+len] = src[src_start..+len]`, device to device (no overlap).
    Copy {
        src: usize,
        dst: usize,
        src_start: usize,
        dst_start: usize,
        len: usize,
    },
    /// Upload `len` bytes of a pattern from a pinned array dropped right after enqueueing.
    Upload {
        buffer: usize,
        start: usize,
        len: usize,
        seed: u8,
    },
    /// Download `buffer[start..+len]` into a new pinned array, checked at the end.
    Download {
        buffer: usize,
        start: usize,
        len: usize,
    },
}

fn range() -> impl Strategy<Value = (usize, usize)> {
    (0..LEN).prop_flat_map(|start| (Just(start), 1..=LEN - start))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..BUFFERS, range(), any::<u8>()).prop_map(|(buffer, (start, len), value)| Op::Fill {
            buffer,
            start,
            len,
            value
        }),
        (
            0..BUFFERS,
            0..BUFFERS,
            1..=LEN / 2,
            0..=LEN / 2,
            0..=LEN / 2
        )
            .prop_map(|(src, dst, len, a, b)| {
                let src_start = a.min(LEN - len);
                let mut dst_start = b.min(LEN - len);
                if src == dst && src_start.abs_diff(dst_start) < len {
                    // Keep copies within one buffer disjoint (overlap is undefined on GPUs).
                    dst_start = if src_start >= len { 0 } else { LEN - len };
                }
                Op::Copy {
                    src,
                    dst,
                    src_start,
                    dst_start,
                    len,
                }
            }),
        (0..BUFFERS, range(), any::<u8>()).prop_map(|(buffer, (start, len), seed)| Op::Upload {
            buffer,
            start,
            len,
            seed
        }),
        (0..BUFFERS, range()).prop_map(|(buffer, (start, len))| Op::Download {
            buffer,
            start,
            len
        }),
    ]
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8 ^ 0x5a))
        .collect()
}

/// The device buffers, their model, and the downloads waiting to be checked.
struct World {
    device: Device,
    buffers: Vec<DeviceArray<u8>>,
    model: Vec<Vec<u8>>,
    downloads: Vec<(PinnedArray<u8>, Vec<u8>)>,
}

impl World {
    fn new() -> World {
        let sim: Arc<dyn Backend> = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20)));
        let device = Runtime::with_backend(sim).device(0).unwrap();
        let mut buffers = Vec::new();
        let mut model = Vec::new();
        for b in 0..BUFFERS {
            let initial = pattern(b as u8 + 100, LEN);
            buffers.push(
                device
                    .to_device(&ndarray::Array1::from(initial.clone()))
                    .unwrap(),
            );
            model.push(initial);
        }
        World {
            device,
            buffers,
            model,
            downloads: Vec::new(),
        }
    }

    /// Enqueues `op` on `stream` and applies it to the model.
    fn apply(&mut self, stream: &Stream, op: &Op) {
        match *op {
            Op::Fill {
                buffer,
                start,
                len,
                value,
            } => {
                let mut dst = self.buffers[buffer]
                    .slice(ndarray::s![start..start + len])
                    .unwrap();
                stream.memset(&mut dst, value).unwrap();
                self.model[buffer][start..start + len].fill(value);
            }
            Op::Copy {
                src,
                dst,
                src_start,
                dst_start,
                len,
            } => {
                let from = self.buffers[src]
                    .slice(ndarray::s![src_start..src_start + len])
                    .unwrap();
                let mut to = self.buffers[dst]
                    .slice(ndarray::s![dst_start..dst_start + len])
                    .unwrap();
                stream.copy_from_device(&mut to, &from).unwrap();
                let bytes = self.model[src][src_start..src_start + len].to_vec();
                self.model[dst][dst_start..dst_start + len].copy_from_slice(&bytes);
            }
            Op::Upload {
                buffer,
                start,
                len,
                seed,
            } => {
                let bytes = pattern(seed, len);
                let mut pinned = self.device.pinned_array::<u8>(&[len]).unwrap();
                pinned
                    .view_mut()
                    .unwrap()
                    .iter_mut()
                    .zip(&bytes)
                    .for_each(|(slot, b)| *slot = *b);
                let mut dst = self.buffers[buffer]
                    .slice(ndarray::s![start..start + len])
                    .unwrap();
                stream.copy_from_host(&mut dst, &pinned).unwrap();
                // The stream keeps the pinned memory alive until the upload has run.
                drop(pinned);
                self.model[buffer][start..start + len].copy_from_slice(&bytes);
            }
            Op::Download { buffer, start, len } => {
                let src = self.buffers[buffer]
                    .slice(ndarray::s![start..start + len])
                    .unwrap();
                let mut pinned = self.device.pinned_array::<u8>(&[len]).unwrap();
                stream.copy_to_host(&src, &mut pinned).unwrap();
                let expected = self.model[buffer][start..start + len].to_vec();
                self.downloads.push((pinned, expected));
            }
        }
    }

    /// Checks every download (reading waits for it) and then every buffer.
    fn check(&self) -> Result<(), TestCaseError> {
        for (i, (pinned, expected)) in self.downloads.iter().enumerate() {
            let got = pinned.view().unwrap().to_owned();
            prop_assert_eq!(got.as_slice().unwrap(), &expected[..], "download {}", i);
        }
        for (b, buffer) in self.buffers.iter().enumerate() {
            let got = buffer.copy_to_host().unwrap();
            prop_assert_eq!(got.as_slice().unwrap(), &self.model[b][..], "buffer {}", b);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 96 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn one_stream_applies_operations_in_order(ops in prop::collection::vec(op(), 1..48)) {
        let mut world = World::new();
        let stream = world.device.stream().unwrap();
        for op in &ops {
            world.apply(&stream, op);
        }
        // No synchronization: the checks must wait for the work themselves.
        world.check()?;
        drop(stream);
        world.device.check_release_errors().unwrap();
    }

    #[test]
    fn events_order_two_streams(
        ops in prop::collection::vec((op(), any::<bool>()), 1..48),
        timing in any::<bool>(),
    ) {
        let mut world = World::new();
        let streams = [world.device.stream().unwrap(), world.device.stream().unwrap()];
        let mut previous: Option<usize> = None;
        for (op, second) in &ops {
            let current = usize::from(*second);
            if let Some(previous) = previous
                && previous != current
            {
                let event = world.device.event(timing).unwrap();
                event.record(&streams[previous]).unwrap();
                event.wait(&streams[current]).unwrap();
            }
            world.apply(&streams[current], op);
            previous = Some(current);
        }
        world.check()?;
        drop(streams);
        world.device.check_release_errors().unwrap();
    }

}

/// A pinned buffer read by an upload on one stream and then written by a download on another.
///
/// The soundness rules: no safe call may let host memory be written while an asynchronous operation
/// still reads it. A stream operation on page-locked memory first waits for the conflicting
/// in-flight uses of that memory on other streams (a download waits for every use, an upload
/// for writers), so the download below cannot overwrite the buffer while the upload on `s0`
/// still reads it. Before that rule existed this failed in about a third of runs.
#[test]
fn a_pinned_buffer_used_by_two_streams_is_not_overwritten_while_read() {
    for attempt in 0..50 {
        let world = World::new();
        let dev = &world.device;
        let (s0, s1) = (dev.stream().unwrap(), dev.stream().unwrap());
        let mut pinned = dev.pinned_array::<u8>(&[4096]).unwrap();
        let mut d = dev.device_array::<u8>(&[4096], Order::C).unwrap();
        let other = dev
            .to_device(&ndarray::Array1::from(vec![7u8; 4096]))
            .unwrap();
        s0.copy_from_host(&mut d, &pinned).unwrap();
        s1.copy_to_host(&other, &mut pinned).unwrap();
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
        let got = d.copy_to_host().unwrap();
        assert!(
            got.iter().all(|&b| b == 0),
            "attempt {attempt}: the upload on s0 saw bytes written afterwards by s1"
        );
    }
}
