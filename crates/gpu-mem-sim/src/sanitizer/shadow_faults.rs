//! The faults of memcheck's shadow (`shadow_memory`): a shadowed program's access that reads a
//! shadow page nothing was granted in yet, and one whose address lies outside the address space.
//!
//! Contract:
//! * a SIGSEGV at an address of the shadow's reservation maps that page, filled with 0xff, and
//!   the access goes on: its test finds the byte poisoned and asks the simulator (refused, or
//!   granted);
//! * a SIGSEGV in the code of a shadowed program ([`ShadowedProgram`]) that is not the shadow's
//!   is a shadow test of an address outside the user half of the address space (its shadow is
//!   not an address either): the thread is sent to the program's `gm_sim_outside_address_space`
//!   with the address tested, as a call from the test, and the access is refused there as
//!   memcheck refuses any other;
//! * every other fault goes to the handler that was installed before (or ends the process as
//!   it would have without this one).

/// A loaded shadowed program's code, where a fault is one of its shadow tests; dropped when the
/// program is unloaded.
pub(crate) struct ShadowedProgram {
    slot: Option<usize>,
}

/// How many shadowed programs can be loaded at once with their faults answered (a program past
/// that many is still checked; a pointer outside the address space then ends the process).
const PROGRAMS: usize = 256;

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
mod on_linux {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Each slot: `[start, end)` of a program's loaded memory and its landing function (0 when
    /// free). Read by the signal handler, hence atomics and no lock.
    static LOADED: [[AtomicUsize; 3]; PROGRAMS] =
        [const { [const { AtomicUsize::new(0) }; 3] }; PROGRAMS];
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    /// The shadow's reservation, `[OFFSET, END)`, and the byte its pages are filled with.
    static OFFSET: AtomicUsize = AtomicUsize::new(0);
    static END: AtomicUsize = AtomicUsize::new(0);
    static POISON: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0xff);
    /// The handler installed before this one.
    static PREVIOUS: std::sync::OnceLock<crate::signals::Disposition> = std::sync::OnceLock::new();

    impl ShadowedProgram {
        /// Records the program loaded at `[start, end)`, whose `landing` is its
        /// `gm_sim_outside_address_space`.
        pub(crate) fn new(start: usize, end: usize, landing: usize) -> ShadowedProgram {
            for (i, slot) in LOADED.iter().enumerate() {
                if slot[2]
                    .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    slot[0].store(start, Ordering::Relaxed);
                    slot[1].store(end, Ordering::Relaxed);
                    slot[2].store(landing, Ordering::Release);
                    return ShadowedProgram { slot: Some(i) };
                }
            }
            ShadowedProgram { slot: None }
        }
    }

    impl Drop for ShadowedProgram {
        fn drop(&mut self) {
            if let Some(i) = self.slot {
                LOADED[i][2].store(0, Ordering::Release);
            }
        }
    }

    /// The landing function of the shadowed program whose memory holds `pc`.
    fn landing_at(pc: usize) -> Option<usize> {
        LOADED.iter().find_map(|slot| {
            let landing = slot[2].load(Ordering::Acquire);
            (landing != 0
                && landing != usize::MAX
                && (slot[0].load(Ordering::Relaxed)..slot[1].load(Ordering::Relaxed)).contains(&pc))
            .then_some(landing)
        })
    }

    /// Installs the handler for the shadow reserved at `shadow` (byte `(a >> 3) + shadow.start`
    /// shadows `a`), whose pages are filled with `poison` when mapped.
    pub(crate) fn install(page: usize, shadow: std::ops::Range<usize>, poison: u8) {
        PAGE.store(page, Ordering::Relaxed);
        OFFSET.store(shadow.start, Ordering::Relaxed);
        END.store(shadow.end, Ordering::Relaxed);
        POISON.store(poison, Ordering::Relaxed);
        // SAFETY: the handler makes system calls (`mmap`, `mremap`), reads the faulting code
        // and edits the interrupted context, or passes the signal on.
        unsafe { crate::signals::install(libc::SIGSEGV, on_fault, &PREVIOUS) };
    }

    /// Puts `len` bytes of pages filled with 0xff at `at` (in the reservation), replacing what
    /// was there in one step: a reader sees the old page or the new one, never one being
    /// filled. Async-signal-safe (system calls only).
    pub(crate) fn map_poisoned(at: usize, len: usize) -> bool {
        // SAFETY: a new private anonymous mapping, filled, then moved over pages of the
        // reservation (`MREMAP_FIXED` replaces them), which only checked programs read.
        unsafe {
            let fresh = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if fresh == libc::MAP_FAILED {
                return false;
            }
            std::ptr::write_bytes(fresh.cast::<u8>(), POISON.load(Ordering::Relaxed), len);
            let moved = libc::mremap(
                fresh,
                len,
                len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                at as *mut libc::c_void,
            );
            if moved == libc::MAP_FAILED {
                libc::munmap(fresh, len);
                return false;
            }
            true
        }
    }

    /// `gregs` index of each x86-64 register number (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi,
    /// r8..r15).
    const GREGS: [libc::c_int; 16] = [
        libc::REG_RAX,
        libc::REG_RCX,
        libc::REG_RDX,
        libc::REG_RBX,
        libc::REG_RSP,
        libc::REG_RBP,
        libc::REG_RSI,
        libc::REG_RDI,
        libc::REG_R8,
        libc::REG_R9,
        libc::REG_R10,
        libc::REG_R11,
        libc::REG_R12,
        libc::REG_R13,
        libc::REG_R14,
        libc::REG_R15,
    ];

    /// Sends the interrupted thread to `landing(address)`, as a call from `pc`.
    ///
    /// # Safety
    /// `context` is the `ucontext_t` of a SIGSEGV handler, for a thread running a shadowed
    /// program's code at its `pc`.
    unsafe fn redirect(context: *mut libc::c_void, landing: usize) {
        // SAFETY: per the contract, a valid context of the interrupted thread.
        let gregs = unsafe { &mut (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
        let at = |r: libc::c_int| usize::try_from(r).unwrap_or(0);
        let pc = gregs[at(libc::REG_RIP)] as usize;
        // The test's operand: its shadow byte's address without the offset, the tested
        // address shifted right by 3. (The code is mapped: it is running.)
        // SAFETY: reading up to 16 bytes of the program's code at `pc`.
        let code = unsafe { std::slice::from_raw_parts(pc as *const u8, 16) };
        let tested = super::shadow_operand(code)
            .map(|operand| {
                let base = operand.base.map_or(0, |r| gregs[at(GREGS[r])] as usize);
                let index = operand
                    .index
                    .map_or(0, |(r, scale)| (gregs[at(GREGS[r])] as usize) << scale);
                base.wrapping_add(index)
                    .wrapping_add(operand.displacement as usize)
                    .wrapping_sub(OFFSET.load(Ordering::Relaxed))
                    << 3
            })
            .unwrap_or(0);
        // Below the red zone, aligned as at a function's entry, the return address `pc`.
        let sp = ((gregs[at(libc::REG_RSP)] as usize - 256) & !15) - 8;
        // SAFETY: the thread's own stack, below everything its frames use (and their red zone).
        unsafe { (sp as *mut usize).write(pc) };
        gregs[at(libc::REG_RSP)] = sp as i64;
        gregs[at(libc::REG_RDI)] = tested as i64;
        gregs[at(libc::REG_RIP)] = landing as i64;
    }

    extern "C" fn on_fault(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
        let address = unsafe { (*info).si_addr() } as usize;
        if (OFFSET.load(Ordering::Relaxed)..END.load(Ordering::Relaxed)).contains(&address) {
            // A checked program read a shadow page nothing was granted in yet: all 0xff, so
            // the access asks (and is refused, or granted).
            let page = PAGE.load(Ordering::Relaxed);
            if map_poisoned(address - address % page, page) {
                return;
            }
        }
        // SAFETY: reading the interrupted thread's program counter from its context.
        let pc = unsafe {
            (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs
                [usize::try_from(libc::REG_RIP).unwrap_or(0)]
        } as usize;
        if let Some(landing) = landing_at(pc) {
            // SAFETY: a SIGSEGV context of a thread in a shadowed program's code.
            unsafe { redirect(context, landing) };
            return;
        }
        // SAFETY: in the handler, with its arguments; the previous disposition is what
        // `sigaction` returned when this handler was installed.
        unsafe { crate::signals::pass_on(PREVIOUS.get().copied(), signal, info, context) };
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
pub(crate) use on_linux::{install, map_poisoned};

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri))))]
impl ShadowedProgram {
    pub(crate) fn new(_: usize, _: usize, _: usize) -> ShadowedProgram {
        ShadowedProgram { slot: None }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri))))]
pub(crate) fn map_poisoned(_: usize, _: usize) -> bool {
    false
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri))))]
pub(crate) fn install(_: usize, _: std::ops::Range<usize>, _: u8) {}

/// The memory operand of a shadow test: `displacement(base, index, 1 << scale)`, registers by
/// their x86-64 numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    pub(crate) base: Option<usize>,
    pub(crate) index: Option<(usize, u32)>,
    pub(crate) displacement: i32,
}

/// The memory operand of the instruction `code` starts with, for the forms GCC's shadow tests
/// take (a byte or word loaded, compared or tested: `movzbl`, `cmpb $0`, `cmpw $0`, ...), with
/// any prefixes; `None` for anything else.
pub(crate) fn shadow_operand(code: &[u8]) -> Option<Operand> {
    let mut at = 0;
    while matches!(
        code.get(at)?,
        0x66 | 0x67 | 0xf2 | 0xf3 | 0x2e | 0x3e | 0x26 | 0x36
    ) {
        at += 1;
    }
    let rex = match code.get(at)? {
        &byte @ 0x40..=0x4f => {
            at += 1;
            byte
        }
        _ => 0,
    };
    match code.get(at)? {
        0x0f => {
            // movzx / movsx of a byte or word.
            if !matches!(code.get(at + 1)?, 0xb6 | 0xb7 | 0xbe | 0xbf) {
                return None;
            }
            at += 2;
        }
        // cmp / test / mov of a byte or word in memory.
        0x80 | 0x81 | 0x83 | 0x38 | 0x39 | 0x3a | 0x3b | 0x84 | 0x85 | 0x8a | 0x8b | 0xf6 => {
            at += 1;
        }
        _ => return None,
    }
    let modrm = *code.get(at)?;
    at += 1;
    let (mode, rm) = (modrm >> 6, modrm & 7);
    if mode == 3 {
        return None;
    }
    let extend = |bit: u8| usize::from((rex >> bit) & 1) << 3;
    let (base, index) = if rm == 4 {
        let sib = *code.get(at)?;
        at += 1;
        let index = usize::from((sib >> 3) & 7) | extend(1);
        let base = usize::from(sib & 7) | extend(0);
        let index = (index != 4).then_some((index, u32::from(sib >> 6)));
        // (No base: a 32-bit displacement alone.)
        let base = (!(mode == 0 && sib & 7 == 5)).then_some(base);
        (base, index)
    } else if mode == 0 && rm == 5 {
        // RIP-relative: not a shadow test.
        return None;
    } else {
        (Some(usize::from(rm) | extend(0)), None)
    };
    let displacement = match (mode, base) {
        (1, _) => i32::from(*code.get(at)? as i8),
        (2, _) | (0, None) => i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?),
        _ => 0,
    };
    Some(Operand {
        base,
        index,
        displacement,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_shadow_tests_name_the_register_holding_the_shifted_address() {
        // movzbl 0x7fff8000(%rax), %edx
        assert_eq!(
            shadow_operand(&[0x0f, 0xb6, 0x90, 0x00, 0x80, 0xff, 0x7f]),
            Some(Operand {
                base: Some(0),
                index: None,
                displacement: 0x7fff_8000
            })
        );
        // cmpb $0x0, 0x7fff8000(%r12)
        assert_eq!(
            shadow_operand(&[0x41, 0x80, 0xbc, 0x24, 0x00, 0x80, 0xff, 0x7f, 0x00]),
            Some(Operand {
                base: Some(12),
                index: None,
                displacement: 0x7fff_8000
            })
        );
        // cmpw $0x0, 0x7fff8000(%rdx)
        assert_eq!(
            shadow_operand(&[0x66, 0x83, 0xba, 0x00, 0x80, 0xff, 0x7f, 0x00]),
            Some(Operand {
                base: Some(2),
                index: None,
                displacement: 0x7fff_8000
            })
        );
        // movzbl 0x7fff8000(%rax,%rcx,1), %edx
        assert_eq!(
            shadow_operand(&[0x0f, 0xb6, 0x94, 0x08, 0x00, 0x80, 0xff, 0x7f]),
            Some(Operand {
                base: Some(0),
                index: Some((1, 0)),
                displacement: 0x7fff_8000
            })
        );
    }

    #[test]
    fn other_instructions_are_not_taken_for_shadow_tests() {
        // ret; a register-to-register move; a RIP-relative load; too short.
        assert_eq!(shadow_operand(&[0xc3]), None);
        assert_eq!(shadow_operand(&[0x48, 0x89, 0xc3]), None);
        assert_eq!(shadow_operand(&[0x0f, 0xb6, 0x05, 0, 0, 0, 0]), None);
        assert_eq!(shadow_operand(&[0x0f, 0xb6]), None);
    }
}
