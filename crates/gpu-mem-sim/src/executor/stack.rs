//! Simulated threads' stacks: their size (`GPU_MEM_SIM_STACK_SIZE`, default 256 KiB), a pool of
//! idle stacks, and what happens when a thread overflows its stack.
//!
//! Every stack has a guard page below it, and Rust code and the compiled kernels (built with
//! `-fstack-clash-protection`) touch every page of a large frame in order, so an overflow always
//! faults in the guard page. A signal handler recognises that fault — the running thread's
//! guard page is recorded before each switch to it — and ends the process with a message that
//! names the kernel and the setting to raise, instead of a bare SIGSEGV. (Unwinding out of a
//! signal handler, or resuming the launch, cannot be done soundly.) Other faults go to the
//! handler that was installed before.

use corosensei::stack::{DefaultStack, Stack, StackPointer};
use gpu_mem_core::sync::lock;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Largest offset of a stack's starting point (see [`ColoredStack`]).
const MAX_COLOR: usize = 16 << 10;

/// A stack whose starting point is moved down by a per-stack offset ("color"). Stacks are
/// allocated at page-multiple distances, so without it the hot top of every simulated thread's
/// stack falls into the same cache sets and a block's threads evict each other at every
/// switch; spreading them over the cache's sets removes most of those misses.
pub(crate) struct ColoredStack {
    inner: DefaultStack,
    color: usize,
}

// SAFETY: `base` is the inner stack's base moved down by `color` (a multiple of 64, so still
// aligned to STACK_ALIGNMENT) and stays above `limit`, which is the inner stack's, guard page
// included; the memory between is the inner stack's own.
unsafe impl Stack for ColoredStack {
    fn base(&self) -> StackPointer {
        let base = self.inner.base().get() - self.color;
        StackPointer::new(base).unwrap_or(self.inner.base())
    }

    fn limit(&self) -> StackPointer {
        self.inner.limit()
    }

    #[cfg(windows)]
    fn teb_fields(&self) -> corosensei::stack::StackTebFields {
        self.inner.teb_fields()
    }

    #[cfg(windows)]
    fn update_teb_fields(&mut self, stack_limit: usize, guaranteed_stack_bytes: usize) {
        self.inner
            .update_teb_fields(stack_limit, guaranteed_stack_bytes)
    }
}

/// The next stack's color: 256 offsets 64 bytes apart, visited in a scattered order.
fn next_color() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    (k.wrapping_mul(37) % (MAX_COLOR / 64)) * 64
}

/// Default stack size of a simulated thread.
pub(crate) const DEFAULT_STACK_SIZE: usize = 256 << 10;
/// The variable that sets it.
pub(crate) const VARIABLE: &str = "GPU_MEM_SIM_STACK_SIZE";
/// How many idle stacks are kept for reuse.
const POOLED_STACKS: usize = 8192;

static STACKS: Mutex<Vec<ColoredStack>> = Mutex::new(Vec::new());

/// The configured stack size (read once per process).
pub(crate) fn stack_size() -> Result<usize, String> {
    static SIZE: OnceLock<Result<usize, String>> = OnceLock::new();
    SIZE.get_or_init(|| match std::env::var(VARIABLE) {
        Ok(value) if !value.trim().is_empty() => crate::config::parse_size(&value)
            .map_err(|e| format!("{VARIABLE}: {e}"))
            .and_then(|bytes| {
                usize::try_from(bytes)
                    .ok()
                    .filter(|b| (16 << 10..=1 << 30).contains(b))
                    .ok_or_else(|| format!("{VARIABLE}={value}: give 16KiB to 1GiB"))
            }),
        _ => Ok(DEFAULT_STACK_SIZE),
    })
    .clone()
}

/// A stack from the pool, or a new one.
pub(crate) fn take() -> Result<ColoredStack, String> {
    let size = stack_size()?;
    if let Some(stack) = lock(&STACKS).pop() {
        return Ok(stack);
    }
    install_handler();
    // The color comes out of the allocation, so `size` bytes stay usable.
    let inner = DefaultStack::new(size + MAX_COLOR)
        .map_err(|e| format!("cannot allocate a thread stack of {size} bytes: {e}"))?;
    Ok(ColoredStack {
        inner,
        color: next_color(),
    })
}

/// Gives a stack back to the pool.
pub(crate) fn give_back(stack: ColoredStack) {
    let mut pool = lock(&STACKS);
    if pool.len() < POOLED_STACKS {
        pool.push(stack);
    }
}

/// The lowest address of `stack`, which corosensei's `limit` counts from the start of its guard
/// page (the page at `[limit, limit + page)`).
pub(crate) fn limit(stack: &ColoredStack) -> usize {
    stack.limit().get()
}

thread_local! {
    /// The stack limit of the simulated thread last switched to on this OS thread: its guard
    /// page is `[limit, limit + page)`.
    static GUARD: Cell<usize> = const { Cell::new(0) };
    /// The running kernel's name (pointer, length), for the message.
    static KERNEL: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Records the kernel whose block this OS thread runs now.
pub(crate) fn running(kernel: &str) {
    KERNEL.set((kernel.as_ptr() as usize, kernel.len()));
    // Read once outside the signal handler, which then finds it initialised.
    page_size();
}

/// Records, before switching to a thread whose stack has `limit`, where its guard page is. (It
/// is not cleared afterwards: only code running on that stack can fault in its guard page.)
#[inline]
pub(crate) fn entering(limit: usize) {
    GUARD.set(limit);
}

static PAGE: OnceLock<usize> = OnceLock::new();

fn page_size() -> usize {
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page).unwrap_or(4096)
    })
}

#[cfg(all(unix, not(miri)))]
fn install_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (signal, previous) in [
            (libc::SIGSEGV, &PREVIOUS_SEGV),
            (libc::SIGBUS, &PREVIOUS_BUS),
        ] {
            // SAFETY: the handler only reads thread-locals with constant initialisers and
            // `previous` (without blocking), calls `write` and `abort` (both async-signal-safe)
            // or passes the signal on.
            unsafe { crate::signals::install(signal, on_fault, previous) };
        }
    });
}

#[cfg(not(all(unix, not(miri))))]
fn install_handler() {}

/// The handlers that were installed before ours (Rust's own stack-overflow handler, usually).
#[cfg(all(unix, not(miri)))]
static PREVIOUS_SEGV: OnceLock<crate::signals::Disposition> = OnceLock::new();
#[cfg(all(unix, not(miri)))]
static PREVIOUS_BUS: OnceLock<crate::signals::Disposition> = OnceLock::new();

#[cfg(all(unix, not(miri)))]
extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let address = unsafe { (*info).si_addr() } as usize;
    let start = GUARD.get();
    let end = start.saturating_add(PAGE.get().copied().unwrap_or(4096));
    if start != 0 && (start..end).contains(&address) {
        report_overflow();
    }
    let previous = if signal == libc::SIGBUS {
        &PREVIOUS_BUS
    } else {
        &PREVIOUS_SEGV
    };
    // (Recorded before this handler was installed: `signals::install`.)
    let old = previous.get().copied();
    // SAFETY: in the handler, with its arguments; `old` is what `sigaction` returned when it
    // was installed.
    unsafe { crate::signals::pass_on(old, signal, info, context) };
}

/// Writes the message and aborts (async-signal-safe: no allocation, no locks).
#[cfg(all(unix, not(miri)))]
fn report_overflow() -> ! {
    let write = |bytes: &[u8]| {
        // SAFETY: writing a valid buffer to stderr.
        unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
    };
    write(b"\ngpu-mem simulator: stack overflow in a simulated thread of kernel `");
    let (ptr, len) = KERNEL.get();
    if ptr != 0 {
        // SAFETY: `entering` recorded the name of the kernel whose launch is running on this
        // thread; it outlives the launch.
        write(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) });
    }
    write(b"`: each simulated thread has a stack of ");
    let mut digits = [0u8; 20];
    let mut n = stack_size().unwrap_or(DEFAULT_STACK_SIZE) >> 10;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    write(&digits[at..]);
    write(b" KiB (large local arrays need more): set GPU_MEM_SIM_STACK_SIZE, e.g. GPU_MEM_SIM_STACK_SIZE=4MiB\n");
    // SAFETY: abort is async-signal-safe and never returns.
    unsafe { libc::abort() }
}
