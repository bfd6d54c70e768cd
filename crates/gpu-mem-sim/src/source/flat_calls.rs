//! Flat loops for kernels run as plain calls: a kernel whose body is leading declarations and
//! guards (`super::guards`), then statements that make flat code (the regions' rules:
//! `super::regions::is_flat_code`) or one `if` whose condition admits, in each row of a block,
//! a prefix of its threads, gets two clones after it, on its own last line:
//! * `gm_sim_admit_<name>(parameters, index)`: the leading declarations, each guard as `return
//!   false`, then the `if`'s condition (or `true`);
//! * `gm_sim_flat_<name>(parameters, index)`: the leading declarations, then what an admitted
//!   thread runs;
//!
//! each with the kernel's parameters and the block's extent, the block's index and the
//! thread's index as values (`gm_sim_bdim`, `gm_sim_bidx`, `gm_sim_tidx`, which their
//! `blockDim`, `blockIdx` and `threadIdx` become). The program's loop (the prelude's
//! `gm_sim_flat_loop`) finds the box of threads a block admits by bisection of the first along
//! each axis, then runs the second over it as counted loops the host compiler can vectorise
//! across threads (vectorAdd's `if (i < n)` kept its stores conditional, which x86-64 without
//! AVX-512 cannot vectorise, and the index was stored for each thread where `threadIdx` reads
//! it).
//!
//! What the loop relies on, and this module checks: the flat code reads the thread's index
//! through its own `threadIdx` only (it calls nothing else that could, so the thread record
//! the prelude's `threadIdx` reads need not be kept up to date), and the threads a block
//! admits are a box from its first thread: each guard refuses a suffix along one axis, each
//! operand of the condition admits a prefix along one, as `super::guards` reads them, and each
//! reads that axis's index and what every thread holds alike, so that a thread is admitted
//! exactly when its index along each axis is admitted with zeros along the others (the loop
//! trusts that only where no index can wrap, and asks every thread otherwise).
//!
//! A kernel that is a template, that has a namesake, takes a `gm_array`, a reference or a
//! template's type, may wait (`super::wrapper::may_wait`: a warp collective asks the
//! simulator, which reads the thread's record), or holds a preprocessor line, `__shared__` or
//! `static` in its body is left as it is. Default arguments are left out of the clones'
//! parameters, which the indices follow.

use super::wrapper::{ADMIT, FLAT};
use gpu_mem_core::kernel::scan::functions::{Function, Kind, call_end, functions};
use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::borrow::Cow;

/// `code` with the clones of every kernel that can have them (see the module's notes) written
/// after it; `code` itself where none can.
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    let Some(toks) = tokens(code) else {
        return Cow::Borrowed(code);
    };
    let Some(fns) = functions(code, &toks) else {
        return Cow::Borrowed(code);
    };
    let text = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let kernels: Vec<&Function> = fns.iter().filter(|f| f.kind == Kind::Kernel).collect();
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for f in &kernels {
        let (Some(name_at), Some((open, close))) = (f.name, f.body) else {
            continue;
        };
        let name = text(name_at);
        let namesakes = kernels
            .iter()
            .filter(|g| g.name.map(text) == Some(name))
            .count();
        if f.template || namesakes != 1 || text(name_at + 1) != "(" {
            continue;
        }
        let Some(params_close) = call_end(code, &toks, name_at + 1) else {
            continue;
        };
        let refused_param = (name_at + 2..params_close)
            .any(|k| matches!(text(k), "gm_array" | "&" | "void" | "..." | "<"));
        let body = &code[toks[open].start..toks[close].end];
        // (A warp collective would ask the simulator, which reads the thread's record.)
        let refused_body = body.contains('#')
            || super::wrapper::may_wait(body)
            || (open..close).any(|k| matches!(text(k), "__shared__" | "static" | "gm_array"));
        if refused_param || refused_body {
            continue;
        }
        let params = super::atomics::parameter_names(code, &toks, f);
        let shape = super::guards::flat_shape(code, &toks, (open, close), &params);
        let (run_first, run_end) = shape.run;
        if run_first >= run_end
            || !super::regions::is_flat_code(code, &toks, &fns, (run_first, run_end - 1))
        {
            continue;
        }
        let line = |(first, end): (usize, usize)| one_line(code, &toks, first, end);
        let parameters = {
            // Each parameter without its default argument (the clones' index parameters
            // follow, which have none).
            let mut kept: Vec<String> = Vec::new();
            let (mut depth, mut start, mut default_at) = (0i32, name_at + 2, None);
            for k in name_at + 2..=params_close {
                match text(k) {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" if k < params_close => depth -= 1,
                    "=" if depth == 0 && default_at.is_none() => default_at = Some(k),
                    _ => {}
                }
                if (text(k) == "," && depth == 0) || k == params_close {
                    let piece = line((start, default_at.unwrap_or(k)));
                    if !piece.is_empty() {
                        kept.push(piece);
                    }
                    start = k + 1;
                    default_at = None;
                }
            }
            let list = kept.join(", ");
            let indices = "const gm_uint3 gm_sim_bdim, const gm_uint3 gm_sim_bidx, const gm_uint3 gm_sim_tidx";
            if list.is_empty() {
                indices.to_string()
            } else {
                format!("{list}, {indices}")
            }
        };
        let mut declarations = String::new();
        let mut admit = String::new();
        for &(span, guard) in &shape.leading {
            if guard {
                admit.push_str(&format!("if ({}) return false; ", line(span)));
            } else {
                let declaration = line(span);
                admit.push_str(&declaration);
                admit.push(' ');
                declarations.push_str(&declaration);
                declarations.push(' ');
            }
        }
        let condition = shape.condition.map_or("true".to_string(), line);
        let run = line(shape.run);
        // A thread that loops runs as a call of its own: inlined into the loops over the
        // block, 3mm's product kept its pointers on the stack (7.1x its plain loop, 4.6x as a
        // call), and a loop inside a thread's part keeps the loop over threads from
        // vectorising anyway.
        let loops = (shape.run.0..shape.run.1).any(|k| matches!(text(k), "for" | "while" | "do"));
        let inlining = if loops { "noinline" } else { "always_inline" };
        inserts.push((
            toks[close].end,
            format!(
                " static inline __attribute__((always_inline)) bool {ADMIT}{name}({parameters}) {{ {admit}return ({condition}); }} \
                 static inline __attribute__(({inlining})) void {FLAT}{name}({parameters}) {{ {declarations}{run} }}"
            ),
        ));
    }
    super::guards::with_inserts(code, inserts)
}

/// Tokens `first..end` on one line (`super::guards::one_line`), `threadIdx`, `blockIdx` and
/// `blockDim` as the clone's values (`gm_sim_tidx`, `gm_sim_bidx`, `gm_sim_bdim`).
fn one_line(code: &str, toks: &[Token], first: usize, end: usize) -> String {
    super::guards::one_line(code, toks, (first, end), |word| match word {
        "threadIdx" => "gm_sim_tidx",
        "blockIdx" => "gm_sim_bidx",
        "blockDim" => "gm_sim_bdim",
        _ => word,
    })
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::rewrite;
    use crate::source::wrapper::cloned;

    fn kernel(body: &str) -> String {
        format!("__global__ void k(float* a, const float* b, int n, int m) {{\n{body}\n}}\n")
    }

    #[test]
    fn kernels_of_guards_and_flat_code_get_clones_on_their_last_line() {
        for body in [
            "int i = blockDim.x * blockIdx.x + threadIdx.x;\nif (i < n) {\n    a[i] = b[i] + 1.0f; // sum\n}",
            "int i = blockDim.x * blockIdx.x + threadIdx.x;\nif (i < n && threadIdx.y <= m) a[i] = sqrtf(b[i]);",
            "if (threadIdx.x >= n) return;\nint j = threadIdx.y;\nif (j >= m) { return; }\na[j * n + threadIdx.x] = 2;",
            "a[threadIdx.x] = b[threadIdx.x] * 2;",
        ] {
            let code = kernel(body);
            let out = rewrite(&code);
            assert_eq!(out.lines().count(), code.lines().count(), "{body}");
            let last = out.lines().last().unwrap_or("");
            assert!(last.contains("bool gm_sim_admit_k(float* a, const float* b, int n, int m, const gm_uint3 gm_sim_bdim, const gm_uint3 gm_sim_bidx, const gm_uint3 gm_sim_tidx)"), "{out}");
            assert!(last.contains("void gm_sim_flat_k("), "{out}");
            assert!(
                !last.contains("threadIdx") && !last.contains("blockIdx"),
                "{out}"
            );
            assert!(!last.contains("// sum"), "{out}");
            assert_eq!(cloned(&out), ["k"], "{out}");
        }
        let guarded = rewrite(&kernel(
            "if (threadIdx.x >= n) return;\na[threadIdx.x] = 1;",
        ))
        .into_owned();
        assert!(
            guarded.contains("{ if (gm_sim_tidx.x >= n) return false; return (true); }"),
            "{guarded}"
        );
        assert!(guarded.contains("{ a[gm_sim_tidx.x] = 1; }"), "{guarded}");
        let wrapped = rewrite(&kernel("int i = threadIdx.x;\nif (i < n) a[i] = 1;")).into_owned();
        assert!(
            wrapped.contains("{ int i = gm_sim_tidx.x; return (i < n); }"),
            "{wrapped}"
        );
        assert!(
            wrapped.contains("{ int i = gm_sim_tidx.x; a[i] = 1; }"),
            "{wrapped}"
        );
        let defaulted = rewrite(
            "__global__ void k(float* a, int n = 4, float* b = NULL) { a[threadIdx.x] = n; }\n",
        )
        .into_owned();
        assert!(
            defaulted
                .contains("gm_sim_flat_k(float* a, int n, float* b, const gm_uint3 gm_sim_bdim"),
            "{defaulted}"
        );
        let spaced = "namespace ns {\n__global__ void k(float* a) { a[threadIdx.x] = 0; }\n}\n";
        assert_eq!(cloned(&rewrite(spaced)), ["ns::k"]);
    }

    #[test]
    fn macros_that_read_no_index_may_stand_in_the_clone() {
        let macros = "#if defined(POLYBENCH_USE_SCALAR_LB)\n#define POLYBENCH_LOOP_BOUND(x, y) x\n#else\n#define POLYBENCH_LOOP_BOUND(x, y) y\n#endif\n\
                      #define N 64\n#define _PB_N POLYBENCH_LOOP_BOUND(N, n)\n#define AT(i) a[(i) * N]\n\
                      #define LINEAR (threadIdx.x + 1)\n#define LATER LINEAR\n#define CALLS(v) f(v)\n";
        for (body, cloned) in [
            ("int i = threadIdx.x;\nif (i < _PB_N) AT(i) = 1;", true),
            ("a[LINEAR] = 1;", false),
            ("a[LATER] = 1;", false),
            ("a[threadIdx.x] = CALLS(2);", false),
        ] {
            let code = format!(
                "__device__ float f(float v) {{ return v; }}\n{macros}{}",
                kernel(body)
            );
            assert_eq!(rewrite(&code) != code, cloned, "{body}");
        }
    }

    #[test]
    fn other_kernels_are_left_alone() {
        // A condition whose admitted threads are no prefix (or that reads memory) is asked in
        // the flat clone, of every thread.
        for (body, condition) in [
            (
                "int i = threadIdx.x;\nif (i % 2 == 0) a[i] = 1;",
                "if (i % 2 == 0)",
            ),
            (
                "int i = threadIdx.x;\nif (i >= 1 && i < n) a[i] = 1;",
                "if (i >= 1 && i < n)",
            ),
            (
                "int i = threadIdx.x;\nif (i < b[0]) a[i] = 1;",
                "if (i < b[0])",
            ),
            (
                "int i = threadIdx.x;\nif (i < n) a[i] = 1; else a[i] = 2;",
                "if (i < n)",
            ),
        ] {
            let out = rewrite(&kernel(body)).into_owned();
            assert!(
                out.contains("{ int i = gm_sim_tidx.x; return (true); }"),
                "{out}"
            );
            assert!(
                out.contains(&format!("{{ int i = gm_sim_tidx.x; {condition}")),
                "{out}"
            );
        }
        for body in [
            // Code that could read the index behind the clone's back, or leave early.
            "a[threadIdx.x] = f(b[threadIdx.x]);",
            "if (threadIdx.x < n) { a[threadIdx.x] = 1; return; }",
            "printf(\"%d\", n);",
            // What the clone does not carry.
            "__shared__ float s[4];\ns[0] = 1;\na[0] = s[0];",
            "static int c = 0;\na[0] = c;",
            "#pragma unroll\nfor (int j = 0; j < 4; ++j) a[j] = 0;",
            "if (threadIdx.x >= n) return;",
            "a[threadIdx.x] = __shfl_down_sync(~0u, b[threadIdx.x], 1);",
        ] {
            let code = format!(
                "__device__ float f(float v) {{ return v; }}\n{}",
                kernel(body)
            );
            assert_eq!(rewrite(&code), code, "{body}");
        }
        for code in [
            "template <int N> __global__ void k(float* a) { a[threadIdx.x] = N; }\n",
            "__global__ void k(float* a) { a[threadIdx.x] = 1; }\n__global__ void k(int* a) { a[threadIdx.x] = 2; }\n",
            "__global__ void k(gm_array<float, 1> a) { a[threadIdx.x] = 1; }\n",
            "__global__ void k(float& a) { a = 1; }\n",
        ] {
            assert_eq!(rewrite(code), code, "{code}");
        }
    }
}
