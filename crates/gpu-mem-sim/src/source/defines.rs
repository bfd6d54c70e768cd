//! The `#define` and `#undef` directives of a kernel source, read from its text alone: the one
//! reading of a macro's name, parameters and replacement that the rewrites ask their questions
//! of (which macros are numbers, which a counted loop or a flat region may name).

use gpu_mem_core::kernel::scan::tokens::directives;

/// One `#define` or `#undef`.
pub(crate) struct Define<'c> {
    /// Whether it is an `#undef`.
    pub(crate) undef: bool,
    pub(crate) name: &'c str,
    /// A function-like macro's parameters (`None`: an object-like one).
    pub(crate) params: Option<Vec<&'c str>>,
    /// The replacement as written (continued lines included, with their backslashes).
    pub(crate) body: &'c str,
}

/// The `#define`s and `#undef`s of `code`, in order.
pub(crate) fn defines(code: &str) -> Vec<Define<'_>> {
    directives(code)
        .into_iter()
        .filter_map(|d| {
            let text = code[d].trim_start().trim_start_matches('#').trim_start();
            let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
            let undef = match word {
                "define" => false,
                "undef" => true,
                _ => return None,
            };
            let rest = rest.trim_start();
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let (name, after) = rest.split_at(end);
            if name.is_empty() {
                return None;
            }
            let (params, body) = match after.strip_prefix('(') {
                Some(list) => {
                    let close = list.find(')')?;
                    let params = list[..close]
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .collect();
                    (Some(params), &list[close + 1..])
                }
                None => (None, after),
            };
            Some(Define {
                undef,
                name,
                params,
                body,
            })
        })
        .collect()
}

/// The object-like macros of `code` that stand for a number (`#define TPB 16`, `(16)`,
/// `16u`): the same in every thread wherever a kernel names them. (Only those defined once:
/// one defined again, or undefined, may stand for something else where a kernel names it.)
pub(crate) fn numbers(code: &str) -> Vec<&str> {
    let mut defined: Vec<(&str, bool)> = Vec::new();
    for d in defines(code) {
        let value = d
            .body
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim();
        let number = !d.undef
            && d.params.is_none()
            && !value.is_empty()
            && value.starts_with(|c: char| c.is_ascii_digit())
            && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
        match defined.iter_mut().find(|(n, _)| *n == d.name) {
            Some(entry) => entry.1 = false,
            None => defined.push((d.name, number)),
        }
    }
    defined
        .into_iter()
        .filter_map(|(name, number)| number.then_some(name))
        .collect()
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::defines;

    #[test]
    fn names_parameters_and_replacements() {
        let code = "#define N 16\n#  define SUM(a, b) ((a) + (b))\n#undef N\n#define EMPTY()\n#pragma once\nint x;\n";
        let found: Vec<_> = defines(code)
            .iter()
            .map(|d| (d.undef, d.name, d.params.clone(), d.body.trim()))
            .collect();
        assert_eq!(
            found,
            [
                (false, "N", None, "16"),
                (false, "SUM", Some(vec!["a", "b"]), "((a) + (b))"),
                (true, "N", None, ""),
                (false, "EMPTY", Some(vec![]), ""),
            ]
        );
    }
}
