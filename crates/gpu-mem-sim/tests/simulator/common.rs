//! What several of the simulator's test modules share: launching a kernel over one array.

use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::backend::{Launch, Memory, Transfer};
use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_core::{Element, Error, Kernel};
use gpu_mem_sim::SimBackend;

/// A one-dimensional array argument of `len` elements of `T` at `ptr`.
pub fn array_arg<T: Element>(ptr: DevicePtr, len: usize) -> LaunchArg {
    LaunchArg::Array {
        ptr,
        shape: vec![len],
        strides: vec![1],
        min_offset: 0,
        span_len: len,
        itemsize: T::itemsize(),
        elem: std::any::TypeId::of::<T>(),
        dtype: T::dtype(),
    }
}

/// Launches `kernel` synchronously on device 0.
pub fn launch(
    backend: &SimBackend,
    kernel: &Kernel,
    config: LaunchConfig,
    args: &[LaunchArg],
) -> Result<(), Error> {
    // SAFETY: the tests' kernels stay inside their arguments (bounds-checked by the simulator).
    unsafe { backend.launch(0, kernel, &config, args, None) }
}

/// Launches `kernel` (synchronously) with one array argument holding `init`, and returns the
/// array afterwards, or the launch's error.
pub fn run_on_array<T: Element>(
    backend: &SimBackend,
    kernel: &Kernel,
    config: LaunchConfig,
    init: &[T],
) -> Result<Vec<T>, Error> {
    let bytes = std::mem::size_of_val(init);
    let out = backend.alloc(0, bytes.max(1)).unwrap();
    // SAFETY: `out` holds `bytes` bytes.
    unsafe { backend.copy_htod(0, out, init.as_ptr().cast(), bytes) }.unwrap();
    // SAFETY: the tests' kernels index their argument within bounds (checked by the simulator).
    let result =
        unsafe { backend.launch(0, kernel, &config, &[array_arg::<T>(out, init.len())], None) };
    let mut back = init.to_vec();
    // SAFETY: as above; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), out, bytes) }.unwrap();
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
    result.map(|()| back)
}

/// The watchdog time of the tests of its reports: short, so they do not wait the default 10 s;
/// the counts of rounds and spins shrink with it (`Watchdog::after`), down to their least.
pub const WATCHDOG_SECONDS: f64 = 0.25;

/// A simulator whose watchdog reports a block without progress after `seconds` instead of the
/// default 10, so that tests of the report do not wait that long.
pub fn backend_with_watchdog(seconds: f64) -> gpu_mem_sim::SimBackend {
    gpu_mem_sim::SimBackend::new(gpu_mem_sim::SimConfig {
        devices: vec![gpu_mem_sim::SimDeviceConfig {
            watchdog: gpu_mem_sim::Watchdog::after(std::time::Duration::from_secs_f64(seconds)),
            ..gpu_mem_sim::SimDeviceConfig::default()
        }],
    })
}

/// Warnings the simulator logged through `tracing`, from every thread (a process-wide
/// subscriber, installed by the first call; tests find theirs by a kernel name of their own).
pub fn warnings() -> &'static std::sync::Mutex<Vec<String>> {
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    static INSTALLED: std::sync::Once = std::sync::Once::new();

    /// Every field of an event, as `name=value`.
    struct Fields(String);
    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={value:?} ", field.name()));
        }
    }
    struct Warnings;
    impl Subscriber for Warnings {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            *metadata.level() <= Level::WARN
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            WARNINGS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(fields.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
    INSTALLED.call_once(|| {
        // (Another subscriber set first would keep the warnings from here: a test then fails
        // saying it saw none.)
        let _ = tracing::subscriber::set_global_default(Warnings);
    });
    &WARNINGS
}

/// Runs `check(seed)` for seeds `0..GPU_MEM_RANDOM_KERNELS` (`default` without it), spread over
/// the machine's cores, each worker taking every `workers`-th seed (each seed compiles kernels
/// of its own, which dominates).
pub fn for_random_seeds(default: u64, check: impl Fn(u64) + Sync) {
    let seeds = std::env::var("GPU_MEM_RANDOM_KERNELS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let check = &check;
    std::thread::scope(|scope| {
        for first in 0..workers.min(seeds) {
            scope.spawn(move || {
                for seed in (first..seeds).step_by(workers as usize) {
                    check(seed);
                }
            });
        }
    });
}

/// A small xorshift from `seed`: each call gives a number below its argument (the random kernel
/// generators' choices, the same sequence for the same seed).
pub fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    }
}

/// A simulator of one device that checks its compiled kernels as `checks` says.
pub fn with_checks(checks: gpu_mem_sim::Checks) -> gpu_mem_sim::SimBackend {
    gpu_mem_sim::SimBackend::new(gpu_mem_sim::SimConfig {
        devices: vec![gpu_mem_sim::SimDeviceConfig {
            checks,
            ..gpu_mem_sim::SimDeviceConfig::default()
        }],
    })
}

/// A 32-bit integer argument.
pub fn int_arg(v: i32) -> LaunchArg {
    LaunchArg::Scalar {
        bytes: v.to_ne_bytes().to_vec(),
        elem: std::any::TypeId::of::<i32>(),
        dtype: "i32",
    }
}
