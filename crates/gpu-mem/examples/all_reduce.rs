//! An all-reduce, a broadcast and an all-gather over every device, checked on the host. The same
//! code runs on simulated devices in one process and with NCCL on GPUs.
//!
//! ```text
//! GPU_MEM_SIM_DEVICES=4 cargo run -p gpu-mem --features nccl --example all_reduce
//!     one process drives every device (ncclCommInitAll; the calls grouped)
//! ... --example all_reduce -- --threads [--tcp 127.0.0.1:PORT | --file PATH]
//!     one thread per device, each joining with the unique id rank 0 makes and sends the
//!     others through a TCP socket on localhost or a file (ncclCommInitRank)
//! ... --example all_reduce -- --rank R --ranks N [--tcp ADDR | --file PATH]
//!     one process per rank (GPUs only: simulated devices belong to one process), on device
//!     R modulo the devices present
//! ```
//!
//! Without an engine (a backend without collectives, NCCL missing) it says why and exits with 0.

use gpu_mem::collective::{self, Communicator, ReduceOp, UNIQUE_ID_BYTES, UniqueId};
use gpu_mem::prelude::*;
use gpu_mem::{Device, Error, Stream};
use ndarray::Array1;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const LEN: usize = 1 << 16;

/// How rank 0's unique id reaches the other ranks.
#[derive(Clone)]
enum Exchange {
    Tcp(String),
    File(PathBuf),
}

fn main() -> gpu_mem::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let exchange = match (value("--tcp"), value("--file")) {
        (Some(addr), _) => Exchange::Tcp(addr),
        (None, Some(path)) => Exchange::File(PathBuf::from(path)),
        (None, None) => Exchange::Tcp("127.0.0.1:29517".into()),
    };
    let runtime = Runtime::from_env()?;
    let first = runtime.device(0)?;
    match collective::engine(&first) {
        Ok(engine) => println!("backend {}, engine: {engine}", runtime.kind()),
        Err(why) => {
            println!("no collectives here: {why}");
            return Ok(());
        }
    }
    let count = runtime.device_count();
    if let (Some(rank), Some(ranks)) = (value("--rank"), value("--ranks")) {
        let (rank, ranks) = (parse(&rank)?, parse(&ranks)?);
        let device = runtime.device(rank % count)?;
        let id = share_id(&device, rank, ranks, &exchange)?;
        return one_rank(&device, &id, ranks, rank);
    }
    let devices = (0..count)
        .map(|i| runtime.device(i))
        .collect::<gpu_mem::Result<Vec<_>>>()?;
    if args.iter().any(|a| a == "--threads") {
        std::thread::scope(|scope| {
            let handles: Vec<_> = devices
                .iter()
                .enumerate()
                .map(|(rank, device)| {
                    let exchange = exchange.clone();
                    scope.spawn(move || {
                        let id = share_id(device, rank, count, &exchange)?;
                        one_rank(device, &id, count, rank)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(failed("a rank panicked"))))
                .collect::<gpu_mem::Result<Vec<()>>>()
        })?;
    } else {
        every_rank_in_one_thread(&devices)?;
    }
    println!("{count} rank(s): all-reduce, broadcast and all-gather checked");
    Ok(())
}

/// One thread drives every rank: the calls are grouped, as NCCL requires.
fn every_rank_in_one_thread(devices: &[Device]) -> gpu_mem::Result<()> {
    let comms = Communicator::init_all(devices)?;
    let n = comms.len();
    let streams = devices
        .iter()
        .map(Device::stream)
        .collect::<gpu_mem::Result<Vec<_>>>()?;
    let mut grads = Vec::new();
    let mut weights = Vec::new();
    let mut gathered = Vec::new();
    for (r, d) in devices.iter().enumerate() {
        grads.push(d.to_device(&gradient(r))?);
        weights.push(d.to_device(&Array1::from_elem(LEN, r as f64))?);
        gathered.push(d.device_array::<i32>(&[n * 4], Order::C)?);
    }
    let parts = devices
        .iter()
        .enumerate()
        .map(|(r, d)| d.to_device(&Array1::from_elem(4, r as i32)))
        .collect::<gpu_mem::Result<Vec<_>>>()?;
    collective::group(|| {
        for r in 0..n {
            comms[r].all_reduce_in_place(&streams[r], &mut grads[r], ReduceOp::Sum)?;
            comms[r].broadcast_in_place(&streams[r], &mut weights[r], 0)?;
            comms[r].all_gather(&streams[r], &parts[r], &mut gathered[r])?;
        }
        Ok(())
    })?;
    for (r, s) in streams.iter().enumerate() {
        s.synchronize()?;
        check(r, n, &grads[r], &weights[r], &gathered[r])?;
    }
    Ok(())
}

/// One rank, as a process (or thread) of its own would run it.
fn one_rank(device: &Device, id: &UniqueId, n: usize, rank: usize) -> gpu_mem::Result<()> {
    let comm = Communicator::init_rank(device, id, n, rank)?;
    let stream: Stream = device.stream()?;
    let mut grad = device.to_device(&gradient(rank))?;
    let mut weights = device.to_device(&Array1::from_elem(LEN, rank as f64))?;
    let part = device.to_device(&Array1::from_elem(4, rank as i32))?;
    let mut gathered = device.device_array::<i32>(&[n * 4], Order::C)?;
    comm.all_reduce_in_place(&stream, &mut grad, ReduceOp::Sum)?;
    comm.broadcast_in_place(&stream, &mut weights, 0)?;
    comm.all_gather(&stream, &part, &mut gathered)?;
    stream.synchronize()?;
    check(rank, n, &grad, &weights, &gathered)?;
    println!("rank {rank} of {n} on device {}: checked", device.ordinal());
    Ok(())
}

fn gradient(rank: usize) -> Array1<f32> {
    Array1::from_shape_fn(LEN, |i| (rank + 1) as f32 * (i % 7) as f32)
}

fn check(
    rank: usize,
    n: usize,
    grad: &gpu_mem::DeviceArray<f32>,
    weights: &gpu_mem::DeviceArray<f64>,
    gathered: &gpu_mem::DeviceArray<i32>,
) -> gpu_mem::Result<()> {
    let scale = (n * (n + 1) / 2) as f32;
    let grad = grad.copy_to_host()?;
    let sum_ok = grad
        .iter()
        .enumerate()
        .all(|(i, &v)| v == scale * (i % 7) as f32);
    let weights_ok = weights.copy_to_host()?.iter().all(|&w| w == 0.0);
    let gathered = gathered.copy_to_host()?;
    let gather_ok = gathered
        .iter()
        .enumerate()
        .all(|(i, &v)| v == (i / 4) as i32);
    if sum_ok && weights_ok && gather_ok {
        Ok(())
    } else {
        Err(failed(&format!(
            "rank {rank}: all-reduce {sum_ok}, broadcast {weights_ok}, all-gather {gather_ok}"
        )))
    }
}

/// Rank 0 makes the unique id and hands it to the others; they wait for it.
fn share_id(
    device: &Device,
    rank: usize,
    ranks: usize,
    exchange: &Exchange,
) -> gpu_mem::Result<UniqueId> {
    let io = |e: std::io::Error| failed(&format!("exchanging the unique id: {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    match (exchange, rank) {
        (Exchange::Tcp(addr), 0) => {
            let id = UniqueId::generate(device)?;
            let listener = TcpListener::bind(addr).map_err(io)?;
            // Served from a thread of its own, so rank 0 goes on to join meanwhile.
            std::thread::spawn(move || {
                for _ in 1..ranks {
                    if let Ok((mut peer, _)) = listener.accept() {
                        let _ = peer.write_all(&id.to_bytes());
                    }
                }
            });
            Ok(id)
        }
        (Exchange::Tcp(addr), _) => loop {
            match TcpStream::connect(addr) {
                Ok(mut peer) => {
                    let mut bytes = [0u8; UNIQUE_ID_BYTES];
                    peer.read_exact(&mut bytes).map_err(io)?;
                    return Ok(UniqueId(bytes));
                }
                Err(e) if Instant::now() > deadline => return Err(io(e)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        },
        (Exchange::File(path), 0) => {
            let id = UniqueId::generate(device)?;
            // Written whole, then renamed: a reader never sees half an id.
            let partial = path.with_extension("partial");
            std::fs::write(&partial, id.to_hex()).map_err(io)?;
            std::fs::rename(&partial, path).map_err(io)?;
            Ok(id)
        }
        (Exchange::File(path), _) => loop {
            if let Some(id) = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| UniqueId::from_hex(&text))
            {
                return Ok(id);
            }
            if Instant::now() > deadline {
                return Err(failed(&format!(
                    "no unique id appeared in {}",
                    path.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        },
    }
}

fn parse(text: &str) -> gpu_mem::Result<usize> {
    text.parse()
        .map_err(|_| failed(&format!("`{text}` is not a number")))
}

fn failed(reason: &str) -> Error {
    Error::InvalidArgument {
        name: "all_reduce example",
        reason: reason.to_string(),
    }
}
