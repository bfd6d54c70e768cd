//! Simulator transfer costs against their targets: a 64 MiB host-to-device copy should reach at
//! least 80% of a plain `memcpy` of the same size, and a 64-byte `to_device` should cost under
//! 2 µs. Both sides of each comparison run in the same process, one after the other.

// A benchmark has no caller to return an error to: it stops at the first failure.
#![allow(clippy::panic)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpu_mem_core::{Device, Order};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::hint::black_box;
use std::sync::Arc;

const BIG: usize = 64 << 20;

fn device() -> Device {
    let backend = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 30)));
    match Device::new(backend, 0) {
        Ok(device) => device,
        Err(error) => panic!("simulator device: {error}"),
    }
}

fn big_copies(c: &mut Criterion) {
    let dev = device();
    let mut group = c.benchmark_group("64MiB");
    group.throughput(Throughput::Bytes(BIG as u64));
    group.sample_size(20);
    let src = vec![7u8; BIG];
    let mut dst = vec![0u8; BIG];
    group.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
    let host = ndarray::Array1::from_elem(BIG, 7u8);
    let mut d = dev
        .device_array::<u8>(&[BIG], Order::C)
        .unwrap_or_else(|e| panic!("{e}"));
    group.bench_function("host_to_device", |b| {
        b.iter(|| {
            d.copy_from_host(black_box(&host))
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    let mut back = ndarray::Array1::from_elem(BIG, 0u8);
    group.bench_function("device_to_host", |b| {
        b.iter(|| {
            d.copy_to_host_into(black_box(&mut back))
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    group.finish();
}

fn small_to_device(c: &mut Criterion) {
    let dev = device();
    let host = ndarray::Array1::from_elem(16, 1.0f32); // 64 bytes
    c.bench_function("to_device_64B", |b| {
        b.iter(|| {
            black_box(
                dev.to_device(black_box(&host))
                    .unwrap_or_else(|e| panic!("{e}")),
            )
        })
    });
}

fn small_stream_round_trip(c: &mut Criterion) {
    let dev = device();
    let stream = match dev.stream() {
        Ok(stream) => stream,
        Err(error) => panic!("stream: {error}"),
    };
    let pinned = dev
        .pinned_array::<u8>(&[4096])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut d = dev
        .device_array::<u8>(&[4096], Order::C)
        .unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("stream_copy_4KiB_and_sync", |b| {
        b.iter(|| {
            stream
                .copy_from_host(&mut d, &pinned)
                .unwrap_or_else(|e| panic!("{e}"));
            stream.synchronize().unwrap_or_else(|e| panic!("{e}"));
        })
    });
}

criterion_group!(
    benches,
    big_copies,
    small_to_device,
    small_stream_round_trip
);
criterion_main!(benches);
