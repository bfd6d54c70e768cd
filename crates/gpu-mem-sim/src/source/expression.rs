//! The operators and parentheses of an expression's tokens, as the rewrites that read
//! conditions see them (`regions::guard`'s prefix guards, `guards`' leading ones): punctuation
//! joined into the operators C++ reads (`<=`, `&&`, `->`), and parentheses around a whole
//! expression taken off. What a condition means is each rewrite's own question.

use gpu_mem_core::kernel::scan::functions::call_end;
use gpu_mem_core::kernel::scan::tokens::Token;

/// The types a variable holding a thread's index may have: integers that hold any index
/// without wrapping (a `char` or `short` would wrap, and a larger index compare as a smaller).
pub(crate) const INDEX_TYPES: [&str; 11] = [
    "const", "unsigned", "int", "long", "signed", "size_t", "auto", "uint32_t", "uint64_t",
    "int32_t", "int64_t",
];

/// The operator at token `k` of `toks` (from `code`), adjacent punctuation joined (`<=`, `&&`,
/// `->`, `+=`, ...), and how many tokens it takes; a name, a number or anything else is itself,
/// one token.
pub(crate) fn operator<'c>(code: &'c str, toks: &[Token], k: usize) -> (&'c str, usize) {
    let text = |k: usize| toks.get(k).map_or("", |t| &code[t.start..t.end]);
    let joined = toks
        .get(k + 1)
        .is_some_and(|n| toks.get(k).is_some_and(|t| n.start == t.end));
    if joined {
        let two = &code[toks[k].start..toks[k + 1].end];
        if matches!(
            two,
            "<=" | ">=" | "==" | "!=" | "&&" | "||" | "<<" | ">>" | "->" | "++" | "--"
        ) || (two.ends_with('=') && "+-*/%&|^".contains(&two[..1]))
        {
            return (two, 2);
        }
    }
    (text(k), 1)
}

/// Tokens `first..end` without the parentheses that enclose all of them.
pub(crate) fn unwrapped(
    code: &str,
    toks: &[Token],
    mut first: usize,
    mut end: usize,
) -> (usize, usize) {
    while end > first + 1
        && toks
            .get(first)
            .is_some_and(|t| &code[t.start..t.end] == "(")
        && call_end(code, toks, first) == Some(end - 1)
    {
        first += 1;
        end -= 1;
    }
    (first, end)
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::{operator, unwrapped};
    use gpu_mem_core::kernel::scan::functions::call_end;
    use gpu_mem_core::kernel::scan::tokens::tokens;

    #[test]
    fn operators_join_and_parentheses_come_off() {
        let code = "((a <= b) && c -> d) + e += f";
        let toks = tokens(code).unwrap();
        let ops: Vec<&str> = {
            let mut k = 0;
            let mut out = Vec::new();
            while k < toks.len() {
                let (op, len) = operator(code, &toks, k);
                out.push(op);
                k += len;
            }
            out
        };
        assert_eq!(
            ops,
            [
                "(", "(", "a", "<=", "b", ")", "&&", "c", "->", "d", ")", "+", "e", "+=", "f"
            ]
        );
        let close = |open: usize| call_end(code, &toks, open).unwrap();
        // `((a <= b) && c -> d)`, then `(a <= b)`: each without its parentheses; with `+ e`
        // after it, the first stays as it is.
        assert_eq!(unwrapped(code, &toks, 0, close(0) + 1), (1, close(0)));
        assert_eq!(unwrapped(code, &toks, 1, close(1) + 1), (2, close(1)));
        assert_eq!(unwrapped(code, &toks, 0, close(0) + 3), (0, close(0) + 3));
    }
}
