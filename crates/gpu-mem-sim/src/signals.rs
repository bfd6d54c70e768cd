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

/// Installs `handler` for `signal` (on the alternate stack where the thread has one), having
/// first recorded in `previous` the disposition it replaces, for [`pass_on`]. Where `handler` is
/// installed already, or `sigaction` fails, nothing changes (faults then go where they went).
///
/// The order matters: a fault on another thread may reach `handler` the moment it is
/// installed, and must find where to pass on what is not its own. `previous` is read with no
/// lock: a handler that took one (`try_lock`) found it held by the same handler on another
/// thread whenever two threads faulted at once (shadow pages that two blocks' threads read
/// first), passed the fault to nothing, restored the default and ended the process. One
/// install at a time, so that two of ours installed at once both stay in the chain.
///
/// # Safety
/// `handler` must be async-signal-safe, and pass on (with [`pass_on`]) the signals it does not
/// answer, reading `previous` without blocking.
#[cfg(all(unix, not(miri)))]
pub(crate) unsafe fn install(
    signal: libc::c_int,
    handler: Handler,
    previous: &std::sync::OnceLock<Disposition>,
) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // SAFETY: a zeroed sigaction is a valid starting point, filled before use; the handler's
    // own contract is the caller's.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction == handler as *const () as usize
        {
            return;
        }
        if previous.set(Disposition(old)).is_err() {
            // Installed once and replaced since: what replaced it chains to it, or not.
            return;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}
