//! memcheck: an index outside a C array whose length the compiler knows, refused before any
//! access through it (UBSan's array-bounds check, `gm_sim/checked.h`).
//!
//! Such an index is refused where no access check would see what it reaches: below a local
//! array (the frame's other locals, which the thread may touch), below a shared array (the
//! array before it), and, in programs clang built, past a local array's end. The check runs
//! before the access and knows the index and the array's type, not the address or whether the
//! access reads or writes, so the report names what it knows: the index, the array's type and
//! length, the line.

/// An index the program found outside its array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexRefusal {
    /// The array's type as the compiler names it, without quotes: `float [8]`.
    array_type: String,
    index: i128,
}

impl IndexRefusal {
    /// `array_type` as UBSan names it (`'float [8]'`), `index` sign-extended to 64 bits where
    /// `is_signed`.
    pub(crate) fn new(array_type: &str, index: u64, is_signed: bool) -> IndexRefusal {
        let index = if is_signed {
            i128::from(index.cast_signed())
        } else {
            i128::from(index)
        };
        IndexRefusal {
            array_type: array_type.trim_matches('\'').to_string(),
            index,
        }
    }

    /// What the report says: the index, the array's length and type, which side of it the
    /// index lies on, and the line (`memcheck: Invalid index -1 of the 8-element array ...`).
    pub(crate) fn message(&self, line: Option<&str>) -> String {
        let (of, side) = match length(&self.array_type) {
            Some(n) => (
                format!("the {n}-element array"),
                if self.index < 0 {
                    "before its first element"
                } else {
                    "past its last element"
                },
            ),
            None => ("an array".to_string(), "outside its bounds"),
        };
        let mut text = format!(
            "memcheck: Invalid index {} of {of} `{}`, {side}: refused before any access through it",
            self.index, self.array_type
        );
        if let Some(line) = line {
            text.push_str(&format!(" (at {line})"));
        }
        text
    }
}

/// The length of an array type's outer dimension: 8 in `float [8]` and in `float[8][3]`.
fn length(array_type: &str) -> Option<u64> {
    let open = array_type.find('[')?;
    let rest = &array_type[open + 1..];
    rest[..rest.find(']')?].trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_length_is_read_from_either_compilers_spelling() {
        assert_eq!(length("float [8]"), Some(8));
        assert_eq!(length("float[8]"), Some(8));
        assert_eq!(length("float [16][17]"), Some(16));
        assert_eq!(length("int [ 4 ]"), Some(4));
        assert_eq!(length("float []"), None);
        assert_eq!(length("float"), None);
    }

    #[test]
    fn a_negative_signed_index_is_named_before_the_first_element() {
        let refusal = IndexRefusal::new("'float [8]'", (-1i64).cast_unsigned(), true);
        assert_eq!(
            refusal.message(Some("k(float*) at k.cu:6")),
            "memcheck: Invalid index -1 of the 8-element array `float [8]`, before its first \
             element: refused before any access through it (at k(float*) at k.cu:6)"
        );
    }

    #[test]
    fn an_unsigned_index_stays_positive_and_lies_past_the_end() {
        let refusal = IndexRefusal::new("'int[16]'", u64::MAX, false);
        let message = refusal.message(None);
        assert!(
            message.contains("Invalid index 18446744073709551615 of the 16-element array `int[16]`, past its last element"),
            "{message}"
        );
    }

    #[test]
    fn an_unknown_length_says_outside_its_bounds() {
        let message = IndexRefusal::new("'T'", 3, true).message(None);
        assert!(
            message.contains("of an array `T`, outside its bounds"),
            "{message}"
        );
    }
}
