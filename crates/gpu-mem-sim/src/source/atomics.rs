//! Whether a kernel's atomics and spin hints can make its threads wait for each other.
//!
//! A thread can only wait at an atomic by calling it again and again: a spin-wait
//! (`while (atomicCAS(lock, 0, 1) != 0)`, `do { ... } while (atomicAdd(flag, 0) == 0)`) is a
//! loop that ends when another thread acts. The simulator lets a block's other threads run at
//! every 16th atomic of a thread so that such loops end, which costs every atomic a call and
//! runs a kernel with atomics as threads that wait (stackless or on fibers). A kernel each of
//! whose threads calls every atomic a bounded number of times cannot spin at one, and runs its
//! threads as plain calls (or its blocks as regions) instead (`super::wrapper::may_wait`).
//!
//! [`may_repeat`] decides that from the source text, conservatively: `false` only when every
//! atomic or spin hint named anywhere in the code is a plain call of one of the prelude's atomics
//! (or `__nanosleep`) at a bounded position of a bounded function, and the code has no `goto`
//! and no preprocessor line naming one (a macro could hide a loop); other names of atomics, such
//! as `atomicAdd_system` or `cuda::atomic_ref`, count as repeated. A position is bounded when
//! every loop around it (its condition included) is counted ([`mod@counted`]: a `for` whose trip
//! count is fixed when it starts, whatever other threads do) and no block around it is not a
//! statement's (a lambda's body, say). A function is bounded when it is a kernel, or a helper
//! every mention of whose name is a call at a bounded position of another bounded function
//! (not itself, not through a pointer): a histogram's `add_byte` called by `add_word` called
//! in a grid-stride loop.

mod counted;

use counted::{Definitions, counted};
use gpu_mem_core::kernel::scan::functions::{
    Function, Kind, body_end, call_end, call_open, functions,
};
use gpu_mem_core::kernel::scan::tokens::{Token, directives, tokens};

/// The names that, called again and again, let a thread wait: the prelude's atomics and the
/// spin hint (where a stackless thread lets the others run, `super::stackless`).
pub(crate) const ATOMICS_AND_SPIN_HINT: [&str; 12] = [
    "atomicAdd",
    "atomicSub",
    "atomicExch",
    "atomicMin",
    "atomicMax",
    "atomicInc",
    "atomicDec",
    "atomicCAS",
    "atomicAnd",
    "atomicOr",
    "atomicXor",
    "__nanosleep",
];

/// Whether `text` may name an atomic or a spin hint anywhere (a quick test, and the one for
/// preprocessor lines).
fn is_atomic_word(text: &str) -> bool {
    text.contains("atomic") || text.contains("nanosleep")
}

/// Whether the identifier `word` names an atomic operation or type or a spin hint: CUDA's
/// atomics and their scoped forms (`atomicAdd`, `atomicCAS_system`), `atomic`, `atomic_ref` and
/// `atomic_flag` (`std::`, `cuda::`), GCC's `__atomic_` builtins, and `__nanosleep`. A name of
/// the kernel's own that merely contains the letters (`atomic_reduction`) is none.
fn names_an_atomic(word: &str) -> bool {
    let cuda = word
        .strip_prefix("atomic")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase());
    cuda || matches!(word, "atomic" | "atomic_ref" | "atomic_flag")
        || word.starts_with("__atomic")
        || word.contains("nanosleep")
}

/// Whether a thread of `code` may call one of its atomics or spin hints more than once (see the
/// module's notes); `true` whenever the text is not understood.
pub(crate) fn may_repeat(code: &str) -> bool {
    if !is_atomic_word(code) {
        return false;
    }
    if directives(code)
        .into_iter()
        .any(|line| is_atomic_word(&code[line]))
    {
        return true;
    }
    let Some(toks) = tokens(code) else {
        return true;
    };
    let word = |t: &Token| &code[t.start..t.end];
    if toks.iter().any(|t| word(t) == "goto") {
        return true;
    }
    let Some(fns) = functions(code, &toks) else {
        return true;
    };
    let defs = Definitions::of(code, &toks, &fns);
    let bounded = bounded_functions(code, &toks, &fns, &defs);
    toks.iter().enumerate().any(|(i, t)| {
        names_an_atomic(word(t))
            && !fns.iter().zip(&bounded).any(|(f, &bounded)| {
                bounded
                    && f.body.is_some_and(|(open, close)| open < i && i < close)
                    && ATOMICS_AND_SPIN_HINT.contains(&word(t))
                    && call_open(code, &toks, i, false).is_some()
                    && bounded_position(code, &toks, f, i, &defs)
            })
    })
}

/// Which of `fns` a thread calls a bounded number of times: the kernels, and the helpers every
/// mention of whose name (but their declarations') is a call at a bounded position of another
/// such function's body (so none that calls itself, or is passed as a pointer).
fn bounded_functions(
    code: &str,
    toks: &[Token],
    fns: &[Function],
    defs: &Definitions,
) -> Vec<bool> {
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let mut bounded: Vec<bool> = fns.iter().map(|f| f.kind == Kind::Kernel).collect();
    loop {
        let mut more = false;
        for (h, helper) in fns.iter().enumerate() {
            let Some(name) = helper.name.filter(|_| !bounded[h]).map(word) else {
                continue;
            };
            let calls_bounded = (0..toks.len()).filter(|&i| word(i) == name).all(|i| {
                fns.iter().any(|g| g.name == Some(i))
                    || (word(i + 1) == "("
                        && fns.iter().enumerate().any(|(g, caller)| {
                            g != h
                                && bounded[g]
                                && caller
                                    .body
                                    .is_some_and(|(open, close)| open < i && i < close)
                                && bounded_position(code, toks, caller, i, defs)
                        }))
            });
            if calls_bounded {
                bounded[h] = true;
                more = true;
            }
        }
        if !more {
            return bounded;
        }
    }
}

/// The names of the parameters of function `f` that it holds by value.
pub(super) fn parameter_names<'c>(code: &'c str, toks: &[Token], f: &Function) -> Vec<&'c str> {
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let Some(open) = f.name.map(|n| n + 1).filter(|&o| word(o) == "(") else {
        return Vec::new();
    };
    let Some(close) = call_end(code, toks, open) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut last_name = None;
    let mut defaulted = false;
    // A reference names the caller's variable, which need not be the thread's own.
    let mut reference = false;
    for (k, tok) in toks.iter().enumerate().take(close + 1).skip(open + 1) {
        match word(k) {
            "(" | "[" | "<" => depth += 1,
            ")" | "]" | ">" if depth > 0 => depth -= 1,
            "," | ")" if depth == 0 => {
                names.extend(last_name.take().filter(|_| !reference));
                defaulted = false;
                reference = false;
            }
            "=" if depth == 0 => defaulted = true,
            "&" if depth == 0 => reference = true,
            w if depth == 0 && !defaulted && tok.ident => last_name = Some(w),
            _ => {}
        }
    }
    names
}

/// Whether token `at` in the body of function `f` is reached a bounded number of times each
/// time `f` runs: every loop around it is counted ([`counted()`]), and it lies inside no block
/// other than a statement's (not a lambda's body).
fn bounded_position(
    code: &str,
    toks: &[Token],
    f: &Function,
    at: usize,
    defs: &Definitions,
) -> bool {
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let Some((open, _)) = f.body else {
        return false;
    };
    let params = parameter_names(code, toks, f);
    // The blocks around the call, innermost last; the loops before it, and the `while`s that
    // end their `do` loops (part of those).
    let mut blocks: Vec<usize> = Vec::new();
    let mut do_tails: Vec<usize> = Vec::new();
    for k in open + 1..at {
        match word(k) {
            "{" => blocks.push(k),
            "}" => {
                blocks.pop();
            }
            "while" if do_tails.contains(&k) => {}
            "for" | "while" | "do" => {
                let (extent, tail) = loop_extent(code, toks, k, &blocks, open);
                if extent.contains(&at) && !counted(code, toks, k, open, &params, defs) {
                    return false;
                }
                do_tails.extend(tail);
            }
            _ => {}
        }
    }
    blocks
        .iter()
        .all(|&brace| statement_block(code, toks, brace))
}

/// The tokens a loop starting at keyword `k` may run again: its condition and body through
/// their end, or, where that is not plain (a body that is no block), to the end of the block
/// around it (`blocks`' innermost, else the function body opening at `open`); and, for a `do`
/// loop, the token of the `while` that ends it.
fn loop_extent(
    code: &str,
    toks: &[Token],
    k: usize,
    blocks: &[usize],
    open: usize,
) -> (std::ops::Range<usize>, Option<usize>) {
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let around = blocks.last().copied().unwrap_or(open);
    let to_block_end = (k..body_end(code, toks, around).unwrap_or(toks.len()), None);
    let body = if word(k) == "do" {
        k + 1
    } else {
        if word(k + 1) != "(" {
            return to_block_end;
        }
        match call_end(code, toks, k + 1) {
            Some(close) => close + 1,
            None => return to_block_end,
        }
    };
    if word(body) != "{" {
        return to_block_end;
    }
    let Some(end) = body_end(code, toks, body) else {
        return to_block_end;
    };
    if word(k) != "do" {
        return (k..end + 1, None);
    }
    // `do { ... } while (condition);`: the condition runs again too.
    if word(end + 1) == "while"
        && word(end + 2) == "("
        && let Some(close) = call_end(code, toks, end + 2)
    {
        return (k..close + 1, Some(end + 1));
    }
    to_block_end
}

/// Whether the `{` at token `brace` opens a statement's block (a compound statement, or the
/// body of `if`, `else`, `switch`, a loop or a `case`), not a lambda's body, a class or an
/// initializer.
fn statement_block(code: &str, toks: &[Token], brace: usize) -> bool {
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    match word(brace.wrapping_sub(1)) {
        "{" | "}" | ";" | ":" | "else" | "do" => true,
        ")" => {
            // The `(` it closes, and what names that group.
            let mut depth = 0i32;
            let mut k = brace - 1;
            loop {
                match word(k) {
                    ")" => depth += 1,
                    "(" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                if k == 0 {
                    return false;
                }
                k -= 1;
            }
            k > 0 && matches!(word(k - 1), "if" | "switch" | "for" | "while")
        }
        _ => false,
    }
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::may_repeat;

    fn kernel(body: &str) -> String {
        format!("__global__ void k(int* a, int n) {{\n{body}\n}}\n")
    }

    #[test]
    fn atomics_a_thread_reaches_once_cannot_spin() {
        for body in [
            "atomicAdd(&a[0], 1); atomicMax(&a[1], n);",
            // After a loop, in branches, in a nested block; comments do not count.
            "int s = 0; for (int i = 0; i < n; ++i) { s += a[i]; } atomicAdd(a, s); // atomic",
            "if (n > 0) { atomicAdd(a, 1); } else { atomicSub(a, 1); }",
            "switch (n) { case 1: { atomicOr(a, 1); break; } default: break; }",
            "{ int v = atomicExch(a, n); a[1] = v; }",
            "do { a[0] += 1; } while (a[0] < n); atomicInc((unsigned*)a, 3u);",
        ] {
            assert!(!may_repeat(&kernel(body)), "{body}");
        }
        assert!(!may_repeat("__global__ void k(int* a) { a[0] = 1; }"));
        // In counted loops: a thread calls them a bounded number of times.
        for body in [
            "for (int i = 0; i < n; ++i) { atomicAdd(a, i); }",
            "for (int i = 0; i < n; ++i) atomicAdd(a, i);",
            "for (unsigned i = threadIdx.x; i < (unsigned)n; i += blockDim.x * gridDim.x) \
             { atomicAdd(&a[a[i] % 4], 1); }",
            "int stride = 2 * n; for (int i = 0; i < n; i += stride) { atomicOr(a, i); }",
            "for (int s = n; s > 0; s >>= 1) { for (int j = 0; j < STEPS; j++) atomicMax(a, s); }",
            "for (int i = 0; i < UMUL(n, 2); i += UMUL(blockDim.x, 4)) atomicAdd(a, 1);",
        ] {
            let code = format!(
                "#define UMUL(a, b) ((a) * (b))\n#define STEPS (2 * 4)\n{}",
                kernel(body)
            );
            assert!(!may_repeat(&code), "{body}");
        }
        // Helpers called a bounded number of times, through each other.
        let helpers = "__device__ void add_byte(int* h, int v) { atomicAdd(h + (v & 3), 1); }\n\
                       __device__ void add_word(int* h, int v) { add_byte(h, v); add_byte(h, v >> 8); }\n";
        assert!(!may_repeat(&format!(
            "{helpers}{}",
            kernel("for (int p = threadIdx.x; p < n; p += blockDim.x) add_word(a, a[p]);")
        )));
        // The kernel's own names are not atomics.
        assert!(!may_repeat(
            "__global__ void atomic_sum(int* a, int n) { int atomics = n; atomicAdd(a, atomics); }"
        ));
    }

    #[test]
    fn atomics_that_may_run_again_may_spin() {
        for body in [
            "while (atomicCAS(a, 0, 1) != 0) {}",
            "do { __nanosleep(10); } while (a[0] == 0);",
            // Loops whose trip count another thread (or the body) may change.
            "for (int i = 0; i < a[0]; ++i) { atomicAdd(a, i); }",
            "for (int i = 0; i < *a; ++i) { atomicAdd(a, i); }",
            "for (int i = 0; i < n; ++i) { atomicAdd(a, 1); i = a[1]; }",
            "for (int i = 0; i < n; ++i) { n = atomicAdd(a, 1); }",
            "for (int i = 0; i < n; i += a[1]) atomicAdd(a, 1);",
            "for (int i = 0; i < n; ++i) { int* p = &i; atomicAdd(a, *p); }",
            "for (int i = 0; i < n; ) { atomicAdd(a, i); }",
            "for (int i = 0; atomicAdd(a, 0) < n; ++i) {}",
            "for (int i = 0; i < load(a); ++i) atomicAdd(a, 1);",
            "for (int i = 0; i < limit; ++i) atomicAdd(a, 1);",
            "for (int i = 0; i < n; ++i) if (i) atomicAdd(a, 1); else atomicSub(a, 1);",
            "int& m = a[3]; for (int i = 0; i < m; ++i) atomicAdd(a, 1);",
            // The bound changed through a pointer or a reference made before the loop.
            "int m = n; int* p = &m; for (int i = 0; i < m; ++i) { atomicAdd(a, 1); *p = a[1]; }",
            "int m = n; int& r = m; for (int i = 0; i < m; ++i) { atomicAdd(a, 1); r = a[1]; }",
            "do { } while (atomicAdd(a, 0) == 0);",
            "int i = 0; again: atomicAdd(a, 1); if (++i < n) goto again;",
            "auto f = [&] { atomicAdd(a, 1); }; for (int i = 0; i < n; ++i) f();",
            "cuda::atomic_ref<int> r(*a); r.fetch_add(1);",
            "atomicAdd_system(a, 1);",
            "std::atomic<int>* f = (std::atomic<int>*)a; f->store(1);",
            "__atomic_fetch_add(a, 1, __ATOMIC_SEQ_CST);",
            "while (n--) if (a[n]) atomicAdd(a, 1);",
        ] {
            assert!(may_repeat(&kernel(body)), "{body}");
        }
        // A module variable bounds the loop: another thread may write it.
        assert!(may_repeat(&format!(
            "__device__ int limit;\n{}",
            kernel("for (int i = 0; i < limit; ++i) atomicAdd(a, 1);")
        )));
        // In a helper called in a loop that is not counted, or by itself, or taken by address;
        // or hidden in a macro.
        let add = "__device__ void add(int* a) { atomicAdd(a, 1); }\n";
        for body in [
            "while (a[0] < n) add(a);",
            "auto f = &add; f(a);",
            "for (int i = 0; i < a[2]; ++i) { add(a); }",
        ] {
            assert!(may_repeat(&format!("{add}{}", kernel(body))), "{body}");
        }
        assert!(may_repeat(
            "__device__ void add(int* a, int n) { atomicAdd(a, 1); if (n) add(a, n - 1); }\n\
             __global__ void k(int* a) { add(a, 3); }"
        ));
        // A loop whose body passes its bound to a helper taking a reference.
        assert!(may_repeat(
            "__device__ void reload(int& m, int* a) { m = a[1]; }\n\
             __global__ void k(int* a, int n) { for (int i = 0; i < n; ++i) { atomicAdd(a, 1); reload(n, a); } }"
        ));
        // A helper's loop bounded by a reference: the caller's memory.
        assert!(may_repeat(
            "__device__ void add(int* a, const int& n) { for (int i = 0; i < n; ++i) atomicAdd(a, 1); }\n\
             __global__ void k(int* a) { add(a, a[1]); }"
        ));
        assert!(!may_repeat(
            "__device__ void add(int* a, int n) { for (int i = 0; i < n; ++i) atomicAdd(a, 1); }\n\
             __global__ void k(int* a) { add(a, a[1]); }"
        ));
        assert!(!may_repeat(
            "__device__ void add(int* a) { atomicAdd(a, 1); }\n__global__ void k(int* a) { add(a); }"
        ));
        assert!(may_repeat(
            "#define ADD(p) atomicAdd(p, 1)\n__global__ void k(int* a) { ADD(a); }"
        ));
    }
}
