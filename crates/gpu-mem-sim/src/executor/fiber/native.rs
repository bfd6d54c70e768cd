//! x86-64 fibers for the System V ABI (Linux, macOS, the BSDs): a switch saves the six
//! callee-saved general registers (rbx, rbp, r12-r15) on the current stack, swaps stack pointers
//! and restores the other fiber's registers. System V has no callee-saved vector registers, and
//! the MXCSR and x87 control words are never changed by simulated threads, so they are not
//! switched. (Windows x64 also saves rsi, rdi and xmm6-xmm15: it uses the coroutine fibers.)

use super::{Fiber, stack};
use std::cell::Cell;

/// A fiber's saved stack pointer and its stack.
pub(super) struct Context {
    /// Where the callee-saved registers of the suspended fiber lie (see [`switch_stacks`]).
    sp: Cell<*mut u8>,
    stack: Option<stack::ColoredStack>,
}

/// The native context of `fiber` (see `super::own_context`).
#[inline(always)]
fn own(fiber: &Fiber) -> &Context {
    super::imp::native(&fiber.context)
}

thread_local! {
    /// The OS thread's own stack pointer while it runs fibers (inside `enter`).
    static MAIN: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
}

impl Context {
    pub(super) fn new(stack: stack::ColoredStack) -> Context {
        Context {
            sp: Cell::new(std::ptr::null_mut()),
            stack: Some(stack),
        }
    }

    /// Lays out the stack so that the first switch to it starts `fiber_main(fiber)`.
    ///
    /// # Safety
    /// The fiber is not running and nothing on its stack is in use.
    pub(super) unsafe fn prepare(&self, fiber: *const Fiber) {
        let Some(stack) = &self.stack else {
            return;
        };
        use corosensei::stack::Stack;
        // SAFETY: the stack is this fiber's own, mapped and not in use (the caller's contract).
        let sp = unsafe { initial_frame(stack.base().get(), entry as *const (), fiber.cast()) };
        self.sp.set(sp);
    }

    /// # Safety
    /// As [`Context::prepare`].
    pub(super) unsafe fn reset(&self, fiber: *const Fiber) {
        // SAFETY: the caller's contract.
        unsafe { self.prepare(fiber) };
    }

    pub(super) fn take_stack(&mut self) -> Option<stack::ColoredStack> {
        self.stack.take()
    }
}

/// Prefetches the first cache lines of the suspended stack (the saved registers, then the
/// frames the fiber returns into).
#[inline(always)]
pub(super) fn prefetch(context: &Context) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    let sp = context.sp.get();
    for line in 0..4 {
        // SAFETY: SSE is part of x86-64; a prefetch never faults, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(sp.wrapping_add(line * 64).cast::<i8>().cast_const())
        };
    }
}

/// # Safety
/// See `super::enter`.
pub(super) unsafe fn enter(to: &Fiber) {
    let main = MAIN.with(Cell::as_ptr);
    // SAFETY: `to.sp` holds a frame laid out by `prepare` or saved by `switch_stacks`; the
    // current stack's pointer is saved in `MAIN`, where `to_main` finds it.
    unsafe { switch_stacks(main, own(to).sp.get()) };
}

/// # Safety
/// See `super::switch`.
#[inline]
pub(super) unsafe fn switch(from: &Fiber, to: &Fiber) {
    // SAFETY: as in `enter`; `from` is the running fiber, whose pointer is saved for whoever
    // switches back to it.
    unsafe { switch_stacks(own(from).sp.as_ptr(), own(to).sp.get()) };
}

/// # Safety
/// See `super::to_main`.
pub(super) unsafe fn to_main(from: &Fiber) {
    let main = MAIN.get();
    // SAFETY: `enter` saved the OS thread's stack pointer in `MAIN` and waits there.
    unsafe { switch_stacks(own(from).sp.as_ptr(), main) };
}

/// Writes, below `top` (a fresh stack's starting point), the frame whose first switch to it
/// calls `entry(arg)` (an `extern "C" fn(*const T) -> !`) through [`trampoline`]; returns the
/// stack pointer to switch to.
///
/// # Safety
/// The 64 bytes below `top` (rounded down to 16) are mapped, writable and not in use.
pub(super) unsafe fn initial_frame(top: usize, entry: *const (), arg: *const ()) -> *mut u8 {
    let top = top & !15;
    // Popped by `switch_stacks`: r15, r14, r13 (the argument), r12 (the entry), rbx, rbp (0:
    // frame-pointer walks stop here), then the return address (the trampoline), and a zero
    // word that keeps the trampoline's frame 16-byte aligned.
    let words: [usize; 8] = [
        0,
        0,
        arg as usize,
        entry as usize,
        0,
        0,
        trampoline as *const () as usize,
        0,
    ];
    let frame = (top - std::mem::size_of_val(&words)) as *mut usize;
    // SAFETY: `frame..top` lies in the stack (the caller's contract), aligned to 16.
    unsafe { frame.cast::<[usize; 8]>().write(words) };
    frame.cast()
}

/// Pushes rbp, rbx, r12-r15, stores the stack pointer at `save`, makes `load` the stack pointer
/// and pops the registers saved there; the `ret` continues where that stack switched away (or at
/// the trampoline, for a fresh fiber).
#[unsafe(naked)]
pub(super) unsafe extern "C" fn switch_stacks(save: *mut *mut u8, load: *mut u8) {
    core::arch::naked_asm!(
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "mov [rdi], rsp",
        "mov rsp, rsi",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
    )
}

/// The first code of a fresh fiber: calls `r12(r13)` on an aligned stack. The entry never
/// returns; the return address it sees lies in this function, which has no unwind information
/// (naked functions get none) and a zero frame pointer, so unwinders and debuggers stop here.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() {
    core::arch::naked_asm!("and rsp, -16", "mov rdi, r13", "call r12", "ud2",)
}

/// The root frame of every fiber: nothing may unwind past it.
extern "C" fn entry(fiber: *const Fiber) -> ! {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::fiber_main(fiber)));
    super::abort("a panic reached a simulator fiber's root")
}
