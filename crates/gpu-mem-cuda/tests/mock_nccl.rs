//! Collectives on the CUDA backend against stand-ins of `libcuda` (tests/mock/libcuda_mock.c)
//! and of `libnccl` (tests/mock/libnccl_mock.c), both built here with `cc`: what reaches NCCL
//! from `gpu_mem_core::collective` — the devices given to `ncclCommInitAll`, the device
//! addresses, counts, types, reductions, roots and the gpu-mem stream of each call, groups
//! opened once and closed, communicators destroyed — and how NCCL's errors come back.
//!
//! The stand-ins move no data: these tests prove the backend's side of NCCL's call protocol,
//! never anything about NCCL or hardware. Without a C compiler the trials are ignored.

#[path = "support/mock.rs"]
mod mock;

use gpu_mem_core::collective::{self, Communicator, ReduceOp, UniqueId};
use gpu_mem_core::layout::Order;
use gpu_mem_core::{Device, Error};
use gpu_mem_cuda::nccl::Nccl;
use libtest_mimic::{Arguments, Failed, Trial};
use mock::{Mock, build, ensure};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const NCCL_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mock/libnccl_mock.c");

fn build_nccl(dir: &Path, name: &str, defines: &[&str]) -> Result<PathBuf, String> {
    let out = dir.join(format!("libnccl_mock_{name}.so"));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .args(defines)
        .arg(NCCL_SOURCE)
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if status.success() {
        Ok(out)
    } else {
        Err(format!("cc exited with {status}"))
    }
}

/// The stand-ins built for one run.
#[derive(Clone, Default)]
struct Built {
    cuda: PathBuf,
    nccl: PathBuf,
    nccl_old: PathBuf,
    nccl_no_send: PathBuf,
}

type TestFn = fn(&Built, &str) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let dir = std::env::temp_dir().join(format!("gpu-mem-cuda-mock-nccl-{}", std::process::id()));
    let built = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            Ok(Built {
                cuda: build(&dir, "nccl", &[])?,
                nccl: build_nccl(&dir, "current", &[])?,
                nccl_old: build_nccl(&dir, "old", &["-DMOCK_NCCL_VERSION=2604"])?,
                nccl_no_send: build_nccl(&dir, "no_send", &["-DMOCK_NO_SEND"])?,
            })
        });
    let reason = built
        .as_ref()
        .err()
        .map(|e| format!("cannot build the stand-in libraries: {e}"));
    let built = built.unwrap_or_default();
    let tests: &[(&str, TestFn)] = &[
        ("calls_reach_nccl_with_arrays_and_streams", calls_reach_nccl),
        ("grouped_calls_open_one_group", grouped_calls),
        ("nccl_errors_name_the_call_rank_and_text", nccl_errors),
        ("init_rank_passes_the_unique_id", init_rank),
        ("old_or_incomplete_libraries_are_refused", refused_libraries),
    ];
    let trials = tests
        .iter()
        .map(|&(name, test)| {
            let built = built.clone();
            let trial = Trial::test(name, move || test(&built, name));
            match &reason {
                Some(reason) => {
                    println!("ignoring {name}: {reason}");
                    trial.with_ignored_flag(true)
                }
                None => trial,
            }
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let _ = std::fs::remove_dir_all(&dir);
    conclusion.exit();
}

/// A private copy of the NCCL stand-in (its own state) and the loaded library to query it.
struct NcclMock {
    library: libloading::Library,
    nccl: Arc<Nccl>,
}

impl NcclMock {
    fn copy_of(built: &Path, test: &str) -> Result<NcclMock, Failed> {
        let path = built.with_file_name(format!("libnccl_{test}.so"));
        std::fs::copy(built, &path)?;
        // SAFETY: the stand-in's initialisers are trivial (static data only).
        let library = unsafe { libloading::Library::new(&path) }?;
        let nccl = Arc::new(Nccl::load_from(&path)?);
        Ok(NcclMock { library, nccl })
    }

    fn int(&self, name: &str) -> Result<i32, Failed> {
        // SAFETY: the mock_* counters take no arguments and return an int.
        let f = unsafe { self.library.get::<unsafe extern "C" fn() -> i32>(name) }?;
        // SAFETY: as above.
        Ok(unsafe { f() })
    }

    fn at(&self, name: &str, i: i32) -> Result<u64, Failed> {
        // SAFETY: mock_last and mock_last_dev take an int and return an unsigned long long.
        let f = unsafe { self.library.get::<unsafe extern "C" fn(i32) -> u64>(name) }?;
        // SAFETY: as above.
        Ok(unsafe { f(i) })
    }
}

/// Two devices of a CUDA backend over the driver stand-in, with NCCL the given stand-in.
fn devices(built: &Built, test: &str) -> Result<(Mock, NcclMock, Vec<Device>), Failed> {
    let cuda = Mock::copy_of(&built.cuda, test)?;
    let nccl = NcclMock::copy_of(&built.nccl, test)?;
    let backend = cuda.backend()?;
    backend.use_nccl(Arc::clone(&nccl.nccl));
    let backend: Arc<dyn gpu_mem_core::Backend> = Arc::new(backend);
    let devices = vec![
        Device::new(Arc::clone(&backend), 0)?,
        Device::new(backend, 1)?,
    ];
    Ok((cuda, nccl, devices))
}

fn calls_reach_nccl(built: &Built, test: &str) -> Result<(), Failed> {
    let (_cuda, nccl, devs) = devices(built, test)?;
    let engine = collective::engine(&devs[0])?;
    ensure(engine.starts_with("NCCL 2.32.3"), || engine.clone())?;
    let comms = Communicator::init_all(&devs)?;
    ensure(nccl.int("mock_last_ndev")? == 2, || "ndev".into())?;
    ensure(
        nccl.at("mock_last_dev", 0)? == 0 && nccl.at("mock_last_dev", 1)? == 1,
        || "devlist".into(),
    )?;
    let stream = devs[1].stream()?;
    let send = devs[1].device_array::<f32>(&[4, 25], Order::C)?;
    let mut recv = devs[1].device_array::<f32>(&[100], Order::C)?;
    comms[1].all_reduce(&stream, &send, &mut recv, ReduceOp::Max)?;
    let want = [
        1,
        send.device_ptr().0,
        recv.device_ptr().0,
        100,
        7, // ncclFloat32
        2, // ncclMax
    ];
    for (i, w) in want.iter().enumerate() {
        let got = nccl.at("mock_last", i as i32)?;
        ensure(got == *w, || {
            format!("all-reduce argument {i}: {got:#x}, want {w:#x}")
        })?;
    }
    ensure(nccl.at("mock_last", 8)? == stream.handle().0, || {
        "the call was not given the gpu-mem stream".into()
    })?;
    // The in-place gathering forms pass this rank's part of the buffer.
    let mut whole = devs[1].device_array::<i64>(&[10], Order::C)?;
    comms[1].all_gather_in_place(&stream, &mut whole)?;
    ensure(
        nccl.at("mock_last", 1)? == whole.device_ptr().0 + 5 * 8
            && nccl.at("mock_last", 2)? == whole.device_ptr().0
            && nccl.at("mock_last", 3)? == 5
            && nccl.at("mock_last", 4)? == 4, // ncclInt64
        || "in-place all-gather arguments".into(),
    )?;
    comms[1].send(&stream, &send, 0)?;
    ensure(
        nccl.at("mock_last", 0)? == 6 && nccl.at("mock_last", 6)? == 0,
        || "send peer".into(),
    )?;
    comms[1].broadcast_in_place(&stream, &mut recv, 1)?;
    ensure(
        nccl.at("mock_last", 0)? == 3 && nccl.at("mock_last", 6)? == 1,
        || "broadcast root".into(),
    )?;
    stream.synchronize()?;
    comms[0].check()?;
    drop(comms);
    ensure(nccl.int("mock_destroys")? == 2, || {
        "dropping the communicators did not destroy both".into()
    })
}

fn grouped_calls(built: &Built, test: &str) -> Result<(), Failed> {
    let (_cuda, nccl, devs) = devices(built, test)?;
    let comms = Communicator::init_all(&devs)?;
    let streams = [devs[0].stream()?, devs[1].stream()?];
    let mut bufs = [
        devs[0].device_array::<u8>(&[64], Order::C)?,
        devs[1].device_array::<u8>(&[64], Order::C)?,
    ];
    collective::group(|| {
        for (r, buf) in bufs.iter_mut().enumerate() {
            comms[r].all_reduce_in_place(&streams[r], buf, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    ensure(nccl.int("mock_group_starts")? == 1, || {
        "one group per backend expected".into()
    })?;
    ensure(nccl.int("mock_group_ends")? == 1, || {
        "the group was not ended".into()
    })?;
    ensure(nccl.at("mock_last", 9)? == 1, || {
        "the calls were not made inside the group".into()
    })?;
    ensure(nccl.int("mock_calls")? == 2, || "two calls expected".into())?;
    // A failing call inside a group still ends it.
    let mut odd = devs[0].device_array::<u8>(&[13], Order::C)?;
    let result =
        collective::group(|| comms[0].all_reduce_in_place(&streams[0], &mut odd, ReduceOp::Sum));
    ensure(result.is_err(), || "the refused call succeeded".into())?;
    ensure(nccl.int("mock_group_ends")? == 2, || {
        "a group whose call failed was left open".into()
    })?;
    for s in &streams {
        s.synchronize()?;
    }
    Ok(())
}

fn nccl_errors(built: &Built, test: &str) -> Result<(), Failed> {
    let (_cuda, _nccl, devs) = devices(built, test)?;
    let comms = Communicator::init_all(&devs)?;
    let stream = devs[0].stream()?;
    let mut odd = devs[0].device_array::<i32>(&[13], Order::C)?;
    let err = comms[0]
        .all_reduce_in_place(&stream, &mut odd, ReduceOp::Sum)
        .err()
        .ok_or("NCCL's refusal was lost")?;
    let text = err.to_string();
    ensure(
        matches!(
            err,
            Error::Collective {
                call: "ncclAllReduce",
                rank: 0,
                nranks: 2,
                ..
            }
        ) && text.contains("invalid argument")
            && text.contains("mock: 13 elements are refused"),
        || text.clone(),
    )
}

fn init_rank(built: &Built, test: &str) -> Result<(), Failed> {
    let (_cuda, nccl, devs) = devices(built, test)?;
    let id = UniqueId::generate(&devs[0])?;
    let id = UniqueId::from_hex(&id.to_hex()).ok_or("hex round trip")?;
    let comm = Communicator::init_rank(&devs[1], &id, 4, 3)?;
    ensure(comm.rank() == 3 && comm.size() == 4, || {
        "rank and size".into()
    })?;
    ensure(
        nccl.int("mock_last_nranks")? == 4 && nccl.int("mock_last_rank")? == 3,
        || "nranks and rank".into(),
    )?;
    let err = Communicator::init_rank(&devs[0], &UniqueId([7; 128]), 2, 0)
        .err()
        .ok_or("a foreign id was accepted")?;
    ensure(
        err.to_string().contains("not made by ncclGetUniqueId"),
        || err.to_string(),
    )
}

fn refused_libraries(built: &Built, test: &str) -> Result<(), Failed> {
    let old = built
        .nccl_old
        .with_file_name(format!("libnccl_{test}_old.so"));
    std::fs::copy(&built.nccl_old, &old)?;
    let err = Nccl::load_from(&old).err().ok_or("NCCL 2.6 was accepted")?;
    ensure(
        matches!(err, Error::LibraryLoad { .. }) && err.to_string().contains("2.6.4 is too old"),
        || err.to_string(),
    )?;
    let partial = built
        .nccl_no_send
        .with_file_name(format!("libnccl_{test}_partial.so"));
    std::fs::copy(&built.nccl_no_send, &partial)?;
    let err = Nccl::load_from(&partial)
        .err()
        .ok_or("a library without ncclSend was accepted")?;
    ensure(err.to_string().contains("ncclSend"), || err.to_string())
}
