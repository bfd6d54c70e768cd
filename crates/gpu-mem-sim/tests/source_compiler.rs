//! The host compiler behind portable-source kernels: a missing one is a clear error, and a
//! kernel launched again in the same process touches neither the compiler nor the disk.
//!
//! Each check runs in a child process (this test binary, re-run with one test selected), so
//! that it can set `GPU_MEM_SIM_CXX` and `GPU_MEM_CACHE_DIR` without racing other tests.
#![cfg(not(miri))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_core::{Backend, Error, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::process::Command;

const CHILD: &str = "GPU_MEM_SIM_TEST_CHILD";
const SOURCE: &str = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void nothing() {}\n";

/// Runs test `name` of this binary in a child with `env`; returns its output.
fn in_child(name: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "child {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {name} ran no test:\n{text}"
    );
    text
}

fn launch(backend: &SimBackend, kernel: &Kernel) -> gpu_mem_core::Result<()> {
    let args: [LaunchArg; 0] = [];
    // SAFETY: the kernel touches no memory.
    unsafe { backend.launch(0, kernel, &LaunchConfig::new(1, 1), &args, None) }
}

#[test]
fn a_missing_compiler_is_a_clear_error() {
    if std::env::var_os(CHILD).is_none() {
        let cache = tempdir("missing");
        in_child(
            "a_missing_compiler_is_a_clear_error",
            &[
                ("GPU_MEM_SIM_CXX", "/nonexistent/bin/c++"),
                ("GPU_MEM_CACHE_DIR", cache.to_str().unwrap()),
            ],
        );
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let result = launch(&backend, &Kernel::from_source(SOURCE, "nothing"));
    match result {
        Err(Error::CompilerUnavailable {
            variable, tried, ..
        }) => {
            assert_eq!(variable, "GPU_MEM_SIM_CXX");
            assert_eq!(tried, vec!["/nonexistent/bin/c++".to_string()]);
        }
        other => panic!("expected CompilerUnavailable, got {other:?}"),
    }
    let message = launch(&backend, &Kernel::from_source(SOURCE, "nothing"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("GPU_MEM_SIM_CXX") && message.contains("/nonexistent/bin/c++"),
        "{message}"
    );
    // A program with arguments is not one program: the message says what to do instead.
    // SAFETY: this child process runs a single test on one thread.
    unsafe { std::env::set_var("GPU_MEM_SIM_CXX", "ccache g++") };
    let message = launch(&backend, &Kernel::from_source(SOURCE, "nothing"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("without arguments"), "{message}");
}

#[test]
fn a_second_launch_needs_neither_compiler_nor_disk() {
    if std::env::var_os(CHILD).is_none() {
        let cache = tempdir("second");
        in_child(
            "a_second_launch_needs_neither_compiler_nor_disk",
            &[("GPU_MEM_CACHE_DIR", cache.to_str().unwrap())],
        );
        assert!(!cache.exists(), "the child removed its cache");
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let kernel = Kernel::from_source(SOURCE, "nothing");
    launch(&backend, &kernel).unwrap();
    let cache = std::path::PathBuf::from(std::env::var_os("GPU_MEM_CACHE_DIR").unwrap());
    let built: Vec<_> = std::fs::read_dir(cache.join("sim-kernels"))
        .unwrap()
        .filter_map(|e| e.ok())
        .collect();
    assert_eq!(built.len(), 1, "one library in the cache: {built:?}");
    std::fs::remove_dir_all(&cache).unwrap();
    // SAFETY: this child process runs a single test on one thread.
    unsafe { std::env::set_var("GPU_MEM_SIM_CXX", "/nonexistent/bin/c++") };
    launch(&backend, &kernel).unwrap();
    assert!(!cache.exists(), "nothing was written again");
}

/// No one else can put a library into the cache (it would be loaded into this process; the
/// temporary directory's fallback, when no home is known, is shared by every user): a cache
/// directory of this user that others may write to loses those permissions, and one of
/// another user is refused (checked where the tests run as root, which can give it away).
#[test]
#[cfg(unix)]
fn no_one_else_can_put_kernels_into_the_cache() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if std::env::var_os(CHILD).is_none() {
        let cache = tempdir("shared");
        let kernels = cache.join("sim-kernels");
        std::fs::create_dir_all(&kernels).unwrap();
        std::fs::set_permissions(&kernels, std::fs::Permissions::from_mode(0o777)).unwrap();
        in_child(
            "no_one_else_can_put_kernels_into_the_cache",
            &[("GPU_MEM_CACHE_DIR", cache.to_str().unwrap())],
        );
        let mode = std::fs::metadata(&kernels).unwrap().mode() & 0o777;
        std::fs::remove_dir_all(&cache).unwrap();
        assert_eq!(mode, 0o755, "group and others may no longer write");
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    launch(&backend, &Kernel::from_source(SOURCE, "nothing")).unwrap();
    let kernels = std::path::PathBuf::from(std::env::var_os("GPU_MEM_CACHE_DIR").unwrap())
        .join("sim-kernels");
    // SAFETY: `geteuid` only reads the process's credentials.
    if unsafe { libc::geteuid() } != 0 {
        println!("not run as root: a directory of another user is not tried");
        return;
    }
    // Given away to `nobody`: refused, even for a kernel not built yet.
    let path = std::ffi::CString::new(kernels.to_str().unwrap()).unwrap();
    // SAFETY: `path` is a NUL-terminated path; chown changes only that directory's owner.
    let given = unsafe { libc::chown(path.as_ptr(), 65534, 65534) };
    assert_eq!(given, 0);
    let other = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void other() {}\n";
    let message = launch(&backend, &Kernel::from_source(other, "other"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("belongs to user 65534") && message.contains("GPU_MEM_CACHE_DIR"),
        "{message}"
    );
}

/// A compiler that hangs is stopped after `GPU_MEM_SIM_CXX_TIMEOUT` seconds, with the passes it
/// started (they hold its output pipes), and kernels built already launch meanwhile (the build
/// used to hold the lock every launch looks its program up under).
#[test]
#[cfg(unix)]
fn a_hanging_compiler_is_stopped_and_blocks_no_other_launch() {
    use std::os::unix::fs::PermissionsExt;
    if std::env::var_os(CHILD).is_none() {
        let cache = tempdir("hanging");
        std::fs::create_dir_all(&cache).unwrap();
        let marker = cache.join("hang");
        let script = cache.join("cxx.sh");
        // Passes through to the real compiler until the marker exists; then starts a pass that
        // hangs holding the output pipes, and waits for it.
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nif [ \"$1\" != --version ] && [ -e '{}' ]; then sleep 120 & wait; exit 1; fi\nexec c++ \"$@\"\n",
                marker.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        in_child(
            "a_hanging_compiler_is_stopped_and_blocks_no_other_launch",
            &[
                ("GPU_MEM_CACHE_DIR", cache.to_str().unwrap()),
                ("GPU_MEM_SIM_CXX", script.to_str().unwrap()),
                ("GPU_MEM_SIM_CXX_TIMEOUT", "3"),
            ],
        );
        std::fs::remove_dir_all(&cache).unwrap();
        return;
    }
    let cache = std::path::PathBuf::from(std::env::var_os("GPU_MEM_CACHE_DIR").unwrap());
    let backend = SimBackend::new(SimConfig::default());
    let built = Kernel::from_source(SOURCE, "nothing");
    launch(&backend, &built).unwrap();
    std::fs::write(cache.join("hang"), b"").unwrap();
    let hanging = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void hangs() {}\n";
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let compiling = scope.spawn(|| launch(&backend, &Kernel::from_source(hanging, "hangs")));
        // While it compiles, the kernel built already launches at once.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let launched = std::time::Instant::now();
        launch(&backend, &built).unwrap();
        assert!(
            launched.elapsed() < std::time::Duration::from_secs(2),
            "a built kernel waited {:?} for another kernel's compile",
            launched.elapsed()
        );
        let message = compiling.join().unwrap().unwrap_err().to_string();
        assert!(
            message.contains("did not finish within 3 s")
                && message.contains("GPU_MEM_SIM_CXX_TIMEOUT"),
            "{message}"
        );
    });
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the stopped compile took {:?}",
        started.elapsed()
    );
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("gpu-mem-sim-compiler-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
