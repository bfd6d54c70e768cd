//! Where the user's call that a backend call serves was made, for the backend's reports.
//!
//! The public API marks the calls whose site a backend may want to name ([`CallSite::enter`]
//! around an allocation, a kernel's launch): while the mark lives, [`call_site`] on that thread
//! returns the user's `file:line:column` (the outermost mark wins, so a helper of the API that
//! marks its own call does not hide the user's). The accounting's ledger records allocations
//! by it; the simulator's memcheck names the allocation an access lies near by it.

use std::cell::Cell;
use std::panic::Location;

thread_local! {
    static SITE: Cell<Option<&'static Location<'static>>> = const { Cell::new(None) };
}

/// The site of the user's call that this thread is serving, if the public API marked one.
pub fn call_site() -> Option<&'static Location<'static>> {
    SITE.with(Cell::get)
}

/// While alive, [`call_site`] on this thread names the caller of the function that made it
/// (unless an outer mark names another).
#[must_use = "the call site is named only while the mark lives"]
pub(crate) struct CallSite {
    outermost: bool,
}

impl CallSite {
    /// Marks the caller's site (every function between the public API and here is
    /// `#[track_caller]`, so it is the user's).
    #[track_caller]
    pub(crate) fn enter() -> CallSite {
        let site = Location::caller();
        let outermost = SITE.with(|s| {
            let unset = s.get().is_none();
            if unset {
                s.set(Some(site));
            }
            unset
        });
        CallSite { outermost }
    }
}

impl Drop for CallSite {
    fn drop(&mut self) {
        if self.outermost {
            SITE.with(|s| s.set(None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outermost_mark_names_the_site_while_it_lives() {
        assert_eq!(call_site(), None);
        let outer = CallSite::enter();
        let named = call_site().map(|l| l.line());
        assert_eq!(named, Some(line!() - 2));
        {
            let _inner = CallSite::enter();
            assert_eq!(call_site().map(|l| l.line()), named, "the outer mark wins");
        }
        assert_eq!(
            call_site().map(|l| l.line()),
            named,
            "the inner drop keeps it"
        );
        drop(outer);
        assert_eq!(call_site(), None);
    }
}
