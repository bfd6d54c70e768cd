//! Cooperative groups of a block, lowered for the stackless rewrite: NVIDIA's samples write a
//! block barrier as `cg::sync(cta)` or `cta.sync()` on `cg::thread_block cta =
//! cg::this_thread_block()`, and warp steps as `tile.shfl_down(v, d)` on `cg::thread_block_tile<32>
//! tile = cg::tiled_partition<32>(cta)`, where a coroutine cannot suspend (they are member
//! functions of the simulator's `cooperative_groups.h`). [`lower`] writes them as the intrinsics
//! they are, in place (same line): a block group's sync as `__syncthreads()`; a tile's `sync()` as
//! `__syncwarp(tile.gm_tile_lanes())`, its `shfl`, `shfl_up`, `shfl_down` and `shfl_xor` as
//! `__shfl_*_sync(tile.gm_tile_lanes(), ..., N)` (the tile's lanes, the width its size), its
//! `any` and `all` as `__any_sync` and `__all_sync` over its lanes, and its `ballot` as
//! `tile.gm_tile_bits(__ballot_sync(tile.gm_tile_lanes(), ...))` (the warp's bits shifted to
//! the tile's), which is what the tile's own functions do; the rewrites (stackless and regions)
//! then treat them as any other wait.
//!
//! Guarantees: the source is lowered only when everything it names of cooperative groups is a
//! block group's type, `this_thread_block()`, a tile of a literal size up to 32 (within a warp of
//! 32 or 64 lanes) declared as `thread_block_tile<N> t` or `auto t = tiled_partition<N>(...)`, a
//! sync of such a group, a tile's shuffle or vote, or a member function that does not wait
//! (`thread_rank`, `size`, ...), or a tile's `cooperative_groups::reduce` with `plus`, `less`,
//! `greater`, `bit_and`, `bit_or` or `bit_xor` of a 32-bit integer type, or `plus`, `less`,
//! `greater` of `float` or `double` (lowered to the prelude's `__gm_tile_reduce_sync`, one
//! exchange computing the same butterfly as the tile's shuffles). Larger and
//! run-time sized tiles, a tile's `match_any` and `match_all`, other reductions, coalesced and
//! grid groups, `memcpy_async` and the rest keep the kernel on stacks, as before. [`is_block_level`]
//! says whether a source names cooperative groups only that way with nothing left to lower, which
//! is what the stackless check (`super::why_not`) accepts.

use gpu_mem_core::kernel::scan::functions::call_end;
use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::collections::{BTreeMap, BTreeSet};

/// The namespace.
const NAMESPACE: &str = "cooperative_groups";

/// What a lowered source may name inside the namespace (qualified, or unqualified after
/// `using namespace cooperative_groups`).
const BLOCK_LEVEL: [&str; 5] = [
    "thread_block",
    "this_thread_block",
    "sync",
    "thread_block_tile",
    "tiled_partition",
];

/// The largest tile lowered: within one warp whatever the device's warp size (32 or 64).
const LARGEST_TILE: u32 = 32;

/// The member function of a lowered tile that gives its lanes as a warp mask (the mask of the
/// intrinsics its calls become).
pub(crate) const TILE_LANES: &str = "gm_tile_lanes";

/// The member function that turns a warp's ballot into the tile's (bit 0 its rank 0).
const TILE_BALLOT: &str = "gm_tile_bits";

/// A tile's shuffles and the intrinsics they are.
const TILE_SHUFFLES: [(&str, &str); 4] = [
    ("shfl", "__shfl_sync"),
    ("shfl_up", "__shfl_up_sync"),
    ("shfl_down", "__shfl_down_sync"),
    ("shfl_xor", "__shfl_xor_sync"),
];

/// A tile's votes whose results are the warp's, and the intrinsics they are (`ballot`, whose
/// bits are the tile's, is lowered through [`TILE_BALLOT`]).
const TILE_VOTES: [(&str, &str); 2] = [("any", "__any_sync"), ("all", "__all_sync")];

/// Member functions of a group that wait (or may), besides `sync` and the shuffles: on a
/// group this does not lower, they keep the kernel on stacks.
const WAITING_MEMBERS: [&str; 6] = [
    "ballot",
    "any",
    "all",
    "match_any",
    "match_all",
    "barrier_wait",
];

/// Names of cooperative groups beyond block groups (the simulator's headers and CUDA's): a
/// source naming one after `using namespace cooperative_groups` is not lowered.
const BEYOND_BLOCKS: [&str; 20] = [
    "thread_group",
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
    if scan.edits.is_empty() {
        return None;
    }
    let mut lowered = String::with_capacity(code.len() + 32 * scan.edits.len());
    let mut at = 0;
    for (start, end, with) in &scan.edits {
        lowered.push_str(&code[at..*start]);
        lowered.push_str(with);
        at = *end;
    }
    lowered.push_str(&code[at..]);
    Some(lowered)
}

/// Whether `code` names cooperative groups only at block level, with no sync left to lower
/// (so that, for the stackless check, it names nothing of them that waits).
pub(crate) fn is_block_level(code: &str) -> bool {
    Scan::of(code).is_some_and(|scan| scan.edits.is_empty())
}

/// The operations of `cooperative_groups::reduce` a tile's reduction is lowered for, in the
/// prelude's order (`__gm_tile_reduce_sync`'s first argument), and whether floats take them.
const TILE_REDUCTIONS: [(&str, bool); 6] = [
    ("plus", true),
    ("less", true),
    ("greater", true),
    ("bit_and", false),
    ("bit_or", false),
    ("bit_xor", false),
];

/// The prelude's intrinsic for a tile's reduction: one exchange, the same butterfly over the
/// tile's width as its shuffles make.
const TILE_REDUCE: &str = "__gm_tile_reduce_sync";

/// The 32-bit integer types a tile's reduction is lowered for, and the floating ones.
const REDUCED_INTEGERS: [&str; 6] = [
    "int",
    "unsigned",
    "unsigned int",
    "uint",
    "int32_t",
    "uint32_t",
];
const REDUCED_FLOATS: [&str; 2] = ["float", "double"];

/// A tile's reduction whose value starts at token `value` and whose call's `)` is token
/// `close`: its operation's number in [`TILE_REDUCTIONS`], and the token of the `,` before its
/// operation. `None` when the operation is not `[cg::]op<type>()` of those on the types above.
fn tile_reduction<'c>(
    text: &impl Fn(usize) -> &'c str,
    spaces: &BTreeSet<&str>,
    namespace_open: bool,
    value: usize,
    close: usize,
) -> Option<(usize, usize)> {
    // The last `,` at the call's depth.
    let mut depth = 0i32;
    let mut comma = None;
    for k in value..close {
        match text(k) {
            "(" | "[" | "{" | "<" => depth += 1,
            ")" | "]" | "}" | ">" => depth -= 1,
            "," if depth == 0 => comma = Some(k),
            _ => {}
        }
    }
    let comma = comma?;
    let mut k = comma + 1;
    if text(k + 1) == ":" && text(k + 2) == ":" && spaces.contains(text(k)) {
        k += 3;
    } else if !namespace_open {
        return None;
    }
    let op = TILE_REDUCTIONS.iter().position(|(op, _)| *op == text(k))?;
    if text(k + 1) != "<" {
        return None;
    }
    let mut j = k + 2;
    let mut words = Vec::new();
    while j < close && text(j) != ">" {
        words.push(text(j));
        j += 1;
    }
    let ty = words.join(" ");
    if !(text(j) == ">" && text(j + 1) == "(" && text(j + 2) == ")" && j + 3 == close) {
        return None;
    }
    let floats = TILE_REDUCTIONS[op].1;
    (REDUCED_INTEGERS.contains(&ty.as_str()) || floats && REDUCED_FLOATS.contains(&ty.as_str()))
        .then_some((op, comma))
}

/// What [`lower`] reads of a source.
struct Scan {
    /// Byte ranges to write otherwise, and what to write there, in order.
    edits: Vec<(usize, usize, String)>,
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
        // Where the name at token `i` starts, its qualifier (`cg::`) included.
        let start_of = |i: usize| {
            if qualified(i) {
                toks[i - 3].start
            } else {
                toks[i].start
            }
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
        // Tiles: `thread_block_tile<N> t` (a variable or parameter) or
        // `auto t = tiled_partition<N>(...)`, each name with one size.
        let size_at = |i: usize| -> Option<u32> {
            (text(i) == "<" && text(i + 2) == ">")
                .then(|| text(i + 1).parse::<u32>().ok())
                .flatten()
                .filter(|n| n.is_power_of_two() && *n <= LARGEST_TILE)
        };
        let mut tiles: BTreeMap<&str, u32> = BTreeMap::new();
        for i in 0..toks.len() {
            let (size, mut j) = if names(i, "thread_block_tile") {
                (size_at(i + 1), i + 4)
            } else if text(i) == "auto"
                && toks.get(i + 1).is_some_and(|t| t.ident)
                && text(i + 2) == "="
            {
                let at = if text(i + 4) == ":" { i + 6 } else { i + 3 };
                if !names(at, "tiled_partition") {
                    continue;
                }
                (size_at(at + 1), i + 1)
            } else {
                continue;
            };
            let size = size?;
            while matches!(text(j), "const" | "&") {
                j += 1;
            }
            if toks.get(j).is_some_and(|t| t.ident)
                && matches!(text(j + 1), "=" | ";" | "," | ")" | "(" | "{")
                && *tiles.entry(text(j)).or_insert(size) != size
            {
                return None;
            }
        }
        let mut edits = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let word = text(i);
            if !toks[i].ident {
                i += 1;
                continue;
            }
            let member = |name: &str| text(i + 1) == "." && text(i + 2) == name;
            // `X.sync()` of a block group variable.
            if blocks.contains(word) && member("sync") && text(i + 3) == "(" && text(i + 4) == ")" {
                edits.push((
                    toks[i].start,
                    toks[i + 4].end,
                    "__syncthreads()".to_string(),
                ));
                i += 5;
                continue;
            }
            // `cg::reduce(t, v, cg::plus<int>())` over a tile: one exchange.
            if names(i, "reduce")
                && text(i + 1) == "("
                && let Some(&size) = tiles.get(text(i + 2))
                && text(i + 3) == ","
            {
                let close = call_end(code, &toks, i + 1)?;
                let (op, comma) = tile_reduction(&text, &spaces, open, i + 4, close)?;
                let start = start_of(i);
                let tile = text(i + 2);
                edits.push((
                    start,
                    toks[i + 3].end,
                    format!("{TILE_REDUCE}({op}, {tile}.{TILE_LANES}(),"),
                ));
                edits.push((toks[comma].start, toks[close].end, format!(", {size})")));
                i = close + 1;
                continue;
            }
            if let Some(&size) = tiles.get(word) {
                let mask = format!("{word}.{TILE_LANES}()");
                // `t.sync()` of a tile: a barrier of its lanes.
                if member("sync") && text(i + 3) == "(" && text(i + 4) == ")" {
                    edits.push((
                        toks[i].start,
                        toks[i + 4].end,
                        format!("__syncwarp({mask})"),
                    ));
                    i += 5;
                    continue;
                }
                // `t.shfl_down(v, d)`: the intrinsic over the tile's lanes, its size the width.
                if let Some((_, intrinsic)) = TILE_SHUFFLES.iter().find(|(name, _)| member(name))
                    && text(i + 3) == "("
                {
                    let close = call_end(code, &toks, i + 3)?;
                    edits.push((
                        toks[i].start,
                        toks[i + 3].end,
                        format!("{intrinsic}({mask}, "),
                    ));
                    edits.push((toks[close].start, toks[close].end, format!(", {size})")));
                    i += 4;
                    continue;
                }
                // `t.any(p)`, `t.all(p)`: the intrinsic over the tile's lanes.
                if let Some((_, intrinsic)) = TILE_VOTES.iter().find(|(name, _)| member(name))
                    && text(i + 3) == "("
                {
                    edits.push((
                        toks[i].start,
                        toks[i + 3].end,
                        format!("{intrinsic}({mask}, "),
                    ));
                    i += 4;
                    continue;
                }
                // `t.ballot(p)`: the warp's ballot over the tile's lanes, as the tile's bits.
                if member("ballot") && text(i + 3) == "(" {
                    let close = call_end(code, &toks, i + 3)?;
                    edits.push((
                        toks[i].start,
                        toks[i + 3].end,
                        format!("{word}.{TILE_BALLOT}(__ballot_sync({mask}, "),
                    ));
                    edits.push((toks[close].start, toks[close].end, "))".to_string()));
                    i += 4;
                    continue;
                }
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
                let start = start_of(i);
                edits.push((start, toks[i + 6].end, "__syncthreads()".to_string()));
                i += 7;
                continue;
            }
            // `cg::sync(X)` of a block group variable.
            if names(i, "sync")
                && text(i + 1) == "("
                && blocks.contains(text(i + 2))
                && text(i + 3) == ")"
            {
                let start = start_of(i);
                edits.push((start, toks[i + 3].end, "__syncthreads()".to_string()));
                i += 4;
                continue;
            }
            // `cg::sync(t)` of a tile: a barrier of its lanes.
            if names(i, "sync")
                && text(i + 1) == "("
                && tiles.contains_key(text(i + 2))
                && text(i + 3) == ")"
            {
                let start = start_of(i);
                let tile = text(i + 2);
                edits.push((
                    start,
                    toks[i + 3].end,
                    format!("__syncwarp({tile}.{TILE_LANES}())"),
                ));
                i += 4;
                continue;
            }
            if word == "sync" {
                // Any other sync (of a group this does not know, or static, or taken by address)
                // might wait where a coroutine cannot.
                return None;
            }
            // Any other group's shuffle or vote (a larger tile's, a coalesced group's) waits.
            let after_dot = i > 0 && text(i - 1) == ".";
            if after_dot
                && (WAITING_MEMBERS.contains(&word)
                    || TILE_SHUFFLES.iter().any(|(name, _)| *name == word))
            {
                return None;
            }
            // Tiles only of a literal size this lowers (not `tiled_partition(cta, n)`).
            if names(i, "tiled_partition") || names(i, "thread_block_tile") {
                size_at(i + 1)?;
            }
            if qualified(i) && !BLOCK_LEVEL.contains(&word) {
                return None;
            }
            if open && BEYOND_BLOCKS.contains(&word) {
                return None;
            }
            i += 1;
        }
        edits.sort_by_key(|edit| edit.0);
        // Each edit is within its line: reports keep naming the user's lines.
        if edits
            .iter()
            .any(|(start, end, _)| code[*start..*end].contains('\n'))
        {
            return None;
        }
        // Edits found from the qualified start (`cg::`) must not overlap an earlier one.
        if edits.windows(2).any(|w| w[1].0 < w[0].1) {
            return None;
        }
        Some(Scan { edits })
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
            "auto tile = cg::tiled_partition<64>(cta); tile.sync();",
            "cg::thread_block_tile<128> t = cg::tiled_partition<128>(cta);",
            "auto t = cg::tiled_partition(cta, 32); t.sync();",
            "auto t = cg::tiled_partition<32>(cta); out[0] = t.match_any(1);",
            "auto t = cg::tiled_partition<64>(cta); out[0] = t.ballot(1);",
            "cg::thread_block_tile<32> t = cg::tiled_partition<32>(cta); cg::reduce(t, 1L, cg::plus<long>());",
            "cg::thread_block_tile<32> t = cg::tiled_partition<32>(cta); cg::reduce(t, 1, my_op());",
            "cg::thread_block_tile<32> t = cg::tiled_partition<32>(cta); cg::reduce(t, 1.0, cg::bit_or<double>());",
            "cg::thread_block_tile<32, cg::thread_block> t = cg::tiled_partition<32>(cta);",
            "cg::thread_block_tile<32> a = cg::tiled_partition<32>(cta); \
             cg::thread_block_tile<16> a2 = cg::tiled_partition<16>(cta); \
             { cg::thread_block_tile<16> a = a2; }",
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
    fn tiles_of_a_warp_or_less_become_warp_intrinsics_in_place_votes_too() {
        let code = r#"#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int sum(cg::thread_block_tile<16> t, int v) {
    for (int o = t.size() / 2; o > 0; o /= 2) v += t.shfl_down(v, o);
    return v;
}
__global__ void k(int* out) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
    auto half = cg::tiled_partition<16>(cta);
    int v = tile.shfl_xor(tile.shfl(out[cta.thread_rank()], 0), 1);
    tile.sync();
    out[tile.thread_rank()] = v + sum(half, tile.shfl_up(v,
                                                         1));
    cg::sync(cta);
    if (half.any(v > 2) && tile.all(v != 0)) out[0] = (int)half.ballot(v & 1);
    cg::sync(half);
}
"#;
        let lowered = lower(code).expect("lowered");
        assert_eq!(lowered.lines().count(), code.lines().count());
        for expected in [
            "v += __shfl_down_sync(t.gm_tile_lanes(), v, o, 16);",
            "int v = __shfl_xor_sync(tile.gm_tile_lanes(), __shfl_sync(tile.gm_tile_lanes(), \
             out[cta.thread_rank()], 0, 32), 1, 32);",
            "    __syncwarp(tile.gm_tile_lanes());\n",
            "sum(half, __shfl_up_sync(tile.gm_tile_lanes(), v,\n",
            "                                                         1, 32));",
            "    __syncthreads();\n    if",
            "cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);",
            "    if (__any_sync(half.gm_tile_lanes(), v > 2) && __all_sync(tile.gm_tile_lanes(), \
             v != 0)) out[0] = (int)half.gm_tile_bits(__ballot_sync(half.gm_tile_lanes(), v & 1));\n\
             \x20   __syncwarp(half.gm_tile_lanes());\n}",
        ] {
            assert!(lowered.contains(expected), "{expected}\n{lowered}");
        }
        assert!(is_block_level(&lowered), "{lowered}");
        assert!(!is_block_level(code));
    }

    /// A tile's reduction with one of cooperative groups' operations on 32-bit integers, floats
    /// or doubles is the prelude's one exchange, a butterfly of the tile's width.
    #[test]
    fn tile_reductions_become_warp_reductions_in_place() {
        let code = SAMPLE.replace(
            "    out[0] = s[0];",
            "    cg::thread_block_tile<16> t = cg::tiled_partition<16>(cta);\n\
             \x20   int n = cg::reduce(t, (int)s[0], cg::plus<int>());\n\
             \x20   unsigned m = cg::reduce(t, 3u, cg::bit_xor<unsigned int>()) + n;\n\
             \x20   out[0] = cg::reduce(t, s[1] * 2.0f, cg::greater<float>()) + m;",
        );
        let lowered = lower(&code).expect("lowered");
        assert_eq!(lowered.lines().count(), code.lines().count());
        for expected in [
            "int n = __gm_tile_reduce_sync(0, t.gm_tile_lanes(), (int)s[0], 16);",
            "unsigned m = __gm_tile_reduce_sync(5, t.gm_tile_lanes(), 3u, 16) + n;",
            "out[0] = __gm_tile_reduce_sync(2, t.gm_tile_lanes(), s[1] * 2.0f, 16) + m;",
        ] {
            assert!(lowered.contains(expected), "{expected}\n{lowered}");
        }
        assert!(is_block_level(&lowered), "{lowered}");
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
