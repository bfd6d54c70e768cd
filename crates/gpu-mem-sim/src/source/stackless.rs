//! Stackless threads: which kernels may run their threads as coroutines instead of on
//! stacks of their own, and the rewrite that makes their `__global__` functions, and the
//! `__device__` helpers that wait, coroutines (the prelude's `GM_SIM_STACKLESS` section turns
//! the barrier names into `co_await`s).
//!
//! Guarantees:
//! * only kernels whose threads wait at barriers and collectives, and let each other run at
//!   atomics and spin hints, called in the `__global__` functions or in `__device__` helpers
//!   they call (by plain calls) are chosen ([`why_not`] says why another is not); the test is on
//!   the source text and conservative;
//! * the rewrite keeps every line where it was (all edits stay within their line), so compile
//!   errors, fault and divergence reports name the user's lines;
//! * a source the rewrite cannot handle gives `None`, and a rewritten source the compiler refuses
//!   (a barrier inside a lambda, say) is built the ordinary way instead (`super::program`): the
//!   choice changes speed, not behaviour (save for two corner cases GCC's coroutines bring:
//!   side effects ordered inside one expression around a call that waits, and copies of classes
//!   passed to or returned from a helper that waits; `docs/src/backends/sim.md`);
//! * sources GCC 12 miscompiles as coroutines are kept off the stackless form: each rewritten
//!   body declares a local (an await in a condition of a coroutine without one lost its
//!   state), and a helper called in a statement with `&&`, `||` or `?:`, or named in an
//!   unevaluated operand, keeps the kernel on stacks.

mod block_groups;
mod bounded;
mod cxx20;
mod macros;

pub(crate) use block_groups::{TILE_LANES, is_block_level};
pub(crate) use cxx20::why_not_as_cxx20;

use crate::abi::SHARED_ALIAS;
use crate::thread::Collective;
use gpu_mem_core::kernel::scan::functions::{
    Function, Kind, body_end, call_end, call_open, functions, waiting_helpers,
};
use gpu_mem_core::kernel::scan::tokens::{self, Token, tokens};
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// Names the rewrite must not meet: the runtime table (through which a thread could wait
/// inside a function), raw strings (which the tokenizer does not read), and the vocabulary the
/// simulator builds out of waiting calls inside functions of its own headers: cooperative
/// groups and `cuda::barrier` (member functions) and the warp functions made of collectives.
const NEEDS_A_STACK: [&str; 7] = [
    "gm_sim_",
    "R\"",
    "cooperative_groups",
    "cuda/barrier",
    "__activemask",
    "__match_any_sync",
    "__match_all_sync",
];

/// The user's own coroutines: a kernel that is one already is left as it is.
const COROUTINE_KEYWORDS: [&str; 3] = ["co_await", "co_yield", "co_return"];

/// The names the prelude turns into `co_await`s (function-like macros): barriers, warp
/// barriers, block and warp collectives, and the atomics and spin hint, which let the others
/// run at every 16th call of a thread (as they do from inside the function on a fiber). A
/// helper function that calls one becomes a coroutine too (`functions::waiting_helpers`).
/// The collectives' names come from their table (`Collective::info`).
static SUSPENDING: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    BARRIERS
        .into_iter()
        .chain(super::atomics::ATOMICS_AND_SPIN_HINT)
        .chain(Collective::calls())
        .collect()
});

/// The names that wait in `code`: [`SUSPENDING`]'s among `of` (all of them when `None`), and the
/// kernel's own function-like macros for them (`macros::aliases`), with each macro's definition.
fn waits_in<'c>(
    code: &'c str,
    of: Option<&dyn Fn(&str) -> bool>,
) -> (Vec<&'c str>, Vec<std::ops::Range<usize>>) {
    let mut names: Vec<&str> = SUSPENDING
        .iter()
        .copied()
        .filter(|name| of.is_none_or(|keep| keep(name)))
        .collect();
    let aliases = macros::aliases(code, &names);
    let definitions = aliases.iter().map(|(_, range)| range.clone()).collect();
    names.extend(aliases.into_iter().map(|(name, _)| name));
    (names, definitions)
}

/// The helpers of `code` that wait, as the stackless form builds them: those that become
/// coroutines, and those that wait only at a bounded number of atomics and spin hints and stay
/// plain functions (`bounded`); and the names that wait (`waits_in`).
struct Helpers<'c> {
    coroutines: BTreeSet<&'c str>,
    bounded: BTreeSet<&'c str>,
    waits: Vec<&'c str>,
    /// Of the coroutines, how many reach a barrier or collective (the others wait only at
    /// atomics and spin hints, and are not bounded).
    at_barriers: usize,
}

fn helpers_of<'c>(code: &'c str, toks: &[Token], fns: &[Function]) -> Helpers<'c> {
    let (waits, _) = waits_in(code, None);
    let waiting = waiting_helpers(code, toks, fns, &waits);
    let (synchronizing, _) = waits_in(
        code,
        Some(&|name: &str| !name.starts_with("atomic") && name != "__nanosleep"),
    );
    let at_barriers = waiting_helpers(code, toks, fns, &synchronizing);
    let bounded = bounded::bounded(code, toks, fns, &waiting, &at_barriers);
    Helpers {
        coroutines: waiting.difference(&bounded).copied().collect(),
        bounded,
        waits,
        at_barriers: at_barriers.len(),
    }
}

/// `code` with its block groups' syncs written as block barriers (`block_groups::lower`), for
/// its stackless form; `None` when it has none, or when the lowered source would have a helper
/// that waits only at atomics and spin hints and is not bounded (`bounded`). Such a helper
/// becomes a coroutine, a frame per call, where on a fiber it is a plain call: NVIDIA's
/// histogram256 ran 2.2x slower stackless than on fibers while its `addByte` was one, so such a
/// kernel keeps its fibers.
pub(crate) fn lower_block_groups(code: &str) -> Option<String> {
    let lowered = block_groups::lower(code)?;
    let toks = tokens(&lowered)?;
    let fns = functions(&lowered, &toks)?;
    let helpers = helpers_of(&lowered, &toks, &fns);
    (helpers.coroutines.len() == helpers.at_barriers).then_some(lowered)
}

/// [`SUSPENDING`]'s barriers (the atomics and spin hint are `atomics::ATOMICS_AND_SPIN_HINT`).
const BARRIERS: [&str; 5] = [
    "__syncthreads",
    "syncthreads",
    "barrier",
    "__syncwarp",
    "wavebarrier",
];

/// Why `code`'s threads may not run stackless, or `None` when they may: it must name something
/// that waits (see [`super::wrapper::may_wait`]), nothing of [`NEEDS_A_STACK`] or
/// [`COROUTINE_KEYWORDS`], and every name of [`SUSPENDING`], and of a helper that waits, must be
/// a plain call in the body of a `__global__` function or of such a helper (`(syncthreads)()`,
/// `&syncthreads` or `__shfl_sync<float>(...)` would reach the function, which cannot suspend a
/// coroutine; a call in an expression, `while (atomicCAS(p, 0, 1) != 0)`, is one). A helper
/// that waits must be a `__device__` function (without `extern`) with a return type the rewrite
/// can wrap, only `__device__` functions may share its name, nothing else may be declared with
/// it, and no kernel may be named in device code. The reason names the line.
pub(crate) fn why_not(code: &str) -> Option<String> {
    if !super::wrapper::may_wait(code) {
        return Some("its threads wait for nothing".into());
    }
    // Cooperative groups that only name block groups, whose syncs are lowered to block barriers
    // already (`block_groups`), wait nowhere else.
    if let Some(word) = NEEDS_A_STACK.iter().find(|&&word| {
        code.contains(word) && !(word == "cooperative_groups" && block_groups::is_block_level(code))
    }) {
        return Some(format!("it names `{word}`"));
    }
    let Some(toks) = tokens(code) else {
        return Some("a comment or literal does not end".into());
    };
    let Some(fns) = functions(code, &toks) else {
        return Some("a brace or parenthesis does not close".into());
    };
    let text = |t: &Token| &code[t.start..t.end];
    let line = |t: &Token| code[..t.start].matches('\n').count() + 1;
    let (waits, macro_definitions) = waits_in(code, None);
    let helpers = waiting_helpers(code, &toks, &fns, &waits);
    // A macro for a wait is one more name for it; one that names a helper is not (the rewrite
    // awaits a helper's calls in the kernel's text, not in a macro's).
    let for_a_wait = |range: &std::ops::Range<usize>| {
        macro_definitions.contains(range)
            && !directive_names(&code[range.clone()], helpers.iter().copied(), false, |_| {
                false
            })
    };
    if directive_names(
        code,
        waits.iter().copied().chain(helpers.iter().copied()),
        !helpers.is_empty(),
        for_a_wait,
    ) {
        return Some(
            "a preprocessor directive names a barrier, collective, atomic or helper that waits"
                .into(),
        );
    }
    let named_helper = |f: &Function| f.name.filter(|&n| helpers.contains(text(&toks[n])));
    for f in &fns {
        let Some(n) = named_helper(f) else { continue };
        let name = text(&toks[n]);
        if f.kind != Kind::Device {
            return Some(format!(
                "line {}: `{name}` names a helper that waits and a function that is not `__device__`",
                line(&toks[n])
            ));
        }
        if f.returns.is_none() {
            return Some(format!(
                "line {}: the helper `{name}` waits, and its return type is deduced or trailing",
                line(&toks[n])
            ));
        }
        if toks[f.start..n].iter().any(|t| text(t) == "extern") {
            return Some(format!(
                "line {}: the helper `{name}` waits, and it is declared `extern`",
                line(&toks[n])
            ));
        }
    }
    let kernels: BTreeSet<&str> = fns
        .iter()
        .filter(|f| f.kind == Kind::Kernel)
        .filter_map(|f| f.name.map(|n| text(&toks[n])))
        .collect();
    // Where a thread can suspend: kernels, and the helpers that wait.
    let bodies: Vec<(usize, usize)> = fns
        .iter()
        .filter(|f| f.kind == Kind::Kernel || named_helper(f).is_some())
        .filter_map(|f| f.body)
        .collect();
    let may_suspend = |i: usize| bodies.iter().any(|&(open, close)| open < i && i < close);
    let declared = |i: usize| fns.iter().any(|f| f.name == Some(i));
    toks.iter().enumerate().find_map(|(i, t)| {
        if t.ident && COROUTINE_KEYWORDS.contains(&text(t)) {
            return Some(format!(
                "line {}: the kernel is a coroutine already",
                line(t)
            ));
        }
        if t.ident && kernels.contains(text(t)) && !declared(i) {
            // Called, a kernel made a coroutine would only start (on a GPU, it is a launch).
            return Some(format!(
                "line {}: the kernel `{}` is named in device code",
                line(t),
                text(t)
            ));
        }
        let helper = t.ident && helpers.contains(text(t));
        if !(t.ident && waits.contains(&text(t)) || helper) || declared(i) {
            return None;
        }
        if helper && declares(code, &toks, i) {
            return Some(format!(
                "line {}: `{}` names a helper that waits and something declared there",
                line(t),
                text(t)
            ));
        }
        if unevaluated(code, &toks, i) {
            return Some(format!(
                "line {}: `{}` is named in an unevaluated operand (`sizeof`, `decltype` & co)",
                line(t),
                text(t)
            ));
        }
        if helper && short_circuits(code, &toks, i) {
            // GCC 12 runs an awaited coroutine call in an operand it should skip
            // (`x = c && helper(p)`).
            return Some(format!(
                "line {}: `{}` is called in a statement with `&&`, `||` or `?:`",
                line(t),
                text(t)
            ));
        }
        if call_open(code, &toks, i, helper).is_none() {
            Some(format!(
                "line {}: `{}` is not a plain call",
                line(t),
                text(t)
            ))
        } else if !may_suspend(i) {
            Some(format!(
                "line {}: `{}` is called outside the kernels and the `__device__` functions \
                 that wait (a struct's member or a host function cannot suspend)",
                line(t),
                text(t)
            ))
        } else {
            None
        }
    })
}

/// The tokens of the statement around token `i`: from after the `;`, `{` or `}` before it to
/// before the one after it (a `for` header's parts, and a condition with its statement, count
/// as one).
fn statement(code: &str, toks: &[Token], i: usize) -> std::ops::Range<usize> {
    let ends = |k: &usize| matches!(&code[toks[*k].start..toks[*k].end], ";" | "{" | "}");
    let start = (0..i).rev().find(ends).map_or(0, |k| k + 1);
    let end = (i..toks.len()).find(ends).unwrap_or(toks.len());
    start..end
}

/// Whether the name at token `i` is declared there rather than called: `Acc acc(3);`,
/// `Box<int> acc(3);`, `decltype(b) acc(3);` (the rewrite would make it a call).
fn declares(code: &str, toks: &[Token], i: usize) -> bool {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let Some(prev) = i.checked_sub(1) else {
        return false;
    };
    let within = statement(code, toks, i);
    // The bracket that `close` closes (`(` or `<`), within the statement.
    let opening = |close: usize, open: &str, shut: &str| {
        let mut depth = 0i32;
        (within.start..=close).rev().find(|&k| {
            if text(k) == shut {
                depth += 1;
            } else if text(k) == open {
                depth -= 1;
            }
            depth == 0
        })
    };
    match text(prev) {
        ">" => opening(prev, "<", ">")
            .and_then(|open| open.checked_sub(1))
            .is_some_and(|name| toks[name].ident),
        ")" => opening(prev, "(", ")")
            .and_then(|open| open.checked_sub(1))
            .is_some_and(|name| text(name) == "decltype"),
        _ => toks[prev].ident && !EXPRESSION_KEYWORDS.contains(&text(prev)),
    }
}

/// Operators of an unevaluated operand: a call there never runs.
const UNEVALUATED: [&str; 6] = [
    "sizeof", "alignof", "_Alignof", "decltype", "noexcept", "typeid",
];

/// Whether token `i` lies in the operand of one of [`UNEVALUATED`] (`sizeof(helper(p))`,
/// `sizeof helper(p)`).
fn unevaluated(code: &str, toks: &[Token], i: usize) -> bool {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let within = statement(code, toks, i);
    let mut depth = 0i32;
    for k in (within.start..i).rev() {
        match text(k) {
            ")" => depth += 1,
            "(" if depth > 0 => depth -= 1,
            // An enclosing parenthesis: after one of them, an unevaluated operand.
            "(" if k
                .checked_sub(1)
                .is_some_and(|p| UNEVALUATED.contains(&text(p))) =>
            {
                return true;
            }
            _ => {}
        }
    }
    i.checked_sub(1)
        .is_some_and(|p| UNEVALUATED.contains(&text(p)))
}

/// Whether the statement around token `i` has a short-circuit operator: `&&`, `||`, `?`
/// (or `and`, `or`).
fn short_circuits(code: &str, toks: &[Token], i: usize) -> bool {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let within = statement(code, toks, i);
    within.clone().any(|k| {
        let doubled = |c: &str| {
            text(k) == c
                && k + 1 < within.end
                && text(k + 1) == c
                && toks[k].end == toks[k + 1].start
        };
        doubled("&") || doubled("|") || matches!(text(k), "?" | "and" | "or")
    })
}

/// Keywords after which a name starts an expression (a call), not a declaration.
const EXPRESSION_KEYWORDS: [&str; 8] = [
    "return",
    "co_return",
    "else",
    "do",
    "case",
    "throw",
    "new",
    "delete",
];

/// Whether a preprocessor directive names one of `names` (barriers and the like, helpers that
/// wait), or with `pasting`, pastes tokens together (`##`, which could make any name): a macro
/// could then reach the function without a plain call the rewrite sees (`#define CAS
/// (atomicCAS)`), which the token test (it skips directives) cannot see. Directives `skip` says
/// are not looked at (the kernel's own macros for a wait, `macros`).
fn directive_names<'n>(
    code: &str,
    names: impl Iterator<Item = &'n str> + Clone,
    pasting: bool,
    skip: impl Fn(&std::ops::Range<usize>) -> bool,
) -> bool {
    tokens::directives(code)
        .into_iter()
        .filter(|range| !skip(range))
        .any(|range| {
            code[range].lines().enumerate().any(|(k, line)| {
                // (An `#include` names a file, not code.)
                let include = k == 0
                    && line
                        .trim_start()
                        .strip_prefix('#')
                        .is_some_and(|rest| rest.trim_start().starts_with("include"));
                let mut words = line
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty());
                !include
                    && (pasting && line.contains("##")
                        || words.any(|w| names.clone().any(|n| n == w)))
            })
        })
}

/// `code` with every `__global__` function, and every `__device__` helper that waits, made a
/// coroutine. A kernel loses an `extern "C"` before `__global__`, its `void` return type becomes
/// `gm_sim_task`; a helper's return type `T` becomes `gm_sim_sub<T>`; each `return` in their
/// bodies becomes `co_return`, each body starts with a `co_await` that never suspends (so that
/// one that does not wait is a coroutine too), and each call of a helper that waits becomes
/// `(co_await helper(...))`. `None` when a `__global__` function has no `void` return type, a
/// helper that waits has no return type the rewrite can wrap, or the source does not tokenize.
pub(crate) fn rewrite(code: &str) -> Option<String> {
    let toks = tokens(code)?;
    let text = |t: &Token| &code[t.start..t.end];
    // A linkage block (`extern "C" { ... }`: the literal is not a token) would keep its kernels'
    // C linkage, which coroutines cannot have.
    if toks
        .windows(2)
        .any(|w| w[0].ident && text(&w[0]) == "extern" && text(&w[1]) == "{")
    {
        return None;
    }
    let fns = functions(code, &toks)?;
    let Helpers {
        coroutines: helpers,
        bounded,
        waits,
        ..
    } = helpers_of(code, &toks, &fns);
    // (byte range replaced, replacement); sorted by position before they are made.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !(toks[i].ident && text(&toks[i]) == "__global__") {
            i += 1;
            continue;
        }
        // `extern "C"` goes: the compiler names a coroutine's parts after the function, which
        // collide under C linkage. The wrapper refers to the entry from the same unit. Only the
        // two words go, so line breaks between them stay.
        if i > 0 && toks[i - 1].ident && text(&toks[i - 1]) == "extern" {
            let between = &code[toks[i - 1].end..toks[i].start];
            if between.trim() == "\"C\"" {
                let literal = toks[i - 1].end + between.find('"')?;
                edits.push((toks[i - 1].start, toks[i - 1].end, String::new()));
                edits.push((literal, literal + 3, String::new()));
            }
        }
        let (end, void_at) = kernel_head(code, &toks, i)?;
        let void_at = void_at?;
        edits.push((toks[void_at].start, toks[void_at].end, "gm_sim_task".into()));
        if text(&toks[end]) == ";" {
            i = end + 1;
            continue;
        }
        let bind_shared = !may_observe_references(code, &toks[end..]);
        let close = body_end(code, &toks, end)?;
        let calls = Calls {
            helpers: &helpers,
            bounded: &bounded,
        };
        coroutine_body(code, &toks, (end, close), calls, bind_shared, &mut edits)?;
        i = close + 1;
    }
    for f in &fns {
        if let (Some(name), Some(body)) = (f.name, f.body)
            && bounded.contains(text(&toks[name]))
        {
            bounded::plain_body(code, &toks, body, &waits, &mut edits)?;
            continue;
        }
        let Some(name) = f.name.filter(|&n| helpers.contains(text(&toks[n]))) else {
            continue;
        };
        if f.kind != Kind::Device {
            return None;
        }
        let (first, last) = f.returns?;
        // A coroutine cannot be inlined everywhere (GCC refuses `always_inline` on one).
        for t in &toks[f.start..name] {
            match text(t) {
                "__forceinline__" => edits.push((t.start, t.end, "inline".into())),
                "GM_DEVICE" => edits.push((t.start, t.end, "__device__ inline".into())),
                _ => {}
            }
        }
        edits.push((toks[first].start, toks[first].start, "gm_sim_sub<".into()));
        edits.push((toks[last].end, toks[last].end, ">".into()));
        if let Some(body) = f.body {
            let calls = Calls {
                helpers: &helpers,
                bounded: &bounded,
            };
            coroutine_body(code, &toks, body, calls, false, &mut edits)?;
        }
    }
    if edits.is_empty() {
        return None;
    }
    // Insertions at one place keep the order they were made in (a body's first `co_await`
    // before a call's `(co_await `); replacements never overlap.
    edits.sort_by_key(|&(start, _, _)| start);
    let mut out = String::with_capacity(code.len() + 64);
    let mut at = 0;
    for (start, end, with) in edits {
        if start < at {
            return None;
        }
        out.push_str(&code[at..start]);
        out.push_str(&with);
        at = end;
    }
    out.push_str(&code[at..]);
    Some(out)
}

/// The helpers a coroutine's calls reach: coroutines (awaited) and bounded plain functions
/// (each call a progress point).
#[derive(Clone, Copy)]
struct Calls<'a, 'c> {
    helpers: &'a BTreeSet<&'c str>,
    bounded: &'a BTreeSet<&'c str>,
}

/// The edits that make the body `open..=close` (tokens) a coroutine's: a `co_await` that never
/// suspends first, `co_return` for `return`, `(co_await helper(...))` for each call of one of
/// `calls.helpers`, a progress point before each call of one of `calls.bounded`, and with
/// `bind_shared`, each `__shared__` variable bound to a reference once.
fn coroutine_body(
    code: &str,
    toks: &[Token],
    (open, close): (usize, usize),
    Calls { helpers, bounded }: Calls<'_, '_>,
    bind_shared: bool,
    edits: &mut Vec<(usize, usize, String)>,
) -> Option<()> {
    let text = |t: &Token| &code[t.start..t.end];
    // The local works around GCC 12: in a coroutine with no local of its own, an await in a
    // condition (`if (__shfl_sync(...))`, `while (helper(p) < 3)`) came back from suspending
    // with its state lost (the thread neither waiting nor ended: a crash).
    edits.push((
        toks[open].end,
        toks[open].end,
        " co_await std::suspend_never{}; int gm_sim_anchor = 0; (void)gm_sim_anchor;".into(),
    ));
    let mut k = open;
    while k < close {
        let t = toks[k];
        match text(&t) {
            "return" if t.ident => edits.push((t.start, t.end, "co_return".into())),
            "__shared__" | "GM_SHARED" if t.ident && bind_shared => {
                if let Some((name, semicolon)) = shared_declaration(code, toks, k) {
                    let alias = format!("{SHARED_ALIAS}{}", text(&toks[name]));
                    edits.push((toks[name].start, toks[name].end, alias.clone()));
                    let bind = format!(" auto& {} = {alias};", text(&toks[name]));
                    edits.push((toks[semicolon].end, toks[semicolon].end, bind));
                    k = semicolon;
                }
            }
            word if t.ident && bounded.contains(word) => {
                bounded::progress_point(code, toks, k, edits)?;
            }
            word if t.ident && helpers.contains(word) => {
                let open = call_open(code, toks, k, true)?;
                let end = toks[call_end(code, toks, open)?].end;
                edits.push((t.start, t.start, "(co_await ".into()));
                edits.push((end, end, ")".into()));
            }
            _ => {}
        }
        k += 1;
    }
    Some(())
}

/// The declaration of the `__global__` function whose keyword is token `at`: the token that
/// ends it (its body's `{`, or the `;` of a declaration), outside parentheses, and its first
/// `void` there (the return type). `None` when the source ends first.
fn kernel_head(code: &str, toks: &[Token], at: usize) -> Option<(usize, Option<usize>)> {
    let mut depth = 0i32;
    let mut void_at = None;
    for (j, t) in toks.iter().enumerate().skip(at + 1) {
        match &code[t.start..t.end] {
            "(" => depth += 1,
            ")" => depth -= 1,
            "{" | ";" if depth == 0 => return Some((j, void_at)),
            "void" if depth == 0 && void_at.is_none() => void_at = Some(j),
            _ => {}
        }
    }
    None
}

/// Whether code from `toks` on (a kernel body and what follows) might tell a `__shared__`
/// variable from a reference bound to it: `decltype` names the reference type, and a lambda
/// capturing by copy copies the referenced value where a static variable is not captured at all.
/// (A lambda: `[=`, or a capture list's `]` followed by `(`, `{` or `mutable`; an occasional
/// subscript caught as well only costs speed.)
fn may_observe_references(code: &str, toks: &[Token]) -> bool {
    let text = |t: &Token| &code[t.start..t.end];
    toks.windows(2).any(|w| {
        let (a, b) = (text(&w[0]), text(&w[1]));
        a == "decltype"
            || (a == "[" && b == "=")
            || (a == "]" && matches!(b, "(" | "{" | "mutable"))
    })
}

/// For a `__shared__` (or `GM_SHARED`) at token `at` that starts a declaration of one variable
/// without initializer (`__shared__ float tile[16][16];`), the tokens of its name and of its `;`.
///
/// Such a variable is a thread-local of the loaded library (one per block: a block's threads
/// share an OS thread), which costs a call to find after every barrier in a coroutine; the
/// rewrite renames it and binds the old name to it once per thread (`auto& tile = ...;`, kept
/// in the frame). `None` for anything else (`extern` dynamic arrays, several declarators,
/// initializers), which stays as written.
fn shared_declaration(code: &str, toks: &[Token], at: usize) -> Option<(usize, usize)> {
    let text = |t: &Token| &code[t.start..t.end];
    let before = text(toks.get(at.checked_sub(1)?)?);
    if !matches!(before, ";" | "{" | "}") {
        return None;
    }
    // Parentheses and brackets nest; a `,` outside them (several declarators, or a template's
    // arguments: not worth telling apart) and initializers leave the declaration as it is.
    let mut depth = 0i32;
    let mut name = None;
    let mut dimensions = false;
    let mut k = at + 1;
    loop {
        let t = toks.get(k)?;
        let word = text(t);
        if word == "[" && depth == 0 {
            dimensions = true;
        }
        match word {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            ";" if depth == 0 => break,
            "," | "=" | "{" | "}" if depth == 0 => return None,
            _ if t.ident && depth == 0 && !dimensions => name = Some(k),
            _ => {}
        }
        k += 1;
    }
    let name = name?;
    // The name is not the type: something comes before it.
    (name > at + 1).then_some((name, k))
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn eligible(code: &str) -> bool {
        why_not(code).is_none()
    }

    const TILED: &str = r#"#include "gpu_mem.h"
#define TPB 16
// a __global__ in a comment, "__global__ void" in a string
extern "C" __global__ void tiled(gm_array<float, 2> a, int n) {
    __shared__ float s[TPB];
    if (threadIdx.x >= n) { return; }
    s[threadIdx.x] = a(0, threadIdx.x) * 1e-3f + 0x1p-2f;
    __syncthreads();
    a(0, threadIdx.x) = s[TPB - 1 - threadIdx.x];
}
"#;

    #[test]
    fn kernels_become_coroutines_on_the_same_lines() {
        let out = rewrite(TILED).unwrap();
        assert!(out.contains(
            "  __global__ gm_sim_task tiled(gm_array<float, 2> a, int n) { co_await std::suspend_never{}; int gm_sim_anchor = 0; (void)gm_sim_anchor;"
        ));
        assert!(!out.contains("extern"));
        assert!(out.contains("{ co_return; }"));
        assert!(out.contains("// a __global__ in a comment, \"__global__ void\" in a string"));
        assert_eq!(out.lines().count(), TILED.lines().count());
        for (before, after) in TILED.lines().zip(out.lines()) {
            if !before.contains("return")
                && !before.contains("__global__ void")
                && !before.contains("__shared__")
            {
                assert_eq!(before, after);
            }
        }
    }

    #[test]
    fn shared_arrays_are_bound_once_per_thread() {
        let code = "__global__ void k(int n) {\n\
                    \x20   GM_SHARED float tile[16][TPB + 1];\n\
                    \x20   __shared__ volatile int count; extern __shared__ float dynamic[];\n\
                    \x20   __shared__ int a[4], b[4];\n\
                    \x20   __shared__ gm_pair<int, int> pair;\n\
                    }\n";
        let out = rewrite(code).unwrap();
        assert!(out.contains(
            "GM_SHARED float gm_sim_shared_tile[16][TPB + 1]; auto& tile = gm_sim_shared_tile;\n"
        ));
        assert!(out.contains(
            "__shared__ volatile int gm_sim_shared_count; auto& count = gm_sim_shared_count; extern __shared__ float dynamic[];\n"
        ));
        // Left as written: two declarators; a comma (of a template) outside brackets.
        assert!(out.contains("    __shared__ int a[4], b[4];\n"));
        assert!(out.contains("    __shared__ gm_pair<int, int> pair;\n"));
        assert_eq!(out.lines().count(), code.lines().count());
    }

    #[test]
    fn helpers_and_declarations() {
        let code = "__device__ float twice(float x) { return 2 * x; }\n\
                    __global__ void k(float* p);\n\
                    __global__ void __launch_bounds__(256) k(float* p) { p[0] = twice(p[0]); syncthreads(); }\n";
        let out = rewrite(code).unwrap();
        // The helper keeps its plain `return`.
        assert!(out.contains("__device__ float twice(float x) { return 2 * x; }"));
        assert!(out.contains("__global__ gm_sim_task k(float* p);"));
        assert!(out.contains(
            "__global__ gm_sim_task __launch_bounds__(256) k(float* p) { co_await std::suspend_never{}; int gm_sim_anchor = 0; (void)gm_sim_anchor; p[0]"
        ));
    }

    #[test]
    fn references_stay_out_where_code_could_tell() {
        for body in [
            "auto show = [=](int i) { a(i) = flag; };",
            "auto show = [flag](int i) { a(i) = flag; };",
            "decltype(flag) mine = flag;",
        ] {
            let code =
                format!("__global__ void k(gm_array<int, 1> a) {{ __shared__ int flag; {body} }}");
            let out = rewrite(&code).unwrap();
            assert!(out.contains("__shared__ int flag;"), "{body}: {out}");
            assert!(!out.contains("gm_sim_shared_flag"), "{body}");
        }
        // A subscript is not a lambda.
        let code = "__global__ void k(gm_array<int, 1> a) { __shared__ int s[4]; s[a(0)] = 1; }";
        assert!(
            rewrite(code)
                .unwrap()
                .contains("auto& s = gm_sim_shared_s;")
        );
    }

    #[test]
    fn linkage_and_characters() {
        // `extern "C"` on its own line: both words go, the line break stays.
        let code = "extern \"C\"\n__global__ void k() { syncthreads(); }\n";
        let out = rewrite(code).unwrap();
        assert_eq!(out.lines().count(), code.lines().count());
        assert!(!out.contains("extern") && !out.contains("\"C\""), "{out}");
        // A linkage block keeps C linkage: not rewritten.
        assert_eq!(
            rewrite("extern \"C\" {\n__global__ void k() { syncthreads(); }\n}\n"),
            None
        );
        // Non-ASCII names and text never split a character.
        let out = rewrite(
            "__global__ void k(gm_array<int, 1> a) { int größe = 1; /* ½ */ syncthreads(); a(0) = größe; }",
        )
        .unwrap();
        assert!(out.contains("int größe = 1; /* ½ */"));
        assert!(eligible(
            "__global__ void k() { int größe = 1; syncthreads(); }"
        ));
    }

    /// A helper that waits only at a bounded number of atomics stays a plain function whose
    /// atomics the macros leave alone; each call of it in a coroutine is a progress point. One
    /// with a loop, or calling a barrier, is a coroutine.
    #[test]
    fn bounded_atomic_helpers_stay_plain_functions() {
        let code = "__device__ int peek(int* f) { return atomicAdd(f, 0); }\n\
                    __device__ int twice(int* f) { return peek(f) + peek(f); }\n\
                    __global__ void k(int* f) { syncthreads(); while (twice(f) == 0) {} }";
        let out = rewrite(code).unwrap();
        assert!(
            out.contains("__device__ int peek(int* f) { return (atomicAdd)(f, 0); }"),
            "{out}"
        );
        assert!(out.contains("{ return peek(f) + peek(f); }"), "{out}");
        assert!(
            out.contains("while ((co_await gm_sim_progress_point(), twice(f)) == 0)"),
            "{out}"
        );
        for unbounded in [
            "{ int s = 0; for (int i = 0; i < 2; ++i) s += atomicAdd(f, 0); return s; }",
            "{ syncthreads(); return atomicAdd(f, 0); }",
        ] {
            let code = code.replace("{ return atomicAdd(f, 0); }", unbounded);
            let out = rewrite(&code).unwrap();
            assert!(out.contains("gm_sim_sub<int> peek"), "{out}");
            assert!(out.contains("(co_await twice(f))"), "{out}");
        }
    }

    #[test]
    fn what_the_rewrite_refuses() {
        assert_eq!(rewrite("__device__ void f() {}"), None);
        assert_eq!(rewrite("__global__ int k() { return 1; }"), None);
        assert_eq!(rewrite("__global__ void k() { /* unterminated"), None);
        assert_eq!(rewrite("__global__ void k() { { }"), None);
        // A directive is not code: the kernel behind the macro is not found.
        assert_eq!(rewrite("#define K __global__ void \\\n  k()\nK {}"), None);
    }

    #[test]
    fn barriers_and_collectives_called_directly_are_stackless() {
        assert!(eligible(TILED));
        for call in [
            "barrier(GM_FENCE_GLOBAL)",
            "p[0] = __shfl_down_sync(~0ull, p[0], 1)",
            "p[0] = __ballot_sync(~0ull, 1)",
            "p[0] = syncthreads_count(1)",
            "wavebarrier()",
            "__syncwarp()",
            "atomicAdd(p, 1)",
            "while (atomicCAS(p, 0, 1) != 0) __nanosleep(10)",
            "p[1] = atomicMax(&p[0], 3) + atomicInc((unsigned*)p, 9u)",
            "if (p[0] > 0 && atomicAdd(p, 1) == 0) p[1] = 1",
            "p[1] = p[0] > atomicMax(p, 2)",
            "p[1] = p[0] ? 1 : atomicAdd(p, 1)",
            "switch (p[0]) { case 0: atomicAdd(p, 1); }",
        ] {
            // (In a loop: atomics a thread reaches once run it as a plain call.)
            let code = format!("__global__ void k(int* p) {{ for (;;) {{ {call}; }} }}");
            assert!(eligible(&code), "{call}");
        }
        assert!(!eligible("__global__ void k(int* p) { atomicAdd(p, 1); }"));
        // Names that only contain a keyword's letters are names.
        assert!(eligible(
            "__global__ void k(int* p) { int co_ord = 1; syncthreads(); }"
        ));
        // No barrier at all: plain calls, not coroutines.
        assert!(!eligible("__global__ void k(float* p) { p[0] = 1; }"));
        for word in [
            "auto add = &atomicAdd",
            "(atomicAdd)(p, 1)",
            "gm_sim_rt.progress()",
            "p[0] = __shfl_sync<int>(~0ull, 1, 0)",
            "co_yield 1",
            "(syncthreads)()",
            "auto f = &syncthreads",
            "int barrier = 1",
            "q->barrier(1)",
            "q.atomicAdd(p, 1)",
            "::atomicAdd(p, 1)",
        ] {
            let code = format!("__global__ void k(int* p) {{ syncthreads(); {word}; }}");
            assert!(!eligible(&code), "{word}");
        }
        // In a helper function (declared before or after the kernel): the helper waits too.
        for code in [
            "__device__ void add(int* p) { atomicAdd(p, 1); }\n__global__ void k(int* p) { syncthreads(); add(p); }",
            "__device__ void add(int* p);\n__global__ void k(int* p) { syncthreads(); add(p); }\n__device__ void add(int* p) { __syncwarp(); }",
        ] {
            assert!(eligible(code), "{code}");
        }
        // Outside the kernels and helpers: a struct's member, a host function.
        assert_eq!(
            why_not("struct S { __device__ void add(int* p) {\n atomicAdd(p, 1); } };\n__global__ void k(int* p) { syncthreads(); }")
                .as_deref(),
            Some("line 2: `atomicAdd` is called outside the kernels and the `__device__` functions that wait (a struct's member or a host function cannot suspend)")
        );
        assert!(!eligible(
            "void host(int* p) { atomicAdd(p, 1); }\n__global__ void k(int* p) { syncthreads(); }"
        ));
        // What a helper's name must not be: declared as something else, pasted by a macro,
        // `extern`; nor may a kernel be named in device code.
        for code in [
            "struct Acc { int s; __device__ Acc(int v) : s(v) {} __device__ int operator()(int x) { return s += x; } };\n\
             __device__ int acc(int v) { __syncwarp(); return v; }\n\
             __global__ void k(int* p) { Acc acc(3); p[0] = acc(4); }",
            "#define CALL(n) n##_add(p)\n__device__ void count_add(int* p) { atomicAdd(p, 1); }\n\
             __global__ void k(int* p) { CALL(count); __syncthreads(); }",
            "extern \"C\" __device__ int f(int v) { __syncwarp(); return v; }\n__global__ void k(int* p) { p[0] = f(1); }",
            "__global__ void k2(int* p) { syncthreads(); }\n__global__ void k(int* p) { k2(p); syncthreads(); }",
            "__device__ auto f(int v) { __syncwarp(); return v; }\n__global__ void k(int* p) { p[0] = f(1); }",
        ] {
            assert!(!eligible(code), "{code}");
        }
        // GCC 12 runs an awaited helper in an operand it should skip; an unevaluated operand
        // is no call; declarations of something else with a helper's name.
        let with_helper = |body: &str| {
            format!(
                "__device__ int h(int* p) {{ __syncwarp(); return p[0]; }}\n\
                 __global__ void k(int* p) {{ int c = p[1]; {body} }}"
            )
        };
        for body in [
            "int x = c && h(p);",
            "p[0] = c ? h(p) : 1;",
            "if (c || h(p)) p[0] = 1;",
            "p[0] = sizeof(h(p));",
            "p[0] = sizeof h(p);",
            "decltype(h(p)) x = 1;",
            "Box<int> h(3);",
            "decltype(c) h(3);",
        ] {
            assert!(!eligible(&with_helper(body)), "{body}");
        }
        // Comparisons are not declarations, and atomics and collectives may short-circuit.
        for body in [
            "p[0] = c > h(p);",
            "if (c < 2) p[0] = h(p);",
            "p[0] = c && atomicAdd(p, 1);",
        ] {
            assert_eq!(why_not(&with_helper(body)), None, "{body}");
        }
        // Names are whole words in directives; helpers in namespaces and template calls count.
        for code in [
            "#include \"gpu_mem.h\"\n__device__ int h(int v) { __syncwarp(); return v; }\n\
             __global__ void k(int* p) { p[0] = h(1); if (p[0]) return; }",
            "namespace a::b { __device__ int inner(int v) { __syncwarp(); return v; } }\n\
             inline namespace c { __device__ int outer(int v) { return inner<int>(v) + 1; } }\n\
             __global__ void k(int* p) { p[0] = outer(1); }",
        ] {
            assert_eq!(why_not(code), None, "{code}");
        }
        // A kernel declared first and defined later is still a kernel.
        assert!(eligible(
            "__global__ void k(int* p);\n__global__ void k(int* p) { atomicAdd(p, 1); syncthreads(); }"
        ));
        // A macro could reach a function without a call the test sees.
        for define in ["#define CAS (atomicCAS)", "#define WAIT \\\n  syncthreads"] {
            let code =
                format!("{define}\n__global__ void k(int* p) {{ syncthreads(); CAS(p, 0, 1); }}");
            assert!(!eligible(&code), "{define}");
        }
    }

    /// Pieces of kernel sources, joined at random for [`any_source_is_read_without_panics`].
    const PIECES: [&str; 44] = [
        "__device__ ",
        "__global__ ",
        "extern \"C\" ",
        "void ",
        "int ",
        "auto ",
        "f",
        "g",
        "k",
        "(",
        ")",
        "{",
        "}",
        ";",
        ",",
        "<",
        ">",
        "=",
        ".",
        "->",
        "::",
        "&",
        "*",
        "[",
        "]",
        "template <typename T> ",
        "namespace n ",
        "struct S ",
        "return ",
        "syncthreads()",
        "__shfl_down_sync(~0ull, v, 1)",
        "atomicAdd(p, 1)",
        "f(1)",
        "g<int>(2)",
        "\n",
        "#define M(x) x##_f\n",
        "#include \"gpu_mem.h\"\n",
        "sizeof",
        "// c\n",
        "/* c */",
        "\"s\"",
        "'c'",
        "inline ",
        "GM_DEVICE ",
    ];

    proptest::proptest! {
        #![proptest_config(crate::test_support::proptest_config(16))]

        /// Whatever the text, the test and the rewrite answer without panicking, and a rewrite
        /// keeps every line where it was.
        #[test]
        fn any_source_is_read_without_panics(
            picks in proptest::collection::vec(0..PIECES.len(), 0..80),
        ) {
            let code: String = picks.iter().map(|&i| PIECES[i]).collect();
            let _ = why_not(&code);
            if let Some(out) = rewrite(&code) {
                proptest::prop_assert_eq!(out.matches('\n').count(), code.matches('\n').count());
            }
        }
    }
}
