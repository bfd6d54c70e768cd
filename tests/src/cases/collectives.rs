//! Collectives (`gpu_mem::collective`): NCCL's calls over gpu-mem arrays and streams, on 2 and 4
//! ranks. On the simulator each case makes a simulator of its own with that many devices; on
//! CUDA (NCCL) the ranks are the GPUs present, up to that many (one GPU: a one-rank
//! communicator, whose calls still go through NCCL).

use crate::{Case, Requires, ensure, fail};
use gpu_mem::collective::{self, CollectiveElement, Communicator, ReduceOp, UniqueId};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{BackendKind, Device, Error, Stream};
use ndarray::{Array1, Array2};
use std::sync::Arc;
use std::time::Duration;

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["collectives", Requires::Collectives;
        all_reduce_on_2, all_reduce_on_4,
        broadcast_on_2, broadcast_on_4,
        all_gather_on_2, all_gather_on_4,
        reduce_and_reduce_scatter_on_2, reduce_and_reduce_scatter_on_4,
        send_and_recv_around_a_ring_on_4,
        one_thread_per_rank_with_a_unique_id,
        wrong_arrays_are_refused_before_anything_is_enqueued,
    ];
    cases.extend(crate::cases!["collectives", Requires::SimulatedCollectives;
        mismatched_calls_are_errors_not_hangs,
        a_rank_that_never_calls_is_reported,
        arrays_outlive_the_calls_that_use_them,
        a_send_nobody_receives_is_reported,
    ]);
    cases
}

/// The ranks of a case: a runtime and `n` devices (on the simulator, a simulator of `n` devices
/// of its own; elsewhere the runtime's devices, at most `n`).
struct World {
    _runtime: Runtime,
    sim: Option<Arc<SimBackend>>,
    devices: Vec<Device>,
}

fn world(rt: &Runtime, n: usize) -> Result<World, String> {
    if rt.kind() == BackendKind::Sim {
        let sim = Arc::new(SimBackend::new(SimConfig::uniform(n, 64 << 20)));
        let runtime = Runtime::with_backend(sim.clone());
        let devices = (0..n)
            .map(|i| runtime.device(i))
            .collect::<gpu_mem::Result<Vec<_>>>()
            .map_err(fail("devices"))?;
        return Ok(World {
            _runtime: runtime,
            sim: Some(sim),
            devices,
        });
    }
    let count = rt.device_count().clamp(1, n);
    let devices = (0..count)
        .map(|i| rt.device(i))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("devices"))?;
    Ok(World {
        _runtime: rt.clone(),
        sim: None,
        devices,
    })
}

/// One communicator over the world's devices, and a stream per rank.
fn ranks(world: &World) -> Result<(Vec<Communicator>, Vec<Stream>), String> {
    collective::engine(&world.devices[0]).map_err(fail("no collectives engine"))?;
    let comms = Communicator::init_all(&world.devices).map_err(fail("init_all"))?;
    let streams = world
        .devices
        .iter()
        .map(Device::stream)
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("streams"))?;
    Ok((comms, streams))
}

fn sync_all(streams: &[Stream]) -> Result<(), String> {
    for s in streams {
        s.synchronize().map_err(fail("synchronize"))?;
    }
    Ok(())
}

/// Rank `r`'s input: `len` values that differ between ranks.
fn input<T: CollectiveElement + From<u8>>(r: usize, len: usize) -> Array1<T> {
    Array1::from_iter((0..len).map(|i| T::from(((r * 10 + i) % 97) as u8)))
}

fn all_reduce_on(rt: &Runtime, n: usize) -> Result<(), String> {
    let world = world(rt, n)?;
    let (comms, streams) = ranks(&world)?;
    let n = comms.len();
    let len = 1000;
    let sends = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<f32>(r, len)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut recvs = world
        .devices
        .iter()
        .map(|d| d.device_array::<f32>(&[len], Order::C))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("device_array"))?;
    // In place too, on an i64 matrix (one contiguous block of two dimensions).
    let mut grids = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            d.to_device(&Array2::from_shape_fn((4, 8), |(i, j)| {
                (r * 100 + i * 8 + j) as i64
            }))
        })
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    // One thread drives every rank: the calls are grouped, as NCCL requires.
    collective::group(|| {
        for r in 0..n {
            comms[r].all_reduce(&streams[r], &sends[r], &mut recvs[r], ReduceOp::Sum)?;
            comms[r].all_reduce_in_place(&streams[r], &mut grids[r], ReduceOp::Max)?;
        }
        Ok(())
    })
    .map_err(fail("all_reduce"))?;
    drop(sends); // the streams keep the sources alive until the calls are done
    sync_all(&streams)?;
    let want: Vec<f32> = (0..len)
        .map(|i| (0..n).map(|r| input::<f32>(r, len)[i]).sum())
        .collect();
    for (r, recv) in recvs.iter().enumerate() {
        let got = recv.copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got.iter().copied().eq(want.iter().copied()),
            "rank {r}: wrong sum"
        );
        let grid = grids[r].copy_to_host().map_err(fail("copy_to_host"))?;
        let top = ((n - 1) * 100) as i64;
        ensure!(
            grid.iter().enumerate().all(|(k, &v)| v == top + k as i64),
            "rank {r}: wrong in-place max {grid:?}"
        );
    }
    Ok(())
}

fn all_reduce_on_2(rt: &Runtime) -> Result<(), String> {
    all_reduce_on(rt, 2)
}

fn all_reduce_on_4(rt: &Runtime) -> Result<(), String> {
    all_reduce_on(rt, 4)
}

fn broadcast_on(rt: &Runtime, n: usize) -> Result<(), String> {
    let world = world(rt, n)?;
    let (comms, streams) = ranks(&world)?;
    let n = comms.len();
    let root = n - 1;
    let len = 333;
    let sends = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<u8>(r, len)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut recvs = world
        .devices
        .iter()
        .map(|d| d.device_array::<u8>(&[len], Order::C))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("device_array"))?;
    let mut bufs = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<f64>(r + 1, 17)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    collective::group(|| {
        for r in 0..n {
            comms[r].broadcast(&streams[r], &sends[r], &mut recvs[r], root)?;
            comms[r].broadcast_in_place(&streams[r], &mut bufs[r], 0)?;
        }
        Ok(())
    })
    .map_err(fail("broadcast"))?;
    sync_all(&streams)?;
    for r in 0..n {
        let got = recvs[r].copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got == input::<u8>(root, len).into_dyn(),
            "rank {r}: not the root's data"
        );
        let got = bufs[r].copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got == input::<f64>(1, 17).into_dyn(),
            "rank {r}: not rank 0's data in place"
        );
    }
    Ok(())
}

fn broadcast_on_2(rt: &Runtime) -> Result<(), String> {
    broadcast_on(rt, 2)
}

fn broadcast_on_4(rt: &Runtime) -> Result<(), String> {
    broadcast_on(rt, 4)
}

fn all_gather_on(rt: &Runtime, n: usize) -> Result<(), String> {
    let world = world(rt, n)?;
    let (comms, streams) = ranks(&world)?;
    let n = comms.len();
    let part = 64;
    let sends = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<i32>(r, part)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut recvs = world
        .devices
        .iter()
        .map(|d| d.device_array::<i32>(&[n * part], Order::C))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("device_array"))?;
    // In place: each rank's part already sits at its place in the whole.
    let mut wholes = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let mut whole = Array1::<u64>::zeros(n * part);
            for i in 0..part {
                whole[r * part + i] = (r * 1000 + i) as u64;
            }
            d.to_device(&whole)
        })
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    collective::group(|| {
        for r in 0..n {
            comms[r].all_gather(&streams[r], &sends[r], &mut recvs[r])?;
            comms[r].all_gather_in_place(&streams[r], &mut wholes[r])?;
        }
        Ok(())
    })
    .map_err(fail("all_gather"))?;
    sync_all(&streams)?;
    let want: Vec<i32> = (0..n)
        .flat_map(|r| input::<i32>(r, part).into_iter())
        .collect();
    let want_whole: Vec<u64> = (0..n)
        .flat_map(|r| (0..part).map(move |i| (r * 1000 + i) as u64))
        .collect();
    for r in 0..n {
        let got = recvs[r].copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got.iter().copied().eq(want.iter().copied()),
            "rank {r}: wrong gather"
        );
        let got = wholes[r].copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got.iter().copied().eq(want_whole.iter().copied()),
            "rank {r}: wrong in-place gather"
        );
    }
    Ok(())
}

fn all_gather_on_2(rt: &Runtime) -> Result<(), String> {
    all_gather_on(rt, 2)
}

fn all_gather_on_4(rt: &Runtime) -> Result<(), String> {
    all_gather_on(rt, 4)
}

fn reduce_and_reduce_scatter_on(rt: &Runtime, n: usize) -> Result<(), String> {
    let world = world(rt, n)?;
    let (comms, streams) = ranks(&world)?;
    let n = comms.len();
    let part = 10;
    let sends = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<i64>(r, n * part)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut reduced = world
        .devices
        .iter()
        .map(|d| d.to_device(&Array1::<i64>::from_elem(n * part, -1)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut scattered = world
        .devices
        .iter()
        .map(|d| d.device_array::<i64>(&[part], Order::C))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("device_array"))?;
    let root = n / 2;
    collective::group(|| {
        for r in 0..n {
            comms[r].reduce(&streams[r], &sends[r], &mut reduced[r], ReduceOp::Sum, root)?;
            comms[r].reduce_scatter(&streams[r], &sends[r], &mut scattered[r], ReduceOp::Sum)?;
        }
        Ok(())
    })
    .map_err(fail("reduce"))?;
    sync_all(&streams)?;
    let sum: Vec<i64> = (0..n * part)
        .map(|i| (0..n).map(|r| input::<i64>(r, n * part)[i]).sum())
        .collect();
    for r in 0..n {
        let got = reduced[r].copy_to_host().map_err(fail("copy_to_host"))?;
        if r == root {
            ensure!(
                got.iter().copied().eq(sum.iter().copied()),
                "root: wrong reduce"
            );
        } else {
            ensure!(
                got.iter().all(|&v| v == -1),
                "rank {r}: a reduce wrote a non-root"
            );
        }
        let got = scattered[r].copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got.iter()
                .copied()
                .eq(sum[r * part..(r + 1) * part].iter().copied()),
            "rank {r}: wrong reduce-scatter part"
        );
    }
    Ok(())
}

fn reduce_and_reduce_scatter_on_2(rt: &Runtime) -> Result<(), String> {
    reduce_and_reduce_scatter_on(rt, 2)
}

fn reduce_and_reduce_scatter_on_4(rt: &Runtime) -> Result<(), String> {
    reduce_and_reduce_scatter_on(rt, 4)
}

/// Each rank sends to the next and receives from the previous, all in one group.
fn send_and_recv_around_a_ring_on_4(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 4)?;
    let (comms, streams) = ranks(&world)?;
    let n = comms.len();
    let len = 100;
    let sends = world
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&input::<u32>(r, len)))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("to_device"))?;
    let mut recvs = world
        .devices
        .iter()
        .map(|d| d.device_array::<u32>(&[len], Order::C))
        .collect::<gpu_mem::Result<Vec<_>>>()
        .map_err(fail("device_array"))?;
    collective::group(|| {
        for r in 0..n {
            comms[r].send(&streams[r], &sends[r], (r + 1) % n)?;
            comms[r].recv(&streams[r], &mut recvs[r], (r + n - 1) % n)?;
        }
        Ok(())
    })
    .map_err(fail("send/recv"))?;
    sync_all(&streams)?;
    for (r, recv) in recvs.iter().enumerate() {
        let got = recv.copy_to_host().map_err(fail("copy_to_host"))?;
        ensure!(
            got == input::<u32>((r + n - 1) % n, len).into_dyn(),
            "rank {r}: not its left neighbour's data"
        );
    }
    Ok(())
}

/// The multi-process form in one process: one thread per rank, each joining with the unique
/// id rank 0 made (`ncclCommInitRank`), each calling on its own stream.
fn one_thread_per_rank_with_a_unique_id(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    let n = world.devices.len();
    let id = UniqueId::generate(&world.devices[0]).map_err(fail("unique id"))?;
    // Sent as text, as between processes.
    let text = id.to_hex();
    let results: Vec<Result<Vec<f64>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = world
            .devices
            .iter()
            .enumerate()
            .map(|(rank, dev)| {
                let text = text.clone();
                scope.spawn(move || -> Result<Vec<f64>, String> {
                    let id = UniqueId::from_hex(&text).ok_or("bad id text")?;
                    let comm =
                        Communicator::init_rank(dev, &id, n, rank).map_err(fail("init_rank"))?;
                    let stream = dev.stream().map_err(fail("stream"))?;
                    let mut a = dev
                        .to_device(&Array1::from_elem(8, rank as f64 + 1.0))
                        .map_err(fail("to_device"))?;
                    comm.all_reduce_in_place(&stream, &mut a, ReduceOp::Avg)
                        .map_err(fail("all_reduce"))?;
                    stream.synchronize().map_err(fail("synchronize"))?;
                    Ok(a.copy_to_host()
                        .map_err(fail("copy_to_host"))?
                        .iter()
                        .copied()
                        .collect())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect()
    });
    let want = (1..=n).map(|r| r as f64).sum::<f64>() / n as f64;
    for (rank, result) in results.into_iter().enumerate() {
        let got = result?;
        ensure!(
            got.iter().all(|&v| v == want),
            "rank {rank}: {got:?}, want {want}"
        );
    }
    Ok(())
}

fn is_collective_error(e: &Error, call: &str) -> bool {
    matches!(e, Error::Collective { call: c, .. } if *c == call)
}

fn wrong_arrays_are_refused_before_anything_is_enqueued(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    let (comms, streams) = ranks(&world)?;
    let (comm, stream, dev) = (&comms[0], &streams[0], &world.devices[0]);
    let n = comm.size();
    let a = dev
        .to_device(&Array2::<f32>::zeros((4, 6)))
        .map_err(fail("to_device"))?;
    let mut b = dev
        .device_array::<f32>(&[24], Order::C)
        .map_err(fail("array"))?;
    // A strided view is not one block.
    let mut column = a.slice(s![.., 1]).map_err(fail("slice"))?;
    let e = comm
        .all_reduce_in_place(stream, &mut column, ReduceOp::Sum)
        .err()
        .ok_or("a strided view was accepted")?;
    ensure!(is_collective_error(&e, "ncclAllReduce"), "{e}");
    ensure!(
        e.to_string().contains("contiguous") && e.to_string().contains("rank 0"),
        "{e}"
    );
    // Sizes: an all-reduce needs equal sizes, an all-gather `ranks` times the part.
    let mut small = dev
        .device_array::<f32>(&[23], Order::C)
        .map_err(fail("array"))?;
    let e = comm
        .all_reduce(stream, &a, &mut small, ReduceOp::Sum)
        .err()
        .ok_or("unequal sizes were accepted")?;
    ensure!(is_collective_error(&e, "ncclAllReduce"), "{e}");
    if n > 1 {
        let e = comm
            .all_gather(stream, &a, &mut b)
            .err()
            .ok_or("an all-gather into a receive buffer too small was accepted")?;
        ensure!(is_collective_error(&e, "ncclAllGather"), "{e}");
    }
    // Roots and peers are ranks.
    let e = comm
        .broadcast_in_place(stream, &mut b, n)
        .err()
        .ok_or("a root past the ranks was accepted")?;
    ensure!(is_collective_error(&e, "ncclBroadcast"), "{e}");
    // Partly overlapping source and destination.
    let whole = dev
        .device_array::<f32>(&[20], Order::C)
        .map_err(fail("array"))?;
    let src = whole.slice(s![0..10]).map_err(fail("slice"))?;
    let mut dst = whole.slice(s![5..15]).map_err(fail("slice"))?;
    let e = comm
        .all_reduce(stream, &src, &mut dst, ReduceOp::Sum)
        .err()
        .ok_or("overlapping buffers were accepted")?;
    ensure!(e.to_string().contains("overlap"), "{e}");
    // An array or stream of another device.
    if world.devices.len() > 1 {
        let other = world.devices[1]
            .device_array::<f32>(&[24], Order::C)
            .map_err(fail("array"))?;
        let e = comm
            .all_reduce(stream, &other, &mut b, ReduceOp::Sum)
            .err()
            .ok_or("another device's array was accepted")?;
        ensure!(e.to_string().contains("device 1"), "{e}");
        let e = comm
            .all_reduce_in_place(&streams[1], &mut b, ReduceOp::Sum)
            .err()
            .ok_or("another device's stream was accepted")?;
        ensure!(e.to_string().contains("stream"), "{e}");
    }
    // Nothing was enqueued: the streams are idle and fine.
    sync_all(&streams)?;
    Ok(())
}

/// Sizes and calls that differ between ranks fail every rank's call, naming each rank's.
fn mismatched_calls_are_errors_not_hangs(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    if let Some(sim) = &world.sim {
        sim.set_collective_timeout(Duration::from_secs(20));
    }
    let (comms, streams) = ranks(&world)?;
    comms[0].check().map_err(fail("a fresh communicator"))?;
    let mut a0 = world.devices[0]
        .device_array::<f32>(&[8], Order::C)
        .map_err(fail("a"))?;
    let mut a1 = world.devices[1]
        .device_array::<f32>(&[16], Order::C)
        .map_err(fail("a"))?;
    comms[0]
        .all_reduce_in_place(&streams[0], &mut a0, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    comms[1]
        .all_reduce_in_place(&streams[1], &mut a1, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    for (r, s) in streams.iter().enumerate() {
        let e = s.synchronize().err().ok_or("mismatched sizes completed")?;
        let text = e.to_string();
        ensure!(
            text.contains("do not match")
                && text.contains("of 8 f32")
                && text.contains("of 16 f32"),
            "rank {r}: {text}"
        );
    }
    // Another call on each rank: a broadcast against an all-reduce.
    comms[0]
        .broadcast_in_place(&streams[0], &mut a0, 0)
        .map_err(fail("enqueue"))?;
    comms[1]
        .all_reduce_in_place(&streams[1], &mut a1, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    for s in &streams {
        let e = s.synchronize().err().ok_or("different calls completed")?;
        ensure!(
            e.to_string().contains("ncclBroadcast") && e.to_string().contains("ncclAllReduce"),
            "{e}"
        );
    }
    // The same call and count with different element types (8 f32 against 8 i32).
    let mut b1 = world.devices[1]
        .device_array::<i32>(&[8], Order::C)
        .map_err(fail("b"))?;
    comms[0]
        .all_reduce_in_place(&streams[0], &mut a0, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    comms[1]
        .all_reduce_in_place(&streams[1], &mut b1, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    for s in &streams {
        let e = s.synchronize().err().ok_or("different types completed")?;
        ensure!(
            e.to_string().contains("of 8 f32") && e.to_string().contains("of 8 i32"),
            "{e}"
        );
    }
    // The communicator is still usable: a matching call completes.
    comms[0]
        .all_reduce_in_place(&streams[0], &mut a0, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    let mut c1 = world.devices[1]
        .device_array::<f32>(&[8], Order::C)
        .map_err(fail("c"))?;
    comms[1]
        .all_reduce_in_place(&streams[1], &mut c1, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    sync_all(&streams)?;
    Ok(())
}

/// A rank that never calls is reported after the timeout, naming it, instead of a hang.
fn a_rank_that_never_calls_is_reported(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    let sim = world.sim.as_ref().ok_or("a simulator case")?;
    sim.set_collective_timeout(Duration::from_millis(200));
    let (comms, streams) = ranks(&world)?;
    let mut a = world.devices[0]
        .device_array::<i32>(&[4], Order::C)
        .map_err(fail("a"))?;
    comms[0]
        .all_reduce_in_place(&streams[0], &mut a, ReduceOp::Sum)
        .map_err(fail("enqueue"))?;
    let started = std::time::Instant::now();
    let e = streams[0]
        .synchronize()
        .err()
        .ok_or("a call without its peer completed")?;
    let text = e.to_string();
    ensure!(
        text.contains("rank(s) 1 never made call") && text.contains("rank 0 of 2"),
        "{text}"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    // The communicator is unusable afterwards, as NCCL's is after an error.
    comms[1]
        .all_reduce_in_place(
            &streams[1],
            &mut world.devices[1]
                .device_array::<i32>(&[4], Order::C)
                .map_err(fail("b"))?,
            ReduceOp::Sum,
        )
        .map_err(fail("enqueue"))?;
    let e = streams[1]
        .synchronize()
        .err()
        .ok_or("a broken communicator worked")?;
    ensure!(e.to_string().contains("unusable"), "{e}");
    Ok(())
}

/// Arrays dropped right after a call stay allocated until a synchronization has shown the call
/// complete, as for copies: the streams keep them.
fn arrays_outlive_the_calls_that_use_them(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    let sim = world.sim.as_ref().ok_or("a simulator case")?;
    let (comms, streams) = ranks(&world)?;
    let live = |d: usize| sim.live_allocations(d).map_err(fail("live_allocations"));
    let before = [live(0)?, live(1)?];
    {
        let sends = world
            .devices
            .iter()
            .map(|d| d.to_device(&Array1::from_elem(1 << 16, 1.5f64)))
            .collect::<gpu_mem::Result<Vec<_>>>()
            .map_err(fail("to_device"))?;
        let mut recvs = world
            .devices
            .iter()
            .map(|d| d.device_array::<f64>(&[1 << 16], Order::C))
            .collect::<gpu_mem::Result<Vec<_>>>()
            .map_err(fail("device_array"))?;
        collective::group(|| {
            for r in 0..2 {
                comms[r].all_reduce(&streams[r], &sends[r], &mut recvs[r], ReduceOp::Sum)?;
            }
            Ok(())
        })
        .map_err(fail("all_reduce"))?;
    } // every array dropped here, the calls perhaps still running
    for (d, &was) in before.iter().enumerate() {
        ensure!(
            live(d)? == was + 2,
            "device {d}: the arrays of an unfinished call were freed"
        );
    }
    sync_all(&streams)?;
    for (d, &was) in before.iter().enumerate() {
        ensure!(
            live(d)? == was,
            "device {d}: memory kept after the calls completed"
        );
    }
    Ok(())
}

/// Outside a group a send completes once its receive took it: a matched pair completes, and a
/// send whose receiver never calls is reported after the timeout, naming both ranks.
fn a_send_nobody_receives_is_reported(rt: &Runtime) -> Result<(), String> {
    let world = world(rt, 2)?;
    let sim = world.sim.as_ref().ok_or("a simulator case")?;
    sim.set_collective_timeout(Duration::from_millis(300));
    let (comms, streams) = ranks(&world)?;
    let data = world.devices[0]
        .to_device(&Array1::from_iter(0..64u64))
        .map_err(fail("to_device"))?;
    let mut into = world.devices[1]
        .device_array::<u64>(&[64], Order::C)
        .map_err(fail("device_array"))?;
    comms[0].send(&streams[0], &data, 1).map_err(fail("send"))?;
    comms[1]
        .recv(&streams[1], &mut into, 0)
        .map_err(fail("recv"))?;
    sync_all(&streams)?;
    let got = into.copy_to_host().map_err(fail("copy_to_host"))?;
    ensure!(got.iter().copied().eq(0..64u64), "wrong bytes received");
    comms[0].send(&streams[0], &data, 1).map_err(fail("send"))?;
    let e = streams[0]
        .synchronize()
        .err()
        .ok_or("a send nobody received completed")?;
    ensure!(
        e.to_string().contains("rank 1 never received from rank 0"),
        "{e}"
    );
    Ok(())
}
