//! Compiled names read back as the source spells them: a symbol of a compiled module (a
//! mangled C++ name such as `_ZN2ns5innerE`, or a plain C one) compared with what a user asks
//! for (`ns::inner`, `mask<float>`). Both backends look kernels and variables up this way in
//! what the compiler produced (PTX on CUDA, the library's symbol table on the simulator).

/// The source spelling of `symbol`: demangled where it is a C++ name, without a function's
/// parameters or return type, template arguments kept; the symbol itself where it is a C name.
pub fn source_name(symbol: &str) -> String {
    demangled(symbol).map_or_else(|| symbol.to_string(), |text| strip_signature(&text))
}

/// `symbol` demangled, where it is a C++ name.
fn demangled(symbol: &str) -> Option<String> {
    cpp_demangle::Symbol::new(symbol.as_bytes())
        .ok()?
        .demangle()
        .ok()
}

/// The name of the entity `symbol` is, without the scopes around it: `tile` for a function's
/// `static` array (`_ZZ6kernelPfiE4tile`, `kernel(float*, int)::tile`), `v` for `ns::v`; the
/// symbol itself where it is a C name or no C++ one.
pub fn unscoped_name(symbol: &str) -> String {
    let Some(text) = demangled(symbol) else {
        return symbol.to_string();
    };
    // After the last `::` outside parameters and template arguments.
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => start = i + 2,
            _ => {}
        }
    }
    text[start..].to_string()
}

/// `void f<int>(int*)` → `f<int>`; `ns::v` → `ns::v`.
fn strip_signature(text: &str) -> String {
    // The name ends at the first `(` outside template arguments; a return type (templates) ends
    // at the last space before the name outside template arguments.
    let mut depth = 0i32;
    let mut end = text.len();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && i > 0 => {
                end = i;
                break;
            }
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    text[start..end].to_string()
}

/// `name` compared the way source spellings of one entity differ: without spaces, a leading
/// `::`, and casts the demangler writes before template arguments (`(unsigned int)128`).
pub fn normalized(name: &str) -> String {
    let compact: String = name.chars().filter(|c| !c.is_whitespace()).collect();
    let compact = compact.strip_prefix("::").unwrap_or(&compact);
    let mut out = String::with_capacity(compact.len());
    let mut rest = compact;
    while let Some(open) = rest.find('(') {
        let close = rest[open..].find(')').map(|c| open + c);
        let cast = close.filter(|&c| {
            rest[c + 1..].starts_with(|n: char| n.is_ascii_digit() || n == '-')
                && rest[open + 1..c]
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
        });
        match cast {
            Some(c) => {
                out.push_str(&rest[..open]);
                rest = &rest[c + 1..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    without_integer_suffixes(&out)
}

/// `128u`, `4ul` and `-1LL` as template arguments are 128, 4 and -1.
fn without_integer_suffixes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if matches!(c, b'u' | b'U' | b'l' | b'L') && i > 0 && bytes[i - 1].is_ascii_digit() {
            let mut j = i;
            while j < bytes.len() && matches!(bytes[j], b'u' | b'U' | b'l' | b'L') {
                j += 1;
            }
            if j == bytes.len() || matches!(bytes[j], b',' | b'>') {
                i = j;
                continue;
            }
        }
        out.push(char::from(c));
        i += 1;
    }
    out
}

/// Whether the compiled `symbol` is the entity the source calls `name`.
pub fn is_named(symbol: &str, name: &str) -> bool {
    normalized(&source_name(symbol)) == normalized(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn compiled_names_read_as_the_source_spells_them() {
        assert_eq!(source_name("_Z4maskIfE"), "mask<float>");
        assert_eq!(source_name("_ZN2ns5innerE"), "ns::inner");
        assert_eq!(source_name("_ZN2ns1kEPfi"), "ns::k");
        assert_eq!(source_name("_Z10vector_addPKfS0_Pfi"), "vector_add");
        assert_eq!(source_name("counter"), "counter");
        assert_eq!(
            source_name("_Z5blockIiLj128EEvPKT_PS0_j"),
            "block<int, (unsigned int)128>"
        );
        assert!(is_named("_Z5blockIiLj128EEvPKT_PS0_j", "block<int, 128>"));
        assert!(is_named("_Z4maskIfE", " mask< float >"));
        assert!(is_named("_ZN2ns5innerE", "::ns::inner"));
        assert!(!is_named("_ZN2ns5innerE", "inner"));
        assert!(!is_named("_Z4maskIfE", "mask<double>"));
        assert!(is_named("_Z5blockIiLj128EEvPKT_PS0_j", "block<int,128u>"));
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn variables_are_named_by_their_last_name() {
        assert_eq!(unscoped_name("_ZZ6kernelPfiE4tile"), "tile");
        assert_eq!(unscoped_name("_ZZ6kernelPfiE4tile_0"), "tile");
        assert_eq!(unscoped_name("_ZL5cache"), "cache");
        assert_eq!(unscoped_name("plain"), "plain");
        assert_eq!(unscoped_name("_Zweird"), "_Zweird");
        assert_eq!(unscoped_name("_ZZ1kvE5TILEX"), "TILEX");
    }
}
