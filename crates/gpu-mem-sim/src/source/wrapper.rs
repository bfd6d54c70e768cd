//! The translation unit the host compiler builds for one kernel: the prelude (host branch), the
//! kernel's source with its own file name and line numbers, and the entry points the simulator
//! loads (`gm_sim_abi`, `gm_sim_init`, `gm_sim_params`, then `gm_sim_run` or, for stackless
//! threads, `gm_sim_start_round`, `gm_sim_resume_round` and `gm_sim_begin_block`).

/// The prelude's names through which a thread can wait for another one besides barriers (`sync`,
/// `barrier`): warp collectives, atomics (a spin-wait on a flag) and the spin hint.
const COLLECTIVES_AND_ATOMICS: [&str; 6] =
    ["__shfl", "ballot", "__all", "__any", "atomic", "nanosleep"];

/// Whether `code` may make its threads wait for each other: it names a barrier, one of
/// [`COLLECTIVES_AND_ATOMICS`] or the runtime table. Conservative: any occurrence, even in a
/// comment or a longer name, counts; a kernel for which this is `false` runs its threads as
/// plain calls in any order.
pub(crate) fn may_wait(code: &str) -> bool {
    ["sync", "barrier", "gm_sim_rt"]
        .iter()
        .chain(&COLLECTIVES_AND_ATOMICS)
        .any(|word| code.contains(word))
}

/// `true` for a C identifier (the entry's name is pasted into generated code).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// How a program's threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Each thread a call of the entry (on a stack of its own when it may wait): `gm_sim_run`.
    Calls,
    /// Each thread a coroutine of the rewritten entry (`super::stackless`): `gm_sim_start_round`,
    /// `gm_sim_resume_round` and `gm_sim_begin_block`.
    Stackless,
}

/// The whole translation unit; `entry` must be an identifier ([`is_identifier`]), `code` the
/// kernel's source (rewritten by `super::stackless::rewrite` for [`Threads::Stackless`]).
pub(crate) fn translation_unit(kernel: &str, code: &str, entry: &str, threads: Threads) -> String {
    let file = file_name(kernel);
    let (mode, run) = match threads {
        Threads::Calls => (
            "",
            format!(
                "GM_SIM_EXPORT int gm_sim_run(void* const* args) {{ return gm_sim_invoke(&{entry}, args); }}\n"
            ),
        ),
        Threads::Stackless => (
            "#define GM_SIM_STACKLESS 1\n",
            format!(
                "GM_SIM_EXPORT void gm_sim_start_round(gm_sim_round* round) {{\n\
                 \x20   gm_sim_run_round<true>(&{entry}, round);\n\
                 }}\n\
                 GM_SIM_EXPORT void gm_sim_resume_round(gm_sim_round* round) {{\n\
                 \x20   gm_sim_run_round<false>(&{entry}, round);\n\
                 }}\n\
                 GM_SIM_EXPORT void gm_sim_begin_block() {{ gm_sim_frames_reset(); }}\n"
            ),
        ),
    };
    format!(
        "{mode}#include \"gpu_mem.h\"\n\
         #line 1 \"{file}\"\n\
         {code}\n\
         #line 1 \"gpu-mem-sim-entry.cpp\"\n\
         GM_SIM_EXPORT unsigned int gm_sim_abi() {{ return GM_SIM_ABI; }}\n\
         GM_SIM_EXPORT void gm_sim_init(const gm_sim_runtime* rt) {{ gm_sim_rt = *rt; }}\n\
         GM_SIM_EXPORT const gm_sim_param* gm_sim_params(int* count) {{\n\
         \x20   return gm_sim_describe(&{entry}, count);\n\
         }}\n\
         {run}"
    )
}

#[cfg(test)]
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
            "atomicAdd(&a(0), 1);",
            "__nanosleep(100);",
        ] {
            assert!(may_wait(code), "{code}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("matmul_tiled"));
        assert!(is_identifier("_k2"));
        assert!(!is_identifier("2k"));
        assert!(!is_identifier("k(); evil"));
        assert!(!is_identifier(""));
    }

    #[test]
    fn the_kernel_keeps_its_line_numbers() {
        let tu = translation_unit("scale", "line one\nline two", "scale", Threads::Calls);
        let lines: Vec<&str> = tu.lines().collect();
        assert_eq!(lines[1], "#line 1 \"scale.cu\"");
        assert_eq!(lines[2], "line one");
        assert!(tu.contains("gm_sim_invoke(&scale, args)"));
        assert_eq!(file_name("we\"ird name"), "we_ird_name.cu");
        let tu = translation_unit("scale", "line one", "scale", Threads::Stackless);
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
        assert!(tu.contains("gm_sim_run_round<true>(&scale, round)"));
        assert!(!tu.contains("gm_sim_run("));
    }
}
