//! CUDA C++ as people write it (`tests/kernels/cuda/*.cu`), launched on every backend that runs
//! kernels: pointer parameters, C++ linkage and namespaces, the math API and intrinsics, vector
//! types, `extern __shared__`, template kernels, `__constant__` and `__device__` variables
//! shared by a module's kernels, cooperative groups; then what ends a thread on the simulator
//! (assert, exit) and the errors of arguments a pointer parameter cannot take.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{DevicePointer, Error, Runtime};
use ndarray::{Array1, Array2, s};

const POINTERS: &str = include_str!("../../kernels/cuda/pointers.cu");
const MATH: &str = include_str!("../../kernels/cuda/math.cu");
const SHARED_TEMPLATES: &str = include_str!("../../kernels/cuda/shared_templates.cu");
const VARIABLES: &str = include_str!("../../kernels/cuda/variables.cu");
const GROUPS: &str = include_str!("../../kernels/cuda/groups.cu");
const TRAPS: &str = include_str!("../../kernels/cuda/traps.cu");
const SHIFTS: &str = include_str!("../../kernels/cuda/shifts.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["cuda_source", Requires::Kernels;
        pointer_parameters_take_arrays_and_host_arrays,
        structs_namespaces_and_raw_pointers,
        math_api_and_intrinsics,
        extern_shared_and_template_kernels,
        vector_types_have_cuda_layouts,
        constant_and_device_variables_are_shared_by_a_module,
        cooperative_groups_block_tiles_and_reduce,
    ];
    cases.extend(crate::cases!["cuda_source", Requires::ClampedShifts;
        shifts_by_the_width_or_more_are_a_gpus,
    ]);
    cases.extend(crate::cases!["cuda_source", Requires::Simulator;
        arrays_a_pointer_cannot_take_are_refused,
        failed_assert_and_exit_are_faults_not_the_end,
        missing_kernels_and_variables_are_named,
    ]);
    cases
}

fn device(rt: &Runtime) -> Result<gpu_mem::Device, String> {
    rt.device(0).map_err(fail("device"))
}

fn pointer_parameters_take_arrays_and_host_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 1000usize;
    let a = Array1::from_shape_fn(n, |i| i as f32);
    let b = Array1::from_shape_fn(n, |i| (2 * i) as f32 + 0.5);
    let mut d_a = dev.to_device(&a).map_err(fail("a"))?;
    let mut c = Array1::<f32>::zeros(n);
    let add = Kernel::from_source(POINTERS, "vector_add");
    // SAFETY: the kernel touches indices below n of each array.
    unsafe {
        dev.launch(
            &add,
            LaunchConfig::for_items(n, 256),
            &mut [
                &mut d_a,
                &mut In(&b),
                &mut Out(&mut c),
                &mut Scalar(n as i32),
            ],
        )
    }
    .map_err(fail("launch"))?;
    ensure!(c == &a + &b, "vector_add differs");
    // A 2-d C-order array is its first element's address too.
    let m = Array2::from_shape_fn((20, 50), |(i, j)| (i * 50 + j) as f32);
    let mut d_m = dev.to_device(&m).map_err(fail("m"))?;
    let mut d_out = dev
        .device_array::<f32>(&[20, 50], Order::C)
        .map_err(fail("out"))?;
    let mut d_m2 = d_m.slice(s![.., ..]).map_err(fail("view"))?;
    // SAFETY: 1000 elements each.
    unsafe {
        dev.launch(
            &add,
            LaunchConfig::for_items(n, 128),
            &mut [&mut d_m, &mut d_m2, &mut d_out, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("launch 2-d"))?;
    let out = d_out.copy_to_host().map_err(fail("copy"))?;
    ensure!(out == (&m * 2.0).into_dyn(), "2-d vector_add differs");
    Ok(())
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct Pair {
    first: i32,
    second: f32,
}

fn structs_namespaces_and_raw_pointers(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 77usize;
    let pairs = Array1::from_shape_fn(n, |i| Pair {
        first: i as i32,
        second: 0.0,
    });
    let mut d_pairs = dev.to_device(&pairs).map_err(fail("pairs"))?;
    let kernel = Kernel::from_source(POINTERS, "pairs");
    // SAFETY: n pairs.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(n, 32),
            &mut [&mut d_pairs, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("pairs launch"))?;
    let out = d_pairs.copy_to_host().map_err(fail("copy"))?;
    for (i, p) in out.iter().enumerate() {
        ensure!(
            p.first == i as i32 && p.second == i as f32 * 0.5,
            "pair {i}: {p:?}"
        );
    }
    // A namespaced kernel, given a raw device address (as interop hands one over).
    let target = dev
        .device_array::<u32>(&[300], Order::C)
        .map_err(fail("target"))?;
    let fill = Kernel::from_source(POINTERS, "outer::fill");
    let mut raw = DevicePointer::<u32>::new(target.raw_parts().ptr);
    // SAFETY: the kernel writes 300 elements of the 300-element array `target`, which lives
    // until after the synchronous launch.
    unsafe {
        dev.launch(
            &fill,
            LaunchConfig::new(2, 64),
            &mut [&mut raw, &mut Scalar(7u32), &mut Scalar(300i32)],
        )
    }
    .map_err(fail("fill launch"))?;
    let filled = target.copy_to_host().map_err(fail("copy fill"))?;
    ensure!(
        filled.iter().enumerate().all(|(i, v)| *v == 7 + i as u32),
        "outer::fill differs"
    );
    // A null pointer, and an empty array (which has no memory), reach the kernel as nullptr.
    let nulls = Kernel::from_source(POINTERS, "null_pointers");
    let mut empty = dev
        .device_array::<i32>(&[0], Order::C)
        .map_err(fail("empty"))?;
    let mut out = dev.to_device_slice(&[7i32, 7]).map_err(fail("out"))?;
    // SAFETY: the kernel compares its first two pointers with nullptr and writes out[0..2].
    unsafe {
        dev.launch(
            &nulls,
            LaunchConfig::new(1, 1),
            &mut [&mut DevicePointer::<f32>::null(), &mut empty, &mut out],
        )
    }
    .map_err(fail("null_pointers launch"))?;
    let flags = out.copy_to_host().map_err(fail("copy flags"))?;
    ensure!(
        flags.as_slice() == Some(&[1, 1][..]),
        "null and empty pointers seen as {flags:?}"
    );
    Ok(())
}

/// `a` and `b` agree to `rel` relatively (or `abs` absolutely near 0), NaNs alike.
fn close(a: f32, b: f32, rel: f32, abs: f32) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= abs.max(rel * a.abs().max(b.abs()))
}

fn math_api_and_intrinsics(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 96usize;
    let x = Array1::from_shape_fn(n, |i| (i as f32 - 48.0) * 0.37);
    let mut out = Array2::<f32>::zeros((n, 24));
    let mut bits = Array2::<u32>::zeros((n, 8));
    let kernel = Kernel::from_source(MATH, "math_row");
    // SAFETY: each thread writes its own row.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(n, 32),
            &mut [
                &mut In(&x),
                &mut Out(&mut out),
                &mut Out(&mut bits),
                &mut Scalar(n as i32),
            ],
        )
    }
    .map_err(fail("launch"))?;
    let erf = |v: f32| libm_erf(f64::from(v)) as f32;
    for (i, &x) in x.iter().enumerate() {
        let normcdf = 0.5 * (1.0 + libm_erf(f64::from(x) / 2f64.sqrt())) as f32;
        let want: [f32; 24] = [
            x.abs().sqrt(),
            (x * 0.1).exp(),
            (x * 0.1).exp(),
            1.0 / (x.abs() + 1.0).sqrt(),
            x / 3.0,
            x.clamp(0.0, 1.0),
            x.abs().powf(1.5),
            (x.abs() + 1.0).powf(0.5),
            x.sin(),
            x.cos(),
            x.min(0.25) + x.max(-0.25),
            x.min(1.0) - x.max(-1.0),
            erf(x * 0.1),
            x * 0.1,
            normcdf,
            x,
            x.round_ties_even(),
            x.trunc(),
            (x.abs() + 1.0).log2(),
            (x.abs() + 1.0).sqrt(),
            x.floor() + x.ceil() + x.trunc() + x.round(),
            x.mul_add(2.0, 1.0),
            0.0,
            x.hypot(2.0),
        ];
        for (k, w) in want.iter().enumerate() {
            // Fast intrinsics (__expf, __powf, __fdividef) may be a few ulp off on a GPU;
            // erfinv(erf(y)) loses a little near 0.
            ensure!(
                close(out[[i, k]], *w, 2e-5, 2e-6),
                "x = {x}: result {k} is {} (expected {w})",
                out[[i, k]]
            );
        }
        let u = (i as u32).wrapping_mul(2_654_435_761);
        let perm = {
            let bytes = ((0x0123_4567u64) << 32) | u64::from(u);
            let pick = |sel: u32| ((bytes >> (8 * sel)) & 0xff) as u32;
            pick(0) | pick(4) << 8 | pick(1) << 16 | pick(5) << 24
        };
        let want_bits: [u32; 8] = [
            u.count_ones(),
            u.leading_zeros(),
            if u == 0 { 0 } else { u.trailing_zeros() + 1 },
            u.reverse_bits(),
            perm,
            (i as i32).wrapping_mul(-3) as u32,
            ((u64::from(u) * 0x9e37_79b9) >> 32) as u32,
            (i as u32).max(7) + u.min(1000),
        ];
        for (k, w) in want_bits.iter().enumerate() {
            ensure!(
                bits[[i, k]] == *w,
                "i = {i}: integer result {k} is {:#x} (expected {w:#x})",
                bits[[i, k]]
            );
        }
    }
    Ok(())
}

/// erf by its series and continued fraction (no libm in the test crate): accurate to 1e-12.
fn libm_erf(x: f64) -> f64 {
    let t = x.abs();
    let value = if t < 3.0 {
        let mut sum = t;
        let mut term = t;
        for n in 1..200 {
            term *= -t * t / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc by Lentz's continued fraction.
        let mut f = t;
        for k in (1..60).rev() {
            f = t + (k as f64 / 2.0) / f;
        }
        1.0 - (-t * t).exp() / (f * std::f64::consts::PI.sqrt())
    };
    value.copysign(x)
}

fn extern_shared_and_template_kernels(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 1000usize;
    let input = Array1::from_shape_fn(n, |i| (i % 13) as i32 - 4);
    let module = Module::from_source(SHARED_TEMPLATES)
        .with_name_expressions(["block_sum<int, 128>", "block_sum<float, 64>"]);
    let blocks = n.div_ceil(128);
    let mut sums = Array1::<i32>::zeros(blocks);
    // SAFETY: each block reads its 128 inputs (bounds-checked) and writes one sum; the dynamic
    // shared memory holds 128 ints.
    unsafe {
        dev.launch(
            &module.kernel("block_sum<int, 128>"),
            LaunchConfig::new(blocks as u32, 128).with_shared_bytes(128 * 4),
            &mut [&mut In(&input), &mut Out(&mut sums), &mut Scalar(n as u32)],
        )
    }
    .map_err(fail("int sums"))?;
    for (b, sum) in sums.iter().enumerate() {
        let want: i32 = input.slice(s![b * 128..((b + 1) * 128).min(n)]).sum();
        ensure!(*sum == want, "block {b}: {sum} != {want}");
    }
    let floats = input.mapv(|v| v as f32 * 0.5);
    let blocks = n.div_ceil(64);
    let mut fsums = Array1::<f32>::zeros(blocks);
    // SAFETY: as above, 64 floats of dynamic shared memory.
    unsafe {
        dev.launch(
            // Spelled differently from the module's expression: the same instantiation.
            &module.kernel("block_sum<float,64>"),
            LaunchConfig::new(blocks as u32, 64).with_shared_bytes(64 * 4),
            &mut [
                &mut In(&floats),
                &mut Out(&mut fsums),
                &mut Scalar(n as u32),
            ],
        )
    }
    .map_err(fail("float sums"))?;
    for (b, sum) in fsums.iter().enumerate() {
        let want: f32 = floats.slice(s![b * 64..((b + 1) * 64).min(n)]).sum();
        ensure!(*sum == want, "block {b}: {sum} != {want}");
    }
    // A template kernel named by Kernel::from_source is its own module's instantiation.
    let single = Kernel::from_source(SHARED_TEMPLATES, "block_sum<int, 128>");
    let mut again = Array1::<i32>::zeros(n.div_ceil(128));
    // SAFETY: as the first launch.
    unsafe {
        dev.launch(
            &single,
            LaunchConfig::new(n.div_ceil(128) as u32, 128).with_shared_bytes(128 * 4),
            &mut [&mut In(&input), &mut Out(&mut again), &mut Scalar(n as u32)],
        )
    }
    .map_err(fail("single"))?;
    ensure!(again == sums, "the instantiation by name differs");
    Ok(())
}

fn vector_types_have_cuda_layouts(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 100usize;
    let v = Array1::from_shape_fn(n, |i| {
        let f = i as f32;
        [f, f + 0.25, f + 0.5, f + 0.75]
    });
    let mut d_v = dev.to_device(&v).map_err(fail("v"))?;
    let swap = Kernel::from_source(SHARED_TEMPLATES, "swap_halves");
    // SAFETY: n float4s; 32 float2s of dynamic shared memory per block of 32.
    unsafe {
        dev.launch(
            &swap,
            LaunchConfig::for_items(n, 32).with_shared_bytes(32 * 8),
            &mut [&mut d_v, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("swap"))?;
    let out = d_v.copy_to_host().map_err(fail("copy"))?;
    for (i, (o, w)) in out.iter().zip(v.iter()).enumerate() {
        ensure!(*o == [w[2], w[3], w[0], w[1]], "float4 {i}: {o:?}");
    }
    let mut layouts = Array1::<i32>::zeros(6);
    let kernel = Kernel::from_source(SHARED_TEMPLATES, "layouts");
    // SAFETY: one thread writes 6 ints.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 1),
            &mut [&mut Out(&mut layouts)],
        )
    }
    .map_err(fail("layouts"))?;
    // size * 100 + alignment, as CUDA's vector_types.h declares them.
    let want = [1616, 1204, 1616, 404, 808, 808];
    ensure!(layouts.to_vec() == want, "vector type layouts {layouts}");
    Ok(())
}

fn constant_and_device_variables_are_shared_by_a_module(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let polynomial = Kernel::from_source(VARIABLES, "polynomial");
    let count_again = Kernel::from_source(VARIABLES, "count_again");
    let coefficients = [1.0f32, -2.0, 0.5, 0.25];
    dev.copy_to_symbol(&polynomial, "coefficients", &coefficients)
        .map_err(fail("coefficients"))?;
    // Written through one kernel, read through another of the same source.
    let read: Vec<f32> = dev
        .copy_from_symbol(&count_again, "coefficients")
        .map_err(fail("read back"))?;
    ensure!(read == coefficients, "coefficients read back {read:?}");
    dev.copy_to_symbol(&polynomial, "launches", &[0u32])
        .map_err(fail("launches"))?;
    let n = 300usize;
    let x = Array1::from_shape_fn(n, |i| i as f32 * 0.01 - 1.0);
    let mut y = Array1::<f32>::zeros(n);
    // SAFETY: n elements each.
    unsafe {
        dev.launch(
            &polynomial,
            LaunchConfig::for_items(n, 64),
            &mut [&mut In(&x), &mut Out(&mut y), &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("polynomial"))?;
    for (xv, yv) in x.iter().zip(y.iter()) {
        let want = 1.0 + xv * (-2.0 + xv * (0.5 + xv * 0.25));
        ensure!(close(*yv, want, 1e-6, 1e-6), "p({xv}) = {yv}, not {want}");
    }
    let mut seen = Array1::<u32>::zeros(1);
    // SAFETY: one element.
    unsafe {
        dev.launch(
            &count_again,
            LaunchConfig::new(1, 32),
            &mut [&mut Out(&mut seen)],
        )
    }
    .map_err(fail("count_again"))?;
    ensure!(
        seen[0] == 1,
        "the second kernel saw {} launches of the first",
        seen[0]
    );
    let launches: Vec<u32> = dev
        .copy_from_symbol(&polynomial, "launches")
        .map_err(fail("launches back"))?;
    ensure!(launches == [2], "launches {launches:?}");
    let totals: Vec<i32> = dev
        .copy_from_symbol(&Module::from_source(VARIABLES), "totals")
        .map_err(fail("totals"))?;
    ensure!(totals == [10, 30], "totals {totals:?}");
    // Too many values for the variable: an error, nothing written.
    let e = dev
        .copy_to_symbol(&polynomial, "coefficients", &[0.0f32; 5])
        .err();
    ensure!(
        matches!(e, Some(Error::InvalidArgument { .. })),
        "5 values into 4: {e:?}"
    );
    Ok(())
}

fn cooperative_groups_block_tiles_and_reduce(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (blocks, threads) = (3usize, 128usize);
    let input = Array1::from_shape_fn(blocks * threads, |i| ((i * 7) % 11) as i32);
    let mut sums = Array1::<i32>::zeros(blocks);
    let tiles = threads / 32;
    let mut info = Array2::<i32>::zeros((blocks * tiles, 3));
    let kernel = Kernel::from_source(GROUPS, "group_sums");
    // SAFETY: the grid covers the input exactly; outputs are sized per block and tile.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(blocks as u32, threads as u32),
            &mut [&mut In(&input), &mut Out(&mut sums), &mut Out(&mut info)],
        )
    }
    .map_err(fail("launch"))?;
    for b in 0..blocks {
        let block = input.slice(s![b * threads..(b + 1) * threads]);
        ensure!(
            sums[b] == block.sum(),
            "block {b}: {} != {}",
            sums[b],
            block.sum()
        );
        for t in 0..tiles {
            let tile = block.slice(s![t * 32..(t + 1) * 32]);
            let row = info.row(b * tiles + t);
            let odd = tile
                .iter()
                .enumerate()
                .fold(0u32, |m, (l, v)| m | (u32::from(v & 1 == 1) << l));
            ensure!(row[0] == tile.sum(), "tile {b}.{t}: reduce {}", row[0]);
            ensure!(row[1] as u32 == odd, "tile {b}.{t}: ballot {:#x}", row[1]);
            ensure!(row[2] == 2, "tile {b}.{t}: any/all {}", row[2]);
        }
    }
    Ok(())
}

fn arrays_a_pointer_cannot_take_are_refused(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let add = Kernel::from_source(POINTERS, "vector_add");
    let m = Array2::from_shape_fn((10, 10), |(i, j)| (i + j) as f32);
    let d_m = dev.to_device(&m).map_err(fail("m"))?;
    let mut column = d_m.slice(s![.., 3]).map_err(fail("slice"))?;
    let mut out = dev
        .device_array::<f32>(&[10], Order::C)
        .map_err(fail("out"))?;
    let mut column2 = column.slice(s![..]).map_err(fail("view"))?;
    // SAFETY: refused before it runs.
    let strided = unsafe {
        dev.launch(
            &add,
            LaunchConfig::new(1, 32),
            &mut [&mut column, &mut column2, &mut out, &mut Scalar(10i32)],
        )
    };
    ensure!(
        matches!(&strided, Err(Error::InvalidLaunch { reason, .. }) if reason.contains("contiguous")),
        "a strided view for a float*: {strided:?}"
    );
    let mut ints = dev
        .device_array::<i32>(&[10], Order::C)
        .map_err(fail("ints"))?;
    let mut out2 = out.slice(s![..]).map_err(fail("view"))?;
    // SAFETY: refused before it runs.
    let wrong = unsafe {
        dev.launch(
            &add,
            LaunchConfig::new(1, 32),
            &mut [&mut ints, &mut out2, &mut out, &mut Scalar(10i32)],
        )
    };
    ensure!(
        matches!(&wrong, Err(Error::InvalidLaunch { reason, .. }) if reason.contains("i32")),
        "an i32 array for a const float*: {wrong:?}"
    );
    Ok(())
}

fn failed_assert_and_exit_are_faults_not_the_end(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let values = Array1::from_shape_fn(64, |i| if i == 37 { -1 } else { i as i32 });
    let checked = Kernel::from_source(TRAPS, "checked");
    // SAFETY: 64 elements.
    let failed = unsafe {
        dev.launch(
            &checked,
            LaunchConfig::new(2, 32),
            &mut [&mut In(&values), &mut Scalar(64i32)],
        )
    };
    ensure!(
        matches!(&failed, Err(Error::KernelFault { message, thread, .. })
            if message.contains("values[i] >= 0") && message.contains("checked.cu:9")
                && *thread == [5, 0, 0]),
        "a failed assert: {failed:?}"
    );
    let trapped = Kernel::from_source(TRAPS, "trapped");
    // SAFETY: no memory is touched.
    let trap = unsafe { dev.launch(&trapped, LaunchConfig::new(1, 8), &mut [&mut Scalar(3i32)]) };
    ensure!(
        matches!(&trap, Err(Error::KernelFault { message, .. }) if message.contains("__trap")),
        "__trap in a kernel: {trap:?}"
    );
    // `exit` is host code CUDA refuses in a kernel; C++ compiles it, and the simulator reports
    // it instead of ending the program.
    const LEAVES: &str = "#include <stdlib.h>\n\
                          __global__ void leaves(int code) { if (threadIdx.x == 3) exit(code); }\n";
    let leaves = Kernel::from_source(LEAVES, "leaves");
    // SAFETY: no memory is touched.
    let exited = unsafe { dev.launch(&leaves, LaunchConfig::new(1, 8), &mut [&mut Scalar(0i32)]) };
    ensure!(
        matches!(&exited, Err(Error::KernelFault { message, .. }) if message.contains("exit(0)")),
        "exit in a kernel: {exited:?}"
    );
    // A shift count with a template argument list in it defeats the wrapping that gives shifts
    // a GPU's answer (the module is built as written): a shift by 32 is then a fault naming
    // its line, not the host processor's answer.
    const SHIFTS_AS_WRITTEN: &str = "template <typename T> __device__ T count(T c) { return c; }
                                     __global__ void shifted(unsigned* out, int n) {
                                         out[0] = 1u << count<int>(n);
                                     }
";
    let shifted = Kernel::from_source(SHIFTS_AS_WRITTEN, "shifted");
    let mut out = dev.to_device_slice(&[7u32]).map_err(fail("out"))?;
    // SAFETY: the kernel writes out[0].
    let result = unsafe {
        dev.launch(
            &shifted,
            LaunchConfig::new(1, 1),
            &mut [&mut out, &mut Scalar(32i32)],
        )
    };
    ensure!(
        matches!(&result, Err(Error::KernelFault { message, .. })
            if message.contains("by 32 bits") && message.contains("shifted.cu:3")),
        "a shift by 32 the wrapping missed: {result:?}"
    );
    Ok(())
}

fn missing_kernels_and_variables_are_named(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let missing = Kernel::from_source(POINTERS, "vector_sub");
    // SAFETY: refused before it runs.
    let e = unsafe { dev.launch(&missing, LaunchConfig::new(1, 1), &mut []) };
    ensure!(
        matches!(&e, Err(Error::InvalidLaunch { reason, .. })
            if reason.contains("vector_sub") && reason.contains("vector_add, pairs, outer::fill")),
        "a kernel the source lacks: {e:?}"
    );
    let template = Module::from_source(SHARED_TEMPLATES).kernel("block_sum");
    // SAFETY: refused before it runs.
    let e = unsafe { dev.launch(&template, LaunchConfig::new(1, 1), &mut []) };
    ensure!(
        matches!(&e, Err(Error::InvalidLaunch { reason, .. }) if reason.contains("instantiation")),
        "a template without arguments: {e:?}"
    );
    let e = dev
        .copy_from_symbol::<f32, _>(&Kernel::from_source(VARIABLES, "polynomial"), "coefs")
        .err();
    ensure!(
        matches!(&e, Some(Error::InvalidArgument { reason, .. })
            if reason.contains("coefficients, launches, totals")),
        "a variable the module lacks: {e:?}"
    );
    Ok(())
}

/// Shifts by the width or more, and by a negative count, give what a GPU gives (PTX clamps the
/// count: 0, or -1 for a right shift of a negative value), not what the host processor would
/// (the count modulo the width), on every backend.
fn shifts_by_the_width_or_more_are_a_gpus(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let counts = [0i32, 1, 4, 31, 32, 33, 63, 64, 100, -1];
    let n = counts.len();
    let mut d_counts = dev.to_device_slice(&counts).map_err(fail("counts"))?;
    let mut left32 = dev
        .to_device_slice(&vec![7u32; n])
        .map_err(fail("left32"))?;
    let mut right32 = dev
        .to_device_slice(&vec![7u32; n])
        .map_err(fail("right32"))?;
    let mut arithmetic32 = dev.to_device_slice(&vec![7i32; n]).map_err(fail("arith"))?;
    let mut left64 = dev
        .to_device_slice(&vec![7u64; n])
        .map_err(fail("left64"))?;
    let mut compound = dev
        .to_device_slice(&vec![7u32; n])
        .map_err(fail("compound"))?;
    let kernel = Kernel::from_source(SHIFTS, "shifts");
    // SAFETY: thread i < n reads counts[i] and writes element i of each output.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 32),
            &mut [
                &mut d_counts,
                &mut Scalar(n as i32),
                &mut left32,
                &mut right32,
                &mut arithmetic32,
                &mut left64,
                &mut compound,
            ],
        )
    }
    .map_err(fail("shifts launch"))?;
    // A GPU's answers: counts outside 0..width clamp to the width.
    let in_range = |c: i32, width: i32| (0..width).contains(&c);
    for (i, &c) in counts.iter().enumerate() {
        let want_left32 = if in_range(c, 32) {
            0x8000_0001u32 << c
        } else {
            0
        };
        let want_right32 = if in_range(c, 32) {
            0x8000_0001u32 >> c
        } else {
            0
        };
        let want_arithmetic = if in_range(c, 32) { -5i32 >> c } else { -1 };
        let want_left64 = if in_range(c, 64) {
            0x8000_0000_0000_0001u64 << c
        } else {
            0
        };
        let mask = if in_range(c, 32) {
            (1u32 << c).wrapping_sub(1)
        } else {
            u32::MAX
        };
        let want_compound = if in_range(c, 32) { 3u32 << c } else { 0 } | mask;
        let got = (
            left32.copy_to_host().map_err(fail("left32"))?[[i]],
            right32.copy_to_host().map_err(fail("right32"))?[[i]],
            arithmetic32.copy_to_host().map_err(fail("arith"))?[[i]],
            left64.copy_to_host().map_err(fail("left64"))?[[i]],
            compound.copy_to_host().map_err(fail("compound"))?[[i]],
        );
        let want = (
            want_left32,
            want_right32,
            want_arithmetic,
            want_left64,
            want_compound,
        );
        ensure!(got == want, "shift by {c}: {got:x?}, a GPU gives {want:x?}");
    }
    Ok(())
}
