//! Simulator transfer costs against their targets, each comparison measured side by side in one
//! run (the printed ratios are what the targets are about):
//! * a 64 MiB host-to-device copy into an existing array should reach at least 80% of a plain
//!   `memcpy` of the same size into already-touched memory;
//! * a 64 MiB `to_device` (a new device array each time) should be within 1.3x of that `memcpy`
//!   and at least as fast as Numba's CUDA simulator (11.4 ms on the reference machine);
//! * a 64-byte `to_device` should cost under 2 µs, of which the memory accounting's counters
//!   (`gpu_mem_core::usage`) under 2% (the list of live allocations with their locations, on by
//!   default, is measured beside them);
//! * a 4 KiB page-locked stream copy plus `synchronize` should take at most 5 µs at the 99th
//!   percentile over 10,000 round trips, with no second mode.

// A benchmark has no caller to return an error to: it stops at the first failure.
#![allow(clippy::panic)]

use gpu_mem_core::{Device, Order};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIG: usize = 64 << 20;

/// Numba's CUDA simulator: `cuda.to_device` of 64 MiB on the reference machine.
const NUMBA_SIM_TO_DEVICE_64MIB_MS: f64 = 11.4;

fn device() -> Device {
    let backend = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 30)));
    match Device::new(backend, 0) {
        Ok(device) => device,
        Err(error) => panic!("simulator device: {error}"),
    }
}

/// Times `f`: batches of as many calls as take about a millisecond, 30 of them after a
/// warm-up; prints the median time per call (and the throughput over `bytes` per call) as
/// `name`.
fn time_calls(name: &str, bytes: Option<usize>, mut f: impl FnMut()) {
    let mut batch = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        if t.elapsed() >= Duration::from_millis(1) || batch >= 1 << 20 {
            break;
        }
        batch *= 2;
    }
    let samples = (0..30)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed() / batch
        })
        .collect();
    let per_call = median(samples);
    match bytes {
        Some(bytes) => println!(
            "{name:<34} {:>10.2} µs  {:>8.2} GiB/s",
            per_call.as_secs_f64() * 1e6,
            bytes as f64 / per_call.as_secs_f64() / f64::from(1u32 << 30)
        ),
        None => println!("{name:<34} {:>10.2} µs", per_call.as_secs_f64() * 1e6),
    }
}

fn big_copies() {
    let dev = device();
    let src = vec![7u8; BIG];
    let mut dst = vec![0u8; BIG];
    time_calls("64MiB/memcpy", Some(BIG), || {
        dst.copy_from_slice(black_box(&src))
    });
    let host = ndarray::Array1::from_elem(BIG, 7u8);
    let mut d = dev
        .device_array::<u8>(&[BIG], Order::C)
        .unwrap_or_else(|e| panic!("{e}"));
    time_calls("64MiB/host_to_device", Some(BIG), || {
        d.copy_from_host(black_box(&host))
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let mut back = ndarray::Array1::from_elem(BIG, 0u8);
    time_calls("64MiB/device_to_host", Some(BIG), || {
        d.copy_to_host_into(black_box(&mut back))
            .unwrap_or_else(|e| panic!("{e}"))
    });
    drop(d);
    time_calls("64MiB/to_device_new_array", Some(BIG), || {
        black_box(
            dev.to_device(black_box(&host))
                .unwrap_or_else(|e| panic!("{e}")),
        );
    });
}

/// Prints whether the targets of one comparison were met, and `figures` with that verdict as one
/// JSON line when `cargo xtask bench --json` asked for it.
fn report(bench: &str, figures: &[(String, f64)], targets_met: bool) {
    println!("  targets {}", if targets_met { "met" } else { "NOT met" });
    if std::env::var_os("GPU_MEM_BENCH_JSON").is_some_and(|v| v == "1") {
        let fields: Vec<String> = figures
            .iter()
            .map(|(name, value)| format!("\"{name}\":{value:e}"))
            .collect();
        println!(
            "{{\"bench\":\"{bench}\",{},\"targets_met\":{targets_met}}}",
            fields.join(",")
        );
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The 64 MiB ratios, measured interleaved in one run: `memcpy` into touched memory, a copy
/// into an existing device array from pageable and from page-locked memory (the latter on a
/// stream, through the simulator's copy engine), and `to_device` (a new device array each time).
fn big_ratios() {
    let dev = device();
    let src = vec![7u8; BIG];
    let mut dst = vec![0u8; BIG];
    dst.copy_from_slice(&src); // touch every page
    let host = ndarray::Array1::from_elem(BIG, 7u8);
    let mut existing = dev
        .device_array::<u8>(&[BIG], Order::C)
        .unwrap_or_else(|e| panic!("{e}"));
    existing
        .copy_from_host(&host)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut fresh = Some(dev.to_device(&host).unwrap_or_else(|e| panic!("{e}")));
    let stream = dev.stream().unwrap_or_else(|e| panic!("{e}"));
    let mut pinned = dev
        .pinned_array::<u8>(&[BIG])
        .unwrap_or_else(|e| panic!("{e}"));
    pinned.view_mut().unwrap_or_else(|e| panic!("{e}")).fill(7);
    let (mut memcpy, mut htod, mut to_device) = (Vec::new(), Vec::new(), Vec::new());
    let mut pinned_htod = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        stream
            .copy_from_host(&mut existing, black_box(&pinned))
            .unwrap_or_else(|e| panic!("{e}"));
        stream.synchronize().unwrap_or_else(|e| panic!("{e}"));
        pinned_htod.push(t.elapsed());
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        memcpy.push(t.elapsed());
        black_box(&mut dst);
        let t = Instant::now();
        existing
            .copy_from_host(black_box(&host))
            .unwrap_or_else(|e| panic!("{e}"));
        htod.push(t.elapsed());
        drop(fresh.take());
        let t = Instant::now();
        fresh = Some(black_box(
            dev.to_device(black_box(&host))
                .unwrap_or_else(|e| panic!("{e}")),
        ));
        to_device.push(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (memcpy, htod, to_device) = (median(memcpy), median(htod), median(to_device));
    let pinned_htod = median(pinned_htod);
    println!("64 MiB, medians of 30 interleaved rounds:");
    println!("  memcpy into touched memory   {:8.2} ms", ms(memcpy));
    println!(
        "  copy_from_host (existing)    {:8.2} ms  = {:.2}x memcpy (target <= 1.25x)",
        ms(htod),
        ms(htod) / ms(memcpy)
    );
    println!(
        "  page-locked, stream + sync   {:8.2} ms  = {:.2}x memcpy, {:.2}x the pageable copy \
         (target <= 1x)",
        ms(pinned_htod),
        ms(pinned_htod) / ms(memcpy),
        ms(pinned_htod) / ms(htod)
    );
    println!(
        "  to_device (new array)        {:8.2} ms  = {:.2}x memcpy (target <= 1.3x), \
         {:.2}x Numba's simulator ({NUMBA_SIM_TO_DEVICE_64MIB_MS} ms, target <= 1x)",
        ms(to_device),
        ms(to_device) / ms(memcpy),
        ms(to_device) / NUMBA_SIM_TO_DEVICE_64MIB_MS
    );
    let targets_met = ms(htod) / ms(memcpy) <= 1.25
        && ms(pinned_htod) / ms(htod) <= 1.0
        && ms(to_device) / ms(memcpy) <= 1.3
        && ms(to_device) <= NUMBA_SIM_TO_DEVICE_64MIB_MS;
    report(
        "transfers_64mib",
        &[
            ("memcpy_seconds".into(), memcpy.as_secs_f64()),
            ("copy_from_host_vs_memcpy".into(), ms(htod) / ms(memcpy)),
            ("page_locked_vs_memcpy".into(), ms(pinned_htod) / ms(memcpy)),
            ("page_locked_vs_pageable".into(), ms(pinned_htod) / ms(htod)),
            ("to_device_vs_memcpy".into(), ms(to_device) / ms(memcpy)),
            (
                "to_device_vs_numba".into(),
                ms(to_device) / NUMBA_SIM_TO_DEVICE_64MIB_MS,
            ),
        ],
        targets_met,
    );
}

fn small_to_device() {
    let dev = device();
    let host = ndarray::Array1::from_elem(16, 1.0f32); // 64 bytes
    time_calls("to_device_64B", None, || {
        black_box(
            dev.to_device(black_box(&host))
                .unwrap_or_else(|e| panic!("{e}")),
        );
    });
}

/// The accounting's share of a 64-byte `to_device`: rounds of 64 B `to_device` calls, of the
/// counters alone and of the counters with the list of live allocations and their locations
/// (the default), interleaved, medians over the rounds. The target is the counters'.
fn accounting_cost() {
    use gpu_mem_core::usage::Tracking;
    use gpu_mem_core::usage::bench_support::Accounting;
    const ROUNDS: usize = 31;
    const CALLS: u32 = 20_000;
    let dev = device();
    let host = ndarray::Array1::from_elem(16, 1.0f32);
    let counters = Accounting::new(Tracking {
        locations: false,
        backtraces: false,
        history: false,
    });
    let located = Accounting::new(Tracking::default());
    let (mut whole, mut counted, mut listed) = (Vec::new(), Vec::new(), Vec::new());
    let time = |samples: &mut Vec<Duration>, f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..CALLS {
            f();
        }
        samples.push(start.elapsed() / CALLS);
    };
    for _ in 0..ROUNDS {
        time(&mut whole, &|| {
            black_box(
                dev.to_device(black_box(&host))
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        });
        time(&mut counted, &|| {
            counters.count_one_allocation(black_box(64))
        });
        time(&mut listed, &|| located.count_one_allocation(black_box(64)));
    }
    let (whole, counted, listed) = (median(whole), median(counted), median(listed));
    let share = |d: Duration| d.as_secs_f64() / whole.as_secs_f64();
    let targets_met = share(counted) < 0.02;
    println!(
        "accounting of a 64 B to_device ({:.1} ns): counters {:.1} ns ({:.2}%, target < 2%); with locations (the default) {:.1} ns ({:.2}%)",
        whole.as_secs_f64() * 1e9,
        counted.as_secs_f64() * 1e9,
        share(counted) * 100.0,
        listed.as_secs_f64() * 1e9,
        share(listed) * 100.0,
    );
    report(
        "transfers_accounting",
        &[
            ("to_device_64b_seconds".to_string(), whole.as_secs_f64()),
            ("counters_seconds".to_string(), counted.as_secs_f64()),
            ("with_locations_seconds".to_string(), listed.as_secs_f64()),
            ("counters_share".to_string(), share(counted)),
        ],
        targets_met,
    );
}

fn small_stream_round_trip() {
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
    time_calls("stream_copy_4KiB_and_sync", Some(4096), || {
        stream
            .copy_from_host(&mut d, &pinned)
            .unwrap_or_else(|e| panic!("{e}"));
        stream.synchronize().unwrap_or_else(|e| panic!("{e}"));
    });
}

/// The distribution of the 4 KiB page-locked copy + `synchronize` round trip: each of 10,000
/// round trips timed on its own (after 1,000 to warm up), with a small gap between them as a
/// real program has, so both the worker's and the waiter's idle paths are exercised.
fn stream_round_trip_percentiles() {
    let dev = device();
    let stream = dev.stream().unwrap_or_else(|e| panic!("stream: {e}"));
    let pinned = dev
        .pinned_array::<u8>(&[4096])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut d = dev
        .device_array::<u8>(&[4096], Order::C)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut round_trip = || {
        let t = Instant::now();
        stream
            .copy_from_host(&mut d, &pinned)
            .unwrap_or_else(|e| panic!("{e}"));
        stream.synchronize().unwrap_or_else(|e| panic!("{e}"));
        t.elapsed()
    };
    let gaps = [
        Duration::ZERO,
        Duration::from_micros(10),
        Duration::from_micros(100),
    ];
    let mut figures = Vec::new();
    let mut targets_met = true;
    for gap in gaps {
        for _ in 0..1_000 {
            round_trip();
        }
        let mut samples = Vec::with_capacity(10_000);
        for _ in 0..10_000 {
            if !gap.is_zero() {
                let until = Instant::now() + gap;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            samples.push(round_trip());
        }
        samples.sort();
        let at = |q: f64| {
            samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64()
                * 1e6
        };
        let slow = samples
            .iter()
            .filter(|s| **s > Duration::from_micros(10))
            .count();
        println!(
            "4 KiB pinned copy + synchronize, {} µs between round trips, 10,000 round trips: \
             p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs (target <= 5), p99.9 {:.2} µs, \
             max {:.1} µs, {slow} over 10 µs",
            gap.as_micros(),
            at(0.5),
            at(0.9),
            at(0.99),
            at(0.999),
            at(1.0),
        );
        targets_met &= at(0.99) <= 5.0;
        let gap = gap.as_micros();
        figures.push((format!("gap_{gap}us_p50_seconds"), at(0.5) * 1e-6));
        figures.push((format!("gap_{gap}us_p99_seconds"), at(0.99) * 1e-6));
        figures.push((format!("gap_{gap}us_over_10us"), slow as f64));
    }
    report("transfers_round_trip_4kib", &figures, targets_met);
}

fn main() {
    big_ratios();
    stream_round_trip_percentiles();
    big_copies();
    small_to_device();
    accounting_cost();
    small_stream_round_trip();
}
