//! Helpers that wait only at a bounded number of atomics and spin hints stay plain functions.
//!
//! A `__device__` helper that calls an atomic is a helper that waits (a thread lets the others
//! run at its atomics, so that spin-waits end), and the stackless form makes such helpers
//! coroutines: a frame made and destroyed per call. NVIDIA's histogram256 (`addByte`, one
//! `atomicAdd` per byte) ran 2.2x slower that way than on fibers. A helper whose body has no loop, no
//! `goto`, and calls only atomics, spin hints and other such helpers (no barrier, collective or
//! other waiting helper) makes a bounded number of atomics per call, so it cannot spin by
//! itself: a thread can only spin by calling it again and again. Such a helper stays a plain
//! function (its atomics written `(atomicAdd)(...)`, which the prelude's macros leave alone),
//! and each of its calls in a coroutine becomes the progress point instead
//! (`(co_await gm_sim_progress_point(), helper(...))`: every 16th lets the others run).

use gpu_mem_core::kernel::scan::functions::{Function, Kind, call_end, call_open};
use gpu_mem_core::kernel::scan::tokens::Token;
use std::collections::BTreeSet;

/// Words that make a helper's body unbounded.
const LOOPS: [&str; 4] = ["for", "while", "do", "goto"];

/// Of `waiting` (the helpers that wait), those that wait only at atomics and spin hints (not in
/// `at_barriers`, the helpers that reach a barrier or collective) and are bounded: every
/// definition of the name has a body without [`LOOPS`] whose calls of waiting helpers are calls
/// of bounded ones (so no recursion either).
pub(super) fn bounded<'c>(
    code: &'c str,
    toks: &[Token],
    fns: &[Function],
    waiting: &BTreeSet<&'c str>,
    at_barriers: &BTreeSet<&'c str>,
) -> BTreeSet<&'c str> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let candidates: Vec<&str> = waiting.difference(at_barriers).copied().collect();
    let mut bounded: BTreeSet<&str> = BTreeSet::new();
    loop {
        let before = bounded.len();
        for &name in &candidates {
            if bounded.contains(name) {
                continue;
            }
            let definitions = fns
                .iter()
                .filter(|f| f.name.is_some_and(|n| text(n) == name));
            let all_bounded = definitions.clone().count() > 0
                && definitions.into_iter().all(|f| {
                    let Some((open, close)) = f.body else {
                        return true;
                    };
                    f.kind == Kind::Device
                        && (open..close).all(|k| {
                            let word = text(k);
                            let loops = toks[k].ident && LOOPS.contains(&word);
                            let waits_unbounded = waiting.contains(word) && !bounded.contains(word);
                            !(loops || waits_unbounded)
                        })
                });
            if all_bounded {
                bounded.insert(name);
            }
        }
        if bounded.len() == before {
            return bounded;
        }
    }
}

/// The edits that keep a bounded helper's body (`open..close`, tokens) a plain function's: each
/// call of one of `waits` (the names the prelude makes `co_await`s) written with the name in
/// parentheses, which no function-like macro expands. `None` when a call's parenthesis is not
/// where the scan expects it.
pub(super) fn plain_body(
    code: &str,
    toks: &[Token],
    (open, close): (usize, usize),
    waits: &[&str],
    edits: &mut Vec<(usize, usize, String)>,
) -> Option<()> {
    for k in open..close {
        let t = toks[k];
        if t.ident && waits.contains(&&code[t.start..t.end]) {
            call_open(code, toks, k, false)?;
            edits.push((t.start, t.start, "(".into()));
            edits.push((t.end, t.end, ")".into()));
        }
    }
    Some(())
}

/// The edits that make the call of a bounded helper at token `at` a progress point:
/// `(co_await gm_sim_progress_point(), helper(...))`.
pub(super) fn progress_point(
    code: &str,
    toks: &[Token],
    at: usize,
    edits: &mut Vec<(usize, usize, String)>,
) -> Option<()> {
    let open = call_open(code, toks, at, true)?;
    let end = toks[call_end(code, toks, open)?].end;
    edits.push((
        toks[at].start,
        toks[at].start,
        "(co_await gm_sim_progress_point(), ".into(),
    ));
    edits.push((end, end, ")".into()));
    Some(())
}
