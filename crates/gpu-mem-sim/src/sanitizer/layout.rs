//! Where a loaded checked program keeps its own memory: its loaded segments (code, constants,
//! `__device__` and `__constant__` variables) and its thread-locals (the static `__shared__`
//! arrays, one instance per OS thread), read from the library file and its load address.

use gpu_mem_core::kernel::compiled::unscoped_name;

/// A thread-local of the program: its offset in the thread-local block, size and symbol.
#[derive(Debug, Clone)]
pub(crate) struct ThreadLocal {
    pub(crate) offset: usize,
    pub(crate) size: usize,
    pub(crate) name: String,
    /// The prelude's own or the C++ runtime's (which its code reaches on the kernel's behalf),
    /// not one of the kernel's shared arrays.
    pub(crate) prelude: bool,
}

impl ThreadLocal {
    /// The shared array's name as the kernel spells it, without scopes (the stackless and
    /// regions rewrites rename a kernel's `__shared__` arrays `gm_sim_shared_<name>`).
    pub(crate) fn array_name(&self) -> String {
        let name = unscoped_name(&self.name);
        match name.strip_prefix(crate::abi::SHARED_ALIAS) {
            Some(array) => array.to_string(),
            None => name,
        }
    }
}

/// A checked program's memory, as loaded.
pub(crate) struct ProgramLayout {
    /// Whether its accesses test the shadow first (`shadow_memory`): what is granted to its
    /// threads is let through there too.
    pub(crate) shadowed: bool,
    /// A shadowed program's code, where a fault is one of its shadow tests (`shadow_faults`).
    pub(crate) _faults: Option<super::ShadowedProgram>,
    /// `[start, end)` of each loaded segment.
    pub(crate) segments: Vec<(usize, usize)>,
    /// The kernels' static `__shared__` arrays (and the prelude's thread-locals, which its code
    /// reaches on the kernel's behalf).
    pub(crate) thread_locals: Vec<ThreadLocal>,
    /// The address of the prelude's anchor thread-local on the calling OS thread, and its
    /// offset in the block: where this OS thread's block starts.
    pub(crate) tls_anchor: (unsafe extern "C" fn() -> *mut u8, usize),
    /// The library file, for source lines.
    pub(crate) path: std::path::PathBuf,
    /// Where the library is loaded.
    pub(crate) base: usize,
    /// Base names of the files the build compiled besides the kernel's (the prelude's headers
    /// and the generated unit): a source line in them is the prelude's code running on the
    /// kernel's behalf, and the kernel's own line is the one it was inlined into.
    pub(crate) prelude_files: Vec<&'static str>,
}

impl std::fmt::Debug for ProgramLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramLayout")
            .field("segments", &self.segments)
            .field("thread_locals", &self.thread_locals.len())
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ProgramLayout {
    /// Start of the calling OS thread's thread-local block of the program.
    pub(crate) fn tls_base(&self) -> usize {
        let (anchor, offset) = self.tls_anchor;
        // SAFETY: the prelude's `gm_sim_tls_anchor` of a loaded checked program: it returns the
        // address of a thread-local and touches nothing else.
        let at = unsafe { anchor() } as usize;
        at.wrapping_sub(offset)
    }

    /// Whether `address..address + size` lies in one of the program's loaded segments.
    pub(crate) fn in_segments(&self, address: usize, size: usize) -> Option<(usize, usize)> {
        self.segments
            .iter()
            .copied()
            .find(|&(start, end)| address >= start && address.saturating_add(size) <= end)
    }
}
