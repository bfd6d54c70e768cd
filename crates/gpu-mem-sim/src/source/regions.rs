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

mod parse;

use crate::thread::Collective;
use gpu_mem_core::kernel::scan::functions::{Kind, functions};
use gpu_mem_core::kernel::scan::tokens::{directives, tokens};
use parse::{BLOCK_BARRIERS, Branch, Decl, Item, Loop, Statements};

/// Names of waits other than block barriers, and of what the rewrite cannot see through: any
/// occurrence (even in a comment) keeps a kernel off regions. (`decltype` of a variable the
/// rewrite makes a reference, a slot or a shared array's, would name a reference type.)
const REFUSED: [&str; 18] = [
    "decltype",
    "__syncwarp",
    "wavebarrier",
    "__shfl",
    "ballot",
    "__all",
    "__any",
    "activemask",
    "__match",
    "__reduce_",
    "cooperative_groups",
    "cuda/barrier",
    "gm_sim_",
    "R\"",
    "co_await",
    "co_yield",
    "co_return",
    "__nanosleep",
];

/// `code` with every kernel's body rewritten as regions, or why it cannot be.
pub(crate) fn rewrite(code: &str) -> Result<String, String> {
    if !super::wrapper::may_wait(code) {
        return Err("its threads wait for nothing".into());
    }
    // Cooperative groups that only name block groups, whose syncs are lowered to block
    // barriers already (`super::stackless::lower_block_groups`), wait nowhere else.
    if let Some(word) = REFUSED
        .iter()
        .copied()
        .chain(Collective::calls())
        .find(|&w| {
            code.contains(w)
                && !(w == "cooperative_groups" && super::stackless::is_block_level(code))
        })
    {
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
    let s = Statements { code, toks: &toks };
    let kernels: Vec<(usize, usize)> = fns
        .iter()
        .filter(|f| f.kind == Kind::Kernel)
        .filter_map(|f| f.body)
        .collect();
    let inside = |k: usize| kernels.iter().any(|&(open, close)| open < k && k < close);
    if let Some(k) = (0..toks.len()).find(|&k| s.names_barrier(k) && !inside(k)) {
        return Err(format!(
            "line {}: a barrier outside a kernel's body",
            s.line(k)
        ));
    }
    let mut out = Rewrite {
        s: &s,
        edits: Vec::new(),
    };
    for &(open, close) in &kernels {
        let items = s.scope(open + 1, close)?;
        let mut storage = String::from("gm_sim_regions& gm_sim_b = gm_sim_regions_here(); ");
        out.slots_of(&items, None, &mut storage);
        out.insert(toks[open].end, &storage);
        out.scope(&items, &mut Vec::new(), close, 0);
    }
    Ok(out.apply())
}

/// The edits of one source: byte ranges and what replaces them.
struct Rewrite<'s, 'c> {
    s: &'s Statements<'c>,
    edits: Vec<(usize, usize, String)>,
}

impl Rewrite<'_, '_> {
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

    /// Declarations of the slots of the variables `items` declare (and of a loop's `init`).
    fn slots_of(&self, items: &[Item], init: Option<&Decl>, storage: &mut String) {
        let decls = items.iter().filter_map(|item| match item {
            Item::Stmt { decl, .. } => decl.as_ref(),
            _ => None,
        });
        let toks = self.s.toks;
        let code = self.s.code;
        for d in init.into_iter().chain(decls) {
            let base = &code[toks[d.first].start..toks[d.base_end - 1].end];
            for v in &d.declarators {
                let stars = "*".repeat(v.name - v.start);
                storage.push_str(&format!(
                    "gm_sim_slots<{} {stars}> gm_sim_v_{}(gm_sim_b); ",
                    base.replace('\n', " "),
                    self.s.text(v.name)
                ));
            }
        }
    }

    /// Each visible variable as the running thread's own.
    fn aliases(visible: &[String]) -> String {
        visible
            .iter()
            .map(|name| format!("auto& {name} = gm_sim_v_{name}[gm_sim_t]; "))
            .collect()
    }

    /// `d` in a region: each variable the thread's slot, initialised; `tail` follows its
    /// `;`. The names declared join `visible`.
    fn declare(&mut self, d: &Decl, tail: &str, visible: &mut Vec<String>) {
        // What ends the previous declarator's part: the initialiser's call.
        let mut close_next = "";
        for (i, v) in d.declarators.iter().enumerate() {
            let close = close_next;
            let name = self.s.text(v.name);
            // (The first declarator starts the statement; the others replace their `,`.)
            let (from, close) = if i == 0 {
                (d.first, String::new())
            } else {
                (v.start - 1, format!("{close};"))
            };
            match v.eq {
                Some(eq) => {
                    self.replace(
                        from,
                        eq,
                        &format!("{close} auto& {name} = gm_sim_v_{name}.init(gm_sim_t,"),
                    );
                    close_next = ")";
                }
                None => {
                    self.replace(
                        from,
                        v.name,
                        &format!("{close} auto& {name} = gm_sim_v_{name}[gm_sim_t]"),
                    );
                    close_next = "";
                }
            }
            visible.push(name.to_string());
        }
        self.replace(d.end, d.end, &format!("{close_next};{tail}"));
    }

    /// `return;` in a region ends the thread: the region's lambda says so.
    fn returns(&mut self, first: usize, last: usize) {
        for k in first..last {
            if self.s.text(k) == "return" && self.s.text(k + 1) == ";" {
                self.replace(k, k, "return false");
            }
        }
    }

    /// The line of the first barrier a thread reaches running `items` on (inside a loop or
    /// `if`, the first one there), or `after` when they hold none: what a thread that parts
    /// from the others at a condition waits at next (0: it ends).
    fn first_barrier(&self, items: &[Item], after: usize) -> usize {
        for item in items {
            match item {
                Item::Barrier { first, .. } => return self.s.line(*first),
                Item::Loop(l) => return self.first_barrier(&l.items, after),
                Item::Branch(b) => {
                    if let Some((_, _, items)) = b.blocks.first() {
                        return self.first_barrier(items, after);
                    }
                }
                Item::Stmt { .. } | Item::Block { .. } => {}
            }
        }
        after
    }

    /// `gm_sim_b.all(...)`'s head for a condition after which threads that hold it wait next at
    /// line `yes` and the others at line `no` (0: they end).
    fn condition(visible: &[String], yes: usize, no: usize) -> String {
        format!(
            "gm_sim_b.all(__FILE__, {yes}, {no}, [&](unsigned int gm_sim_t) -> bool {{ {}return (",
            Self::aliases(visible)
        )
    }

    /// The regions of a scope whose closing `}` is token `close`, after which a thread waits
    /// next at line `after` (0: it ends).
    fn scope(&mut self, items: &[Item], visible: &mut Vec<String>, close: usize, after: usize) {
        let outer = visible.len();
        let mut open = false;
        let toks = self.s.toks;
        let end_region = |this: &mut Self, open: &mut bool, at: usize| {
            if std::mem::take(open) {
                this.insert(at, "GM_SIM_EACH_THREAD_END");
            }
        };
        for (i, item) in items.iter().enumerate() {
            let next = |this: &Self| this.first_barrier(&items[i + 1..], after);
            match item {
                Item::Stmt { first, last, decl } => {
                    if !open {
                        self.insert(
                            toks[*first].start,
                            &format!("GM_SIM_EACH_THREAD {}", Self::aliases(visible)),
                        );
                        open = true;
                    }
                    self.returns(*first, *last);
                    if let Some(d) = decl {
                        self.declare(d, "", visible);
                    }
                }
                Item::Block { first, last } => {
                    end_region(self, &mut open, toks[*first].start);
                    // A shared array's address, taken once per block: a thread-local's
                    // address is a call (`__tls_get_addr`) the compiler does not move out of
                    // the regions' loops.
                    if let Some(k) = self.s.shared_name(*first, *last) {
                        let name = self.s.text(k);
                        self.replace(k, k, &format!("gm_sim_shared_{name}"));
                        self.insert(
                            toks[*last].end,
                            &format!("auto& {name} = *gm_sim_opaque(&gm_sim_shared_{name});"),
                        );
                    }
                }
                Item::Barrier { first, last } => {
                    end_region(self, &mut open, toks[*first].start);
                    self.replace(*first, *last, "GM_SIM_BARRIER();");
                }
                Item::Loop(l) => {
                    end_region(self, &mut open, toks[l.keyword].start);
                    let next = next(self);
                    self.barrier_loop(l, visible, next);
                }
                Item::Branch(b) => {
                    end_region(self, &mut open, toks[b.keyword].start);
                    let next = next(self);
                    self.branch(b, visible, next);
                }
            }
        }
        end_region(self, &mut open, toks[close].start);
        visible.truncate(outer);
    }

    /// An `if` with barriers: its condition asked of every thread, each block's slots declared
    /// inside it.
    /// `after`: the line of the barrier after it (0: none, the threads end).
    fn branch(&mut self, b: &Branch, visible: &mut Vec<String>, after: usize) {
        let side = |k: usize| {
            b.blocks
                .get(k)
                .map_or(after, |(_, _, items)| self.first_barrier(items, after))
        };
        let head = format!("if ({}", Self::condition(visible, side(0), side(1)));
        self.replace(b.keyword, b.open, &head);
        self.replace(b.close, b.close, "); }))");
        for (open, close, items) in &b.blocks {
            let mut storage = String::new();
            self.slots_of(items, None, &mut storage);
            self.insert(self.s.toks[*open].end, &storage);
            self.scope(items, visible, *close, after);
        }
    }

    /// A loop with barriers: its slots in a block around it, its initialiser a region, its
    /// condition asked of every thread (`gm_sim_regions::all`), its step made by each.
    /// `after`: the line of the barrier after it (0: none, the threads end).
    fn barrier_loop(&mut self, l: &Loop, visible: &mut Vec<String>, after: usize) {
        let s = self.s;
        let mut head = String::from("{ ");
        self.slots_of(&l.items, l.init.as_ref(), &mut head);
        // Threads that go round again wait next at the body's first barrier.
        let again = self.first_barrier(&l.items, after);
        let condition =
            |visible: &[String]| format!("for (; {}", Self::condition(visible, again, after));
        let outer = visible.len();
        match l.semis {
            Some((s1, s2)) => {
                let (init_empty, cond_empty, step_empty) =
                    (s1 == l.open + 1, s2 == s1 + 1, l.close == s2 + 1);
                if init_empty {
                    self.replace(l.keyword, l.open, &head);
                    self.replace(s1, s1, "");
                } else {
                    head.push_str(&format!("GM_SIM_EACH_THREAD {}", Self::aliases(visible)));
                    self.replace(l.keyword, l.open, &head);
                    match &l.init {
                        Some(d) => self.declare(d, " GM_SIM_EACH_THREAD_END", visible),
                        None => self.replace(s1, s1, "; GM_SIM_EACH_THREAD_END"),
                    }
                }
                let mut text = condition(visible);
                if cond_empty {
                    text.push_str("true");
                }
                self.insert(s.toks[s1].end, &text);
                self.replace(
                    s2,
                    s2,
                    &format!(
                        "); }}); gm_sim_b.each([&](unsigned int gm_sim_t) {{ {}(void)({}",
                        Self::aliases(visible),
                        if step_empty { "0" } else { "" }
                    ),
                );
                self.replace(l.close, l.close, "); }))");
            }
            None => {
                head.push_str(&condition(visible));
                self.replace(l.keyword, l.open, &head);
                self.replace(l.close, l.close, "); }); )");
            }
        }
        let (_, body_close) = l.body;
        self.scope(&l.items, visible, body_close, again);
        self.insert(s.toks[body_close].end, "}");
        visible.truncate(outer);
    }
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn corpus_status() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/corpus");
        for dir in std::fs::read_dir(root).unwrap() {
            let dir = dir.unwrap().path();
            if !dir.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "cu") {
                    let code = std::fs::read_to_string(&f).unwrap();
                    let code = crate::source::stackless::lower_block_groups(&code).unwrap_or(code);
                    println!(
                        "{:?}: {:?}",
                        f.file_name().unwrap(),
                        rewrite(&code).map(|_| "REGIONS")
                    );
                }
            }
        }
    }

    #[test]
    fn print_block_sum() {
        let code = include_str!("../../../gpu-mem-core/kernels/block_sum.cu");
        println!("{}", rewrite(code).unwrap());
        let code = include_str!("../../../gpu-mem-core/kernels/matmul_tiled.cu");
        println!("{}", rewrite(code).unwrap());
    }
}
