//! The host compiler behind source kernels and the cache of what it built: a missing compiler
//! is a clear error, a kernel launched again in the same process touches neither the compiler
//! nor the disk, no library another user could have written is ever loaded, a damaged one is
//! rebuilt, and a compiler is bounded in time whatever it does.
//!
//! Each check runs in a child process (this test binary, re-run with one test selected), so
//! that it can set `GPU_MEM_SIM_CXX` and `GPU_MEM_CACHE_DIR` without racing other tests.
#![cfg(not(miri))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem_core::backend::Launch;
use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
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
    let built: Vec<_> = libraries(&cache.join("sim-kernels"));
    assert_eq!(built.len(), 1, "one library in the cache: {built:?}");
    std::fs::remove_dir_all(&cache).unwrap();
    // SAFETY: this child process runs a single test on one thread.
    unsafe { std::env::set_var("GPU_MEM_SIM_CXX", "/nonexistent/bin/c++") };
    launch(&backend, &kernel).unwrap();
    assert!(!cache.exists(), "nothing was written again");
}

/// No one else can put a library into the cache (it would be loaded into this process): a
/// cache directory of this user that others may write to is refused and left as it is (gpu-mem
/// changes no folder's permissions), and one of another user is refused (checked where the
/// tests run as root, which can give it away).
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
        std::fs::remove_dir_all(&cache).unwrap();
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let message = launch(&backend, &Kernel::from_source(SOURCE, "nothing"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("others may write to") && message.contains("GPU_MEM_CACHE_DIR"),
        "{message}"
    );
    let kernels = std::path::PathBuf::from(std::env::var_os("GPU_MEM_CACHE_DIR").unwrap())
        .join("sim-kernels");
    let mode = std::fs::metadata(&kernels).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o777, "its permissions were changed");
    // SAFETY: `geteuid` only reads the process's credentials.
    if unsafe { libc::geteuid() } != 0 {
        println!("not run as root: a directory of another user is not tried");
        return;
    }
    // Private, but given away to `nobody`: refused.
    std::fs::set_permissions(&kernels, std::fs::Permissions::from_mode(0o700)).unwrap();
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
    // So is a link in the way to a folder of this user's (found by its real path, whose
    // `/tmp` may not be the cache folder itself: everyone may write there).
    std::fs::set_permissions(&kernels, std::fs::Permissions::from_mode(0o755)).unwrap();
    let linked = kernels.parent().unwrap().join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(std::env::temp_dir(), linked.join("sim-kernels")).unwrap();
    // SAFETY: this child process runs a single test on one thread.
    unsafe { std::env::set_var("GPU_MEM_CACHE_DIR", &linked) };
    let third = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void third() {}\n";
    let message = launch(&backend, &Kernel::from_source(third, "third"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("others may write to /tmp"), "{message}");
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

/// A compiler that exits but leaves a helper holding its output (compile servers do) neither
/// hangs the launch nor outlives it: its output is read from files, and its process group is
/// ended.
#[test]
#[cfg(unix)]
fn a_compiler_leaving_a_helper_behind_ends_with_it() {
    use std::os::unix::fs::PermissionsExt;
    if std::env::var_os(CHILD).is_none() {
        let cache = tempdir("helper");
        std::fs::create_dir_all(&cache).unwrap();
        let script = cache.join("cxx.sh");
        let pid_file = cache.join("helper.pid");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh
if [ \"$1\" != --version ]; then sleep 300 & echo $! > '{}'; fi
exec c++ \"$@\"\n",
                pid_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        in_child(
            "a_compiler_leaving_a_helper_behind_ends_with_it",
            &[
                ("GPU_MEM_CACHE_DIR", cache.to_str().unwrap()),
                ("GPU_MEM_SIM_CXX", script.to_str().unwrap()),
            ],
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        std::fs::remove_dir_all(&cache).unwrap();
        // Gone, or a zombie no one reaped yet (its state after the command's name is `Z`).
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        let alive = stat.is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        });
        assert!(
            !alive,
            "the compiler's helper {} outlived the build",
            pid.trim()
        );
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let kernel = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void helped() {}\n";
    let started = std::time::Instant::now();
    launch(&backend, &Kernel::from_source(kernel, "helped")).unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "the build waited {:?} for the helper",
        started.elapsed()
    );
}

/// A time limit that is not a number of seconds is an error naming the variable, not a
/// silent default.
#[test]
fn a_bad_time_limit_is_an_error() {
    if std::env::var_os(CHILD).is_none() {
        for value in ["abc", "0", "-1"] {
            in_child(
                "a_bad_time_limit_is_an_error",
                &[("GPU_MEM_SIM_CXX_TIMEOUT", value)],
            );
        }
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let kernel = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void timed() {}\n";
    match launch(&backend, &Kernel::from_source(kernel, "timed")) {
        Err(Error::InvalidArgument { name, reason }) => {
            assert_eq!(name, "GPU_MEM_SIM_CXX_TIMEOUT");
            assert!(reason.contains("seconds"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A library in the cache that fails a check is rebuilt, never loaded: cut short (a crash while
/// it was written, which made every later process die in `dlopen`), replaced by a link, made
/// writable by others, or belonging to another user (planted while the folder was open to
/// others). Each is found by a new process, as it would be.
#[test]
#[cfg(unix)]
fn damaged_and_planted_libraries_are_rebuilt() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let cache = match std::env::var_os(CHILD) {
        None => tempdir("planted"),
        Some(_) => {
            let backend = SimBackend::new(SimConfig::default());
            launch(&backend, &Kernel::from_source(SOURCE, "nothing")).unwrap();
            return;
        }
    };
    let env = [("GPU_MEM_CACHE_DIR", cache.to_str().unwrap())];
    in_child("damaged_and_planted_libraries_are_rebuilt", &env);
    let kernels = cache.join("sim-kernels");
    let library = std::fs::read_dir(&kernels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .expect("a stored library");
    let good = std::fs::read(&library).unwrap();
    // SAFETY: reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let damages: [(&str, &dyn Fn()); 4] = [
        ("cut short", &|| {
            std::fs::write(&library, &good[..good.len() / 3]).unwrap()
        }),
        ("a link", &|| {
            let elsewhere = cache.join("elsewhere.so");
            std::fs::write(&elsewhere, &good).unwrap();
            std::fs::remove_file(&library).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &library).unwrap();
        }),
        ("writable by others", &|| {
            std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o666)).unwrap()
        }),
        ("another user's", &|| {
            if root {
                let path = std::ffi::CString::new(library.to_str().unwrap()).unwrap();
                // SAFETY: a NUL-terminated path; changes only that file's owner.
                assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
            }
        }),
    ];
    for (what, damage) in damages {
        damage();
        in_child("damaged_and_planted_libraries_are_rebuilt", &env);
        let meta = std::fs::symlink_metadata(&library).unwrap();
        let rebuilt = std::fs::read(&library).unwrap();
        assert!(meta.file_type().is_file(), "{what}: not replaced");
        assert_eq!(rebuilt, good, "{what}: not rebuilt as it was");
        assert_eq!(meta.mode() & 0o022, 0, "{what}: still writable by others");
        // SAFETY: reads the process's credentials.
        let me = unsafe { libc::geteuid() };
        assert_eq!(meta.uid(), me, "{what}: not this user's");
    }
    std::fs::remove_dir_all(&cache).unwrap();
}

/// With no home known (a service run as root without HOME), the cache is never a folder of a
/// name another user could make first (it was `gpu-mem-cache-<uid>` in the temporary directory,
/// which another user could fill with a link to `/tmp` and a library): that folder is left
/// alone, and so is `/tmp`.
#[test]
#[cfg(unix)]
fn no_home_never_means_a_folder_others_can_prepare() {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: reads the process's credentials.
    let uid = unsafe { libc::geteuid() };
    let prepared = std::env::temp_dir().join(format!("gpu-mem-cache-{uid}"));
    if std::env::var_os(CHILD).is_none() {
        let tmp_mode = std::fs::metadata(std::env::temp_dir()).unwrap().mode();
        let made_here = !prepared.exists();
        if made_here {
            std::fs::create_dir_all(&prepared).unwrap();
            std::os::unix::fs::symlink(std::env::temp_dir(), prepared.join("sim-kernels")).unwrap();
            if uid == 0 {
                // As root, the folder is another user's, as the attack has it.
                for path in [prepared.clone(), prepared.join("sim-kernels")] {
                    let path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
                    // SAFETY: `path` is NUL-terminated; lchown changes only that entry's owner.
                    assert_eq!(unsafe { libc::lchown(path.as_ptr(), 65534, 65534) }, 0);
                }
            }
        }
        let exe = std::env::current_exe().unwrap();
        let output = Command::new(exe)
            .args([
                "--exact",
                "no_home_never_means_a_folder_others_can_prepare",
                "--nocapture",
                "--test-threads=1",
            ])
            .env_clear()
            .env(CHILD, "1")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let after = std::fs::metadata(std::env::temp_dir()).unwrap().mode();
        if made_here {
            std::fs::remove_dir_all(&prepared).unwrap();
        }
        assert!(
            output.status.success() && text.contains("1 passed"),
            "{text}"
        );
        assert_eq!(after, tmp_mode, "the temporary directory's mode changed");
        return;
    }
    let libraries = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".so"))
            .count()
    };
    let before = libraries();
    let backend = SimBackend::new(SimConfig::default());
    let kernel = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void homeless() {}\n";
    launch(&backend, &Kernel::from_source(kernel, "homeless")).unwrap();
    assert_eq!(
        libraries(),
        before,
        "a library was stored through the prepared link"
    );
}

/// Deep recursion in a kernel whose threads run as plain calls overflows a simulated thread's
/// stack, reported naming the kernel and the setting, not the host thread's (Rust's message).
#[test]
#[cfg(unix)]
fn deep_recursion_names_the_kernel_and_the_stack_setting() {
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().unwrap();
        let cache = tempdir("recursion");
        let output = Command::new(exe)
            .args([
                "--exact",
                "deep_recursion_names_the_kernel_and_the_stack_setting",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("GPU_MEM_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&cache);
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "the overflow went unnoticed");
        assert!(
            text.contains("stack overflow in a simulated thread of kernel `deep`")
                && text.contains("GPU_MEM_SIM_STACK_SIZE"),
            "{text}"
        );
        return;
    }
    let backend = SimBackend::new(SimConfig::default());
    let kernel = "__device__ int down(int n, volatile char* pad) {\n\
                  \x20   char frame[4096]; frame[0] = (char)n; pad[0] = frame[0];\n\
                  \x20   return n == 0 ? 0 : 1 + down(n - 1, frame);\n}\n\
                  __global__ void deep(int n) { char p[1]; down(n, p); }\n";
    let args = [LaunchArg::Scalar {
        bytes: 1_000_000i32.to_ne_bytes().to_vec(),
        elem: std::any::TypeId::of::<i32>(),
        dtype: "i32",
    }];
    // SAFETY: the kernel touches only its own stack, which overflows.
    let _ = unsafe {
        backend.launch(
            0,
            &Kernel::from_source(kernel, "deep"),
            &LaunchConfig::new(1, 1),
            &args,
            None,
        )
    };
}

/// The kernel libraries in cache folder `dir`, by name.
fn libraries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "so"))
        .collect();
    found.sort();
    found
}

/// A kernel whose threads wait at a barrier (built stackless) and one that waits for nothing.
const TWO_FORMS: &str = "#include \"gpu_mem.h\"\n\
    extern \"C\" __global__ void waits() {\n\
        __shared__ int s[32]; s[threadIdx.x] = threadIdx.x; __syncthreads();\n\
        if (s[31 - threadIdx.x] != 31 - (int)threadIdx.x) __trap();\n\
    }\n";

/// The precompiled prelude changes a compile's speed, never its result: the libraries built
/// with it and without it (`GPU_MEM_SIM_PRECOMPILED=0`) are the same bytes, for both thread
/// forms (with GCC; clang's name the prelude's headers by where the cache keeps them, see
/// below); a damaged header in the cache is rebuilt, never used.
#[test]
fn the_precompiled_prelude_changes_nothing_but_speed() {
    if std::env::var_os(CHILD).is_some() {
        let backend = SimBackend::new(SimConfig::default());
        launch(&backend, &Kernel::from_source(SOURCE, "nothing")).unwrap();
        let waits = Kernel::from_source(TWO_FORMS, "waits");
        let args: [LaunchArg; 0] = [];
        // SAFETY: the kernel touches only its shared array.
        unsafe { backend.launch(0, &waits, &LaunchConfig::new(2, 32), &args, None) }.unwrap();
        return;
    }
    let with = tempdir("precompiled");
    let without = tempdir("not-precompiled");
    let test = "the_precompiled_prelude_changes_nothing_but_speed";
    in_child(test, &[("GPU_MEM_CACHE_DIR", with.to_str().unwrap())]);
    in_child(
        test,
        &[
            ("GPU_MEM_CACHE_DIR", without.to_str().unwrap()),
            ("GPU_MEM_SIM_PRECOMPILED", "0"),
        ],
    );
    let (with_dir, without_dir) = (with.join("sim-kernels"), without.join("sim-kernels"));
    let built = libraries(&with_dir);
    assert_eq!(built.len(), 2, "a library per module: {built:?}");
    let names = |dir: &std::path::Path| {
        libraries(dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&with_dir), names(&without_dir), "the same cache keys");
    // clang's header names the prelude's headers by their full paths (kept in the cache), and
    // so do the shift checks of the libraries built with it: only GCC's are the same bytes.
    let clang = std::env::var("GPU_MEM_SIM_CXX").is_ok_and(|c| c.contains("clang"));
    let same_libraries = || {
        for library in &built {
            let other = without_dir.join(library.file_name().unwrap());
            assert!(
                clang || std::fs::read(library).unwrap() == std::fs::read(&other).unwrap(),
                "{} differs when built without the precompiled prelude",
                library.display()
            );
        }
    };
    same_libraries();
    let headers = |dir: &std::path::Path| {
        let mut found: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "gch" || e == "pch"))
            .collect();
        found.sort();
        found
    };
    assert!(headers(&without_dir).is_empty(), "turned off, none is made");
    let made = headers(&with_dir);
    // One per thread form.
    assert_eq!(made.len(), 2, "{made:?}");
    // Damaged: cut short. The next build rebuilds it and still builds the same library (and
    // the child runs it).
    let good = std::fs::read(&made[0]).unwrap();
    std::fs::write(&made[0], &good[..good.len() / 2]).unwrap();
    for library in &built {
        std::fs::remove_file(library).unwrap();
    }
    in_child(test, &[("GPU_MEM_CACHE_DIR", with.to_str().unwrap())]);
    // (A header's bytes vary from build to build: it records the folder it was built in.)
    let rebuilt = std::fs::read(&made[0]).unwrap().len();
    assert!(rebuilt > good.len() / 2 + 1, "not rebuilt: {rebuilt} bytes");
    same_libraries();
    std::fs::remove_dir_all(&with).unwrap();
    std::fs::remove_dir_all(&without).unwrap();
}

/// clang's precompiled prelude is read with the headers kept beside it in the cache. When they
/// change while a process uses them, clang refuses the header and the unit is compiled from the
/// text instead; the next process finds them changed and writes them again.
#[test]
fn clangs_header_is_dropped_when_its_headers_change() {
    let Some(clang) = clang() else {
        eprintln!("skipped: no clang++ on PATH (clang's precompiled prelude is not tested)");
        return;
    };
    let kept_prelude = |cache: &std::path::Path| {
        let kept: Vec<_> = std::fs::read_dir(cache.join("sim-kernels"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "headers"))
            .collect();
        assert_eq!(kept.len(), 1, "the headers of the one form built: {kept:?}");
        kept[0].join("include").join("gpu_mem.h")
    };
    const CHANGED: &str = "\n// changed\n";
    if std::env::var_os(CHILD).is_some() {
        let cache = std::path::PathBuf::from(std::env::var_os("GPU_MEM_CACHE_DIR").unwrap());
        let backend = SimBackend::new(SimConfig::default());
        launch(&backend, &Kernel::from_source(SOURCE, "nothing")).unwrap();
        if std::env::var_os("GPU_MEM_TEST_CHANGE_HEADERS").is_some() {
            let prelude = kept_prelude(&cache);
            let text = std::fs::read_to_string(&prelude).unwrap();
            std::fs::write(&prelude, format!("{text}{CHANGED}")).unwrap();
        }
        let other = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void other() {}\n";
        launch(&backend, &Kernel::from_source(other, "other")).unwrap();
        return;
    }
    let cache = tempdir("clang-headers");
    let test = "clangs_header_is_dropped_when_its_headers_change";
    let env = [
        ("GPU_MEM_CACHE_DIR", cache.to_str().unwrap()),
        ("GPU_MEM_SIM_CXX", clang.as_str()),
        ("GPU_MEM_TEST_CHANGE_HEADERS", "1"),
    ];
    // The second kernel is built after its headers changed: from the text.
    let output = in_child(test, &env);
    let dir = cache.join("sim-kernels");
    assert_eq!(libraries(&dir).len(), 2, "{output}");
    let prelude = kept_prelude(&cache);
    assert!(
        std::fs::read_to_string(&prelude)
            .unwrap()
            .ends_with(CHANGED)
    );
    // The next process writes them again.
    for library in libraries(&dir) {
        std::fs::remove_file(library).unwrap();
    }
    in_child(test, &env[..2]);
    assert!(
        !std::fs::read_to_string(&prelude)
            .unwrap()
            .ends_with(CHANGED)
    );
    assert_eq!(libraries(&dir).len(), 2);
    std::fs::remove_dir_all(&cache).unwrap();
}

/// The clang++ the simulator's tests may use: `GPU_MEM_SIM_CXX` when it names clang, else
/// `clang++-16` or `clang++` on `PATH`.
fn clang() -> Option<String> {
    if let Ok(named) = std::env::var("GPU_MEM_SIM_CXX") {
        return named.contains("clang").then_some(named);
    }
    ["clang++-16", "clang++"]
        .into_iter()
        .map(String::from)
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("gpu-mem-sim-compiler-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
