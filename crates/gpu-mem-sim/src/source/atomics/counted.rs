//! Counted loops: a `for` whose trip count is fixed when it starts, whatever other threads do.
//!
//! A thread that calls an atomic in such a loop calls it a bounded number of times, so it cannot
//! spin at it (`super::may_repeat`): a histogram's `for (pos = i; pos < n; pos += stride)
//! atomicAdd(&bins[data[pos]], 1);` waits for nobody. [`counted`] says so, from the text alone
//! and conservatively, of a `for (init; condition; step)` whose step changes one variable
//! (`++i`, `i--`, `i += e`, `i <<= e`, ...), whose condition names it, and whose condition and
//! step read nothing another thread could change while the loop runs:
//! * no memory: no `[`, `->`, unary `*` or `&`, no call but `sizeof`, `min`, `max`, `__mul24`,
//!   `__umul24` and the source's function-like macros made of the same;
//! * only names that are the thread's own or constant: the loop's variable, the enclosing
//!   function's parameters and the variables it declares, the built-in indices (`threadIdx.x`
//!   & co, `warpSize`), type names, and object-like macros made of the same;
//! * none of them changed in the loop's body (assigned, stepped, passed to a helper that takes
//!   a reference) or through a pointer or reference made anywhere in the function, and the
//!   condition itself changes nothing.
//!
//! A module variable (`__device__ int n`), which another thread may write, is none of these: a
//! loop bounded by one stays uncounted, and its atomics may repeat.

use gpu_mem_core::kernel::scan::functions::{Function, body_end, bracket_end, call_end};
use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::collections::BTreeMap;

/// Calls a loop's condition or step may make: pure functions of their arguments.
const PURE_CALLS: [&str; 7] = [
    "sizeof", "min", "max", "umin", "umax", "__mul24", "__umul24",
];

/// Names every thread reads alike or as its own: the built-in indices, their fields, and the
/// words of type names (`unsigned int` in a cast).
const BUILT_IN: [&str; 22] = [
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "x",
    "y",
    "z",
    "unsigned",
    "signed",
    "int",
    "long",
    "short",
    "char",
    "float",
    "double",
    "bool",
    "size_t",
    "uint",
    "const",
    "static_cast",
    "true",
];

/// A macro of the source: its parameters (`None`: object-like) and its replacement's text.
struct Macro {
    params: Option<Vec<String>>,
    body: String,
}

/// What a source defines that the loops' conditions may name: its macros, and its type names
/// (`typedef`, `using`).
pub(super) struct Definitions {
    macros: BTreeMap<String, Macro>,
    types: Vec<String>,
    /// The functions that take a reference (and may change what their caller passes them).
    by_reference: Vec<String>,
}

impl Definitions {
    pub(super) fn of(code: &str, toks: &[Token], fns: &[Function]) -> Definitions {
        let mut macros = BTreeMap::new();
        for d in crate::source::defines::defines(code) {
            if d.undef {
                continue;
            }
            macros.insert(
                d.name.to_string(),
                Macro {
                    params: d
                        .params
                        .map(|ps| ps.into_iter().map(str::to_string).collect()),
                    body: d.body.replace("\\\n", " ").replace('\\', " "),
                },
            );
        }
        let text = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
        let mut types = Vec::new();
        for k in 0..toks.len() {
            if text(k) == "typedef" {
                // `typedef ... name;`: the last name before the `;`.
                let mut j = k;
                while j < toks.len() && text(j) != ";" {
                    j += 1;
                }
                types.push(text(j - 1).to_string());
            } else if text(k) == "using" && text(k + 2) == "=" {
                types.push(text(k + 1).to_string());
            }
        }
        let by_reference = fns
            .iter()
            .filter_map(|f| {
                let name = f.name?;
                let open = name + 1;
                let close = call_end(code, toks, open)?;
                (open..close)
                    .any(|k| {
                        text(k) == "&" && text(k + 1) != "&" && text(k.saturating_sub(1)) != "&"
                    })
                    .then(|| text(name).to_string())
            })
            .collect();
        Definitions {
            macros,
            types,
            by_reference,
        }
    }
}

/// Whether the `for` at token `k`, in the body of the function whose `{` is token `open` and
/// whose parameters are `params`, is counted (see the module's notes).
pub(super) fn counted(
    code: &str,
    toks: &[Token],
    k: usize,
    open: usize,
    params: &[&str],
    defs: &Definitions,
) -> bool {
    let text = |j: usize| toks.get(j).map_or("", |t| &code[t.start..t.end]);
    if text(k) != "for" || text(k + 1) != "(" {
        return false;
    }
    let Some(close) = call_end(code, toks, k + 1) else {
        return false;
    };
    let mut semis = Vec::new();
    let mut depth = 0i32;
    for j in k + 2..close {
        match text(j) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            ";" if depth == 0 => semis.push(j),
            _ => {}
        }
    }
    let [s1, s2] = semis[..] else {
        return false;
    };
    let (condition, step) = (s1 + 1..s2, s2 + 1..close);
    let Some((var, step_operand)) = stepped(code, toks, step.clone()) else {
        return false;
    };
    if !condition.clone().any(|j| text(j) == var) || changes_any(code, toks, condition.clone()) {
        return false;
    }
    // The body: a block, or one plain statement.
    let body = close + 1;
    let body_last = if text(body) == "{" {
        match body_end(code, toks, body) {
            Some(end) => end,
            None => return false,
        }
    } else {
        if matches!(
            text(body),
            "if" | "for" | "while" | "do" | "switch" | "{" | "else"
        ) {
            return false;
        }
        let mut j = body;
        let mut depth = 0i32;
        while j < toks.len() && !(depth == 0 && text(j) == ";") {
            match text(j) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        j
    };
    // The thread's own names: parameters, and what the function declares before the loop
    // (and the loop's initialiser).
    let declared = |name: &str| {
        params.contains(&name) || (open..s1).any(|j| text(j) == name && declares(code, toks, j))
    };
    let reads = condition.chain(step_operand);
    let mut names = Vec::new();
    for j in reads {
        if !plain_reads(code, toks, j) {
            return false;
        }
        let t = &toks[j];
        let name = text(j);
        if !t.ident || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        // A member (`blockDim.x`, `s.n` of a value the thread holds) is its base's.
        if j > 0 && text(j - 1) == "." {
            continue;
        }
        if text(j + 1) == "(" {
            if !pure_call(name, defs, 0) {
                return false;
            }
            continue;
        }
        if name == var
            || BUILT_IN.contains(&name)
            || defs.types.iter().any(|t| t == name)
            || constant_macro(name, defs, 0)
            || declared(name)
        {
            names.push(name);
            continue;
        }
        return false;
    }
    names.push(var);
    // Nothing the loop is counted by changes in its body: assigned or stepped there, changed by
    // a helper it passes a reference to, or through a pointer or reference made anywhere in
    // the function (`int* p = &n;`, `int& r = n;`).
    let function_end = body_end(code, toks, open).unwrap_or(toks.len());
    let calls_by_reference = (body..=body_last)
        .any(|j| text(j + 1) == "(" && defs.by_reference.iter().any(|f| f == text(j)));
    let aliased = (open..function_end).any(|j| {
        let address_of = text(j) == "&"
            && names.contains(&text(j + 1))
            && !(j > 0 && text(j - 1) == "&" && toks[j - 1].end == toks[j].start)
            && !(j > 0 && toks[j - 1].ident || text(j.saturating_sub(1)) == ")");
        let reference = text(j) == "&"
            && toks.get(j + 1).is_some_and(|t| t.ident)
            && text(j + 2) == "="
            && text(j + 3) != "=";
        address_of || reference
    });
    !calls_by_reference
        && !aliased
        && !(body..=body_last).any(|j| names.contains(&text(j)) && changed_at(code, toks, j))
}

/// The variable a `for`'s step changes, and the tokens of the operand it changes it by (empty
/// for `++`/`--`): `++i`, `i++`, `--i`, `i--`, `i op= e`.
fn stepped<'c>(
    code: &'c str,
    toks: &[Token],
    step: std::ops::Range<usize>,
) -> Option<(&'c str, std::ops::Range<usize>)> {
    let text = |j: usize| toks.get(j).map_or("", |t| &code[t.start..t.end]);
    let (a, n) = (step.start, step.len());
    let ident = |j: usize| toks.get(j).is_some_and(|t| t.ident);
    let twice = |j: usize, c: &str| text(j) == c && text(j + 1) == c;
    if n == 3 && (twice(a, "+") || twice(a, "-")) && ident(a + 2) {
        return Some((text(a + 2), step.end..step.end));
    }
    if n == 3 && ident(a) && (twice(a + 1, "+") || twice(a + 1, "-")) {
        return Some((text(a), step.end..step.end));
    }
    if n >= 3 && ident(a) {
        // `i += e`, `i -= e`, `i *= e`, `i <<= e`, `i >>= e`.
        let op_end = match (text(a + 1), text(a + 2)) {
            ("+" | "-" | "*" | "/", "=") => a + 3,
            ("<", "<") | (">", ">") if text(a + 3) == "=" => a + 4,
            _ => return None,
        };
        if op_end < step.end {
            return Some((text(a), op_end..step.end));
        }
    }
    None
}

/// Whether token `j` of a condition or step reads nothing through memory: not `[`, `->`, `?:`,
/// or a unary `*` or `&`.
fn plain_reads(code: &str, toks: &[Token], j: usize) -> bool {
    let text = |j: usize| toks.get(j).map_or("", |t| &code[t.start..t.end]);
    // A name, a number or a closing parenthesis: `*` and `&` after one are binary.
    let operand_before = j > 0 && {
        let before = text(j - 1);
        before.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') || before == ")"
    };
    // The second `&` of `&&`.
    let and = j > 0 && text(j - 1) == "&" && toks[j - 1].end == toks[j].start;
    match text(j) {
        "[" | "]" | "{" | "}" | "?" => false,
        "-" => text(j + 1) != ">",
        "*" => operand_before,
        "&" => operand_before || and,
        _ => true,
    }
}

/// Whether tokens `range` change anything (an assignment or a step).
fn changes_any(code: &str, toks: &[Token], range: std::ops::Range<usize>) -> bool {
    range
        .clone()
        .any(|j| changed_at(code, toks, j) && toks[j].ident)
        || range.clone().any(|j| {
            let t = toks.get(j).map_or("", |t| &code[t.start..t.end]);
            let next = toks.get(j + 1).map_or("", |t| &code[t.start..t.end]);
            let joined = toks.get(j + 1).is_some_and(|n| toks[j].end == n.start);
            joined && ((t == "+" && next == "+") || (t == "-" && next == "-"))
        })
}

/// Whether the name at token `j` is changed there: assigned (`=`, `op=`), stepped, or its
/// address taken; a member or element of it too (`s.n = `, `a[i] += `).
fn changed_at(code: &str, toks: &[Token], j: usize) -> bool {
    let text = |j: usize| toks.get(j).map_or("", |t| &code[t.start..t.end]);
    let before = |back: usize| j.checked_sub(back).map_or("", text);
    let and = j >= 2 && before(2) == "&" && toks[j - 2].end == toks[j - 1].start;
    if before(1) == "&" && !and {
        return true;
    }
    if (before(1) == "+" && before(2) == "+") || (before(1) == "-" && before(2) == "-") {
        return true;
    }
    let mut at = j + 1;
    loop {
        match text(at) {
            "." => at += 2,
            "[" => match bracket_end(code, toks, at) {
                Some(end) => at = end + 1,
                None => return true,
            },
            _ => break,
        }
    }
    match (text(at), text(at + 1)) {
        ("=", next) => next != "=",
        ("+", "+") | ("-", "-") => true,
        ("+" | "-" | "*" | "/" | "%" | "&" | "|" | "^", "=") => true,
        ("<", "<") | (">", ">") => text(at + 2) == "=",
        _ => false,
    }
}

/// Whether the identifier at token `j` is declared there as a variable the thread holds: a
/// type's last word (or `*`, `>`) before it, and `=`, `;`, `,`, `[` or `)` after it (not a
/// reference, `int& n = a[0]`, which names memory another thread may change).
fn declares(code: &str, toks: &[Token], j: usize) -> bool {
    let text = |j: usize| toks.get(j).map_or("", |t| &code[t.start..t.end]);
    if j == 0 {
        return false;
    }
    let before = text(j - 1);
    let typed = (toks[j - 1].ident
        && !matches!(
            before,
            "return" | "else" | "case" | "goto" | "new" | "delete"
        ))
        || matches!(before, "*" | ">");
    typed && matches!(text(j + 1), "=" | ";" | "," | "[" | ")")
}

/// Whether `name` is a macro whose replacement is a constant: numbers, operators and names of
/// the same kind (`#define BINS (WARPS * 256)`).
fn constant_macro(name: &str, defs: &Definitions, depth: usize) -> bool {
    match defs.macros.get(name) {
        Some(Macro { params: None, body }) => pure_text(body, &[], defs, depth + 1),
        _ => false,
    }
}

/// Whether a call of `name` reads nothing but its arguments: one of [`PURE_CALLS`], or a
/// function-like macro whose replacement is made of its parameters, constants and such calls.
fn pure_call(name: &str, defs: &Definitions, depth: usize) -> bool {
    if PURE_CALLS.contains(&name) {
        return true;
    }
    match defs.macros.get(name) {
        Some(Macro {
            params: Some(params),
            body,
        }) => {
            let params: Vec<&str> = params.iter().map(String::as_str).collect();
            pure_text(body, &params, defs, depth + 1)
        }
        _ => false,
    }
}

/// Whether a macro's replacement `body` is pure: no memory read, and names only of `params`,
/// the built-in indices, type words, constant macros and pure calls.
fn pure_text(body: &str, params: &[&str], defs: &Definitions, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let Some(toks) = tokens(body) else {
        return false;
    };
    let text = |j: usize| toks.get(j).map_or("", |t| &body[t.start..t.end]);
    (0..toks.len()).all(|j| {
        let name = text(j);
        if !plain_reads(body, &toks, j) || (toks[j].ident && changed_at(body, &toks, j)) {
            return false;
        }
        if !toks[j].ident || name.starts_with(|c: char| c.is_ascii_digit()) {
            return true;
        }
        if j > 0 && text(j - 1) == "." {
            return true;
        }
        if text(j + 1) == "(" {
            return pure_call(name, defs, depth);
        }
        params.contains(&name)
            || BUILT_IN.contains(&name)
            || defs.types.iter().any(|t| t == name)
            || constant_macro(name, defs, depth)
    })
}
