//! `Launch::launch` of the CUDA backend against the stand-in `libcuda`
//! (tests/mock/libcuda_mock.c), with the real NVRTC compiling the kernels.
//!
//! The stand-in runs nothing: it records each launch's shape, stream and parameter bytes and
//! numbers launches and stream synchronisations. These tests prove what the backend hands the
//! driver (parameter layout, launch shape, stream, synchronisation, module caching and
//! unloading, error translation), never that a kernel computes anything on a GPU.
//!
//! Trials that only need the mock are ignored without a C compiler; trials that compile need
//! NVRTC as well (the wheel of `.ci/install-cuda-parts.sh` or `GPU_MEM_NVRTC_LIBRARY`) and are
//! ignored, with the reason printed, without it.

#[path = "support/mock.rs"]
mod mock;
#[path = "support/ptx_params.rs"]
mod ptx_params;

use gpu_mem_core::backend::{DevicePtr, StreamHandle};
use gpu_mem_core::backend::{Launch, Memory, PeerAccess, Streams};
use gpu_mem_core::kernel::{Dim3, Kernel, LaunchArg, LaunchConfig};
use gpu_mem_core::{BackendKind, Error};
use gpu_mem_cuda::CudaBackend;
use gpu_mem_cuda::nvrtc::{CodeKind, ComputeCapability, Nvrtc};
use libtest_mimic::{Arguments, Failed, Trial};
use mock::{Mock, build, ensure, wheel_nvrtc};
use std::any::TypeId;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

type MockTest = fn(&Mock) -> Result<(), Failed>;
type NvrtcTest = fn(&Mock, &Path) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let dir = std::env::temp_dir().join(format!("gpu-mem-cuda-mock-launch-{}", std::process::id()));
    let built = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| build(&dir, "launch", &[]));
    let mock_reason = built
        .as_ref()
        .err()
        .map(|e| format!("cannot build the mock driver: {e}"));
    let library = built.unwrap_or_default();
    let nvrtc = wheel_nvrtc();
    let nvrtc_reason = mock_reason.clone().or_else(|| {
        nvrtc.is_none().then(|| {
            "libnvrtc not found (run .ci/install-cuda-parts.sh or set GPU_MEM_NVRTC_LIBRARY)"
                .to_string()
        })
    });
    let nvrtc = nvrtc.unwrap_or_default();

    let mock_only: &[(&str, MockTest)] = &[
        (
            "kernel_without_source_is_not_supported",
            kernel_without_source_is_not_supported,
        ),
        (
            "invalid_launches_are_rejected_before_compiling",
            invalid_launches_are_rejected_before_compiling,
        ),
    ];
    let with_nvrtc_peer: &[(&str, NvrtcTest)] = &[(
        "peer_arrays_need_peer_access_enabled",
        peer_arrays_need_peer_access_enabled,
    )];
    let with_nvrtc: &[(&str, NvrtcTest)] = &[
        (
            "kernels_compile_load_and_launch",
            kernels_compile_load_and_launch,
        ),
        (
            "launch_passes_the_exact_parameter_bytes",
            launch_passes_the_exact_parameter_bytes,
        ),
        (
            "modules_are_compiled_once_per_kernel_and_device",
            modules_are_compiled_once_per_kernel_and_device,
        ),
        (
            "synchronous_launch_waits_and_reports_failures",
            synchronous_launch_waits_and_reports_failures,
        ),
        (
            "a_failed_function_query_is_retried_on_the_loaded_module",
            a_failed_function_query_is_retried_on_the_loaded_module,
        ),
        (
            "missing_entry_point_is_an_invalid_launch",
            missing_entry_point_is_an_invalid_launch,
        ),
        (
            "kernels_carry_line_info_and_jit_logs_reach_errors",
            kernels_carry_line_info_and_jit_logs_reach_errors,
        ),
        (
            "arguments_are_checked_against_the_compiled_function",
            arguments_are_checked_against_the_compiled_function,
        ),
        (
            "shared_memory_above_48k_opts_in_and_counts_static",
            shared_memory_above_48k_opts_in_and_counts_static,
        ),
        (
            "blocks_larger_than_the_function_allows_are_refused",
            blocks_larger_than_the_function_allows_are_refused,
        ),
        (
            "compile_errors_point_into_the_kernel_code",
            compile_errors_point_into_the_kernel_code,
        ),
        (
            "a_grid_barrier_outside_a_cooperative_launch_is_refused",
            a_grid_barrier_outside_a_cooperative_launch_is_refused,
        ),
    ];

    let mut trials = Vec::new();
    let mut push = |name: &str, reason: &Option<String>, trial: Trial| {
        trials.push(match reason {
            Some(r) => {
                println!("ignoring {name}: {r}");
                trial.with_ignored_flag(true)
            }
            None => trial,
        });
    };
    for &(name, test) in mock_only {
        let library = library.clone();
        let trial = Trial::test(name, move || test(&Mock::copy_of(&library, name)?));
        push(name, &mock_reason, trial);
    }
    for &(name, test) in with_nvrtc.iter().chain(with_nvrtc_peer) {
        let (library, nvrtc) = (library.clone(), nvrtc.clone());
        let trial = Trial::test(name, move || test(&Mock::copy_of(&library, name)?, &nvrtc));
        push(name, &nvrtc_reason, trial);
    }
    let conclusion = libtest_mimic::run(&args, trials);
    // The mock copies are scratch files of this run only.
    let _ = std::fs::remove_dir_all(&dir);
    conclusion.exit();
}

// ----- helpers -------------------------------------------------------------------------------

fn backend_with_nvrtc(mock: &Mock, nvrtc: &Path) -> Result<CudaBackend, Failed> {
    let b = mock.backend()?;
    b.use_nvrtc(Arc::new(Nvrtc::load_from(nvrtc)?));
    Ok(b)
}

fn array(ptr: DevicePtr, shape: &[usize], strides: &[isize], itemsize: usize) -> LaunchArg {
    LaunchArg::Array {
        ptr,
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        min_offset: 0,
        span_len: shape.iter().product(),
        itemsize,
        elem: TypeId::of::<f32>(),
        dtype: "f32",
    }
}

fn scalar<const N: usize>(bytes: [u8; N], dtype: &'static str) -> LaunchArg {
    LaunchArg::Scalar {
        bytes: bytes.to_vec(),
        elem: TypeId::of::<[u8; N]>(),
        dtype,
    }
}

fn launches(mock: &Mock) -> Result<i32, Failed> {
    mock.call_with("mock_last_launch", 7)
}

/// `a(0, 0) *= factor` with every kind of parameter; deliberately without the include (the
/// launcher adds the prelude).
const SCALE: &str = r#"
extern "C" __global__ void scale(gm_array<float, 2> a, float* out, int n, double factor,
                                 char flag) {
    if (flag && n > 0) { a(0, 0) *= (float)factor; out[0] = a(0, 0); }
}
"#;

fn scale_kernel() -> Kernel {
    Kernel::new("scale").with_source(SCALE, "scale")
}

/// The parameter sizes NVRTC gives `entry` in `code` (compiled to PTX for 9.0, the mock's
/// compute capability).
fn declared_sizes(nvrtc: &Path, code: &str, entry: &str) -> Result<Vec<usize>, Failed> {
    let nvrtc = Nvrtc::load_from(nvrtc)?;
    let source = format!("#include \"gpu_mem.h\"\n{code}");
    let ptx = nvrtc.compile(
        &source,
        "sizes.cu",
        ComputeCapability::new(9, 0),
        CodeKind::Ptx,
        &[],
    )?;
    let text = ptx.ptx_text().ok_or("PTX is not UTF-8")?;
    Ok(ptx_params::entry_params(text, entry)?
        .iter()
        .map(|p| p.size)
        .collect())
}

/// A kernel on device 0 given an array of device 1 is refused until device 0 enables peer
/// access to device 1 (the GPU would fault on it), then launched with the peer's address.
fn peer_arrays_need_peer_access_enabled(mock: &Mock, nvrtc: &Path) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    mock.set_param_sizes(&declared_sizes(nvrtc, SCALE, "scale")?)?;
    let data = b.alloc(1, 6 * 4)?;
    let out = b.alloc(0, 4)?;
    let args = [
        array(data, &[2, 3], &[3, 1], 4),
        LaunchArg::Record {
            ptr: out,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        scalar(1i32.to_ne_bytes(), "i32"),
        scalar(2.0f64.to_ne_bytes(), "f64"),
        scalar([1u8], "i8"),
    ];
    let config = LaunchConfig::new(1, 1);
    let before = launches(mock)?;
    // SAFETY: the mock records launches and runs nothing; the buffers outlive the test.
    match unsafe { b.launch(0, &scale_kernel(), &config, &args, None) } {
        Err(Error::InvalidLaunch { kernel, reason }) => ensure(
            kernel == "scale" && reason.contains("argument 0") && reason.contains("peer access"),
            || reason.clone(),
        )?,
        other => return Err(format!("expected a peer-access refusal, got {other:?}").into()),
    }
    ensure(launches(mock)? == before, || {
        "the refused kernel reached cuLaunchKernel".into()
    })?;
    b.enable_peer_access(0, 1)?;
    // SAFETY: as above.
    unsafe { b.launch(0, &scale_kernel(), &config, &args, None)? };
    ensure(launches(mock)? == before + 1, || "not launched".into())?;
    ensure(mock.call::<u64>("mock_last_param0")? == data.0, || {
        "the peer's address was not passed".into()
    })?;
    // SAFETY: the mock ran nothing; both allocations are unused.
    unsafe {
        b.free(1, data)?;
        b.free(0, out)?;
    }
    Ok(())
}

// ----- mock only -----------------------------------------------------------------------------

fn kernel_without_source_is_not_supported(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let kernel = Kernel::new("only_simulated").with_sim_form(std::sync::Arc::new(()));
    // SAFETY: rejected before anything reaches the driver.
    let result = unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 32), &[], None) };
    match result {
        Err(Error::NotSupportedByBackend {
            backend: BackendKind::Cuda,
            reason,
            ..
        }) => ensure(
            reason.contains("only_simulated")
                && reason.contains("no portable source")
                && reason.contains("simulator"),
            || reason.clone(),
        )?,
        other => return Err(format!("expected NotSupportedByBackend, got {other:?}").into()),
    }
    ensure(launches(mock)? == 0, || "the driver saw a launch".into())
}

fn invalid_launches_are_rejected_before_compiling(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    // No NVRTC is loaded: reaching the compile step would fail with a different error.
    let kernel = scale_kernel();
    let limits = b.launch_limits(0)?;
    ensure(
        limits.max_threads_per_block == 1024
            && limits.max_block == [1024, 1024, 64]
            && limits.max_grid == [i32::MAX as u32, 65535, 65535]
            && limits.max_shared_per_block == 49152,
        || format!("limits read from the driver: {limits:?}"),
    )?;
    let bad_configs = [
        (LaunchConfig::new(1, 1025), "1025 threads"),
        (
            LaunchConfig::new(1, Dim3::new(2, 2, 65)),
            "block dimensions",
        ),
        (LaunchConfig::new((1, 65536), 32), "grid dimensions"),
        (
            LaunchConfig::new(Dim3::new(1, 1, 65536), 32),
            "grid dimensions",
        ),
        (LaunchConfig::new(0, 32), "empty"),
        (
            LaunchConfig::new(1, 32).with_shared_bytes(232449),
            "shared memory",
        ),
    ];
    for (config, what) in bad_configs {
        // SAFETY: rejected before anything reaches the driver.
        match unsafe { b.launch(0, &kernel, &config, &[], None) } {
            Err(Error::InvalidLaunch {
                kernel: name,
                reason,
            }) if name == "scale" && reason.contains(what) => {}
            other => {
                return Err(
                    format!("{config:?}: expected InvalidLaunch ({what}), got {other:?}").into(),
                );
            }
        }
    }
    let malformed = [array(DevicePtr(0), &[2, 3], &[1], 4)];
    // SAFETY: rejected before anything reaches the driver.
    match unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 32), &malformed, None) } {
        Err(Error::InvalidLaunch { reason, .. }) if reason.contains("argument 0") => {}
        other => return Err(format!("malformed array: {other:?}").into()),
    }
    let modules: i32 = mock.call("mock_module_loads")?;
    ensure(launches(mock)? == 0 && modules == 0, || {
        format!("invalid launches reached the driver ({modules} module loads)")
    })
}

// ----- with NVRTC ----------------------------------------------------------------------------

fn launch_passes_the_exact_parameter_bytes(mock: &Mock, nvrtc: &Path) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let sizes = declared_sizes(nvrtc, SCALE, "scale")?;
    ensure(sizes == [40, 8, 4, 8, 1], || {
        format!("NVRTC declares {sizes:?}")
    })?;
    mock.set_param_sizes(&sizes)?;

    let data = b.alloc(0, 6 * 4)?;
    let out = b.alloc(0, 4)?;
    // A transposed 2 x 3 view: strides (1, 2) in elements.
    let args = [
        array(data, &[2, 3], &[1, 2], 4),
        LaunchArg::Record {
            ptr: out,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        scalar((-7i32).to_ne_bytes(), "i32"),
        scalar(0.25f64.to_ne_bytes(), "f64"),
        scalar([1u8], "i8"),
    ];
    let stream = b.stream_create(0)?;
    let config = LaunchConfig::new((3, 2), (64, 2)).with_shared_bytes(512);
    // SAFETY: the mock records the launch and runs nothing; the buffers outlive the test.
    unsafe { b.launch(0, &scale_kernel(), &config, &args, Some(stream))? };

    let mut expected_array = data.0.to_ne_bytes().to_vec();
    for v in [2i64, 3, 1, 2] {
        expected_array.extend_from_slice(&v.to_ne_bytes());
    }
    let expected: [Vec<u8>; 5] = [
        expected_array,
        out.0.to_ne_bytes().to_vec(),
        (-7i32).to_ne_bytes().to_vec(),
        0.25f64.to_ne_bytes().to_vec(),
        vec![1],
    ];
    for (i, want) in expected.iter().enumerate() {
        let got = mock.param_bytes(i)?;
        ensure(got == *want, || {
            format!("parameter {i}: driver read {got:?}, expected {want:?}")
        })?;
    }
    let recorded: Vec<i32> = (0..8)
        .map(|i| mock.call_with("mock_last_launch", i))
        .collect::<Result<_, _>>()?;
    ensure(recorded == [3, 2, 1, 64, 2, 1, 512, 1], || {
        format!("launch recorded as {recorded:?}")
    })?;
    let launch_stream: u64 = mock.call("mock_last_launch_stream")?;
    ensure(launch_stream == stream.0, || {
        format!(
            "launched on {launch_stream:#x}, expected the stream {:#x}",
            stream.0
        )
    })?;
    // An enqueued launch returns without waiting.
    let (launch_seq, sync_seq): (u64, u64) = (
        mock.call("mock_last_launch_seq")?,
        mock.call("mock_last_sync_seq")?,
    );
    ensure(sync_seq < launch_seq, || {
        "a stream launch synchronised".into()
    })?;
    // SAFETY: the handles came from this backend on device 0 and are live.
    unsafe { b.stream_synchronize(0, stream) }?;
    // SAFETY: nothing runs in the mock; handles are released once.
    unsafe {
        b.stream_destroy(0, stream)?;
        b.free(0, data)?;
        b.free(0, out)?;
    }
    Ok(())
}

fn modules_are_compiled_once_per_kernel_and_device(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let sum = Kernel::new("block_sum").with_source(
        include_str!("../../gpu-mem-core/kernels/block_sum.cu"),
        "block_sum",
    );
    let input = b.alloc(0, 1024 * 4)?;
    let partial = b.alloc(0, 4 * 4)?;
    let args = [
        array(input, &[1024], &[1], 4),
        array(partial, &[4], &[1], 4),
    ];
    let config = LaunchConfig::new(4, 256).with_shared_bytes(256 * 4);
    let mut times = Vec::new();
    for _ in 0..2 {
        let started = Instant::now();
        // SAFETY: the mock runs nothing; the buffers outlive the launches.
        unsafe { b.launch(0, &sum, &config, &args, None)? };
        times.push(started.elapsed());
    }
    let loads: i32 = mock.call("mock_module_loads")?;
    ensure(loads == 1 && b.loaded_kernel_modules() == 1, || {
        format!("two launches loaded {loads} modules")
    })?;
    ensure(launches(mock)? == 2, || "two launches expected".into())?;
    println!(
        "block_sum: first launch (compile + load) {:.1} ms, second {:.3} ms",
        times[0].as_secs_f64() * 1e3,
        times[1].as_secs_f64() * 1e3
    );
    // A clone is the same kernel; another kernel or another device is compiled anew.
    // SAFETY: as above.
    unsafe { b.launch(0, &sum.clone(), &config, &args, None)? };
    ensure(mock.call::<i32>("mock_module_loads")? == 1, || {
        "a clone of the kernel was recompiled".into()
    })?;
    let scale_args = [
        array(input, &[2, 2], &[2, 1], 4),
        LaunchArg::Record {
            ptr: partial,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        scalar(1i32.to_ne_bytes(), "i32"),
        scalar(2.0f64.to_ne_bytes(), "f64"),
        scalar([1u8], "i8"),
    ];
    // SAFETY: as above.
    unsafe {
        b.launch(
            0,
            &scale_kernel(),
            &LaunchConfig::new(1, 1),
            &scale_args,
            None,
        )?
    };
    let on_device_1 = b.alloc(1, 1024 * 4)?;
    let partial_1 = b.alloc(1, 4 * 4)?;
    let args_1 = [
        array(on_device_1, &[1024], &[1], 4),
        array(partial_1, &[4], &[1], 4),
    ];
    // SAFETY: as above.
    unsafe { b.launch(1, &sum, &config, &args_1, None)? };
    let loads: i32 = mock.call("mock_module_loads")?;
    let live: i32 = mock.call("mock_live_modules")?;
    ensure(
        loads == 3 && live == 3 && b.loaded_kernel_modules() == 3,
        || format!("{loads} loads, {live} live modules, expected 3"),
    )?;
    // SAFETY: nothing runs in the mock; every allocation is freed once.
    unsafe {
        b.free(0, input)?;
        b.free(0, partial)?;
        b.free(1, on_device_1)?;
        b.free(1, partial_1)?;
    }
    drop(b);
    let live: i32 = mock.call("mock_live_modules")?;
    ensure(live == 0, || {
        format!("{live} modules still loaded after the backend was dropped")
    })?;
    ensure(
        mock.call_with("mock_primary_refs", 0)? == 0
            && mock.call_with("mock_primary_refs", 1)? == 0,
        || "contexts not released".into(),
    )
}

fn synchronous_launch_waits_and_reports_failures(mock: &Mock, nvrtc: &Path) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let data = b.alloc(0, 16)?;
    let args = [
        array(data, &[2, 2], &[2, 1], 4),
        LaunchArg::Record {
            ptr: data,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        scalar(1i32.to_ne_bytes(), "i32"),
        scalar(2.0f64.to_ne_bytes(), "f64"),
        scalar([1u8], "i8"),
    ];
    let kernel = scale_kernel();
    let config = LaunchConfig::new(1, 4);
    // SAFETY: the mock runs nothing; the buffer outlives the launches.
    unsafe { b.launch(0, &kernel, &config, &args, None)? };
    let launch_stream: u64 = mock.call("mock_last_launch_stream")?;
    let sync_stream: u64 = mock.call("mock_last_sync_stream")?;
    let (launch_seq, sync_seq): (u64, u64) = (
        mock.call("mock_last_launch_seq")?,
        mock.call("mock_last_sync_seq")?,
    );
    ensure(launch_stream == 0 && sync_stream == 0, || {
        format!(
            "launched on {launch_stream:#x}, synchronised {sync_stream:#x}; expected the legacy stream (0) for both"
        )
    })?;
    ensure(sync_seq == launch_seq + 1, || {
        format!("launch #{launch_seq}, synchronisation #{sync_seq}: not waited for right after")
    })?;

    // A fault the driver reports at the synchronisation is this call's error: the device is
    // lost, and the error names the fault and the kernel.
    mock.call_with("mock_fail_next_sync", 700)?;
    // SAFETY: as above.
    match unsafe { b.launch(0, &kernel, &config, &args, None) } {
        Err(Error::DeviceLost {
            device: 0, fault, ..
        }) => ensure(
            fault.contains("CUDA_ERROR_ILLEGAL_ADDRESS")
                && fault.contains("kernel `scale`")
                && fault.contains("cuStreamSynchronize"),
            || fault.clone(),
        )?,
        other => return Err(format!("expected the synchronisation's fault, got {other:?}").into()),
    }
    // The next launch does not reach the driver: the same fault, not a bare code.
    // SAFETY: as above.
    match unsafe { b.launch(0, &kernel, &config, &args, None) } {
        Err(Error::DeviceLost { fault, .. }) if fault.contains("CUDA_ERROR_ILLEGAL_ADDRESS") => {}
        other => return Err(format!("second launch after the fault: {other:?}").into()),
    }
    // SAFETY: nothing runs in the mock; the lost context took the buffer with it.
    unsafe { b.free(0, data)? };
    Ok(())
}

fn missing_entry_point_is_an_invalid_launch(mock: &Mock, nvrtc: &Path) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let kernel = Kernel::new("misnamed").with_source(SCALE, "no_such_entry");
    // SAFETY: fails before launching.
    match unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 1), &[], None) } {
        Err(Error::InvalidLaunch { kernel, reason })
            if kernel == "misnamed" && reason.contains("no_such_entry") => {}
        other => return Err(format!("expected InvalidLaunch, got {other:?}").into()),
    }
    // The module stays loaded (its other kernels and its variables are still reachable), and a
    // second lookup finds it instead of compiling again.
    // SAFETY: fails before launching.
    let again = unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 1), &[], None) };
    ensure(matches!(again, Err(Error::InvalidLaunch { .. })), || {
        format!("the second lookup: {again:?}")
    })?;
    let loads: i32 = mock.call("mock_module_loads")?;
    ensure(loads == 1 && b.loaded_kernel_modules() == 1, || {
        format!("{loads} module loads for two failed lookups")
    })?;
    ensure(launches(mock)? == 0, || "the driver saw a launch".into())
}

fn compile_errors_point_into_the_kernel_code(mock: &Mock, nvrtc: &Path) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let code = "extern \"C\" __global__ void broken(gm_array<float, 1> a) {\n    a(0) = not_declared_anywhere;\n}\n";
    let kernel = Kernel::new("broken").with_source(code, "broken");
    for attempt in 0..2 {
        // SAFETY: fails at compilation.
        match unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 1), &[], None) } {
            Err(Error::Native {
                call: "nvrtcCompileProgram",
                description,
                ..
            }) => ensure(
                // Line 2 of the kernel's own code, not of the text with the prelude in front.
                description.contains("broken.cu(2)")
                    && description.contains("not_declared_anywhere"),
                || format!("attempt {attempt}: {description}"),
            )?,
            other => return Err(format!("expected a compile error, got {other:?}").into()),
        }
    }
    ensure(mock.call::<i32>("mock_module_loads")? == 0, || {
        "a failed compile loaded a module".into()
    })
}

/// NVRTC compiles for the (mock) device's compute capability, the module loads, the kernel is
/// found by its `extern "C"` name, and `cuLaunchKernel` receives the launch shape and the
/// parameter block unchanged. Nothing executes: the mock only records the launch.
fn kernels_compile_load_and_launch(mock: &Mock, nvrtc_path: &Path) -> Result<(), Failed> {
    let b = mock.backend()?;
    b.use_nvrtc(Arc::new(Nvrtc::load_from(nvrtc_path)?));
    let (kind, capability) = b.kernel_target(0)?;
    ensure(
        kind == CodeKind::Cubin && capability == ComputeCapability::new(9, 0),
        || {
            format!(
                "a 9.0 device with NVRTC supporting sm_90 should get an sm_90 cubin, got {kind:?} {capability}"
            )
        },
    )?;
    let source = include_str!("../../gpu-mem-core/kernels/block_sum.cu");
    let cubin = b.compile_kernel(0, source, "block_sum.cu")?;
    ensure(cubin.code.starts_with(b"\x7fELF"), || "not a cubin".into())?;
    let module = b.module_load(0, &cubin)?;
    // SAFETY: `module` was just loaded on device 0 and is unloaded below.
    let function = unsafe { b.module_function(0, module, "block_sum") }?;
    // SAFETY: as above.
    match unsafe { b.module_function(0, module, "no_such_kernel") } {
        Err(Error::Native {
            code: 500,
            code_name,
            ..
        }) if code_name == "CUDA_ERROR_NOT_FOUND" => {}
        other => return Err(format!("missing kernel lookup: {other:?}").into()),
    }

    // gm_array<float, 1> as the launcher lays it out: data, shape[1], strides[1].
    #[repr(C)]
    struct Array1 {
        data: u64,
        shape: [i64; 1],
        strides: [i64; 1],
    }
    let input = b.alloc(0, 1024 * 4)?;
    let partial = b.alloc(0, 4 * 4)?;
    let mut a = Array1 {
        data: input.0,
        shape: [1024],
        strides: [1],
    };
    let mut p = Array1 {
        data: partial.0,
        shape: [4],
        strides: [1],
    };
    let mut params = [(&raw mut a).cast::<std::ffi::c_void>(), (&raw mut p).cast()];
    let stream = b.stream_create(0)?;
    let config = LaunchConfig::new(4, 256).with_shared_bytes(256 * 4);
    mock.set_param_sizes(&[24, 24])?;
    // SAFETY: the mock records the launch without running it; the parameter values outlive
    // the call.
    unsafe { b.launch_function(0, function, &config, stream, &mut params)? };
    let recorded: Vec<u32> = (0..8)
        .map(|i| mock.call_with("mock_last_launch", i).map(|v| v as u32))
        .collect::<Result<_, _>>()?;
    ensure(recorded == [4, 1, 1, 256, 1, 1, 1024, 1], || {
        format!("launch recorded as {recorded:?}")
    })?;
    let param0: u64 = mock.call("mock_last_param0")?;
    ensure(param0 == input.0, || {
        format!(
            "first parameter's data pointer {param0:#x}, expected {:#x}",
            input.0
        )
    })?;
    // SAFETY: the legacy stream (null handle) is always valid; the mock records it.
    unsafe {
        b.launch_function(
            0,
            function,
            &LaunchConfig::new((1, 2, 3), (32, 4, 2)),
            StreamHandle(0),
            &mut params,
        )?
    };
    let recorded: Vec<u32> = (0..8)
        .map(|i| mock.call_with("mock_last_launch", i).map(|v| v as u32))
        .collect::<Result<_, _>>()?;
    ensure(recorded == [1, 2, 3, 32, 4, 2, 0, 2], || {
        format!("second launch recorded as {recorded:?}")
    })?;
    ensure(
        mock.call::<i32>("mock_last_launch_cooperative")? == 0,
        || "a plain launch went to cuLaunchCooperativeKernel".into(),
    )?;
    // A cooperative launch goes to cuLaunchCooperativeKernel; a grid the device cannot keep
    // resident at once fails there, as CUDA fails it.
    let cooperative = LaunchConfig::new(132, 256).cooperative();
    // SAFETY: as above.
    unsafe { b.launch_function(0, function, &cooperative, stream, &mut params)? };
    ensure(
        mock.call::<i32>("mock_last_launch_cooperative")? == 1,
        || "a cooperative launch went to cuLaunchKernel".into(),
    )?;
    let too_large = LaunchConfig::new(133, 256).cooperative();
    // SAFETY: as above.
    match unsafe { b.launch_function(0, function, &too_large, stream, &mut params) } {
        Err(Error::Native { code: 720, .. }) => {}
        other => return Err(format!("a cooperative grid of 133 blocks on 132: {other:?}").into()),
    }

    // The PTX path: NUL-terminated text is what cuModuleLoadData gets.
    let ptx = b.nvrtc()?.compile(
        source,
        "block_sum.cu",
        ComputeCapability::new(9, 0),
        CodeKind::Ptx,
        &[],
    )?;
    let ptx_module = b.module_load(0, &ptx)?;
    // SAFETY: `ptx_module` was just loaded on device 0 and is unloaded below.
    unsafe { b.module_function(0, ptx_module, "block_sum") }?;
    // SAFETY: nothing runs in the mock; all handles are live and released once.
    unsafe {
        b.module_unload(0, ptx_module)?;
        b.module_unload(0, module)?;
        b.stream_destroy(0, stream)?;
        b.free(0, input)?;
        b.free(0, partial)?;
    }
    Ok(())
}

/// A kernel whose function attributes cannot be read fails to launch without leaving its
/// module loaded (nothing would ever unload it), and the next launch builds it again.
/// A function query that fails leaves the module loaded (a module is shared by its kernels):
/// the retry finds the function again without compiling or loading the module again.
fn a_failed_function_query_is_retried_on_the_loaded_module(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let data = b.alloc(0, 16)?;
    let before: i32 = mock.call("mock_live_modules")?;
    // SAFETY: nothing runs in the mock; `data` holds the arguments' bytes.
    let launch = || unsafe {
        b.launch(
            0,
            &scale_kernel(),
            &LaunchConfig::new(1, 1),
            &scale_args(data),
            None,
        )
    };
    // CUDA_ERROR_UNKNOWN from the next cuFuncGetAttribute.
    mock.call_with("mock_fail_next_func_attribute", 999)?;
    let failed = launch();
    let after_failure: i32 = mock.call("mock_live_modules")?;
    let again = launch();
    let after_retry: i32 = mock.call("mock_live_modules")?;
    // SAFETY: nothing uses it any more.
    unsafe { b.free(0, data)? };
    ensure(failed.is_err(), || {
        format!("the launch succeeded: {failed:?}")
    })?;
    ensure(after_failure == before + 1, || {
        format!(
            "{} module(s) loaded by the failed launch",
            after_failure - before
        )
    })?;
    ensure(again.is_ok() && after_retry == before + 1, || {
        format!(
            "the retry: {again:?}, {} module(s) loaded",
            after_retry - before
        )
    })
}

fn scale_args(data: DevicePtr) -> Vec<LaunchArg> {
    vec![
        array(data, &[2, 2], &[2, 1], 4),
        LaunchArg::Record {
            ptr: data,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        scalar(1i32.to_ne_bytes(), "i32"),
        scalar(2.0f64.to_ne_bytes(), "f64"),
        scalar([1u8], "i8"),
    ]
}

/// With cuFuncGetParamInfo, a wrong argument count or size is an error before cuLaunchKernel
/// (which would otherwise read past the parameter buffers); the driver is asked only for the
/// parameters the PTX declares.
fn arguments_are_checked_against_the_compiled_function(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    mock.set_param_sizes(&declared_sizes(nvrtc, SCALE, "scale")?)?;
    let data = b.alloc(0, 16)?;
    let kernel = scale_kernel();
    let config = LaunchConfig::new(1, 4);
    let mut short = scale_args(data);
    short.pop();
    // SAFETY: rejected before the driver launches; the mock runs nothing anyway.
    match unsafe { b.launch(0, &kernel, &config, &short, None) } {
        Err(Error::InvalidLaunch { reason, .. })
            if reason.contains("takes 5 parameter(s), 4 argument(s)") => {}
        other => return Err(format!("four arguments for five parameters: {other:?}").into()),
    }
    let mut narrow = scale_args(data);
    narrow[3] = scalar(2.0f32.to_ne_bytes(), "f32"); // the kernel takes a double
    // SAFETY: as above.
    match unsafe { b.launch(0, &kernel, &config, &narrow, None) } {
        Err(Error::InvalidLaunch { reason, .. })
            if reason.contains("argument 3 has 4 bytes") && reason.contains("has 8") => {}
        other => return Err(format!("a float for a double: {other:?}").into()),
    }
    ensure(launches(mock)? == 0, || {
        "a bad launch reached the driver".into()
    })?;
    // SAFETY: as above.
    unsafe { b.launch(0, &kernel, &config, &scale_args(data), None)? };
    ensure(launches(mock)? == 1, || {
        "the good launch did not run".into()
    })?;
    // The PTX gave the parameter count: the driver was asked for those parameters only, never
    // for one past the last (an API error under compute-sanitizer, seen on an H200).
    let past_end: i32 = mock.call("mock_param_info_past_end")?;
    ensure(past_end == 0, || {
        format!("cuFuncGetParamInfo asked {past_end} time(s) past the last parameter")
    })?;
    // SAFETY: nothing runs in the mock.
    unsafe { b.free(0, data)? };
    Ok(())
}

/// A kernel waiting at a grid barrier, launched without `cooperative()`, traps on a GPU and
/// loses the device (`CUDA_ERROR_LAUNCH_FAILED`, seen on an H200): the launch is refused before
/// it reaches the driver, naming the barrier's line, as the simulator refuses it; launched
/// cooperatively it goes to `cuLaunchCooperativeKernel`. A kernel that only asks `this_grid()`
/// its rank is launched as any other.
fn a_grid_barrier_outside_a_cooperative_launch_is_refused(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    const WAITS: &str = r#"#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void waits(float* out) {
    cg::grid_group grid = cg::this_grid();
    out[grid.thread_rank()] = 1.0f;
    grid.sync();
    if (grid.thread_rank() == 0) out[0] += 1.0f;
}
extern "C" __global__ void ranks(float* out) {
    out[cg::this_grid().thread_rank()] = 1.0f;
}
"#;
    let b = backend_with_nvrtc(mock, nvrtc)?;
    mock.set_param_sizes(&declared_sizes(nvrtc, WAITS, "waits")?)?;
    let data = b.alloc(0, 4 * 256)?;
    let args = [array(data, &[256], &[1], 4)];
    let waits = Kernel::new("waits").with_source(WAITS, "waits");
    let plain = LaunchConfig::new(2, 128);
    // SAFETY: refused before the driver; the mock runs nothing anyway.
    match unsafe { b.launch(0, &waits, &plain, &args, None) } {
        Err(Error::InvalidLaunch { reason, .. })
            if reason.contains("needs a cooperative launch") && reason.contains(".cu:6") => {}
        other => return Err(format!("a grid barrier in a plain launch: {other:?}").into()),
    }
    ensure(launches(mock)? == 0, || {
        "the refused launch reached the driver".into()
    })?;
    // SAFETY: the mock records the launch without running it; the buffer outlives it.
    unsafe { b.launch(0, &waits, &plain.cooperative(), &args, None)? };
    ensure(
        mock.call::<i32>("mock_last_launch_cooperative")? == 1,
        || "the cooperative launch did not reach cuLaunchCooperativeKernel".into(),
    )?;
    let ranks = Kernel::new("ranks").with_source(WAITS, "ranks");
    // SAFETY: as above.
    unsafe { b.launch(0, &ranks, &plain, &args, None)? };
    ensure(
        mock.call::<i32>("mock_last_launch_cooperative")? == 0,
        || "a kernel without a grid barrier was launched cooperatively".into(),
    )?;
    // SAFETY: nothing runs in the mock.
    unsafe { b.free(0, data)? };
    Ok(())
}

/// Dynamic shared memory above the 48 KiB default opts in (cuFuncSetAttribute) up to the
/// device's maximum; the function's static shared memory counts towards both limits.
fn shared_memory_above_48k_opts_in_and_counts_static(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    mock.set_param_sizes(&declared_sizes(nvrtc, SCALE, "scale")?)?;
    mock.call_with("mock_set_static_shared", 16 * 1024)?;
    let data = b.alloc(0, 16)?;
    let kernel = scale_kernel();
    let args = scale_args(data);
    // 40 KiB dynamic + 16 KiB static > 48 KiB: needs the opt-in.
    let big = LaunchConfig::new(1, 32).with_shared_bytes(40 * 1024);
    // SAFETY: the mock runs nothing; the buffer outlives the launches.
    unsafe { b.launch(0, &kernel, &big, &args, None)? };
    ensure(mock.call::<i32>("mock_set_attribute_calls")? == 1, || {
        "no cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) before the launch".into()
    })?;
    ensure(mock.call_with("mock_last_launch", 6)? == 40 * 1024, || {
        "the launch did not get 40 KiB".into()
    })?;
    // The same size again needs no second opt-in; 200 KiB does.
    // SAFETY: as above.
    unsafe { b.launch(0, &kernel, &big, &args, None)? };
    let huge = LaunchConfig::new(1, 32).with_shared_bytes(200 * 1024);
    // SAFETY: as above.
    unsafe { b.launch(0, &kernel, &huge, &args, None)? };
    ensure(mock.call::<i32>("mock_set_attribute_calls")? == 2, || {
        "opt-in calls: expected one per size increase".into()
    })?;
    // 212 KiB dynamic fits the 227 KiB maximum alone, not with 16 KiB static.
    let too_much = LaunchConfig::new(1, 32).with_shared_bytes(212 * 1024);
    // SAFETY: rejected before the launch.
    match unsafe { b.launch(0, &kernel, &too_much, &args, None) } {
        Err(Error::InvalidLaunch { reason, .. })
            if reason.contains("16384 bytes of static") && reason.contains("232448") => {}
        other => return Err(format!("static + dynamic over the maximum: {other:?}").into()),
    }
    ensure(launches(mock)? == 3, || {
        "the rejected launch reached the driver".into()
    })?;
    // SAFETY: nothing runs in the mock.
    unsafe { b.free(0, data)? };
    Ok(())
}

/// A block larger than the compiled kernel can run (its register use allows fewer threads than
/// the device's 1024; the driver would answer CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) is refused
/// before the launch, naming both numbers.
fn blocks_larger_than_the_function_allows_are_refused(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    mock.set_param_sizes(&declared_sizes(nvrtc, SCALE, "scale")?)?;
    mock.call_with("mock_set_function_max_threads", 256)?;
    let outcome = (|| -> Result<(), Failed> {
        let data = b.alloc(0, 16)?;
        let (kernel, args) = (scale_kernel(), scale_args(data));
        let before = launches(mock)?;
        // SAFETY: rejected before the launch.
        match unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 512), &args, None) } {
            Err(Error::InvalidLaunch { reason, .. })
                if reason.contains("512 threads per block") && reason.contains("256") => {}
            other => return Err(format!("512 threads for a 256-thread kernel: {other:?}").into()),
        }
        ensure(launches(mock)? == before, || {
            "the refused launch reached the driver".into()
        })?;
        // SAFETY: the mock runs nothing; the buffer outlives the launch.
        unsafe { b.launch(0, &kernel, &LaunchConfig::new(1, 256), &args, None)? };
        ensure(launches(mock)? == before + 1, || {
            "256 threads did not launch".into()
        })?;
        // SAFETY: nothing runs in the mock.
        unsafe { b.free(0, data)? };
        Ok(())
    })();
    mock.call_with("mock_set_function_max_threads", 1024)?;
    outcome
}

/// NVRTC compiles with -lineinfo (the loaded image carries line information), and a module the
/// JIT refuses is a KernelCompile error carrying the JIT's error log.
fn kernels_carry_line_info_and_jit_logs_reach_errors(
    mock: &Mock,
    nvrtc: &Path,
) -> Result<(), Failed> {
    let b = backend_with_nvrtc(mock, nvrtc)?;
    let data = b.alloc(0, 16)?;
    // SAFETY: the mock runs nothing; the buffer outlives the launch.
    unsafe {
        b.launch(
            0,
            &scale_kernel(),
            &LaunchConfig::new(1, 4),
            &scale_args(data),
            None,
        )?
    };
    let contains = |needle: &str| -> Result<bool, Failed> {
        let needle = std::ffi::CString::new(needle)?;
        // SAFETY: mock_last_image_contains(const char*) reads a NUL-terminated string.
        let f = unsafe {
            mock.library
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> i32>(
                    "mock_last_image_contains",
                )
        }?;
        // SAFETY: `needle` is NUL-terminated and alive for the call.
        Ok(unsafe { f(needle.as_ptr()) } != 0)
    };
    ensure(contains(".loc")? || contains(".debug_line")?, || {
        "the loaded image has no line information (-lineinfo missing)".into()
    })?;
    let refused = gpu_mem_cuda::nvrtc::Compiled {
        code: b".version 9.0\n.target sm_90\n.entry gpu_mem_mock_jit_error() { ret; }\n".to_vec(),
        kind: CodeKind::Ptx,
        capability: ComputeCapability::new(9, 0),
        log: String::new(),
        ptx: String::new(),
        lowered: Vec::new(),
    };
    match b.module_load(0, &refused) {
        Err(Error::KernelCompile { compiler, log, .. })
            if compiler.contains("JIT")
                && log.contains("CUDA_ERROR_INVALID_PTX")
                && log.contains("mock JIT refusal") => {}
        other => return Err(format!("a refused module: {other:?}").into()),
    }
    // SAFETY: nothing runs in the mock.
    unsafe { b.free(0, data)? };
    Ok(())
}
