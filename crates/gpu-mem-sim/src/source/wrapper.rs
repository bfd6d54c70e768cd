//! The translation unit the host compiler builds for one module: the prelude (host branch), the
//! kernel's source with its own file name and line numbers, and the entry points the simulator
//! loads: `gm_sim_abi`, `gm_sim_init`, `gm_sim_kernels` (each kernel with its parameters and its
//! thread functions: `run` (one thread) and `run_threads` (a block's threads as a loop) for
//! threads as calls, `start_round` / `resume_round` for stackless threads) and, for stackless threads, `gm_sim_begin_block`. (Variables are found in the
//! library's symbol table, `super::elf`.) The generated code follows the kernel's, so it uses
//! only `gm_sim_` names, which no kernel's macro can have taken.

use super::compiler::{Instrumented, Threads, shadow_offset};
use super::declarations::Declared;
use crate::abi::{GmSimAllowed, GmSimLane, GmSimRuntime, GmSimThread};
use crate::thread::Collective;
use gpu_mem_core::kernel::scan::functions::functions;
use gpu_mem_core::kernel::scan::tokens::tokens;

/// The prelude's names through which a thread can wait for another one besides barriers (`sync`,
/// `barrier`), the collectives' own names and atomics: the prefixes of warp collectives (with
/// their legacy forms) and cooperative groups.
const COLLECTIVES: [&str; 6] = [
    "__shfl",
    "ballot",
    "__all",
    "__any",
    "activemask",
    "cooperative_groups",
];

/// Whether `code` may make its threads wait for each other: it names a barrier, a collective
/// of the table (`Collective::info`), one of [`COLLECTIVES`] or the runtime table, or a thread
/// may call one of its atomics or spin hints again and again (`super::atomics::may_repeat`: a
/// spin-wait). Conservative: any occurrence of those names, even in a comment or a longer name,
/// counts; a kernel for which this is `false` runs its threads as plain calls in any order.
pub(crate) fn may_wait(code: &str) -> bool {
    ["sync", "barrier", "gm_sim_rt"]
        .into_iter()
        .chain(COLLECTIVES)
        .chain(Collective::calls())
        .any(|word| code.contains(word))
        || super::atomics::may_repeat(code)
}

/// The prefix of the name of a kernel's admitting clone (`super::flat_calls`).
pub(crate) const ADMIT: &str = "gm_sim_admit_";
/// The prefix of the name of a kernel's flat clone (`super::flat_calls`).
pub(crate) const FLAT: &str = "gm_sim_flat_";

/// The kernels of `code` (qualified names, as entries name them) that have clones.
pub(crate) fn cloned(code: &str) -> Vec<String> {
    let Some(toks) = tokens(code) else {
        return Vec::new();
    };
    let Some(fns) = functions(code, &toks) else {
        return Vec::new();
    };
    fns.iter()
        .filter_map(|f| {
            let name = &code[toks[f.name?].start..toks[f.name?].end];
            let kernel = name.strip_prefix(FLAT)?;
            let mut qualified = String::new();
            for space in f.namespace.iter().flatten() {
                qualified.push_str(space);
                qualified.push_str("::");
            }
            qualified.push_str(kernel);
            Some(qualified)
        })
        .collect()
}

/// The file name compile errors and divergence reports show: `<kernel>.cu`.
pub(crate) fn file_name(kernel: &str) -> String {
    let clean: String = kernel
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}.cu")
}

/// The kernel's part of a unit: the prelude, then `code` from line 1 of its own file (what
/// [`super::declarations`] preprocesses, and the start of every unit).
pub(crate) fn kernel_part(file: &str, code: &str, threads: Threads) -> String {
    let mode = match threads {
        Threads::Calls => "",
        Threads::Stackless => "#define GM_SIM_STACKLESS 1\n",
        Threads::Regions => "#define GM_SIM_REGIONS 1\n",
        Threads::Checked(Instrumented::EveryAccess) => "#define GM_SIM_CHECKED 1\n",
        Threads::Checked(Instrumented::Shadowed) => {
            concat!(
                "#define GM_SIM_CHECKED 1\n#define GM_SIM_SHADOWED 1\n#define GM_SIM_SHADOW_OFFSET ",
                shadow_offset!(),
                "\n"
            )
        }
        Threads::ShadowedRegions => {
            concat!(
                "#define GM_SIM_REGIONS 1\n#define GM_SIM_CHECKED 1\n#define GM_SIM_SHADOWED 1\n#define GM_SIM_SHADOW_OFFSET ",
                shadow_offset!(),
                "\n"
            )
        }
    };
    format!("{mode}#include \"gpu_mem.h\"\n#line 1 \"{file}\"\n{code}\n")
}

/// The whole translation unit; `code` is the kernel's source (rewritten by
/// `super::stackless::rewrite` for [`Threads::Stackless`]), `declared` its kernels (name
/// expressions, checked by `scan::is_name_expression`).
pub(crate) fn translation_unit(
    file: &str,
    code: &str,
    declared: &Declared,
    threads: Threads,
) -> String {
    use std::fmt::Write;
    let mut unit = kernel_part(file, code, threads);
    unit.push_str(
        "#line 1 \"gpu-mem-sim-entry.cpp\"\n\
         GM_SIM_EXPORT unsigned int gm_sim_abi() { return GM_SIM_ABI; }\n\
         GM_SIM_EXPORT GM_SIM_UNCHECKED void gm_sim_init(const gm_sim_runtime* gm_sim_runtime_table) { gm_sim_rt = *gm_sim_runtime_table; }\n",
    );
    // The structures the executor and the program share must agree in size (a field added on
    // one side only would otherwise be read past or short), and the access kinds in code.
    let _ = writeln!(
        unit,
        "static_assert(sizeof(gm_sim_runtime) == {} && sizeof(gm_sim_thread) == {} && sizeof(gm_sim_allowed) == {} && sizeof(gm_sim_lane) == {}, \"the prelude's ABI structures differ from the simulator's\");",
        std::mem::size_of::<GmSimRuntime>(),
        std::mem::size_of::<GmSimThread>(),
        std::mem::size_of::<GmSimAllowed>(),
        std::mem::size_of::<GmSimLane>(),
    );
    let _ = writeln!(
        unit,
        "static_assert(GM_SIM_ACCESS_WRITE == {} && GM_SIM_ACCESS_ATOMIC == {} && GM_SIM_ACCESS_SYNCED == {} && GM_SIM_ACCESS_ATOMIC_STORE == {} && GM_SIM_ACCESS_MISALIGNED == {} && GM_SIM_ACCESS_OUTSIDE_OBJECT == {}, \"the prelude's access kinds differ from the simulator's\");",
        crate::abi::ACCESS_WRITE,
        crate::abi::ACCESS_ATOMIC,
        crate::abi::ACCESS_SYNCED,
        crate::abi::ACCESS_ATOMIC_STORE,
        crate::abi::ACCESS_MISALIGNED,
        crate::abi::ACCESS_OUTSIDE_OBJECT,
    );
    if threads == Threads::Stackless {
        let _ = writeln!(
            unit,
            "static_assert(sizeof(gm_sim_round) == {} && sizeof(gm_sim_wait_more) == {}, \"the prelude's round structures differ from the simulator's\");",
            std::mem::size_of::<crate::abi::GmSimRound>(),
            std::mem::size_of::<crate::abi::GmSimWaitMore>(),
        );
    }
    if threads.is_regions() {
        let _ = writeln!(
            unit,
            "static_assert(GM_SIM_DIVERGED_EXITED == {} && GM_SIM_DIVERGED_SITES == {} && GM_SIM_GUESS == {}u, \"the prelude's divergence kinds differ from the simulator's\");",
            crate::abi::DIVERGED_EXITED,
            crate::abi::DIVERGED_SITES,
            crate::abi::REGIONS_GUESS,
        );
        let _ = writeln!(
            unit,
            "static_assert(GM_SIM_WARP_PARKED == {} && GM_SIM_VERDICT_ENDED == {} && GM_SIM_VERDICT_BARRIER == {} && GM_SIM_VERDICT_COLLECTIVE == {} && GM_SIM_VERDICT_RELEASED == {}, \"the prelude's verdict kinds differ from the simulator's\");",
            crate::abi::WARP_PARKED,
            crate::abi::VERDICT_ENDED,
            crate::abi::VERDICT_BARRIER,
            crate::abi::VERDICT_COLLECTIVE,
            crate::abi::VERDICT_RELEASED,
        );
    }
    // Kernels whose leading guards were marked (`super::guards`) have the loop over threads
    // watch for them (every kernel of the module: a mark is only ever set by a guard).
    let guarded = threads == Threads::Calls && code.contains(super::guards::REFUSE);
    // Kernels with flat clones (`super::flat_calls`) run their threads through them.
    let flat = if threads == Threads::Calls {
        cloned(code)
    } else {
        Vec::new()
    };
    let mut table = String::new();
    for (i, entry) in declared.kernels.iter().enumerate() {
        let _ = writeln!(
            unit,
            "GM_SIM_UNCHECKED static const gm_sim_param* gm_sim_params_{i}(int* gm_sim_count) {{ return gm_sim_describe(static_cast<decltype(&{entry})>(nullptr), gm_sim_count); }}"
        );
        match threads {
            Threads::Calls | Threads::Checked(_) => {
                let run_threads = if flat.contains(entry) {
                    let (space, name) = entry
                        .rsplit_once("::")
                        .map_or(("", entry.as_str()), |(s, n)| (s, n));
                    let space = if space.is_empty() {
                        String::new()
                    } else {
                        format!("{space}::")
                    };
                    format!(
                        "gm_sim_run_flat<&{space}{ADMIT}{name}, &{space}{FLAT}{name}>(&{entry}, gm_sim_t)"
                    )
                } else {
                    format!("gm_sim_run_threads<&{entry}, {guarded}>(gm_sim_t)")
                };
                let _ = writeln!(
                    unit,
                    "static int gm_sim_run_{i}(void* const* gm_sim_args) {{ return gm_sim_invoke(&{entry}, gm_sim_args); }}\n\
                     static void gm_sim_threads_{i}(gm_sim_threads* gm_sim_t) {{ {run_threads}; }}"
                );
                let _ = writeln!(
                    table,
                    "    {{\"{entry}\", &gm_sim_params_{i}, &gm_sim_run_{i}, &gm_sim_threads_{i}, nullptr, nullptr}},"
                );
            }
            Threads::Regions | Threads::ShadowedRegions => {
                let _ = writeln!(
                    unit,
                    "static void gm_sim_blocks_{i}(gm_sim_threads* gm_sim_t) {{ gm_sim_run_blocks<&{entry}>(gm_sim_t); }}"
                );
                let _ = writeln!(
                    table,
                    "    {{\"{entry}\", &gm_sim_params_{i}, nullptr, &gm_sim_blocks_{i}, nullptr, nullptr}},"
                );
            }
            Threads::Stackless => {
                let _ = writeln!(
                    unit,
                    "static void gm_sim_start_{i}(gm_sim_round* gm_sim_r) {{ gm_sim_run_round<true>(&{entry}, gm_sim_r); }}\n\
                     static void gm_sim_resume_{i}(gm_sim_round* gm_sim_r) {{ gm_sim_run_round<false>(&{entry}, gm_sim_r); }}"
                );
                let _ = writeln!(
                    table,
                    "    {{\"{entry}\", &gm_sim_params_{i}, nullptr, nullptr, &gm_sim_start_{i}, &gm_sim_resume_{i}}},"
                );
            }
        }
    }
    let _ = write!(
        unit,
        "static const gm_sim_kernel gm_sim_kernel_table[] = {{\n{table}    {{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}}\n}};\n\
         GM_SIM_EXPORT const gm_sim_kernel* gm_sim_kernels(int* gm_sim_count) {{\n\
         \x20   *gm_sim_count = {};\n\
         \x20   return gm_sim_kernel_table;\n\
         }}\n",
        declared.kernels.len()
    );
    if threads == Threads::Stackless {
        unit.push_str("GM_SIM_EXPORT void gm_sim_begin_block() { gm_sim_frames_reset(); }\n");
    }
    if threads.instrumented().is_some() {
        // Where this OS thread's thread-locals (the `__shared__` arrays) are.
        unit.push_str(
            "static thread_local char gm_sim_tls_anchor;\n\
             GM_SIM_EXPORT GM_SIM_UNCHECKED char* gm_sim_tls_anchor_address() { return &gm_sim_tls_anchor; }\n",
        );
    }
    unit
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn waiting_vocabulary() {
        assert!(!may_wait(
            "extern \"C\" __global__ void add(gm_array<float, 1> a) { a(0) = 1; }"
        ));
        for code in [
            "syncthreads();",
            "__syncthreads();",
            "barrier(GM_FENCE_GLOBAL);",
            "wavebarrier();",
            "__syncwarp();",
            "int v = __shfl_down_sync(~0ull, x, 1);",
            "__ballot_sync(m, p)",
            "__all_sync(m, p)",
            "__any_sync(m, p)",
            "syncthreads_count(p)",
            "while (atomicCAS(&a(0), 0, 1) != 0) {}",
            "__device__ void add(int* a) { atomicAdd(a, 1); } \
             __global__ void k(int* a) { while (a[0]) add(a); }",
            "__nanosleep(100);",
        ] {
            assert!(may_wait(code), "{code}");
        }
    }

    #[test]
    fn the_kernel_keeps_its_line_numbers() {
        let declared = Declared {
            kernels: vec!["scale".into(), "sum<float, 4>".into()],
        };
        let tu = translation_unit("scale.cu", "line one\nline two", &declared, Threads::Calls);
        let lines: Vec<&str> = tu.lines().collect();
        assert_eq!(lines[1], "#line 1 \"scale.cu\"");
        assert_eq!(lines[2], "line one");
        assert!(tu.contains("gm_sim_invoke(&scale, gm_sim_args)"));
        assert!(tu.contains("gm_sim_invoke(&sum<float, 4>, gm_sim_args)"));
        assert!(
            tu.contains("{\"sum<float, 4>\", &gm_sim_params_1, &gm_sim_run_1, &gm_sim_threads_1, nullptr, nullptr}")
        );
        assert_eq!(file_name("we\"ird name"), "we_ird_name.cu");
        let tu = translation_unit("scale.cu", "line one", &declared, Threads::Stackless);
        let lines: Vec<&str> = tu.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "#define GM_SIM_STACKLESS 1",
                "#include \"gpu_mem.h\"",
                "#line 1 \"scale.cu\"",
                "line one"
            ]
        );
        assert!(tu.contains("gm_sim_run_round<true>(&scale, gm_sim_r)"));
        assert!(tu.contains("gm_sim_begin_block"));
        assert!(!tu.contains("gm_sim_invoke("));
    }
}
