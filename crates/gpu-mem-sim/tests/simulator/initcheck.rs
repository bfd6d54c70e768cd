//! initcheck (`Checks::initcheck`): a kernel reading device memory that nothing wrote since it
//! was allocated is refused with the first unwritten byte and the line; memory written by a
//! copy, a fill, a compiled kernel or handed to a closure kernel reads clean.

// Source kernels: the host compiler and loaded libraries are outside what Miri interprets.
#![cfg(not(miri))]

use crate::common::{self, array_arg, with_checks as with};
use gpu_mem_core::backend::{DevicePtr, Memory, Transfer};
use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::{Checks, SimBackend, SimKernel};

fn initchecked() -> SimBackend {
    with(Checks {
        initcheck: true,
        ..Checks::default()
    })
}

/// Doubles `n` floats of `in` into `out`, one thread each.
const DOUBLE: &str = r#"
extern "C" __global__ void k(const float* in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = 2.0f * in[i];
}
"#;

/// An allocation of `n` floats, its first `written` ones copied from the host (1.0 each).
fn floats(backend: &SimBackend, n: usize, written: usize) -> DevicePtr {
    let ptr = backend.alloc(0, n * 4).unwrap();
    let ones = vec![1.0f32; written];
    // SAFETY: `ptr` holds `n` >= `written` floats.
    unsafe { backend.copy_htod(0, ptr, ones.as_ptr().cast(), written * 4) }.unwrap();
    ptr
}

/// Runs `code`'s kernel `k` on one block of `n` threads over `arrays` of `n` floats each, and
/// returns the last array afterwards, or the launch's error.
fn run(
    backend: &SimBackend,
    code: &str,
    arrays: &[DevicePtr],
    n: usize,
) -> Result<Vec<f32>, Error> {
    let kernel = Kernel::from_source(code, "k");
    let args: Vec<_> = arrays.iter().map(|&p| array_arg::<f32>(p, n)).collect();
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(n as u32, 1, 1));
    common::launch(backend, &kernel, config, &args)?;
    let mut back = vec![0.0f32; n];
    let last = *arrays.last().unwrap();
    // SAFETY: `last` holds `n` floats; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), last, n * 4) }.unwrap();
    Ok(back)
}

#[track_caller]
fn fault_of(result: Result<Vec<f32>, Error>) -> ([u32; 3], String) {
    match result {
        Err(Error::KernelFault {
            thread, message, ..
        }) => (thread, message),
        other => panic!("expected an initcheck fault, got {other:?}"),
    }
}

#[test]
fn a_read_of_bytes_no_copy_wrote_names_the_first_of_them_and_the_line() {
    let backend = initchecked();
    // Half of the input was copied in.
    let (input, out) = (floats(&backend, 64, 32), floats(&backend, 64, 0));
    let (thread, message) = fault_of(run(&backend, DOUBLE, &[input, out], 64));
    assert_eq!(thread, [32, 0, 0], "{message}");
    assert!(
        message.contains("initcheck: Uninitialized __global__ memory read of size 4")
            && message.contains("byte 128 of the 256-byte allocation")
            && message.contains("never written since it was allocated")
            && message.contains("k.cu:4"),
        "{message}"
    );
    // Without initcheck the same read gives the simulator's zeros, memcheck or not.
    for checks in [
        Checks::default(),
        Checks {
            memcheck: true,
            ..Checks::default()
        },
    ] {
        let backend = with(checks);
        let (input, out) = (floats(&backend, 64, 32), floats(&backend, 64, 0));
        let doubled = run(&backend, DOUBLE, &[input, out], 64).unwrap();
        assert_eq!(doubled[..32], [2.0; 32]);
        assert_eq!(doubled[32..], [0.0; 32]);
    }
}

#[test]
fn memory_written_by_a_fill_a_kernel_or_a_closure_reads_clean() {
    let backend = initchecked();
    let n = 64;
    // A fill.
    let filled = floats(&backend, n, 0);
    // SAFETY: `filled` holds `n` floats.
    unsafe { backend.memset_d8(0, filled, 0, n * 4) }.unwrap();
    let out = floats(&backend, n, 0);
    assert_eq!(
        run(&backend, DOUBLE, &[filled, out], n).unwrap(),
        vec![0.0; n]
    );
    // `out` was written by that kernel: reading it is fine.
    let again = floats(&backend, n, 0);
    assert_eq!(
        run(&backend, DOUBLE, &[out, again], n).unwrap(),
        vec![0.0; n]
    );
    // A closure kernel's arrays count as written (its writes are not seen one by one).
    let by_closure = floats(&backend, n, 0);
    let ones = Kernel::sim("ones", |t| t.array::<f32>(0).set([t.grid1()], 1.0));
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(n as u32, 1, 1));
    common::launch(&backend, &ones, config, &[array_arg::<f32>(by_closure, n)]).unwrap();
    let doubled = floats(&backend, n, 0);
    assert_eq!(
        run(&backend, DOUBLE, &[by_closure, doubled], n).unwrap(),
        vec![2.0; n]
    );
    for ptr in [filled, out, again, by_closure, doubled] {
        // SAFETY: allocated above, nothing pending.
        unsafe { backend.free(0, ptr) }.unwrap();
    }
}

#[test]
fn a_histogram_whose_bins_were_never_cleared_is_an_uninitialized_atomic() {
    let code = r#"
extern "C" __global__ void k(const float* in, unsigned int* bins) {
    int i = threadIdx.x;
    atomicAdd(&bins[i % 4], (unsigned int)in[i]);
}
"#;
    let backend = initchecked();
    let kernel = Kernel::from_source(code, "k");
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(64, 1, 1));
    let (input, bins) = (floats(&backend, 64, 64), backend.alloc(0, 16).unwrap());
    let args = [array_arg::<f32>(input, 64), array_arg::<u32>(bins, 4)];
    let (thread, message) =
        fault_of(common::launch(&backend, &kernel, config, &args).map(|()| vec![]));
    assert_eq!(thread, [0, 0, 0], "{message}");
    assert!(
        message.contains("Uninitialized __global__ memory atomic of size 4")
            && message.contains("byte 0 of the 16-byte allocation"),
        "{message}"
    );
    // Cleared first, the same kernel is clean.
    // SAFETY: `bins` holds 16 bytes.
    unsafe { backend.memset_d8(0, bins, 0, 16) }.unwrap();
    common::launch(&backend, &kernel, config, &args).unwrap();
    let mut counted = [0u32; 4];
    // SAFETY: `bins` holds 4 counts; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, counted.as_mut_ptr().cast(), bins, 16) }.unwrap();
    assert_eq!(counted, [16; 4]);
}

/// Reads of shared memory no thread of the block wrote, logged as warnings (once per launch)
/// with the kernel named `name`.
fn shared_warnings(name: &str) -> Vec<String> {
    let warnings = common::warnings().lock().unwrap().clone();
    warnings
        .into_iter()
        .filter(|w| w.contains(&format!("kernel=\"{name}\"")))
        .collect()
}

#[test]
fn shared_memory_no_thread_of_the_block_wrote_is_reported_once_per_launch() {
    let half = r#"
extern "C" __global__ void half_tile(const float* in, float* out) {
    __shared__ float tile[64];
    int t = threadIdx.x;
    if (t < 32) tile[t] = in[t];
    __syncthreads();
    out[t] = tile[63 - t];
}
"#;
    common::warnings();
    let backend = initchecked();
    let (input, out) = (floats(&backend, 64, 64), floats(&backend, 64, 0));
    let args = [array_arg::<f32>(input, 64), array_arg::<f32>(out, 64)];
    // A warning, not a fault: the simulator cannot tell whether the value read is used.
    let kernel = Kernel::from_source(half, "half_tile");
    let config = LaunchConfig::new(Dim3::new(3, 1, 1), Dim3::new(64, 1, 1));
    common::launch(&backend, &kernel, config, &args).unwrap();
    let said = shared_warnings("half_tile");
    assert_eq!(said.len(), 1, "once for the launch: {said:?}");
    assert!(
        said[0].contains("initcheck: Uninitialized __shared__ memory read of size 4")
            && said[0].contains("byte 252 of the 256-byte shared array `tile`")
            && said[0].contains("not written by any thread of this block")
            && said[0].contains("half_tile.cu:7"),
        "{said:?}"
    );
    // Written whole by the block's threads first: nothing to say, block after block (each
    // block's own writes count, not what the block before left in the same memory).
    let whole = half
        .replace("if (t < 32) ", "")
        .replace("half_tile", "whole_tile");
    let kernel = Kernel::from_source(whole.as_str(), "whole_tile");
    common::launch(&backend, &kernel, config, &args).unwrap();
    assert_eq!(shared_warnings("whole_tile"), Vec::<String>::new());
    // Dynamic shared memory is watched the same way.
    let dynamic = r#"
extern "C" __global__ void from_dynamic(const float* in, float* out) {
    extern __shared__ float buffer[];
    int t = threadIdx.x;
    out[t] = buffer[t] + in[t];
}
"#;
    let kernel = Kernel::from_source(dynamic, "from_dynamic");
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(64, 1, 1)).with_shared_bytes(256);
    common::launch(&backend, &kernel, config, &args).unwrap();
    let said = shared_warnings("from_dynamic");
    assert!(
        said.len() == 1
            && said[0].contains("byte 0 of the 256-byte dynamic shared memory of the block"),
        "{said:?}"
    );
}
