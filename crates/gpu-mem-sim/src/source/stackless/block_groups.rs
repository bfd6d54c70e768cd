//! Cooperative groups at block scope, lowered for the stackless rewrite: NVIDIA's samples write
//! a block barrier as `cg::sync(cta)` or `cta.sync()` on `cg::thread_block cta =
//! cg::this_thread_block()`, where a coroutine cannot suspend (the barrier is a member
//! function of the simulator's `cooperative_groups.h`). Such a sync of a block group is
//! `__syncthreads()`, so [`lower`] writes it so, in place (same line, same column), and the
//! rewrite then treats it as any other barrier.
//!
//! Guarantees: the source is lowered only when everything it names of cooperative groups is a
//! block group's type, `this_thread_block()`, a sync of a variable declared as a block group
//! (or of `this_thread_block()` itself), or a member function of a block group that does not
//! wait (`thread_rank`, `size`, ...). Tiles, coalesced and grid groups, `reduce`, `memcpy_async`
//! and the rest keep the kernel on stacks, as before. [`is_block_level`] says whether a source
//! names cooperative groups only that way with no sync left, which is what the stackless check
//! (`super::why_not`) accepts.

use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::collections::BTreeSet;

/// The namespace.
const NAMESPACE: &str = "cooperative_groups";

/// What a lowered source may name inside the namespace (qualified, or unqualified after
/// `using namespace cooperative_groups`).
const BLOCK_LEVEL: [&str; 3] = ["thread_block", "this_thread_block", "sync"];

/// Names of cooperative groups beyond block groups (the simulator's headers and CUDA's): a
/// source naming one after `using namespace cooperative_groups` is not lowered.
const BEYOND_BLOCKS: [&str; 22] = [
    "thread_group",
    "thread_block_tile",
    "tiled_partition",
    "coalesced_group",
    "coalesced_threads",
    "labeled_partition",
    "binary_partition",
    "grid_group",
    "this_grid",
    "multi_grid_group",
    "this_multi_grid",
    "block_tile_memory",
    "cluster_group",
    "this_cluster",
    "reduce",
    "inclusive_scan",
    "exclusive_scan",
    "memcpy_async",
    "wait",
    "wait_prior",
    "invoke_one",
    "details",
];

/// `code` with every sync of a block group written `__syncthreads()`, when it names cooperative
/// groups only at block level and has at least one such sync; `None` otherwise (no sync to
/// lower, or something beyond block groups, or a form this does not read).
pub(crate) fn lower(code: &str) -> Option<String> {
    let scan = Scan::of(code)?;
    if scan.syncs.is_empty() {
        return None;
    }
    let mut lowered = String::with_capacity(code.len());
    let mut at = 0;
    for &(start, end) in &scan.syncs {
        lowered.push_str(&code[at..start]);
        lowered.push_str("__syncthreads()");
        at = end;
    }
    lowered.push_str(&code[at..]);
    Some(lowered)
}

/// Whether `code` names cooperative groups only at block level, with no sync left to lower
/// (so that, for the stackless check, it names nothing of them that waits).
pub(crate) fn is_block_level(code: &str) -> bool {
    Scan::of(code).is_some_and(|scan| scan.syncs.is_empty())
}

/// What [`lower`] reads of a source.
struct Scan {
    /// Byte ranges of the syncs to write as `__syncthreads()`, in order.
    syncs: Vec<(usize, usize)>,
}

impl Scan {
    /// `None` when the source names something of cooperative groups beyond block groups, or a
    /// sync this cannot read.
    fn of(code: &str) -> Option<Scan> {
        let toks = tokens(code)?;
        let text = |i: usize| toks.get(i).map_or("", |t: &Token| &code[t.start..t.end]);
        // The namespace's names: itself and its aliases (`namespace cg = cooperative_groups;`).
        let mut spaces: BTreeSet<&str> = BTreeSet::from([NAMESPACE]);
        let mut open = false;
        for i in 0..toks.len() {
            if text(i) == "namespace" && text(i + 2) == "=" && text(i + 3) == NAMESPACE {
                spaces.insert(text(i + 1));
            }
            if text(i) == "using" && text(i + 1) == "namespace" && text(i + 2) == NAMESPACE {
                open = true;
            }
        }
        // (Punctuation is one byte a token: `::` is two.)
        let qualified = |i: usize| {
            i >= 3 && text(i - 1) == ":" && text(i - 2) == ":" && spaces.contains(text(i - 3))
        };
        // A name of the namespace: qualified by it, or unqualified where it is open.
        let names = |i: usize, name: &str| text(i) == name && (qualified(i) || open);
        // Variables and parameters declared as block groups: `thread_block`, then `const` or
        // references, then the name.
        let mut blocks: BTreeSet<&str> = BTreeSet::new();
        for i in 0..toks.len() {
            if !names(i, "thread_block") {
                continue;
            }
            let mut j = i + 1;
            while matches!(text(j), "const" | "&") {
                j += 1;
            }
            if toks.get(j).is_some_and(|t| t.ident)
                && matches!(text(j + 1), "=" | ";" | "," | ")" | "(" | "{")
            {
                blocks.insert(text(j));
            }
        }
        let mut syncs = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let word = text(i);
            if !toks[i].ident {
                i += 1;
                continue;
            }
            // `X.sync()` of a block group variable.
            if blocks.contains(word)
                && text(i + 1) == "."
                && text(i + 2) == "sync"
                && text(i + 3) == "("
                && text(i + 4) == ")"
            {
                syncs.push((toks[i].start, toks[i + 4].end));
                i += 5;
                continue;
            }
            // `this_thread_block().sync()`.
            if names(i, "this_thread_block")
                && text(i + 1) == "("
                && text(i + 2) == ")"
                && text(i + 3) == "."
                && text(i + 4) == "sync"
                && text(i + 5) == "("
                && text(i + 6) == ")"
            {
                let start = if qualified(i) {
                    toks[i - 3].start
                } else {
                    toks[i].start
                };
                syncs.push((start, toks[i + 6].end));
                i += 7;
                continue;
            }
            // `cg::sync(X)` of a block group variable.
            if names(i, "sync")
                && text(i + 1) == "("
                && blocks.contains(text(i + 2))
                && text(i + 3) == ")"
            {
                let start = if qualified(i) {
                    toks[i - 3].start
                } else {
                    toks[i].start
                };
                syncs.push((start, toks[i + 3].end));
                i += 4;
                continue;
            }
            if word == "sync" {
                // Any other sync (of a group this does not know, or static, or taken by address)
                // might wait where a coroutine cannot.
                return None;
            }
            if qualified(i) && !BLOCK_LEVEL.contains(&word) {
                return None;
            }
            if open && BEYOND_BLOCKS.contains(&word) {
                return None;
            }
            i += 1;
        }
        // Each sync is replaced within its line: reports keep naming the user's lines.
        if syncs
            .iter()
            .any(|&(start, end)| code[start..end].contains('\n'))
        {
            return None;
        }
        // Syncs found from the qualified start (`cg::`) must not overlap an earlier one.
        if syncs.windows(2).any(|w| w[1].0 < w[0].1) {
            return None;
        }
        Some(Scan { syncs })
    }
}

// Text only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ void step(const cg::thread_block &cta, float* s) { s[0] += 1; cg::sync(cta); }
__global__ void k(float* out) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float s[256];
    s[cta.thread_rank()] = 0;
    cg::sync(cta);
    step(cta, s);
    cta.sync();
    cg::this_thread_block().sync();
    out[0] = s[0];
}
"#;

    #[test]
    fn block_syncs_become_block_barriers_in_place() {
        let lowered = lower(SAMPLE).expect("lowered");
        assert_eq!(lowered.lines().count(), SAMPLE.lines().count());
        assert_eq!(lowered.matches("__syncthreads()").count(), 4, "{lowered}");
        assert!(!lowered.contains(".sync()") && !lowered.contains("cg::sync"));
        assert!(
            lowered.contains("s[0] += 1; __syncthreads(); }"),
            "{lowered}"
        );
        assert!(lowered.contains("    __syncthreads();\n    step(cta, s);"));
        // The rest of cooperative groups stays as written.
        assert!(lowered.contains("cg::thread_block cta = cg::this_thread_block();"));
        assert!(lowered.contains("s[cta.thread_rank()] = 0;"));
        assert!(is_block_level(&lowered));
        assert!(!is_block_level(SAMPLE));
    }

    #[test]
    fn anything_beyond_block_groups_is_left_alone() {
        for beyond in [
            "auto tile = cg::tiled_partition<32>(cta); tile.sync();",
            "cg::thread_block_tile<32> t = cg::tiled_partition<32>(cta);",
            "cg::grid_group g = cg::this_grid(); g.sync();",
            "cg::coalesced_group a = cg::coalesced_threads();",
            "float r = cg::reduce(cta, 1.0f, cg::plus<float>());",
            "cg::thread_group g = cta; g.sync();",
            "cg::thread_block::sync();",
            "auto f = &cg::sync<cg::thread_block>;",
        ] {
            let code = SAMPLE.replace("    out[0] = s[0];", beyond);
            assert_eq!(lower(&code), None, "{beyond}");
            assert!(!is_block_level(&code), "{beyond}");
        }
        // With the namespace open, its other names are refused unqualified too.
        let open = "#include <cooperative_groups.h>\nusing namespace cooperative_groups;\n\
                    __global__ void k() { thread_block b = this_thread_block(); sync(b); \
                    grid_group g = this_grid(); }\n";
        assert_eq!(lower(open), None);
        let open = open.replace(" grid_group g = this_grid();", "");
        assert_eq!(
            lower(&open).as_deref(),
            Some(
                "#include <cooperative_groups.h>\nusing namespace cooperative_groups;\n\
                 __global__ void k() { thread_block b = this_thread_block(); __syncthreads(); }\n"
            )
        );
    }

    #[test]
    fn sources_without_block_syncs_are_not_lowered() {
        assert_eq!(lower("__global__ void k() { __syncthreads(); }"), None);
        let no_sync = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
                       __global__ void k(int* o) { cg::thread_block b = cg::this_thread_block(); \
                       o[b.thread_rank()] = 1; __syncthreads(); }\n";
        assert_eq!(lower(no_sync), None);
        assert!(is_block_level(no_sync));
    }
}
