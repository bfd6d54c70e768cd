//! Chaining the simulator's fault handlers (a simulated thread's stack overflow,
//! `executor::stack`; memcheck's shadow, `sanitizer::shadow_faults`) to the handler that was
//! installed before each: a fault that is not theirs goes on as if they were not there.

/// A signal's disposition as `sigaction` returned it when a handler of ours replaced it.
#[cfg(all(unix, not(miri)))]
#[derive(Clone, Copy)]
pub(crate) struct Disposition(libc::sigaction);
// SAFETY: a plain C struct of a function address, flags and a signal mask.
#[cfg(all(unix, not(miri)))]
unsafe impl Send for Disposition {}
// SAFETY: as above; never written once made.
#[cfg(all(unix, not(miri)))]
unsafe impl Sync for Disposition {}

/// Hands a signal a handler of ours does not answer to `previous`, the disposition installed
/// before it: calls that handler, or, where it was the default (or ignore), restores the
/// default and returns, so that the faulting access runs again and ends the process as it
/// would have without ours.
///
/// # Safety
/// Called from a signal handler with the arguments it received; `previous` is what `sigaction`
/// returned when that handler was installed.
#[cfg(all(unix, not(miri)))]
pub(crate) unsafe fn pass_on(
    previous: Option<Disposition>,
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: calling or restoring the previous disposition, as a chained handler must; a
    // handler installed with SA_SIGINFO takes three arguments, one without it takes one.
    unsafe {
        match previous.map(|p| p.0) {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = std::mem::transmute(old.sa_sigaction);
                    handler(signal, info, context);
                } else {
                    let handler: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    handler(signal);
                }
            }
            _ => {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
    }
}

/// A handler with the information `SA_SIGINFO` gives it.
#[cfg(all(unix, not(miri)))]
pub(crate) type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for `signal` (on the alternate stack where the thread has one), returning
/// the disposition it replaces, for [`pass_on`]; `None` if it could not be installed.
///
/// # Safety
/// `handler` must be async-signal-safe, and pass on (with [`pass_on`]) the signals it does not
/// answer.
#[cfg(all(unix, not(miri)))]
pub(crate) unsafe fn install(signal: libc::c_int, handler: Handler) -> Option<Disposition> {
    // SAFETY: a zeroed sigaction is a valid starting point, filled before use; the handler's
    // own contract is the caller's.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(signal, &action, &mut old) == 0).then_some(Disposition(old))
    }
}
