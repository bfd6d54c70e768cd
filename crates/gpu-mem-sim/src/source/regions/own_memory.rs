//! Whether memcheck may check a kernel run as regions as strictly as one run on stacks.
//!
//! A block run as regions keeps its threads' own variables in memory the whole block shares: the
//! stack of its loops (a region's locals, each thread's call reusing the same frame) and the
//! slots of the variables that live across barriers. memcheck lets the block through there for
//! as long as it runs (`gm_sim/regions.h`, `gm_sim_rt.own`), so a pointer to one thread's
//! variable that another thread follows would pass, where on a stack of its own it is refused
//! ("another thread's local memory"). Such a pointer can only come from the kernel taking a
//! thread's own address: `&` of a variable that is not shared or global (`&local`, `&local.field`,
//! `&param`), or a local array, which converts to a pointer to its first element. A kernel that
//! does neither, anywhere in its source (helpers included), is checked as regions; any other is
//! checked on stacks. Conservative: a name counts as a thread's own unless a declaration of it
//! says `__shared__`, `__device__`, `__constant__`, `static` or `extern`.

use super::parse::Statements;
use gpu_mem_core::kernel::scan::tokens::tokens;
use std::collections::BTreeSet;

/// Storage classes that make a name memory a block or the grid shares.
const SHARED_STORAGE: [&str; 5] = [
    "__shared__",
    "__device__",
    "__constant__",
    "static",
    "extern",
];

/// Keywords a local array's declaration cannot follow (`return a[i];`, `else b[i] = 0;`).
const NOT_TYPES: [&str; 8] = [
    "return", "case", "else", "do", "goto", "sizeof", "delete", "throw",
];

/// Why a thread's own address may reach another thread of a kernel in `code` (see the module's
/// doc), or `None` when it cannot.
pub(crate) fn leaks_own_address(code: &str) -> Option<String> {
    let Some(toks) = tokens(code) else {
        return Some("a comment or literal does not end".into());
    };
    let s = Statements {
        code,
        toks: &toks,
        warp_calls: Vec::new(),
    };
    let shared = shared_names(&s);
    for k in 0..toks.len() {
        let name = s.text(k + 1);
        if s.takes_address(k) && toks.get(k + 1).is_some_and(|t| t.ident) {
            // `&p[i]`, `&p->f`: an element of what `p` points at (a local array's is caught at
            // its declaration).
            let pointee = match s.text(k + 2) {
                "[" | "->" => true,
                // (Where the scanner reads `->` as two tokens.)
                "-" => s.text(k + 3) == ">",
                _ => false,
            };
            if !pointee && !shared.contains(name) {
                return Some(format!(
                    "line {}: the address of `{name}`, a thread's own",
                    s.line(k)
                ));
            }
        }
        if toks[k].ident && s.text(k + 1) == "[" && declares_array(&s, k, &shared) {
            return Some(format!(
                "line {}: the local array `{}`",
                s.line(k),
                s.text(k)
            ));
        }
    }
    None
}

/// Whether the name at token `k`, followed by `[`, is declared there as an array of a thread's
/// own: a type's name before it (`float mine[8]`, `T* ptrs[4]`) and not shared storage.
fn declares_array(s: &Statements<'_>, k: usize, shared: &BTreeSet<&str>) -> bool {
    let Some(before) = k.checked_sub(1) else {
        return false;
    };
    let b = s.text(before);
    let after_type = s.toks[before].ident && !NOT_TYPES.contains(&b)
        || (matches!(b, "*" | "&" | ">") && before > 0 && s.toks[before - 1].ident);
    after_type && !shared.contains(s.text(k))
}

/// Every name a declaration with one of [`SHARED_STORAGE`] declares: the identifiers of its
/// statement directly followed by `[`, `;`, `=` or `,` (a declarator's end; not a function's
/// parameters, which are a thread's own).
fn shared_names<'c>(s: &Statements<'c>) -> BTreeSet<&'c str> {
    let mut names = BTreeSet::new();
    let mut start = 0;
    for k in 0..s.toks.len() {
        let t = s.text(k);
        if matches!(t, ";" | "{" | "}") {
            let statement = start..k;
            if statement
                .clone()
                .any(|j| SHARED_STORAGE.contains(&s.text(j)))
            {
                for j in statement {
                    let next = if j + 1 == k { t } else { s.text(j + 1) };
                    if s.toks[j].ident && matches!(next, "[" | ";" | "=" | ",") {
                        names.insert(s.text(j));
                    }
                }
            }
            start = k + 1;
        }
    }
    names
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::leaks_own_address;

    #[test]
    fn a_locals_address_or_a_local_array_leaks() {
        for code in [
            "__global__ void k(float* a) { float mine[8]; mine[0] = a[0]; }",
            "__global__ void k(float* a) { int x = 1; int* p = &x; a[0] = *p; }",
            "__global__ void k(float* a) { float2 v; float* p = &v.x; a[0] = *p; }",
            "__global__ void k(float* a, int n) { g(&n); }",
            "__device__ void h() { int buf[4]; use(buf); }",
            "__device__ void h(int n) { g(&n); }",
            "__global__ void k(float* a) { unsigned int* ptrs[2]; }",
            "__global__ void k(float* a) { vector<float> vs[2]; }",
        ] {
            assert!(leaks_own_address(code).is_some(), "{code}");
        }
    }

    #[test]
    fn shared_and_global_memory_and_pointees_do_not() {
        for code in [
            "__global__ void k(float* a) { __shared__ float tile[32]; float* p = &tile[1]; a[0] = tile[0] + *p; }",
            "__device__ int counter; __global__ void k(int* a) { atomicAdd(&counter, 1); atomicAdd(&a[3], 1); }",
            "__global__ void k(float* a, S* s) { float* p = &s->x; a[threadIdx.x] = a[2] * *p; return a[1] ? 1 : 0; }",
            "__global__ void k(int* a) { extern __shared__ int dyn[]; int* p = &dyn[0]; if (a[0] && a[1]) p[0] = a[2] & 3; }",
            "__constant__ float weights[16]; __global__ void k(float* a) { a[0] = weights[2]; const float* w = &weights[0]; }",
            "static __shared__ int s_hist[256]; __global__ void k(int* a) { int* p = &s_hist[0]; else a[1] = 0; }",
        ] {
            assert_eq!(leaks_own_address(code), None, "{code}");
        }
    }
}
