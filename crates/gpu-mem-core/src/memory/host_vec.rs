//! Ordinary host memory sized by user input, allocated fallibly.
//!
//! Element counts come from shapes the user chose, and a broadcast device array of a few bytes
//! can stand for more elements than any host could hold. `vec![x; n]` or `collect()` would panic
//! ("capacity overflow") or abort the process when the allocator refuses; these helpers return
//! [`Error::HostOutOfMemory`] instead.

use crate::element::Element;
use crate::error::{Error, Result};

fn refused(what: &str, len: usize, itemsize: usize, reason: &str) -> Error {
    Error::HostOutOfMemory {
        what: what.to_string(),
        requested: (len as u64).saturating_mul(itemsize as u64),
        reason: reason.to_string(),
        report: None,
    }
}

/// An empty vector with room for exactly `len` elements of `T`, or an error.
fn with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let itemsize = std::mem::size_of::<T>();
    let fits = len
        .checked_mul(itemsize)
        .is_some_and(|bytes| bytes <= isize::MAX as usize);
    if !fits {
        return Err(refused(
            what,
            len,
            itemsize,
            "larger than any host allocation can be",
        ));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| refused(what, len, itemsize, "the host allocator refused"))?;
    Ok(out)
}

/// `len` zeroed elements, allocated fallibly.
pub(crate) fn zeroed_vec<T: Element>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut out = with_capacity(len, what)?;
    out.resize(len, T::zeroed());
    Ok(out)
}

/// Collects exactly `len` items (an `ExactSizeIterator`'s length) into a fallibly allocated
/// vector.
pub(crate) fn try_collect<T>(
    items: impl ExactSizeIterator<Item = T>,
    what: &str,
) -> Result<Vec<T>> {
    let mut out = with_capacity(items.len(), what)?;
    out.extend(items);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_errors() {
        for len in [usize::MAX, isize::MAX as usize, 1 << 62] {
            let err = zeroed_vec::<u64>(len, "test").unwrap_err();
            assert!(matches!(err, Error::HostOutOfMemory { .. }), "{err}");
        }
        assert_eq!(zeroed_vec::<u16>(3, "test").unwrap(), vec![0, 0, 0]);
        assert_eq!(try_collect([1, 2].into_iter(), "test").unwrap(), vec![1, 2]);
    }
}
