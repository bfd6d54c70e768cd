//! Threads as loops between barriers: the rewrite that lets a kernel run a whole block per
//! call, each stretch of its body between two block barriers (a region) a loop over the block's
//! threads (the prelude's `gm_sim/regions.h`), as CPU compilers of GPU kernels do (POCL,
//! CuPBoP). A stretch without barriers then costs what a loop costs, where the stackless form
//! suspends and resumes every thread at every barrier.
//!
//! Guarantees:
//! * only kernels whose threads wait at nothing but block barriers are rewritten, and only
//!   where every barrier is a statement of a kernel's body or of a `for` or `while` loop (with a
//!   block as its body) that is itself such a statement; anything else ([`rewrite`]'s `Err`
//!   says what) is built the stackless way or on stacks, as before;
//! * variables declared by a statement of the body or of such a loop (`type name = init;`)
//!   become per-thread slots (`gm_sim_slots`), so that each thread finds its own values after a
//!   barrier; `__shared__`, `static`, type and constant declarations stay where they are, shared
//!   by the block;
//! * a loop with barriers asks its condition of every live thread, which must agree (else the
//!   block diverged, as the scheduler would find: some threads wait at its barrier for others
//!   that left); a thread that returned skips every later region, and a barrier it would have
//!   to reach is the scheduler's divergence too;
//! * every edit stays within its line, so compile errors and reports name the user's lines; a
//!   declaration or statement the rewrite misreads fails to compile (a name used across a
//!   barrier that is not a slot, a `break` out of a region), and the kernel is built the next
//!   way instead: the choice changes speed, never behaviour.

mod accessors;
mod flat;
mod guard;
mod own_memory;
mod parse;

pub(crate) use own_memory::leaks_own_address;

pub(crate) use flat::is_flat_code;

use crate::abi::REGIONS_GUESS as GUESS;
use crate::abi::SHARED_ALIAS;
use crate::thread::{BarrierScope, Collective, Combine};
use gpu_mem_core::kernel::scan::functions::{Kind, body_end, call_end, functions};
use gpu_mem_core::kernel::scan::tokens::{Token, directives, tokens};
use parse::{BLOCK_BARRIERS, Branch, Decl, Item, Loop, Statements};
use std::collections::{BTreeMap, BTreeSet};

/// Names of waits other than block barriers and warp collectives, and of what the rewrite
/// cannot see through: any occurrence (even in a comment) keeps a kernel off regions.
/// (`decltype` of a variable the rewrite makes a reference, a slot or a shared array's, would
/// name a reference type.)
const REFUSED: [&str; 12] = [
    "decltype",
    "wavebarrier",
    "activemask",
    "__match",
    "cooperative_groups",
    "cuda/barrier",
    "gm_sim_",
    "R\"",
    "co_await",
    "co_yield",
    "co_return",
    "__nanosleep",
];

/// `code` with every kernel's body rewritten as regions, or why it cannot be. (Only for code
/// whose threads may wait: the others run as plain calls, `super::wrapper::may_wait`.)
pub(crate) fn rewrite(code: &str) -> Result<String, String> {
    // Cooperative groups that only name block groups, whose syncs are lowered to block
    // barriers already (`super::stackless::lower_block_groups`), wait nowhere else.
    // Warp collectives split regions (see `warp_calls`); block-wide votes and grid barriers
    // are waits the regions do not know.
    let block_collectives = Collective::ALL
        .iter()
        .filter(|op| op.scope() != BarrierScope::Warp || op.combine() == Combine::ActiveMask)
        .flat_map(|op| op.info().calls.iter().copied());
    if let Some(word) = REFUSED.iter().copied().chain(block_collectives).find(|&w| {
        code.contains(w) && !(w == "cooperative_groups" && super::stackless::is_block_level(code))
    }) {
        return Err(format!("it names `{word}`"));
    }
    if super::atomics::may_repeat(code) {
        return Err("a thread may spin at an atomic".into());
    }
    let toks = tokens(code).ok_or("a comment or literal does not end")?;
    let fns = functions(code, &toks).ok_or("a brace or parenthesis does not close")?;
    if directives(code)
        .iter()
        .any(|d| BLOCK_BARRIERS.iter().any(|b| code[d.clone()].contains(b)))
    {
        return Err("a preprocessor directive names a barrier".into());
    }
    let s = Statements {
        code,
        toks: &toks,
        warp_calls: warp_calls(code, &toks)?,
    };
    let kernels: Vec<(usize, usize)> = fns
        .iter()
        .filter(|f| f.kind == Kind::Kernel)
        .filter_map(|f| f.body)
        .collect();
    let inside = |k: usize| kernels.iter().any(|&(open, close)| open < k && k < close);
    if let Some(k) = (0..toks.len()).find(|&k| s.waits(k) && !inside(k)) {
        return Err(format!(
            "line {}: a barrier or warp collective outside a kernel's body",
            s.line(k)
        ));
    }
    // Two barriers on one line are one barrier to the scheduler (a barrier is known by its
    // line), which releases threads that parted to reach them; regions cannot part.
    let mut lines: Vec<usize> = (0..toks.len())
        .filter(|&k| s.names_barrier(k))
        .map(|k| s.line(k))
        .collect();
    let count = lines.len();
    lines.dedup();
    if lines.len() != count {
        return Err("two barriers on one line".into());
    }
    let constants = super::defines::numbers(code);
    let mut out = Rewrite {
        s: &s,
        edits: Vec::new(),
        // (And a name a reference is bound to, `int& r = name;`, which changes through `r`.)
        addressed: (1..toks.len())
            .filter(|&k| toks[k].ident && s.takes_address(k - 1))
            .map(|k| s.text(k))
            .chain((3..toks.len()).filter_map(|k| {
                let bound = toks[k].ident
                    && s.text(k - 1) == "="
                    && toks[k - 2].ident
                    && s.text(k - 3) == "&"
                    && matches!(s.text(k + 1), ";" | ",");
                bound.then(|| s.text(k))
            }))
            .collect(),
        by_reference: false,
        uniform: Vec::new(),
        index: Vec::new(),
        held: Vec::new(),
        held_types: BTreeMap::new(),
        held_declarations: BTreeSet::new(),
        uniform_arrays: Vec::new(),
        body: (0, 0),
        uniform_declarations: BTreeSet::new(),
        flat_rules: flat::Flat::of(code, &s, &fns, &constants),
    };
    // A helper that takes a reference may change what it is passed: then every parameter a
    // kernel that names it (or that a macro may name it for) is taken to change.
    let by_reference: Vec<&str> = fns
        .iter()
        .filter(|f| f.kind != Kind::Kernel)
        .filter_map(|f| {
            let n = f.name?;
            (s.text(n + 1) == "("
                && s.parameters(n + 1).map_or(true, |ps| {
                    ps.iter().any(|&(a, b)| (a..b).any(|k| s.text(k) == "&"))
                }))
            .then(|| s.text(n))
        })
        .collect();
    let through_macros = directives(code).iter().any(|d| {
        by_reference
            .iter()
            .any(|name| code[d.clone()].contains(name))
    });
    for f in fns.iter().filter(|f| f.kind == Kind::Kernel) {
        let (Some(name), Some((open, close))) = (f.name, f.body) else {
            continue;
        };
        out.by_reference =
            through_macros || (open..close).any(|k| by_reference.contains(&s.text(k)));
        let params = s.parameters(name + 1)?;
        let items = s.scope(open + 1, close)?;
        let names: Vec<&str> = params.iter().map(|&(_, name)| s.text(name)).collect();
        let index = guard::index_variables(&s, (open, close), &names, |name| {
            out.by_reference || out.addressed.contains(name)
        });
        out.index = index
            .iter()
            .filter(|&&(_, field)| field == "x")
            .map(|&(name, _)| name)
            .collect();
        out.held = index;
        out.held_types.clear();
        out.body = (open + 1, close);
        let mut storage = String::from(
            "gm_sim_regions& gm_sim_b = gm_sim_regions_here(); \
             unsigned long long* const gm_sim_words = gm_sim_b.operands.value; (void)gm_sim_words; ",
        );
        // Parameters a thread changes: each thread's own copy (the program passes one set
        // to the whole block).
        let mut visible = Vec::new();
        let mut copies = String::new();
        out.uniform.clear();
        out.uniform_arrays.clear();
        out.uniform.extend(template_parameters(&s, f.start));
        out.uniform.extend(constants.iter().copied());
        for &(first, name) in &params {
            let text = s.text(name);
            let named = (open..close).filter(|&k| s.text(k) == text);
            if !named.clone().any(|k| out.by_reference || s.changes(k)) {
                out.uniform.push(text);
                if (first..name).any(|k| s.text(k) == "gm_array") {
                    out.uniform_arrays.push(text);
                }
                continue;
            }
            let ty = code[toks[first].start..toks[name - 1].end].replace('\n', " ");
            storage.push_str(&format!("gm_sim_slots<{ty}> gm_sim_v_{text}(gm_sim_b); "));
            copies.push_str(&format!(
                "gm_sim_v_{text}.init(gm_sim_t, gm_sim_p_{text}); "
            ));
            out.replace(name, name, &format!("gm_sim_p_{text}"));
            visible.push(text.to_string());
        }
        if !copies.is_empty() {
            storage.push_str(&format!(
                "GM_SIM_EACH_THREAD {copies}GM_SIM_EACH_THREAD_END "
            ));
        }
        out.slots_of(&items, None, &visible, &mut storage);
        out.insert(toks[open].end, &storage);
        out.scope(&items, &mut visible, (close, 0), None);
        // (After the last region's end, inserted at the same place.)
        out.insert(toks[close].start, "GM_SIM_END();");
    }
    Ok(out.apply())
}

/// The names of the template parameters of the function whose declaration starts at token
/// `start` (`functions`' `start`: the `template` of `template <int BLOCK_SIZE, class T>
/// __global__ void k(...)`): constants of the kernel's instance, the same in every thread.
fn template_parameters<'c>(s: &Statements<'c>, start: usize) -> Vec<&'c str> {
    if s.text(start) != "template" || s.text(start + 1) != "<" {
        return Vec::new();
    }
    let mut names = Vec::new();
    let mut depth = 0usize;
    for j in start + 1..s.toks.len() {
        match s.text(j) {
            "<" | "(" => depth += 1,
            ">" | ")" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ if depth == 1 && s.toks[j].ident && matches!(s.text(j + 1), "," | ">" | "=") => {
                names.push(s.text(j));
            }
            _ => {}
        }
    }
    names
}

/// For a source whose kernels cannot all be rewritten: the kernels that can, each on its own,
/// and the source rewritten for them alone, the other kernels' bodies emptied (and the
/// helpers only those reach), every line kept. `None` when no kernel can, or the source has
/// fewer than two. A module whose kernels need different forms is built twice, these kernels
/// taken from this build (`super::build_module`). `code` is the source before
/// `super::stackless::lower_block_groups`, which runs on each trial.
pub(crate) fn rewrite_subset(code: &str) -> Option<(String, BTreeSet<String>)> {
    let toks = tokens(code)?;
    let fns = functions(code, &toks)?;
    let word = |k: usize| &code[toks[k].start..toks[k].end];
    let kernels: Vec<usize> = (0..fns.len())
        .filter(|&f| fns[f].kind == Kind::Kernel && fns[f].body.is_some() && fns[f].name.is_some())
        .collect();
    if kernels.len() < 2 {
        return None;
    }
    // Kernels are taken by name: one name of two kernels (overloads) is never split.
    let named_once = |k: usize| {
        let name = fns[k].name.map(word);
        kernels
            .iter()
            .filter(|&&j| fns[j].name.map(word) == name)
            .count()
            == 1
    };
    // A helper a macro names may be called through it anywhere: never emptied.
    let in_directives: Vec<&str> = directives(code).into_iter().map(|d| &code[d]).collect();
    let named_in_directives = |name: &str| {
        in_directives.iter().any(|d| {
            d.match_indices(name).any(|(at, _)| {
                let before = d[..at].chars().next_back();
                let after = d[at + name.len()..].chars().next();
                !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    };
    // The source with only `kept` kernels' bodies, and the bodies of the helpers anything else
    // may reach: a helper stays whole when its name appears anywhere outside the bodies of the
    // functions emptied (a kept kernel's body, another helper kept, a class's member function,
    // an initializer).
    let variant = |kept: &[usize]| -> String {
        let mut live: Vec<bool> = (0..fns.len())
            .map(|f| fns[f].kind != Kind::Kernel || kept.contains(&f))
            .collect();
        for f in 0..fns.len() {
            live[f] = live[f]
                && (fns[f].kind == Kind::Kernel
                    || fns[f].body.is_none()
                    || fns[f].name.is_some_and(|n| named_in_directives(word(n))));
        }
        loop {
            let mut more = false;
            for h in 0..fns.len() {
                let (Some(name), Some(_)) = (fns[h].name, fns[h].body) else {
                    continue;
                };
                if live[h] {
                    continue;
                }
                let emptied = |k: usize| {
                    (0..fns.len()).any(|f| {
                        !live[f]
                            && fns[f]
                                .body
                                .is_some_and(|(open, close)| open < k && k < close)
                    })
                };
                // (A declaration's own header names it too: `T f<int>(...)`, a specialisation.)
                let declares = |k: usize| {
                    fns.iter().any(|f| {
                        f.name == Some(k)
                            || f.body.is_some_and(|(open, _)| f.start <= k && k < open)
                    })
                };
                let reached =
                    (0..toks.len()).any(|k| word(k) == word(name) && !declares(k) && !emptied(k));
                if reached {
                    live[h] = true;
                    more = true;
                }
            }
            if !more {
                break;
            }
        }
        let mut out = String::with_capacity(code.len());
        let mut at = 0;
        for (f, function) in fns.iter().enumerate() {
            let Some((open, close)) = function.body.filter(|_| !live[f]) else {
                continue;
            };
            let (start, end) = (toks[open].end, toks[close].start);
            out.push_str(&code[at..start]);
            out.extend(code[start..end].chars().filter(|&c| c == '\n'));
            at = end;
        }
        out.push_str(&code[at..]);
        out
    };
    let rewritten = |text: &str| {
        let lowered = super::stackless::lower_block_groups(text);
        rewrite(lowered.as_deref().unwrap_or(text)).ok()
    };
    let alone: Vec<usize> = kernels
        .iter()
        .copied()
        .filter(|&k| named_once(k) && rewritten(&variant(&[k])).is_some())
        .collect();
    if alone.is_empty() {
        return None;
    }
    let text = rewritten(&variant(&alone))?;
    let names = alone
        .iter()
        .filter_map(|&k| fns[k].name.map(|n| word(n).to_string()))
        .collect();
    Some((text, names))
}

/// What every warp collective's name contains: a name or directive with one of these that the
/// rewrite does not know as a call (a pasted name, `__shfl_##xor_sync`) keeps a kernel off
/// regions.
const WARP_STEMS: [&str; 5] = ["__shfl", "ballot", "__all", "__any", "syncwarp"];

/// The names `code` calls warp collectives by: the prelude's (and `__syncwarp`), and those of
/// function-like macros whose definitions call one once (`#define __shfl(v, d)
/// __shfl_sync(...)`, and macros of those), which the prelude's record and hand out as the
/// rewrite splits the regions at their calls. Another directive that names one is refused, as
/// is a name with a collective's stem that is none of them.
fn warp_calls<'c>(code: &'c str, toks: &[Token]) -> Result<Vec<&'c str>, String> {
    let mut names: Vec<&str> = Collective::ALL
        .iter()
        .filter(|op| op.scope() == BarrierScope::Warp && op.combine() != Combine::ActiveMask)
        .flat_map(|op| op.info().calls.iter().copied())
        .chain(["__syncwarp"])
        .collect();
    let defines = directives(code);
    let mut known = vec![false; defines.len()];
    // Macros of macros: until no directive names a collective by a name just learnt.
    loop {
        let before = names.len();
        for (d, known) in defines.iter().zip(known.iter_mut()) {
            let text = &code[d.clone()];
            let calls: usize = names.iter().map(|w| count_names(text, w)).sum();
            if *known || calls == 0 {
                continue;
            }
            match function_macro(text).map(|(name, _)| name) {
                Some(name) if calls == 1 => {
                    let at = d.start + text.find(name).unwrap_or(0);
                    names.push(&code[at..at + name.len()]);
                    *known = true;
                }
                _ => return Err("a preprocessor directive names a warp collective".into()),
            }
        }
        if names.len() == before {
            break;
        }
    }
    if defines
        .iter()
        .zip(&known)
        .any(|(d, known)| !known && WARP_STEMS.iter().any(|w| code[d.clone()].contains(w)))
    {
        return Err("a preprocessor directive names a warp collective".into());
    }
    // (A variable of the kernel's own, `unsigned ballot_bits = ...`, is none: a name declared
    // after a type and followed by `=`, `;`, `,`, `[` or `)`.)
    let word = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let variable = |name: &str| {
        (1..toks.len()).any(|k| {
            word(k) == name
                && (toks[k - 1].ident || matches!(word(k - 1), "*" | "&" | ">"))
                && !matches!(word(k - 1), "return" | "else" | "case")
                && matches!(word(k + 1), "=" | ";" | "," | "[" | ")")
        })
    };
    if let Some(t) = toks.iter().find(|t| {
        let text = &code[t.start..t.end];
        t.ident
            && WARP_STEMS.iter().any(|w| text.contains(w))
            && !names.contains(&text)
            && !variable(text)
    }) {
        return Err(format!(
            "`{}` is no warp collective the rewrite knows",
            &code[t.start..t.end]
        ));
    }
    Ok(names)
}

/// The prelude's warp collectives a kernel may call by their own names, for which a statement
/// declares stand-ins of its own (`GM_SIM_COLLECTIVES_AT` in `gm_sim/regions.h`) that find the
/// thread's operands from its index: nothing is stored per thread to say whose turn it is.
const BY_NAME: [&str; 8] = [
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__ballot_sync",
    "__all_sync",
    "__any_sync",
    "__syncwarp",
];

/// What a thread's turn at a collective call named `name` starts with, in `mode`
/// (`GM_SIM_RECORD`, `GM_SIM_DELIVER`): the stand-ins, and where the call may reach the
/// prelude's functions by another name (a macro, a tile's member), the block's note of whose
/// turn it is, which they read.
fn turn(by_name: bool, mode: &str) -> String {
    let stand_ins = format!("GM_SIM_COLLECTIVES_AT(gm_sim_t, {mode}) ");
    if by_name {
        stand_ins
    } else {
        format!("{stand_ins}gm_sim_b.collect(gm_sim_t, {mode}); ")
    }
}

/// The name of the function-like macro directive `text` defines, and what follows the name
/// (its parameters and replacement).
fn function_macro(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .trim_start_matches('#')
        .trim_start()
        .strip_prefix("define")?
        .trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    (end > 0 && rest[end..].starts_with('(')).then(|| (&rest[..end], &rest[end..]))
}

/// Whether a call of `name` in `code` (a collective's name or a macro of one, `calls`) reaches
/// one of the prelude's functions by its own name (`BY_NAME`), unqualified, where a
/// statement's stand-ins answer it: the name itself, or a macro whose one collective call does
/// (`#define __shfl(v, d) __shfl_sync(0xffffffff, v, d)`).
fn called_by_name(code: &str, name: &str, calls: &[&str], depth: usize) -> bool {
    if BY_NAME.contains(&name) {
        return true;
    }
    let Some(replacement) = directives(code)
        .iter()
        .filter_map(|d| function_macro(&code[d.clone()]))
        .find_map(|(defined, rest)| (defined == name).then_some(rest))
    else {
        return false;
    };
    let Some(toks) = tokens(replacement) else {
        return false;
    };
    let word = |k: usize| &replacement[toks[k].start..toks[k].end];
    let mut called = (0..toks.len()).filter(|&k| calls.contains(&word(k)));
    match (called.next(), called.next()) {
        (Some(k), None) => {
            let qualified = k > 0 && past_stand_ins(word(k - 1));
            !qualified && depth < 8 && called_by_name(code, word(k), calls, depth + 1)
        }
        _ => false,
    }
}

/// Whether a call whose name follows the token `before` passes the stand-ins a statement
/// declares: a member's (`.`, `->`) or a qualified name's (`::__shfl_sync` too), which name
/// lookup finds outside the statement's scope.
fn past_stand_ins(before: &str) -> bool {
    matches!(before, ":" | "." | ">")
}

/// How often `name` stands as a whole word in `text`.
fn count_names(text: &str, name: &str) -> usize {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    text.match_indices(name)
        .filter(|&(at, _)| {
            !word(text[..at].chars().next_back()) && !word(text[at + name.len()..].chars().next())
        })
        .count()
}

/// The edits of one source: byte ranges and what replaces them.
struct Rewrite<'s, 'c> {
    s: &'s Statements<'c>,
    edits: Vec<(usize, usize, String)>,
    /// Names whose address the source takes somewhere (`&name`): their slots are named by
    /// reference in the regions, the others copied in and written back (`gm_sim_keep`), which
    /// lets the compiler keep them in registers (a store through a reference into the slots may
    /// alias any other store of the type: a tiled matmul's sum went to memory at every step).
    addressed: BTreeSet<&'c str>,
    /// Whether a helper takes a reference (and may change any variable it is passed).
    by_reference: bool,
    /// Names whose value is the same in every thread of a block where the regions being
    /// written run: the kernel's parameters no thread changes, and the variables of the
    /// uniform loops around (see [`Rewrite::uniform_loop`]).
    uniform: Vec<&'c str>,
    /// The variables of the kernel being written that hold the thread's `threadIdx.x`
    /// throughout (see [`guard::index_variables`]).
    index: Vec<&'c str>,
    /// The variables of the kernel being written that hold one of the thread's indices
    /// throughout, each with its field (`guard::index_variables`): not slots, each region
    /// declares them again from the index (`held_types`: each one's declared type and field),
    /// which the cursor keeps in a register; `held_declarations`: their first tokens.
    held: Vec<(&'c str, &'c str)>,
    held_types: BTreeMap<&'c str, (String, &'c str)>,
    held_declarations: BTreeSet<usize>,
    /// The `gm_array` parameters among `uniform`: their `shape[d]` and `strides[d]` are
    /// uniform too.
    uniform_arrays: Vec<&'c str>,
    /// The tokens of the body of the kernel being written (after its `{`, before its `}`).
    body: (usize, usize),
    /// The first tokens of the declarations of uniform variables (see
    /// [`Rewrite::uniform_variable`]).
    uniform_declarations: BTreeSet<usize>,
    /// What a flat region may name and call in this source ([`flat::Flat`]).
    flat_rules: flat::Flat<'c>,
}

impl<'c> Rewrite<'_, 'c> {
    /// Whether the collective call named by token `name` reaches a prelude function by its own
    /// name, unqualified ([`called_by_name`]).
    fn by_name(&self, name: usize) -> bool {
        let qualified = name > 0 && past_stand_ins(self.s.text(name - 1));
        !qualified && called_by_name(self.s.code, self.s.text(name), &self.s.warp_calls, 0)
    }

    fn insert(&mut self, at: usize, text: &str) {
        self.edits.push((at, at, format!(" {text} ")));
    }

    /// Replaces tokens `first..=last` with `text`.
    fn replace(&mut self, first: usize, last: usize, text: &str) {
        let toks = self.s.toks;
        self.edits
            .push((toks[first].start, toks[last].end, format!(" {text} ")));
    }

    /// The source with every edit made; the lines a replaced range held are kept as blank
    /// lines after its replacement.
    fn apply(mut self) -> String {
        self.move_loop_pragmas();
        self.edits.sort_by_key(|&(start, _, _)| start);
        let code = self.s.code;
        let mut out = String::with_capacity(code.len() * 2);
        let mut at = 0;
        for (start, end, text) in &self.edits {
            out.push_str(&code[at..*start]);
            out.push_str(text);
            out.extend(std::iter::repeat_n(
                '\n',
                code[*start..*end].matches('\n').count(),
            ));
            at = *end;
        }
        out.push_str(&code[at..]);
        out
    }

    /// A loop's `#pragma GCC unroll` (`super::unroll`) names the loop after it: where text is
    /// written between the directive and its loop (a region's loop over threads, slots), the
    /// directive moves after that text as `_Pragma`, so that it still names the kernel's loop
    /// (and not the loop over the block's threads). Its line stays, blank.
    fn move_loop_pragmas(&mut self) {
        let code = self.s.code;
        let points: BTreeSet<usize> = self
            .edits
            .iter()
            .filter(|(start, end, _)| start == end)
            .map(|&(start, _, _)| start)
            .collect();
        // (Not where a replaced range holds the directive: the replacement has it.)
        let replaced: Vec<(usize, usize)> = self
            .edits
            .iter()
            .filter(|(start, end, _)| start < end)
            .map(|&(start, end, _)| (start, end))
            .collect();
        for d in directives(code) {
            let directive = &code[d.clone()];
            let Some(factor) = directive.trim().strip_prefix("#pragma GCC unroll ") else {
                continue;
            };
            let rest = &code[d.end..];
            let next = d.end + (rest.len() - rest.trim_start().len());
            if replaced
                .iter()
                .any(|&(start, end)| start < d.start && d.start < end)
            {
                continue;
            }
            let text_end = d.start + directive.trim_end().len();
            if replaced.iter().any(|&(start, _)| start == next) {
                // The loop itself is rewritten (its header a block's): no loop follows the
                // directive any more, and the hint goes (GCC refuses it before anything else).
                self.edits.push((d.start, text_end, String::new()));
            } else if points.contains(&next) {
                self.edits.push((d.start, text_end, String::new()));
                self.edits
                    .push((next, next, format!("_Pragma(\"GCC unroll {factor}\") ")));
            }
        }
    }

    /// Declarations of the slots of the variables `items` declare (and of a loop's `init`),
    /// and of the uniform variables among them ([`Self::uniform_variable`], recorded in
    /// `uniform_declarations`) as plain variables.
    fn slots_of(
        &mut self,
        items: &[Item],
        init: Option<&Decl>,
        visible: &[String],
        storage: &mut String,
    ) {
        let decls = items.iter().filter_map(|item| match item {
            Item::Stmt { decl, .. } => decl.as_ref(),
            _ => None,
        });
        let toks = self.s.toks;
        let code = self.s.code;
        let mut earlier = Vec::new();
        for (k, d) in init.into_iter().chain(decls).enumerate() {
            let base = code[toks[d.first].start..toks[d.base_end - 1].end].replace('\n', " ");
            if let Some((name, field)) =
                (k > 0 || init.is_none()).then(|| self.held_by(d)).flatten()
            {
                self.held_types.insert(name, (base, field));
                self.held_declarations.insert(d.first);
                continue;
            }
            let uniform = (k > 0 || init.is_none())
                .then(|| self.uniform_variable(d, visible, &earlier))
                .flatten();
            if let Some(name) = uniform {
                let stars = "*".repeat(d.declarators[0].name - d.declarators[0].start);
                storage.push_str(&format!(
                    "typename std::remove_cv<{base} {stars}>::type {name}{{}}; "
                ));
                self.uniform_declarations.insert(d.first);
                earlier.push(name);
                continue;
            }
            for v in &d.declarators {
                let stars = "*".repeat(v.name - v.start);
                storage.push_str(&format!(
                    "gm_sim_slots<{base} {stars}> gm_sim_v_{}(gm_sim_b); ",
                    self.s.text(v.name)
                ));
            }
        }
    }

    /// The variable `d` declares and its index field, where it is one of [`Self::held`]
    /// declared from the index.
    fn held_by(&self, d: &Decl) -> Option<(&'c str, &'c str)> {
        let s = self.s;
        let [v] = d.declarators[..] else {
            return None;
        };
        let name = s.text(v.name);
        let field = self.held.iter().find(|(n, _)| *n == name)?.1;
        (v.start == v.name
            && v.eq == Some(v.name + 1)
            && s.text(v.name + 2) == "threadIdx"
            && s.text(v.name + 4) == field)
            .then_some((name, field))
    }

    /// A flat region of tokens `first..=last`: its `threadIdx` the walk's (`gm_sim_tidx`), and
    /// its aliases ([`Self::aliases`]) reading the index from there too.
    fn index_of_the_walk(&mut self, visible: &[String], (first, last): (usize, usize)) -> String {
        for k in first..=last {
            if self.s.text(k) == "threadIdx" {
                self.replace(k, k, "gm_sim_tidx");
            }
        }
        self.aliases_reading(visible, (first, last), "gm_sim_tidx")
    }

    /// Each visible variable as the running thread's own, in code whose tokens are `span`: a
    /// variable that holds an index declared again from it, a reference to its slot when its
    /// address is taken anywhere, else a copy, written back when the code may change it.
    fn aliases(&self, visible: &[String], span: (usize, usize)) -> String {
        self.aliases_reading(visible, span, "threadIdx")
    }

    /// [`Self::aliases`], the index read from `index` (`threadIdx`, or a flat walk's).
    fn aliases_reading(&self, visible: &[String], span: (usize, usize), index: &str) -> String {
        visible
            .iter()
            .map(|name| {
                if let Some((ty, field)) = self.held_types.get(name.as_str()) {
                    format!("{ty} {name} = {index}.{field}; ")
                } else if self.addressed.contains(name.as_str()) {
                    format!("auto& {name} = gm_sim_v_{name}[gm_sim_t]; ")
                } else if self.changed_in(name, span) {
                    format!(
                        "auto {name} = gm_sim_v_{name}[gm_sim_t]; {}; ",
                        Self::keep(name)
                    )
                } else {
                    format!("auto {name} = gm_sim_v_{name}[gm_sim_t]; ")
                }
            })
            .collect()
    }

    /// Whether tokens `first..last` may change `name` (any of them, when a helper takes a
    /// reference).
    fn changed_in(&self, name: &str, (first, last): (usize, usize)) -> bool {
        (first..last).any(|k| self.s.text(k) == name && (self.by_reference || self.s.changes(k)))
    }

    /// What writes a copied variable back to its slot when the thread's part ends.
    fn keep(name: &str) -> String {
        format!("gm_sim_keep<decltype({name})> gm_sim_k_{name}(gm_sim_v_{name}[gm_sim_t], {name})")
    }

    /// `d` in a region: each variable the thread's slot, initialised; `tail` follows its
    /// `;`. The names declared join `visible`.
    fn declare(&mut self, d: &Decl, tail: &str, visible: &mut Vec<String>, region_end: usize) {
        // What ends the previous declarator's part: the initialiser's call, and the keeper of
        // a copied variable.
        let mut close_next = String::new();
        for (i, v) in d.declarators.iter().enumerate() {
            let name = self.s.text(v.name);
            // (The first declarator starts the statement; the others replace their `,`.)
            let (from, close) = if i == 0 {
                (d.first, String::new())
            } else {
                (v.start - 1, format!("{close_next};"))
            };
            let (by, keep) = if self.addressed.contains(name) {
                ("auto&", String::new())
            } else if self.changed_in(name, (v.name + 1, region_end)) {
                ("auto", format!("; {}", Self::keep(name)))
            } else {
                ("auto", String::new())
            };
            match v.eq {
                Some(eq) => {
                    self.replace(
                        from,
                        eq,
                        &format!("{close} {by} {name} = gm_sim_v_{name}.init(gm_sim_t,"),
                    );
                    close_next = format!("){keep}");
                }
                None => {
                    self.replace(
                        from,
                        v.name,
                        &format!("{close} {by} {name} = gm_sim_v_{name}.make(gm_sim_t)"),
                    );
                    close_next = keep;
                }
            }
            visible.push(name.to_string());
        }
        self.replace(d.end, d.end, &format!("{close_next};{tail}"));
    }

    /// `return;` in a region ends the thread, and a `break` or `continue` of the loop around it
    /// leaves or goes round it: the region's lambda says so (`returned`: what it returns then).
    fn jumps(&mut self, first: usize, last: usize, returned: &str) {
        for k in first..last {
            if self.s.text(k) == "return" && self.s.text(k + 1) == ";" {
                self.replace(k, k, &format!("return {returned}"));
            }
        }
        for k in self.s.loose_jumps(first, last) {
            let code = if self.s.text(k) == "break" { 2 } else { 3 };
            self.replace(k, k, &format!("return {code}"));
        }
    }

    /// The regions of a scope whose closing `}` is token `close`, after which a thread waits
    /// next at line `after` (0: it ends); `around`: the innermost loop with barriers around
    /// it, as (the line a thread that leaves it waits at next, the line one that goes round
    /// does).
    fn scope(
        &mut self,
        items: &[Item],
        visible: &mut Vec<String>,
        (close, after): (usize, usize),
        around: Option<(usize, usize)>,
    ) {
        let end_at = self.s.toks[close].start;
        self.scope_ending(items, visible, (close, end_at, after), around);
    }

    /// [`Self::scope`] of a scope whose last region ends at byte `end_at` (before its `}`, or
    /// after the last token of a statement that stands for a block).
    fn scope_ending(
        &mut self,
        items: &[Item],
        visible: &mut Vec<String>,
        (close, end_at, after): (usize, usize, usize),
        around: Option<(usize, usize)>,
    ) {
        let outer = visible.len();
        let outer_uniform = self.uniform.len();
        let toks = self.s.toks;
        // The region open: whether it may leave the loop around it, and whether it is flat
        // ([`Self::flat`]); its last token.
        let mut open: Option<(bool, bool)> = None;
        let mut region_end = close;
        for (i, item) in items.iter().enumerate() {
            let next = |this: &Self| this.first_barrier(&items[i + 1..], after);
            if !matches!(item, Item::Stmt { .. })
                && let Some(region) = open.take()
            {
                // (The item that ends the region is what its threads reach next.)
                let here = self.first_barrier(&items[i..], after);
                self.end_region(toks[item.first()].start, region, here, around);
            }
            match item {
                Item::Stmt {
                    first,
                    last,
                    decl,
                    call,
                } => {
                    if let Some(call) = call {
                        // The threads record the call's operands where the region before
                        // ends (one of its own if none is open), the warps exchange, and the
                        // statement starts the next region, the call handing out results.
                        let record = format!(
                            "{{ {}(void)({}); }}",
                            turn(self.by_name(call.name), "GM_SIM_RECORD"),
                            self.s.code[toks[call.name].start..toks[call.close].end]
                                .replace('\n', " ")
                        );
                        let at = toks[*first].start;
                        match open.take() {
                            Some(region) => {
                                self.insert(at, &record);
                                let here = self.first_barrier(&items[i..], after);
                                self.end_region(at, region, here, around);
                            }
                            None => self.insert(
                                at,
                                &format!(
                                    "GM_SIM_EACH_THREAD {}{record} GM_SIM_EACH_THREAD_END",
                                    self.aliases(visible, (*first, *last))
                                ),
                            ),
                        }
                        self.insert(
                            at,
                            &format!(
                                "gm_sim_b.warp_exchange(__FILE__, {});",
                                self.s.line(call.name)
                            ),
                        );
                    }
                    let jumps = match open {
                        Some((jumps, _)) => jumps,
                        None => {
                            // (Up to the next statement with a warp collective.)
                            let run: Vec<(usize, usize)> = items[i..]
                                .iter()
                                .enumerate()
                                .map_while(|(j, item)| match item {
                                    Item::Stmt {
                                        first, last, call, ..
                                    } if j == 0 || call.is_none() => Some((*first, *last)),
                                    _ => None,
                                })
                                .collect();
                            let jumps = run
                                .iter()
                                .any(|&(first, last)| !self.s.loose_jumps(first, last).is_empty());
                            region_end = run.last().map_or(*last, |&(_, last)| last);
                            if run.len() == 1
                                && !jumps
                                && call.is_none()
                                && decl.is_none()
                                && let Some(close) = self.prefix_guard(*first, *last, visible)
                            {
                                self.guarded_region((*first, *last), close, visible);
                                continue;
                            }
                            // (A region that ends where a collective's operands are recorded
                            // runs that call too.)
                            let record_flat = match items.get(i + run.len()) {
                                Some(Item::Stmt {
                                    call: Some(next), ..
                                }) => self.flat(next.name, next.close),
                                _ => true,
                            };
                            let flat = !jumps && record_flat && self.flat(*first, region_end);
                            let aliases = if flat {
                                self.index_of_the_walk(visible, (*first, region_end))
                            } else {
                                self.aliases(visible, (*first, region_end))
                            };
                            let head = if flat {
                                "GM_SIM_EACH_THREAD_FLAT"
                            } else if jumps {
                                "GM_SIM_EACH_THREAD_JUMPS"
                            } else {
                                "GM_SIM_EACH_THREAD"
                            };
                            self.insert(toks[*first].start, &format!("{head} {aliases}"));
                            open = Some((jumps, flat));
                            jumps
                        }
                    };
                    if let Some(call) = call {
                        self.insert(
                            toks[*first].start,
                            &turn(self.by_name(call.name), "GM_SIM_DELIVER"),
                        );
                    }
                    self.jumps(*first, *last, if jumps { "1" } else { "false" });
                    match decl {
                        Some(d) if self.uniform_declarations.contains(&d.first) => {
                            // Each thread assigns the block's variable (the same value).
                            let v = d.declarators[0];
                            let name = self.s.text(v.name);
                            if let Some(eq) = v.eq {
                                self.replace(d.first, eq, &format!("{name} ="));
                            }
                            self.uniform.push(name);
                        }
                        Some(d) if self.held_declarations.contains(&d.first) => {
                            // Declared as written; the regions after declare it again.
                            visible.push(self.s.text(d.declarators[0].name).to_string());
                        }
                        Some(d) => self.declare(d, "", visible, region_end),
                        None => {}
                    }
                }
                Item::Block { first, last } => {
                    // A shared array's address, taken once per block: a thread-local's
                    // address is a call (`__tls_get_addr`) the compiler does not move out of
                    // the regions' loops.
                    if let Some(k) = self.s.shared_name(*first, *last) {
                        let name = self.s.text(k);
                        self.replace(k, k, &format!("{SHARED_ALIAS}{name}"));
                        self.insert(
                            toks[*last].end,
                            &format!("auto& {name} = *gm_sim_opaque(&{SHARED_ALIAS}{name});"),
                        );
                    }
                }
                Item::Barrier { first, last } => {
                    self.replace(*first, *last, "GM_SIM_BARRIER();");
                }
                Item::Loop(l) => {
                    let next = next(self);
                    self.barrier_loop(l, visible, next);
                }
                Item::Branch(b) => {
                    let next = next(self);
                    self.branch(b, visible, next, around);
                }
                Item::Compound(open, close, items) => {
                    let next = next(self);
                    let mut storage = String::new();
                    self.slots_of(items, None, visible, &mut storage);
                    self.insert(toks[*open].end, &storage);
                    self.scope(items, visible, (*close, next), around);
                }
            }
        }
        if let Some(region) = open {
            self.end_region(end_at, region, after, around);
        }
        visible.truncate(outer);
        self.uniform.truncate(outer_uniform);
    }

    /// The regions of a block (`braced`) or of a single statement that stands for one (tokens
    /// `first..=last`), braced here; its slots declared at its start.
    fn block(
        &mut self,
        (first, last, items, braced): (usize, usize, &[Item], bool),
        visible: &mut Vec<String>,
        after: usize,
        around: Option<(usize, usize)>,
    ) {
        let toks = self.s.toks;
        let mut storage = String::new();
        self.slots_of(items, None, visible, &mut storage);
        if braced {
            self.insert(toks[first].end, &storage);
            self.scope(items, visible, (last, after), around);
        } else {
            self.insert(toks[first].start, &format!("{{ {storage}"));
            self.scope_ending(items, visible, (last, toks[last].end, after), around);
            self.insert(toks[last].end, "}");
        }
    }

    /// The line of the first barrier a thread reaches running `items` on, or `after` when
    /// they hold none: what a thread that parts from the others at a condition waits at next
    /// (0: it ends). Past a loop or `if` it is a guess (its first barrier inside, marked
    /// [`GUESS`]): the program then runs that side on to find out (`gm_sim_regions::all`).
    fn first_barrier(&self, items: &[Item], after: usize) -> usize {
        for item in items {
            match item {
                Item::Barrier { first, .. } => return self.s.line(*first),
                Item::Loop(l) => return self.first_barrier(&l.items, after) | GUESS,
                Item::Branch(b) => {
                    if let Some((_, _, items, _)) = b.blocks.first() {
                        return self.first_barrier(items, after) | GUESS;
                    }
                }
                Item::Compound(_, _, items) => return self.first_barrier(items, after),
                // A warp collective is where a thread waits next too; whether the others of
                // its warp come is known only by running on to it (a guess).
                Item::Stmt {
                    call: Some(call), ..
                } => return self.s.line(call.name) | GUESS,
                Item::Stmt { .. } | Item::Block { .. } => {}
            }
        }
        after
    }

    /// `gm_sim_b.all(...)`'s head for a condition after which threads that hold it wait next at
    /// line `yes` and the others at line `no` (0: they end).
    fn condition(&self, visible: &[String], yes: usize, no: usize, span: (usize, usize)) -> String {
        format!(
            "gm_sim_b.all(__FILE__, {yes}, {no}, [&](unsigned int gm_sim_t) -> bool {{ {}return (",
            self.aliases(visible, span)
        )
    }

    /// The `)` of the condition when the statement of tokens `first..=last` is an `if` without
    /// `else` whose condition admits a prefix of the block's threads (`guard`).
    fn prefix_guard(&self, first: usize, last: usize, visible: &[String]) -> Option<usize> {
        let s = self.s;
        if s.text(first) != "if" || s.text(first + 1) != "(" {
            return None;
        }
        let close = call_end(s.code, s.toks, first + 1)?;
        let one_block = if s.text(close + 1) == "{" {
            body_end(s.code, s.toks, close + 1) == Some(last)
        } else {
            !(close + 1..=last).any(|k| s.text(k) == "else")
        };
        let index = |k: usize| {
            if s.text(k) == "threadIdx" && s.text(k + 1) == "." && s.text(k + 2) == "x" {
                return Some(k + 3);
            }
            let name = s.text(k);
            // (The kernel's one variable of the name, not another that hides it.)
            let once = visible.iter().filter(|n| *n == name).count() == 1;
            (self.index.contains(&name) && once).then_some(k + 1)
        };
        let uniform = |k: usize| self.uniform_here(k, &[], visible);
        (one_block && guard::admits_a_prefix(s, (first + 1, close), index, uniform))
            .then_some(close)
    }

    /// A region that is one `if` of tokens `first..=last` whose condition (closed at token
    /// `close`) admits a prefix of the threads: the walk over a block of one row stops at the
    /// first thread it refuses (`GM_SIM_EACH_THREAD_WHILE`).
    fn guarded_region(&mut self, (first, last): (usize, usize), close: usize, visible: &[String]) {
        let toks = self.s.toks;
        if self.flat(first, last) {
            // The condition and the block apart (`gm_sim_walk_prefix`), each with the thread's
            // variables, the index the walk's.
            let aliases = self.index_of_the_walk(visible, (first, last));
            self.insert(
                toks[first].start,
                &format!("GM_SIM_EACH_THREAD_PREFIX {aliases}"),
            );
            self.replace(first, first, "return");
            self.replace(
                close,
                close,
                &format!("); GM_SIM_EACH_THREAD_PREFIX_BODY {aliases}"),
            );
            self.insert(toks[last].end, "GM_SIM_EACH_THREAD_PREFIX_END");
            return;
        }
        let head = format!(
            "GM_SIM_EACH_THREAD_WHILE {}",
            self.aliases(visible, (first, last))
        );
        self.insert(toks[first].start, &head);
        self.replace(first, first, "if (!");
        self.replace(close, close, ")) return 2;");
        self.jumps(first, last, "1");
        self.insert(toks[last].end, "GM_SIM_EACH_THREAD_END_WHILE");
    }

    /// Ends a region (whether it may jump, whether it is flat) at byte `at`, after which a
    /// thread waits next at line `next`.
    fn end_region(
        &mut self,
        at: usize,
        (jumps, flat): (bool, bool),
        next: usize,
        around: Option<(usize, usize)>,
    ) {
        match (jumps, around) {
            _ if flat => self.insert(at, "GM_SIM_EACH_THREAD_FLAT_END"),
            (true, Some((leave, again))) => self.insert(
                at,
                &format!("GM_SIM_EACH_THREAD_END_JUMPS({leave}, {next}, {again})"),
            ),
            _ => self.insert(at, "GM_SIM_EACH_THREAD_END"),
        }
    }

    /// Whether the statements of tokens `first..=last` make a flat region (see
    /// [`flat::Flat::region`]).
    fn flat(&self, first: usize, last: usize) -> bool {
        self.flat_rules.region(self.s, first, last)
    }

    /// An `if` with barriers: its condition asked of every thread, each block's slots declared
    /// inside it.
    /// `after`: the line of the barrier after it (0: none, the threads end).
    fn branch(
        &mut self,
        b: &Branch,
        visible: &mut Vec<String>,
        after: usize,
        around: Option<(usize, usize)>,
    ) {
        if !b.barriers {
            return self.masked_branch(b, visible, after, around);
        }
        let side = |k: usize| {
            b.blocks
                .get(k)
                .map_or(after, |(_, _, items, _)| self.first_barrier(items, after))
        };
        let head = format!(
            "if ({}",
            self.condition(visible, side(0), side(1), (b.open, b.close))
        );
        self.replace(b.keyword, b.open, &head);
        self.replace(b.close, b.close, "); }))");
        for (open, close, items, _) in &b.blocks {
            let mut storage = String::new();
            self.slots_of(items, None, visible, &mut storage);
            self.insert(self.s.toks[*open].end, &storage);
            self.scope(items, visible, (*close, after), around);
        }
    }

    /// An `if` with warp collectives and no barrier: the threads that do not hold its
    /// condition wait (masked) at its end, those that do run its block, and then the others
    /// its `else` block (`gm_sim_regions::mask_enter`).
    fn masked_branch(
        &mut self,
        b: &Branch,
        visible: &mut Vec<String>,
        after: usize,
        around: Option<(usize, usize)>,
    ) {
        let head = format!(
            "if (gm_sim_b.mask_enter([&](unsigned int gm_sim_t) -> bool {{ {}return (",
            self.aliases(visible, (b.open, b.close))
        );
        self.replace(b.keyword, b.open, &head);
        self.replace(b.close, b.close, "); }))");
        for (k, (first, last, items, braced)) in b.blocks.iter().enumerate() {
            if k == 1 {
                self.replace(first - 1, first - 1, "if (gm_sim_b.mask_else())");
            }
            self.block((*first, *last, items, *braced), visible, after, around);
        }
        if let Some((_, close, _, _)) = b.blocks.last() {
            self.insert(self.s.toks[*close].end, "gm_sim_b.mask_end();");
        }
    }

    /// A loop with barriers, in a block that holds its slots. Its initialiser, condition and
    /// step become lambdas where they stand (`gm_sim_init`, `gm_sim_cond`, `gm_sim_step`); a
    /// `for` runs as `if (all(init, cond)) do { body } while (all(step, cond));`, so that every
    /// thread makes its step and asks the condition in one pass over the block
    /// (`gm_sim_regions::all`), a `while` as `for (; all(cond);) { body }`. A `continue` of the
    /// `do` goes to its condition, as the `for`'s goes to its step.
    /// `after`: the line of the barrier after it (0: none, the threads end).
    fn barrier_loop(&mut self, l: &Loop, visible: &mut Vec<String>, after: usize) {
        if let Some(names) = self.uniform_loop(l, visible) {
            return self.uniform_for(l, names, visible, after);
        }
        let s = self.s;
        let mut head = String::from("{ ");
        self.slots_of(&l.items, l.init.as_ref(), visible, &mut head);
        // Threads that go round again wait next at the body's first barrier.
        let again = self.first_barrier(&l.items, after);
        let all = format!(
            "gm_sim_b.all(__FILE__, {again}, {after}, [&](unsigned int gm_sim_t) -> bool {{"
        );
        let outer = visible.len();
        let lambda = "[&](unsigned int gm_sim_t)";
        let (_, body_close) = l.body;
        // What follows the body (inserted after the body's own edits).
        let tail;
        match l.semis {
            Some((s1, s2)) => {
                head.push_str(&format!(
                    "auto gm_sim_init = {lambda} {{ {}",
                    self.aliases(visible, (l.open, s1))
                ));
                self.replace(l.keyword, l.open, &head);
                match &l.init {
                    Some(d) => self.declare(d, " };", visible, s1),
                    None => self.replace(s1, s1, "; };"),
                }
                let cond_empty = s2 == s1 + 1;
                self.insert(
                    s.toks[s1].end,
                    &format!(
                        "auto gm_sim_cond = {lambda} -> bool {{ {}return ({}",
                        self.aliases(visible, (s1, s2)),
                        if cond_empty { "true" } else { "" }
                    ),
                );
                let step_empty = l.close == s2 + 1;
                self.replace(
                    s2,
                    s2,
                    &format!(
                        "); }}; auto gm_sim_step = {lambda} {{ {}(void)({}",
                        self.aliases(visible, (s2, l.close)),
                        if step_empty { "0" } else { "" }
                    ),
                );
                if l.barriers {
                    self.replace(
                        l.close,
                        l.close,
                        &format!("); }}; if ({all} gm_sim_init(gm_sim_t); return gm_sim_cond(gm_sim_t); }}, gm_sim_cond)) do"),
                    );
                    tail = format!(
                        "while ({all} gm_sim_step(gm_sim_t); return gm_sim_cond(gm_sim_t); }}, gm_sim_cond)); }}"
                    );
                } else {
                    // (The step and the condition in one pass, as above.)
                    self.replace(
                        l.close,
                        l.close,
                        &format!("); }}; if (gm_sim_b.mask_enter({lambda} -> bool {{ gm_sim_init(gm_sim_t); return gm_sim_cond(gm_sim_t); }})) do"),
                    );
                    tail = format!(
                        "while (gm_sim_b.mask_while({lambda} -> bool {{ gm_sim_step(gm_sim_t); return gm_sim_cond(gm_sim_t); }})); gm_sim_b.mask_end(); }}"
                    );
                }
            }
            None => {
                head.push_str(&format!(
                    "auto gm_sim_cond = {lambda} -> bool {{ {}return (",
                    self.aliases(visible, (l.open, l.close))
                ));
                self.replace(l.keyword, l.open, &head);
                if l.barriers {
                    self.replace(
                        l.close,
                        l.close,
                        &format!("); }}; for (; {all} return gm_sim_cond(gm_sim_t); }});)"),
                    );
                    tail = "}".to_string();
                } else {
                    self.replace(
                        l.close,
                        l.close,
                        "); }; if (gm_sim_b.mask_enter(gm_sim_cond)) do",
                    );
                    tail = "while (gm_sim_b.mask_while(gm_sim_cond)); gm_sim_b.mask_end(); }"
                        .to_string();
                }
            }
        }
        self.loop_body(l, visible, (after, again));
        self.insert(s.toks[body_close].end, &tail);
        visible.truncate(outer);
    }
}

impl<'c> Rewrite<'_, 'c> {
    /// The variable of `for (T v = init; cond; step)` when the loop is uniform: `v` is the same
    /// in every thread (its initialiser, the condition and the step read only `v`, uniform
    /// names, the block's and grid's shape and index, literals and operators; nothing else
    /// changes it, nor takes its address), so every thread takes the same way each time round.
    /// Such a loop runs once for the block as written, `v` a plain variable the regions inside
    /// read: no slot, and no pass over the threads to ask the condition (a tree reduction's
    /// `for (s = blockDim.x / 2; s > 0; s >>= 1)` asked it of every thread at every level).
    fn uniform_loop(&self, l: &Loop, visible: &[String]) -> Option<Vec<&'c str>> {
        let s = self.s;
        let (s1, s2) = l.semis?;
        let d = l.init.as_ref()?;
        let names: Vec<&'c str> = d.declarators.iter().map(|v| s.text(v.name)).collect();
        let (_, body_last) = l.body;
        let simple = d
            .declarators
            .iter()
            .all(|v| v.start == v.name && v.eq.is_some())
            && !self.by_reference
            && names.iter().all(|name| {
                !self.addressed.contains(name)
                    && !visible.iter().any(|n| n == name)
                    && !(l.close..=body_last).any(|k| s.text(k) == *name && s.changes(k))
            })
            && s2 > s1 + 1;
        let reads =
            |from: usize, to: usize| (from..to).all(|k| self.uniform_here(k, &names, visible));
        let first_eq = d.declarators.first()?.eq?;
        (simple && reads(first_eq + 1, s1) && reads(s1 + 1, s2) && reads(s2 + 1, l.close))
            .then_some(names)
    }

    /// The variable `d` (a statement of a scope) declares when its value is the same in every
    /// thread of the block: one variable (not an array or reference, no `auto`), initialised
    /// from uniform names only ([`Self::uniform_token`]; `earlier`: uniform variables declared
    /// before it in its scope), keeping its first value (`Statements::keeps_first_value`: not
    /// changed, nor its address taken). Such a variable is declared once for the block, where the scope's slots
    /// are, each thread assigning it the same value where the kernel declares it: the regions
    /// after read a plain variable (matrixMul's `aBegin`, `aEnd`, `aStep` made its loop over
    /// tiles uniform; as slots, every thread asked its condition).
    fn uniform_variable(
        &self,
        d: &Decl,
        visible: &[String],
        earlier: &[&'c str],
    ) -> Option<&'c str> {
        let s = self.s;
        let [v] = d.declarators[..] else {
            return None;
        };
        let name = s.text(v.name);
        let eq = v.eq?;
        let plain = eq == v.name + 1
            && (v.start..v.name).all(|k| s.text(k) == "*")
            && (d.first..d.base_end).all(|k| {
                !matches!(
                    s.text(k),
                    "auto" | "&" | "volatile" | "static" | "extern" | "["
                )
            });
        let kept = !self.by_reference
            && !self.addressed.contains(name)
            && !visible.iter().any(|n| n == name)
            && s.keeps_first_value(v.name, self.body);
        let init = (eq + 1..d.end).all(|k| self.uniform_here(k, earlier, visible))
            || self.flat_rules.accessor_call(s, (eq + 1, d.end));
        (plain && kept && init && eq + 1 < d.end).then_some(name)
    }

    /// [`Self::uniform_token`] where the threads' own variables `visible` are in scope (a name
    /// of the kernel's that one of them hides is that variable).
    fn uniform_here(&self, k: usize, names: &[&str], visible: &[String]) -> bool {
        self.uniform_token(k, names) && !visible.iter().any(|n| n == self.s.text(k))
    }

    /// Whether token `k` keeps an expression uniform (`names`: uniform variables besides the
    /// kernel's parameters no thread changes and the variables of uniform loops around: a
    /// loop's own, or those declared before in the same scope).
    fn uniform_token(&self, k: usize, names: &[&str]) -> bool {
        const SAME_IN_A_BLOCK: [&str; 17] = [
            "blockDim", "gridDim", "blockIdx", "warpSize", "x", "y", "z", "sizeof", "int",
            "unsigned", "long", "short", "char", "signed", "float", "double", "bool",
        ];
        let s = self.s;
        let t = s.text(k);
        let before = if k > 0 { s.text(k - 1) } else { "" };
        if !s.toks[k].ident {
            // No memory read (`[`, `->`, a unary `*`), no other statement.
            let operand_before = s.toks.get(k.wrapping_sub(1)).is_some_and(|b| b.ident)
                || before.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                || matches!(before, ")" | "]");
            // (A `gm_array` parameter's shape and strides are its own copy's, not memory.)
            let reads_memory = (t == "[" && !(k >= 1 && self.own_shape(k - 1)))
                || (t == "-" && s.text(k + 1) == ">");
            let unary = matches!(t, "*" | "&") && !operand_before;
            return !(reads_memory || unary || matches!(t, "{" | ";" | "}"));
        }
        if t.starts_with(|c: char| c.is_ascii_digit()) || names.contains(&t) {
            return true;
        }
        // A shift by a literal, which the shift check (`super::shifts`) wraps: it cannot fail.
        if t == "gm_shift_count"
            && s.text(k + 1) == "("
            && s.text(k + 2).starts_with(|c: char| c.is_ascii_digit())
            && s.text(k + 3) == ")"
        {
            return true;
        }
        let known = self.uniform.contains(&t)
            || self.own_shape(k)
            || SAME_IN_A_BLOCK.contains(&t) && (t.len() > 1 || before == ".");
        known && !s.changes(k) && (s.text(k + 1) != "(" || t == "sizeof")
    }

    /// Whether token `k` is the `shape` or `strides` of a `gm_array` parameter no thread
    /// changes (`uniform_arrays`): the parameter's own copy, the same in every thread.
    fn own_shape(&self, k: usize) -> bool {
        let s = self.s;
        k >= 2
            && matches!(s.text(k), "shape" | "strides")
            && s.text(k - 1) == "."
            && self.uniform_arrays.contains(&s.text(k - 2))
    }

    /// A uniform loop ([`Self::uniform_loop`]) of variables `names`, run for the block as
    /// written, in a block that holds its body's slots; its condition also ends it once the
    /// block stopped (a fault, a divergence).
    fn uniform_for(
        &mut self,
        l: &Loop,
        names: Vec<&'c str>,
        visible: &mut Vec<String>,
        after: usize,
    ) {
        let s = self.s;
        let (Some((s1, s2)), (_, body_close)) = (l.semis, l.body) else {
            return;
        };
        let outer = self.uniform.len();
        self.uniform.extend(names);
        let mut head = String::from("{ ");
        self.slots_of(&l.items, None, visible, &mut head);
        self.insert(s.toks[l.keyword].start, &head);
        self.replace(
            s1,
            s1,
            "; gm_sim_b.count != 0 && gm_sim_b.ended != gm_sim_b.threads && (",
        );
        self.replace(s2, s2, ");");
        let again = self.first_barrier(&l.items, after);
        self.loop_body(l, visible, (after, again));
        self.uniform.truncate(outer);
        self.insert(s.toks[body_close].end, "}");
    }

    /// The regions of a loop's body (after it a thread waits next at line `after`; going round,
    /// at line `again`), braced here when it is a single statement (a loop without barriers).
    fn loop_body(&mut self, l: &Loop, visible: &mut Vec<String>, (after, again): (usize, usize)) {
        let (body_open, body_close) = l.body;
        let around = Some((after, again));
        if l.braced {
            self.scope(&l.items, visible, (body_close, again), around);
        } else {
            let end_at = self.s.toks[body_close].end;
            self.insert(self.s.toks[body_open].start, "{");
            self.scope_ending(&l.items, visible, (body_close, end_at, again), around);
            self.insert(end_at, "}");
        }
    }
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn lines(code: &str) -> usize {
        code.matches('\n').count()
    }

    #[test]
    fn the_library_kernels_run_as_regions_on_their_own_lines() {
        for code in [
            include_str!("../../../gpu-mem-core/kernels/block_sum.cu"),
            include_str!("../../../gpu-mem-core/kernels/matmul_tiled.cu"),
        ] {
            let out = rewrite(code).unwrap();
            assert_eq!(lines(&out), lines(code));
            assert!(out.contains("GM_SIM_BARRIER();"), "{out}");
            assert!(!out.contains("barrier(GM_FENCE_LOCAL)"), "{out}");
        }
    }

    /// Real kernels with barriers that run as regions: shared tiles, loops with barriers and
    /// a `break` (pathfinder), parameters each thread moves (convolutionSeparable), block
    /// groups (the cuda-samples), several variables declared at once (matrixMul), blocks with
    /// barriers inside (bitonicSort).
    #[test]
    fn an_unroll_pragma_names_the_kernels_loop_not_the_threads() {
        // A region that starts with the marked loop: its loop over threads is written between
        // the directive and the kernel's loop, so the directive moves after it.
        let code = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void k(float* a) {\n    float s = 0;\n    __syncthreads();\n#pragma GCC unroll 8\n    for (int j = 0; j < 8; ++j) s += a[j];\n    a[threadIdx.x] = s;\n}\n";
        let out = rewrite(code).unwrap();
        assert_eq!(lines(&out), lines(code));
        let line = |n: usize| out.lines().nth(n - 1).unwrap_or_default();
        assert_eq!(line(5).trim(), "", "{out}");
        let marked = line(6);
        let (before, after) = marked
            .split_once("_Pragma(\"GCC unroll 8\")")
            .expect(marked);
        assert!(before.contains("GM_SIM_EACH_THREAD"), "{marked}");
        assert!(after.trim_start().starts_with("for (int j"), "{marked}");
    }

    #[test]
    fn corpus_kernels_with_barriers_run_as_regions() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/corpus");
        for file in [
            "cuda-samples/matrixMul.cu",
            "cuda-samples/transpose.cu",
            "cuda-samples/convolutionSeparable.cu",
            "cuda-samples/scalarProd.cu",
            "cuda-samples/reduction.cu",
            "cuda-samples/sortingNetworks_bitonicSort.cu",
            "rodinia/pathfinder.cu",
            "rodinia/hotspot.cu",
            "rodinia/lud.cu",
        ] {
            let code = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            let code = crate::source::stackless::lower_block_groups(&code).unwrap_or(code);
            let out = rewrite(&code).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(lines(&out), lines(&code), "{file}");
        }
    }

    #[test]
    fn what_cannot_be_split_at_its_barriers_is_refused() {
        let kernel = |body: &str| {
            format!(
                "#include \"gpu_mem.h\"\nextern \"C\" __global__ void k(int* a) {{\n{body}\n}}\n"
            )
        };
        for (body, reason) in [
            (
                "if (a[0]) __syncthreads();",
                "line 3: an `if` with barriers whose branches are not blocks",
            ),
            (
                "do { __syncthreads(); } while (a[0]);",
                "line 3: a barrier or warp collective inside a statement",
            ),
            (
                "a[0] = 1 + (__syncthreads(), 1);",
                "line 3: a barrier or warp collective inside a statement",
            ),
            (
                "auto x = a[0]; __syncthreads();",
                "line 3: a variable declared with `auto`",
            ),
            ("decltype(a) b = a; __syncthreads();", "it names `decltype`"),
            ("__activemask(); __syncthreads();", "it names `activemask`"),
            (
                "int v = a[0] ? __shfl_sync(~0u, 1, 0) : 0;",
                "line 3: a warp collective behind a condition",
            ),
            (
                "a[0] = __shfl_sync(~0u, a[1]++, 0);",
                "line 3: a warp collective whose operands call or assign",
            ),
            (
                "a[0] = __shfl_sync(~0u, 1, 0) + __shfl_down_sync(~0u, 2, 1);",
                "line 3: two warp collectives in one statement",
            ),
            (
                "if (__any_sync(~0u, a[0])) { a[1] = __shfl_sync(~0u, 1, 0); }",
                "line 3: a barrier or warp collective in a condition",
            ),
            (
                "if (a[2] && __any_sync(~0u, a[0])) { a[1] = 1; }",
                "line 3: a warp collective behind a condition",
            ),
            (
                "while (__any_sync(~0u, a[0])) { a[0] -= 1; }",
                "line 3: a barrier or warp collective in a condition",
            ),
            (
                "for (int i = 0; i < 4; ++i) { if (i == a[0]) break; a[1] = __shfl_sync(~0u, i, 0); }",
                "line 3: a `break` or `continue` in a loop with warp collectives",
            ),
            (
                "if (a[0]) { __syncthreads(); } else { __syncthreads(); }",
                "two barriers on one line",
            ),
            (
                "while (atomicCAS(a, 0, 1)) {} __syncthreads();",
                "a thread may spin at an atomic",
            ),
        ] {
            let error = rewrite(&kernel(body)).unwrap_err();
            assert!(error.contains(reason), "{body}: {error}");
        }
        let helper = "#include \"gpu_mem.h\"\n__device__ void wait() { __syncthreads(); }\n\
                      extern \"C\" __global__ void k(int* a) { wait(); }\n";
        assert!(
            rewrite(helper)
                .unwrap_err()
                .contains("line 2: a barrier or warp collective outside")
        );
        let shuffling = helper.replace("__syncthreads()", "__shfl_xor_sync(~0u, 1, 1)");
        assert!(
            rewrite(&shuffling)
                .unwrap_err()
                .contains("line 2: a barrier or warp collective outside")
        );
        let hidden = "#include \"gpu_mem.h\"\n#define SYNC __syncthreads()\n\
                      extern \"C\" __global__ void k(int* a) { SYNC; }\n";
        assert!(rewrite(hidden).unwrap_err().contains("directive"));
        // A macro that calls a warp collective (or a macro of one) is a call the regions split
        // at; one that pastes a name, or calls two, is refused.
        let macros = "#include \"gpu_mem.h\"\n#define XOR(v, d) __shfl_xor_sync(0xffffffff, v, d)\n\
                      #define PAIR(v) XOR(v, 1)\n\
                      extern \"C\" __global__ void k(int* a) {\n int v = PAIR(a[0]);\n a[1] = v;\n}\n";
        let out = rewrite(macros).unwrap();
        assert!(out.contains("(void)(PAIR(a[0]));"), "{out}");
        assert!(
            out.contains("gm_sim_b.warp_exchange(__FILE__, 5);"),
            "{out}"
        );
        for bad in [
            macros.replace("__shfl_xor_sync(", "__shfl_##xor_sync("),
            macros.replace("XOR(v, 1)", "XOR(XOR(v, 1), 2)"),
        ] {
            assert!(rewrite(&bad).is_err(), "{bad}");
        }
    }

    /// A collective called by the prelude's name, or through macros whose one call is one, is
    /// answered by the statement's stand-ins alone; one called qualified (past the stand-ins, to
    /// the prelude's function) also has the block note whose turn it is, which that reads.
    #[test]
    fn stand_ins_answer_collectives_called_by_the_preludes_names() {
        let kernel = |defines: &str, call: &str| {
            format!(
                "#include \"gpu_mem.h\"\n{defines}extern \"C\" __global__ void k(int* a) {{\n\
                 int v = {call};\n a[1] = v;\n}}\n"
            )
        };
        let pair =
            "#define XOR(v, d) __shfl_xor_sync(0xffffffff, v, d)\n#define PAIR(v) XOR(v, 1)\n";
        for (defines, call, noted) in [
            ("", "__shfl_down_sync(~0u, a[0], 1)", false),
            ("", "__ballot_sync(~0u, a[0] > 1)", false),
            (pair, "PAIR(a[0])", false),
            ("", "::__shfl_down_sync(~0u, a[0], 1)", true),
            (
                "#define DOWN(v) ::__shfl_down_sync(~0u, v, 1)\n",
                "DOWN(a[0])",
                true,
            ),
        ] {
            let out = rewrite(&kernel(defines, call)).unwrap();
            for mode in ["GM_SIM_RECORD", "GM_SIM_DELIVER"] {
                assert!(
                    out.contains(&format!("GM_SIM_COLLECTIVES_AT(gm_sim_t, {mode})")),
                    "{out}"
                );
                let note = format!("gm_sim_b.collect(gm_sim_t, {mode})");
                assert_eq!(out.contains(&note), noted, "{call}: {out}");
            }
        }
    }

    /// A helper taking a reference may change the parameters of a kernel that calls it (each
    /// thread's own copy then), not those of another kernel of the module (read alike by all).
    #[test]
    fn only_kernels_naming_a_helper_by_reference_copy_their_parameters() {
        let code = "#include \"gpu_mem.h\"\n\
                    __device__ void bump(int& v) { v += 1; }\n\
                    extern \"C\" __global__ void calls(int* a, int n) {\n\
                    \x20   bump(n);\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = n;\n}\n\
                    extern \"C\" __global__ void reads(int* a, int m) {\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = m;\n}\n";
        let out = rewrite(code).unwrap();
        assert!(out.contains("gm_sim_v_n"), "{out}");
        assert!(!out.contains("gm_sim_v_m"), "{out}");
        // Named through a macro: every kernel is taken to call it.
        let through_macro = code.replace("bump(n);", "BUMP(n);").replace(
            "__device__ void bump",
            "#define BUMP(x) bump(x)\n__device__ void bump",
        );
        let out = rewrite(&through_macro).unwrap();
        assert!(out.contains("gm_sim_v_m"), "{out}");
    }

    /// Kernels rewritten apart from their module keep every line, the helpers anything kept
    /// may reach (a macro's included), and nothing of the kernels left out; kernels that share
    /// a name are never split.
    #[test]
    fn kernels_apart_keep_what_they_reach() {
        let code = "#include \"gpu_mem.h\"\n\
                    #define TWICE(v) twice(v)\n\
                    __device__ int twice(int v) { return 2 * v; }\n\
                    __device__ int waits(int v) { __syncthreads(); return v + 1; }\n\
                    extern \"C\" __global__ void fast(int* a) {\n\
                    \x20   int v = TWICE(a[threadIdx.x]);\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = v;\n}\n\
                    extern \"C\" __global__ void slow(int* a) {\n\
                    \x20   a[0] = waits(a[0]);\n}\n";
        assert!(rewrite(code).is_err());
        let (out, names) = rewrite_subset(code).expect("fast alone");
        assert_eq!(names, BTreeSet::from(["fast".to_string()]));
        assert_eq!(lines(&out), lines(code));
        assert!(out.contains("return 2 * v;"), "{out}");
        assert!(
            !out.contains("return v + 1;") && !out.contains("a[0] = waits"),
            "{out}"
        );
        let overloaded = code.replace("void slow(int* a)", "void fast(float* a)");
        assert_eq!(rewrite_subset(&overloaded), None);
    }

    /// A name with a collective's stem that the rewrite does not know keeps a kernel off
    /// regions where it could be one called (`__shfl_up(v, 1)`, the pre-Volta shuffle), not
    /// where the kernel declares it as a variable (reduction_warp's `ballot_result`).
    #[test]
    fn names_like_collectives_are_refused_unless_variables() {
        let kernel = |body: &str| {
            format!(
                "#include \"gpu_mem.h\"\nextern \"C\" __global__ void k(int* a) {{\n    {body}\n}}\n"
            )
        };
        let variable = kernel(
            "unsigned ballot_result = __ballot_sync(~0u, a[0] > 0);\n    a[1] = (int)ballot_result;",
        );
        assert!(rewrite(&variable).is_ok(), "{:?}", rewrite(&variable));
        let called = kernel("a[1] = __shfl_up(a[0], 1);");
        assert_eq!(
            rewrite(&called).err().as_deref(),
            Some("`__shfl_up` is no warp collective the rewrite knows")
        );
    }

    /// Warp collectives split regions; an `if` or loop that holds them and no barrier runs
    /// masked, a single statement for its block braced; an `if` whose condition votes and whose
    /// blocks wait at nothing is a statement like another; real warp kernels rewrite.
    #[test]
    fn warp_collectives_split_regions_and_their_ifs_and_loops_run_masked() {
        let code = "#include \"gpu_mem.h\"\n\
                    extern \"C\" __global__ void k(int* a) {\n\
                    \x20   int v = a[threadIdx.x];\n\
                    \x20   for (int o = 16; o > (int)threadIdx.x % 2; o /= 2)\n\
                    \x20       v += __shfl_down_sync(~0u, v, o);\n\
                    \x20   if (threadIdx.x % 32 < 8) { int w = __shfl_up_sync(0xffu, v, 1, 8); v += w; }\n\
                    \x20   else v = 0;\n\
                    \x20   if (__all_sync(~0u, v > 2)) v += 1; else { v -= 1; }\n\
                    \x20   a[threadIdx.x] = v;\n}\n";
        let out = rewrite(code).unwrap();
        assert_eq!(lines(&out), lines(code));
        for wanted in [
            "GM_SIM_COLLECTIVES_AT(gm_sim_t, GM_SIM_RECORD) (void)(__shfl_down_sync(~0u, v, o));",
            "gm_sim_b.warp_exchange(__FILE__, 5);",
            "GM_SIM_COLLECTIVES_AT(gm_sim_t, GM_SIM_DELIVER)",
            "if (gm_sim_b.mask_enter(",
            "while (gm_sim_b.mask_while(",
            "if (gm_sim_b.mask_enter(",
            "gm_sim_b.warp_exchange(__FILE__, 6);",
            "if (gm_sim_b.mask_else())",
            "gm_sim_b.mask_end();",
            // A vote in an `if`'s condition: recorded, then the whole `if` runs.
            "GM_SIM_COLLECTIVES_AT(gm_sim_t, GM_SIM_RECORD) (void)(__all_sync(~0u, v > 2));",
            "gm_sim_b.warp_exchange(__FILE__, 8);",
        ] {
            assert!(out.contains(wanted), "{wanted}:\n{out}");
        }
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/corpus");
        for file in ["cuda-samples/shfl_scan.cu", "hecbench/shuffle.cu"] {
            let code = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            let out = rewrite(&code).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(lines(&out), lines(&code), "{file}");
        }
    }

    /// A variable every thread of a block holds alike (initialised from uniform names, never
    /// changed) is the block's, declared where the scope's slots are and assigned by each
    /// thread where the kernel declares it; a loop it bounds is uniform. Template parameters
    /// are uniform names, and so are the shape and strides of a `gm_array` parameter and
    /// macros that stand for a number (defined once).
    #[test]
    fn variables_every_thread_holds_alike_are_the_blocks() {
        for (declaration, uniform) in [
            ("const int w = n * blockDim.x;", true),
            ("int w = blockIdx.x + N;", true),
            ("unsigned w = gridDim.x, v = 2 * w;", false),
            ("int w = threadIdx.x;", false),
            ("int w = p[0];", false),
            ("int w = f(n);", false),
            ("int w = n; w += 1;", false),
            ("int w = n; int* q = &w;", false),
            ("int w[1] = {n};", false),
            ("long long w = (g.shape[1] + 15) / 16;", true),
            ("long long w = g.strides[0];", true),
            ("float w = g.data[0];", false),
            ("int w = n * M;", true),
            ("int w = n * K;", false),
            ("int w = 2 * n; if (n > 3) { int w = 5; p[w] = 1; }", true),
            ("int w = 2 * n; if (n > 3) { int w = 5; w += 1; }", false),
        ] {
            let code = format!(
                "#include \"gpu_mem.h\"\n#define M (16)\n#define K 4\n#undef K\n#define K 8\n__device__ int f(int v) {{ return v; }}\n\
                 template <int N> __global__ void k(int* p, int n, gm_array<float, 2> g) {{\n\
                 \x20   {declaration}\n\
                 \x20   for (int i = 0; i < w; i += 1) {{ p[threadIdx.x] = i; __syncthreads(); }}\n}}\n"
            );
            let out = rewrite(&code).unwrap();
            assert_eq!(
                out.contains("typename std::remove_cv<"),
                uniform,
                "{declaration}:\n{out}"
            );
            assert_eq!(
                out.contains("gm_sim_b.count != 0 &&"),
                uniform,
                "{declaration}:\n{out}"
            );
        }
        let two = "#include \"gpu_mem.h\"\n\
                   extern \"C\" __global__ void k(int* p, int n) {\n\
                   \x20   int first = blockIdx.x * n;\n\
                   \x20   for (int a = first, b = 0; a < first + n; a += 4, b += 1) { p[a + threadIdx.x] = b; __syncthreads(); }\n}\n";
        let out = rewrite(two).unwrap();
        assert!(out.contains("gm_sim_b.count != 0 &&"), "{out}");
        assert!(!out.contains("gm_sim_v_a"), "{out}");
    }

    /// A variable initialised from an accessor call (`accessors`) is the block's, and the
    /// region that makes it stays flat; a struct that reads the index, indexes memory or
    /// calls a function of the source is no accessor.
    #[test]
    fn accessor_calls_make_block_variables() {
        let accessor = "template <class T> struct SharedMemory {\n\
                        \x20   __device__ inline operator T *() { extern __shared__ int __smem[]; return (T *)__smem; }\n\
                        \x20   __device__ inline operator const T *() const { extern __shared__ int __smem[]; return (T *)__smem; }\n};\n\
                        template <> struct SharedMemory<double> {\n\
                        \x20   __device__ inline operator double *() { extern __shared__ double __smem_d[]; return (double *)__smem_d; }\n};\n";
        let reads_index = "template <class T> struct SharedMemory {\n\
                           \x20   __device__ operator T *() { extern __shared__ int __smem[]; return (T *)__smem + threadIdx.x; }\n};\n";
        let indexes = "template <class T> struct SharedMemory {\n\
                       \x20   __device__ operator T *() { extern __shared__ int __smem[]; return (T *)&__smem[1]; }\n};\n";
        let calls = "__device__ int* where();\n\
                     template <class T> struct SharedMemory {\n\
                     \x20   __device__ operator T *() { return (T *)where(); }\n};\n";
        let derefs = "template <class T> struct SharedMemory {\n\
                      \x20   __device__ operator T () { extern __shared__ int __smem[]; int* const p = __smem; return *p; }\n};\n";
        for (structs, uniform) in [
            (accessor, true),
            (reads_index, false),
            (indexes, false),
            (calls, false),
            (derefs, false),
        ] {
            let code = format!(
                "#include \"gpu_mem.h\"\n#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n{structs}\
                 template <class T> __global__ void k(T* p) {{\n\
                 \x20   cg::thread_block cta = cg::this_thread_block();\n\
                 \x20   T *sdata = SharedMemory<T>();\n\
                 \x20   sdata[threadIdx.x] = p[threadIdx.x];\n\
                 \x20   cg::sync(cta);\n\
                 \x20   p[threadIdx.x] = sdata[threadIdx.x ^ 1];\n}}\n"
            );
            let code = crate::source::dynamic_shared::rewrite(&code);
            let code = crate::source::stackless::lower_block_groups(&code).unwrap();
            let out = rewrite(&code).unwrap();
            // (The thread block is an accessor's in every case.)
            assert!(!out.contains("gm_sim_v_cta"), "{out}");
            assert_eq!(
                !out.contains("gm_sim_v_sdata"),
                uniform,
                "{structs}:\n{out}"
            );
            let first_region = out.split("GM_SIM_BARRIER").next().unwrap_or("");
            assert_eq!(
                first_region.contains("GM_SIM_EACH_THREAD_FLAT"),
                uniform,
                "{structs}:\n{out}"
            );
        }
    }

    /// Names after a unary `&` (or a cast's) are taken to have their address held; after `&&`
    /// or a bitwise and they are not.
    #[test]
    fn only_a_unary_ampersand_takes_an_address() {
        for (code, taken) in [
            ("p = &x;", true),
            ("f((int*)&x);", true),
            ("return &x;", true),
            ("if (a && x) {}", false),
            ("y = m & x;", false),
            ("y = a[0] & x;", false),
            ("y = 3 & x;", false),
        ] {
            let toks = tokens(code).unwrap();
            let s = Statements {
                code,
                toks: &toks,
                warp_calls: Vec::new(),
            };
            let k = (0..toks.len()).find(|&k| s.text(k) == "x").unwrap();
            assert_eq!(s.takes_address(k - 1), taken, "{code}");
        }
    }

    /// A region that is one `if` on a variable holding `threadIdx.x` stops at the first thread
    /// refused; not where the kernel declares another variable of the name (a guard in that
    /// variable's scope would read it).
    #[test]
    fn guards_name_the_one_variable_that_holds_the_index() {
        for (other, guarded) in [
            ("", true),
            ("if (p[0] > 0) { int tid = 7; p[tid] = 0; }", false),
        ] {
            let code = format!(
                "#include \"gpu_mem.h\"\n\
                 extern \"C\" __global__ void k(int* p) {{\n\
                 \x20   __shared__ int s[64];\n\
                 \x20   unsigned int tid = threadIdx.x;\n\
                 \x20   s[tid] = 1; {other}\n\
                 \x20   __syncthreads();\n\
                 \x20   if (tid < 4) {{ p[tid] = s[tid]; }}\n}}\n"
            );
            let out = rewrite(&code).unwrap();
            assert_eq!(
                out.contains("GM_SIM_EACH_THREAD_PREFIX "),
                guarded,
                "{other}:\n{out}"
            );
            // (A guarded region that calls a helper is walked, stopping at the first refused.)
            let calling = code
                .replace("p[tid] = s[tid];", "p[tid] = f(s[tid]);")
                .replace("extern", "__device__ int f(int v) { return v; }\nextern");
            let out = rewrite(&calling).unwrap();
            assert_eq!(
                out.contains("GM_SIM_EACH_THREAD_WHILE"),
                guarded,
                "{other}:\n{out}"
            );
        }
    }

    /// A `for` whose variable every thread holds alike runs once for the block as written;
    /// one whose variable or condition a thread's own values enter asks each thread.
    #[test]
    fn uniform_loops_run_as_written() {
        let block_sum = include_str!("../../../gpu-mem-core/kernels/block_sum.cu");
        let out = rewrite(block_sum).unwrap();
        assert!(
            out.contains("for (int stride = blockDim.x / 2 ; gm_sim_b.count != 0 && gm_sim_b.ended != gm_sim_b.threads && (  stride > 0 );  stride /= 2)"),
            "{out}"
        );
        assert!(!out.contains("gm_sim_v_stride"), "{out}");
        for (header, uniform) in [
            ("for (int i = 0; i < n; i += 2 * gridDim.x)", true),
            (
                "for (unsigned i = sizeof(float); i < (unsigned)n; i <<= 1)",
                true,
            ),
            ("for (int i = 0; i < n; ++i)", true),
            ("for (int i = n; i > 0; i >>= gm_shift_count(1))", true),
            ("for (int i = n; i > 0; i >>= gm_shift_count(n))", false),
            ("for (int i = threadIdx.x; i < n; ++i)", false),
            ("for (int i = 0; i < p[0]; ++i)", false),
            ("for (int i = 0; i < t; ++i)", false),
            ("for (int i = 0; i < f(n); ++i)", false),
            ("for (int i = 0; ; ++i)", false),
            ("for (int i = 0; i < n; i += t)", false),
        ] {
            let code = format!(
                "#include \"gpu_mem.h\"\n__device__ int f(int v) {{ return v; }}\n\
                 extern \"C\" __global__ void k(int* p, int n) {{\n\
                 \x20   int t = threadIdx.x;\n\
                 \x20   {header} {{ if (i == 3) {{ t += 1; }} p[t] = i; __syncthreads(); }}\n}}\n"
            );
            let out = rewrite(&code).unwrap();
            assert_eq!(
                out.contains("gm_sim_b.count != 0 &&"),
                uniform,
                "{header}:\n{out}"
            );
        }
    }

    /// A variable that holds one of the thread's indices throughout is declared again from it
    /// in every region (no slot); one the kernel changes, or takes the address of, or declares
    /// with another value or type, is a slot.
    #[test]
    fn index_variables_are_declared_again_from_the_index() {
        for (declaration, held) in [
            ("int tx = threadIdx.x;", true),
            ("const unsigned int tx = threadIdx.y;", true),
            ("long tx = threadIdx.z;", true),
            ("int tx = threadIdx.x; tx += 1;", false),
            ("int tx = threadIdx.x; int* q = &tx;", false),
            ("int tx = threadIdx.x + 1;", false),
            ("short tx = threadIdx.x;", false),
            ("int tx = threadIdx.x * 2;", false),
            ("int tx = threadIdx.x; if (p[0] && tx < 4) p[1] = 0;", true),
            ("int tx = threadIdx.x; int& r = tx; r += 1;", false),
        ] {
            let code = format!(
                "#include \"gpu_mem.h\"\n\
                 extern \"C\" __global__ void k(int* p) {{\n\
                 \x20   {declaration}\n\
                 \x20   p[tx] = 1;\n    __syncthreads();\n    p[tx + 1] = 2;\n}}\n"
            );
            let out = rewrite(&code).unwrap();
            assert_eq!(!out.contains("gm_sim_v_tx"), held, "{declaration}:\n{out}");
            if held {
                let at = declaration.find("threadIdx.").unwrap() + "threadIdx.".len();
                let field = &declaration[at..at + 1];
                // (Its regions are flat: the index is the loop's, `gm_sim_tidx`.)
                assert!(
                    out.contains(&format!(" tx = gm_sim_tidx.{field}; ")),
                    "{declaration}:\n{out}"
                );
            }
        }
    }

    /// A region that calls nothing that could read the thread's index, and never returns, is
    /// flat: its `threadIdx` is the loop's; any other is walked as before.
    #[test]
    fn regions_that_call_nothing_are_flat() {
        for (statement, flat) in [
            ("p[threadIdx.x] = q[threadIdx.y] * 2;", true),
            (
                "p[threadIdx.x] = (float)(q[0]) + sqrtf(q[1]) + min(q[2], 1);",
                true,
            ),
            (
                "p[threadIdx.x] = static_cast<int>(q[0]) + (q[1] > (q[2]) ? 1 : 0);",
                true,
            ),
            (
                "for (int k = 0; k < 4; ++k) { if (q[k] > 0) p[k] += q[k]; }",
                true,
            ),
            ("p[threadIdx.x] = f(q[0]);", false),
            ("p[threadIdx.x] = g<int>(q[0]);", false),
            ("p[threadIdx.x] = atomicAdd(&p[0], 1);", false),
            ("if (q[0] > 0) return;", false),
            ("p[threadIdx.x] = (q)(0);", false),
            // A macro may read the index where the rewrite cannot see it; a number cannot.
            ("p[IDX] = 1;", false),
            ("p[threadIdx.x] = N;", true),
            ("p[threadIdx.x] = TWICE(q[ROW]);", true),
            ("p[threadIdx.x] = BAD(q[0]);", false),
            ("p[threadIdx.x] = CALLS(q[0]);", false),
            ("p[threadIdx.x] = APPLY(f, q[0]);", false),
            ("p[threadIdx.x] = fmaxf(q[0], 1);", false),
            ("#include <cmath>\np[threadIdx.x] = 1;", true),
            ("#include \"mine.h\"\np[threadIdx.x] = 1;", false),
        ] {
            let (include, statement) = statement.rsplit_once('\n').unwrap_or(("", statement));
            let code = format!(
                "#include \"gpu_mem.h\"\n{include}\n#define IDX (threadIdx.x + 0)\n#define N 4\n\
                 #define TWICE(v) ((v) * 2)\n#define ROW (blockIdx.y * blockDim.y + N)\n\
                 #define BAD(v) ((v) + IDX)\n#define CALLS(v) f(v)\n#define APPLY(g, v) g(v)\n\
                 __device__ int f(int v) {{ return v; }}\n\
                 template <typename T> __device__ T g(T v) {{ return v; }}\n\
                 __device__ float fmaxf(float a, float b) {{ return a + threadIdx.x; }}\n\
                 __global__ void k(int* p, int* q) {{\n\
                 \x20   {statement}\n\
                 \x20   __syncthreads();\n    p[1] = 2;\n}}\n"
            );
            let out = rewrite(&code).unwrap();
            let first = &out[out.find("GM_SIM_EACH_THREAD").unwrap()..];
            assert_eq!(
                first.starts_with("GM_SIM_EACH_THREAD_FLAT "),
                flat,
                "{statement}:\n{out}"
            );
            let kernel = &out[out.find("__global__ void k").unwrap()..];
            assert_eq!(
                kernel.contains("threadIdx"),
                !flat && statement.contains("threadIdx"),
                "{statement}:\n{out}"
            );
        }
    }

    #[test]
    fn variables_become_slots_and_parameters_a_thread_changes_copies() {
        let code = "#include \"gpu_mem.h\"\n\
                    extern \"C\" __global__ void k(int* moved, const int* read, int n) {\n\
                    \x20   int a = n, *b = &a, c;\n\
                    \x20   __shared__ float tile[32];\n\
                    \x20   moved += threadIdx.x;\n\
                    \x20   __syncthreads();\n\
                    \x20   for (int i = 0; i < a; ++i) { if (i == c) break; c = read[i]; __syncthreads(); }\n\
                    \x20   *moved = *b + c;\n}\n";
        let out = rewrite(code).unwrap();
        assert_eq!(lines(&out), lines(code));
        for wanted in [
            "gm_sim_slots<int > gm_sim_v_a(gm_sim_b);",
            "gm_sim_slots<int *> gm_sim_v_b(gm_sim_b);",
            // Variables whose address is never taken are copied in and written back (kept in
            // registers); `a`'s is taken.
            "auto c = gm_sim_v_c.make(gm_sim_t)",
            "gm_sim_keep<decltype(c)> gm_sim_k_c(gm_sim_v_c[gm_sim_t], c);",
            "auto& a = gm_sim_v_a.init(gm_sim_t,",
            "gm_sim_slots<int > gm_sim_v_i(gm_sim_b);",
            // The pointer each thread moves is its own; the others stay shared.
            "gm_sim_p_moved ,",
            "gm_sim_v_moved.init(gm_sim_t, gm_sim_p_moved);",
            "const int* read",
            // The shared array's address taken once per block.
            "auto& tile = *gm_sim_opaque(&gm_sim_shared_tile);",
            // A `break` of the loop with barriers leaves it for every thread, or is divergence:
            // those that break end (0), the others wait at the barrier of line 7.
            "return 2",
            "GM_SIM_EACH_THREAD_END_JUMPS(0, 7, 7)",
        ] {
            assert!(out.contains(wanted), "{wanted}:\n{out}");
        }
        assert!(
            !out.contains("gm_sim_p_read") && !out.contains("gm_sim_p_n"),
            "{out}"
        );
    }
}
