//! The simulator as a sanitizer: what it checks of compiled kernels beyond `gm_array` indices.
//!
//! A device whose [`crate::Checks`] ask for `memcheck`, `racecheck` or `initcheck` builds its
//! kernels *checked* (`source`'s `Threads::Checked`): the host compiler instruments every load,
//! store and atomic of the kernel, with no sanitizer runtime linked, and the prelude's
//! `gm_sim/checked.h` supplies the functions it calls, which ask the executor
//! (`SimThread::check_access`) before the access happens. Racecheck and initcheck watch every
//! access: each calls a hook (ThreadSanitizer's instrumentation, `-fsanitize=thread`). memcheck
//! alone needs only a yes or no: each access tests a shadow byte inline and calls a hook only
//! where the byte is not zero (AddressSanitizer's kernel mode, `-fsanitize=kernel-address`, over
//! [`shadow_memory`], whose faults [`shadow_faults`] answers), and the executor zeroes the
//! shadow over what it grants; a kernel with barriers then runs as regions, as unchecked
//! (`Threads::ShadowedRegions`), its block's per-thread variables let through for the block's
//! life, unless a thread's own address could reach another thread
//! (`source::regions::leaks_own_address`).
//!
//! Contract:
//! * memcheck ([`memcheck`]): a thread may touch the live allocations of its device and of
//!   peers with access enabled (device, managed and mapped host memory, module variables:
//!   [`MemoryMap`]), its block's static `__shared__` arrays (each array's own bytes), the
//!   launch's dynamic shared memory, its own stack below the frame that started it (a block
//!   run as regions: the block's stack and slots, which only a thread's own address, kept off
//!   regions, could point another thread at), and its program's own data; anything else is refused before it happens, as a `KernelFault` in
//!   compute-sanitizer's words (`Invalid __global__ write of size 4`) with the address, the
//!   nearest allocation or shared array and how far outside it the access lies, and the
//!   kernel's source line; the thread ends there, as after a trap, and nothing is read or
//!   written; so is an access the compiler took to be aligned that does not lie on a multiple
//!   of its size (of 8 for 16 bytes), which a GPU refuses, and an index below the start of a C
//!   array of known length (past its end too in programs clang built), refused at the index
//!   before any access ([`array_index`]);
//! * racecheck ([`racecheck`], [`global_races`]): two threads touching the same byte, at least
//!   one writing, with nothing ordering them, fail the launch naming both accesses: in shared
//!   memory threads of a block with no barrier between them, in global memory threads of any
//!   blocks with no barrier, grid barrier or atomic between them; racecheck builds kernels
//!   checked, so memcheck's checks come with it;
//! * initcheck ([`initcheck`]): a read or atomic of a device allocation's byte that no copy,
//!   fill or kernel wrote since it was allocated, or of a byte of shared memory no thread of
//!   the block wrote, is refused, as memcheck refuses (memcheck's checks come with it too);
//! * under racecheck and initcheck each access costs a call of a hook in the program, which
//!   looks in the ranges granted to the OS thread's current block lately ([`memcheck::Allowed`],
//!   read by the program itself) and asks the executor only outside them; with racecheck every
//!   atomic and every access of shared and global memory is asked for and recorded, except
//!   reads of an allocation no thread of the launch wrote yet, a thread's repeats of its own
//!   last write ([`global_races`]), and reads of a shared word that two threads read whole in
//!   the reading thread's phase with no write of that phase, which the program lets through
//!   itself by a tag per word ([`Allowed::share_reads`]; exact while no warp barrier or
//!   collective ordered lanes of the block, and off from the first one);
//! * under memcheck alone (built by GCC, the shadow reserved) an access costs a shadow byte's
//!   test; what the executor grants a launch (allocations, the program's data, argument
//!   buffers, static shared arrays) is let through in the shadow until the launch ends
//!   ([`ShadowGrants`]), what lives as long as a block (its dynamic shared memory; the stack
//!   and record its threads share where they run as plain calls) until the block ends
//!   ([`BlockGrants`]); the stacks of threads that wait ask through the hook's ranges as above.
//!   The shadow is one for the process: a launch may pass where another launch running beside
//!   it was granted (another device's allocation, another worker's static shared arrays), which
//!   the hook-per-access build would refuse.

mod array_index;
mod global_races;
mod initcheck;
mod layout;
mod memcheck;
mod racecheck;
mod shadow_faults;
mod shadow_memory;
mod symbolize;

pub(crate) use array_index::IndexRefusal;
pub(crate) use global_races::{Across, GlobalRaces};
pub(crate) use initcheck::{SharedWritten, Written};
pub(crate) use layout::{ProgramLayout, ThreadLocal};
pub(crate) use memcheck::{
    Allocation, Allowed, Frame, Granted, MemoryMap, Violation, check, misaligned_access,
    outside_object_access, unwritten_shared,
};
pub(crate) use racecheck::{Hazard, Shadow, Stamp, synchronize};
pub(crate) use shadow_faults::ShadowedProgram;
#[cfg(test)]
pub(crate) use shadow_memory::OFFSET as SHADOW_OFFSET;
pub(crate) use shadow_memory::{BlockGrants, ShadowGrants, shadow as memory_shadow};
pub(crate) use symbolize::{in_kernel, source_line};

/// What an access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// An atomic that reads (a load, an exchange, an update).
    Atomic,
    /// An atomic that only writes (a store).
    AtomicStore,
}

impl Access {
    /// Whether it is atomic (never a race with another atomic).
    pub(crate) fn is_atomic(self) -> bool {
        matches!(self, Access::Atomic | Access::AtomicStore)
    }

    /// Whether it reads what is there (initcheck refuses it on bytes never written).
    pub(crate) fn reads(self) -> bool {
        matches!(self, Access::Read | Access::Atomic)
    }
}

/// What the program itself found wrong with an access before asking (`gm_sim/checked.h`):
/// either is refused wherever the access lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flagged {
    /// Nothing: the access is judged by where it lies.
    No,
    /// It does not lie on a multiple of its size (an alignment check).
    Misaligned,
    /// It reaches past the end of the object the compiler sees it in (an object-size check):
    /// a local array indexed past its end, which would otherwise land in the frames above.
    OutsideObject,
}
