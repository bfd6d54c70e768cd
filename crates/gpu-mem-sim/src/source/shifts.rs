//! Shifts as a GPU computes them. A shift by the operand's width or more (or by a negative
//! count) is undefined in C++; PTX's `shl`/`shr` clamp the count, so a GPU gives 0 (or, for a
//! right shift of a negative signed value, -1), and real kernels rely on it (`1 << tid` with
//! `tid` past 31, `(1 << bits) - 1` with `bits` = 32). The host processor takes the count
//! modulo the width instead. So every shift's right operand is wrapped — `a << n` becomes
//! `a << gm_shift_count(n)`, `a >>= n` becomes `a >>= gm_shift_count(n)` — and the prelude's
//! operators on `gm_shift_count_t` (`gpu_mem.h`) give the GPU's answer.
//!
//! Guarantees: only right operands of shift operators change, by an insertion before and after
//! them (lines and columns before the operand stay); preprocessor directives other than
//! `#define` bodies are left alone; a `>>` that may close two template argument lists (an
//! unmatched `<` before it in the statement) and `operator<<` / `operator>>` are left alone. The
//! right operand ends where C++'s precedence ends it (a relational, equality, bitwise, logical,
//! conditional, assignment or comma operator, or a closing bracket, at its own nesting level);
//! a template argument list in it other than a cast's would be cut short: the rewritten source
//! then fails to compile, and the module is built without this rewrite instead
//! (`super::plans`), where the compiled code's shift checks report such a shift
//! (`gm_sim/output.h`).

use gpu_mem_core::kernel::scan::tokens::{Token, directives, tokens};
use std::borrow::Cow;

/// The function the prelude declares, wrapped around each right operand.
const WRAPPER: &str = "gm_shift_count(";

/// The casts whose template argument list may stand in a right operand.
const CASTS: [&str; 4] = [
    "static_cast",
    "reinterpret_cast",
    "const_cast",
    "dynamic_cast",
];

/// `code` with the right operand of every shift wrapped (see the module docs).
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    if !code.contains("<<") && !code.contains(">>") {
        return Cow::Borrowed(code);
    }
    let Some(toks) = tokens(code) else {
        return Cow::Borrowed(code);
    };
    let mut inserts = operands(code, &toks, 0);
    // Macro bodies: `#define BIT(n) (1u << (n))` is kernel code where it is used.
    for range in directives(code) {
        let line = &code[range.clone()];
        let Some(body) = define_body(line) else {
            continue;
        };
        let start = range.start + body;
        if let Some(toks) = tokens(&code[start..range.end]) {
            inserts.extend(operands(&code[start..range.end], &toks, start));
        }
    }
    if inserts.is_empty() {
        return Cow::Borrowed(code);
    }
    // Openings before closings at one position: `a << b << c` closes b's and opens c's there
    // (the second operand starts after the second operator, never at b's end).
    inserts.sort_by_key(|&(at, text)| (at, text != WRAPPER));
    let mut out = String::with_capacity(code.len() + inserts.len() * 10);
    let mut at = 0;
    for (position, text) in inserts {
        out.push_str(&code[at..position]);
        out.push_str(text);
        at = position;
    }
    out.push_str(&code[at..]);
    Cow::Owned(out)
}

/// Where `#define`'s body starts in `line` (a directive), after the macro's name and
/// parameters; `None` for other directives.
fn define_body(line: &str) -> Option<usize> {
    let after_hash = line.find('#')? + 1;
    let rest = &line[after_hash..];
    let word = rest.trim_start();
    let word_at = after_hash + (rest.len() - word.len());
    let name_part = word.strip_prefix("define")?;
    let name_at = word_at + "define".len();
    let trimmed = name_part.trim_start();
    let name_start = name_at + (name_part.len() - trimmed.len());
    let name_len = trimmed
        .bytes()
        .take_while(|&b| gpu_mem_core::kernel::scan::tokens::is_name_byte(b))
        .count();
    let after_name = name_start + name_len;
    // A function-like macro's parameters follow the name at once.
    if line[after_name..].starts_with('(') {
        let close = line[after_name..].find(')')?;
        return Some(after_name + close + 1);
    }
    Some(after_name)
}

/// The insertions (byte position in the whole source, text) that wrap the right operands of
/// the shifts among `toks` (of `code`, which starts at `offset` in the whole source).
fn operands(code: &str, toks: &[Token], offset: usize) -> Vec<(usize, &'static str)> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    // Two one-byte tokens written together (`<<`, `->`, `::`).
    let joined = |k: usize, a: &str, b: &str| {
        k + 1 < toks.len() && text(k) == a && text(k + 1) == b && toks[k].end == toks[k + 1].start
    };
    let mut inserts = Vec::new();
    let mut k = 0;
    while k + 1 < toks.len() {
        let left = joined(k, "<", "<");
        let right = joined(k, ">", ">");
        if !(left || right) {
            k += 1;
            continue;
        }
        // `<<<` (a launch) and `>>>` are not shifts; nor are operator names.
        let third =
            k + 2 < toks.len() && toks[k + 1].end == toks[k + 2].start && text(k + 2) == text(k);
        let named = k > 0 && text(k - 1) == "operator";
        if third || named || (right && may_close_templates(code, toks, k)) {
            k += if third { 3 } else { 2 };
            continue;
        }
        let mut first = k + 2;
        // `<<=` and `>>=`.
        if first < toks.len() && text(first) == "=" && toks[first - 1].end == toks[first].start {
            first += 1;
        }
        let end = operand_end(code, toks, first);
        if end > first {
            inserts.push((offset + toks[first].start, WRAPPER));
            inserts.push((offset + toks[end - 1].end, ")"));
        }
        k = first;
    }
    inserts
}

/// One past the last token of the shift's right operand starting at `first`.
fn operand_end(code: &str, toks: &[Token], first: usize) -> usize {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let joined = |k: usize, b: &str| {
        k + 1 < toks.len() && text(k + 1) == b && toks[k].end == toks[k + 1].start
    };
    let mut depth = 0usize;
    let mut k = first;
    while k < toks.len() {
        match text(k) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                if depth == 0 {
                    return k;
                }
                depth -= 1;
            }
            // `->` and `::` are not operators that end it.
            "-" if joined(k, ">") => k += 1,
            ":" if joined(k, ":") => k += 1,
            "<" if depth == 0 && k > first && CASTS.contains(&text(k - 1)) => {
                k = matching_angle(code, toks, k);
            }
            // `!` alone is a unary operator inside the operand; `!=` ends it.
            "!" if depth == 0 && joined(k, "=") => return k,
            "<" | ">" | "=" | "&" | "^" | "|" | "?" | ":" | "," | ";" if depth == 0 => return k,
            _ => {}
        }
        k += 1;
    }
    k
}

/// The index of the `>` closing the `<` at `open` (nested lists counted).
fn matching_angle(code: &str, toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, tok) in toks.iter().enumerate().skip(open) {
        match &code[tok.start..tok.end] {
            "<" => depth += 1,
            ">" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            ";" | "{" | "}" => return k,
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// Whether the `>>` at token `k` may close template argument lists: a `<` after a name,
/// unmatched, earlier in its statement at its nesting level.
fn may_close_templates(code: &str, toks: &[Token], k: usize) -> bool {
    let text = |i: usize| &code[toks[i].start..toks[i].end];
    let mut depth = 0usize;
    let mut open = 0isize;
    for i in (0..k).rev() {
        match text(i) {
            ")" | "]" => depth += 1,
            "(" | "[" => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            ";" | "{" | "}" => break,
            ">" if depth == 0 => open -= 1,
            "<" if depth == 0 => {
                let shift = (i > 0 && text(i - 1) == "<" && toks[i - 1].end == toks[i].start)
                    || (i + 1 < toks.len()
                        && text(i + 1) == "<"
                        && toks[i].end == toks[i + 1].start);
                if !shift && i > 0 && toks[i - 1].ident {
                    open += 1;
                }
            }
            _ => {}
        }
    }
    open > 0
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::rewrite;

    #[test]
    fn right_operands_are_wrapped_where_precedence_ends_them() {
        for (code, want) in [
            ("x = 1 << tid;", "x = 1 << gm_shift_count(tid);"),
            ("m = (1<<wrbits)-1;", "m = (1<<gm_shift_count(wrbits))-1;"),
            ("y = a << b + 1 | c;", "y = a << gm_shift_count(b + 1) | c;"),
            (
                "y = a << b << c;",
                "y = a << gm_shift_count(b) << gm_shift_count(c);",
            ),
            ("w >>= k;", "w >>= gm_shift_count(k);"),
            (
                "if (x >> p->n != 0) {}",
                "if (x >> gm_shift_count(p->n) != 0) {}",
            ),
            (
                "v = a << std::min(b, c);",
                "v = a << gm_shift_count(std::min(b, c));",
            ),
            (
                "v = a << static_cast<int>(b) & 3;",
                "v = a << gm_shift_count(static_cast<int>(b)) & 3;",
            ),
            ("v = c ? a << s : 0;", "v = c ? a << gm_shift_count(s) : 0;"),
            (
                "f(a >> (b << 2), d[i << 1]);",
                "f(a >> gm_shift_count((b << gm_shift_count(2))), d[i << gm_shift_count(1)]);",
            ),
            (
                "#define BIT(n) (1u << (n))\nint z = BIT(3);",
                "#define BIT(n) (1u << gm_shift_count((n)))\nint z = BIT(3);",
            ),
        ] {
            assert_eq!(rewrite(code), want, "{code}");
        }
    }

    #[test]
    fn what_is_not_a_shift_stays() {
        for code in [
            "vector<vector<int>> v;",
            "A<B<C>> x = y;",
            "bool operator<<(S a, int b);",
            "kernel<<<grid, block>>>(x);",
            "#if (1 << 3) > 4\n#endif",
            "x = a < b;",
            "// a << b\n",
            "s = \"a << b\";",
        ] {
            assert_eq!(rewrite(code), code, "{code}");
        }
    }
}
