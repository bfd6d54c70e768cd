//! [`Kernel`]: a kernel's code: portable source for every backend, and optionally a Rust
//! closure for the simulator.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The simulator's closure form of a kernel, which the core carries without interpreting it
/// (the simulator crate's `SimKernel` trait makes and reads it).
pub type SimForm = Arc<dyn Any + Send + Sync>;

/// Portable GPU source: compiled with the `gpu_mem.h` prelude ([`crate::KERNEL_PRELUDE`]) by
/// NVRTC (CUDA), hiprtc (ROC) and the host C++ compiler (the simulator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// The source text (without the prelude, which the backend adds).
    pub code: String,
    /// The `extern "C" __global__` entry point.
    pub entry: String,
}

/// A kernel: a name, and its code for the backends that can run it.
///
/// Portable source ([`Kernel::with_source`]) runs on every backend; the simulator's closure form
/// (`gpu_mem::prelude::SimKernel`) is for kernels written in Rust that only the simulator runs.
/// Where a kernel has both, the simulator runs the source.
#[derive(Clone)]
pub struct Kernel {
    id: u64,
    name: String,
    sim: Option<SimForm>,
    source: Option<Arc<KernelSource>>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("sim", &self.sim.is_some())
            .field("source", &self.source.as_ref().map(|s| &s.entry))
            .finish()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Kernel {
    /// A kernel with no code yet; add its source with [`Kernel::with_source`].
    pub fn new(name: impl Into<String>) -> Kernel {
        Kernel {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            sim: None,
            source: None,
        }
    }

    /// A kernel from portable source (`entry` is the `extern "C" __global__` function); the
    /// kernel's name is the entry's.
    pub fn from_source(code: impl Into<String>, entry: impl Into<String>) -> Kernel {
        let entry = entry.into();
        Kernel::new(entry.clone()).with_source(code, entry)
    }

    /// Adds the simulator's closure form (used by the simulator crate's `SimKernel` trait).
    pub fn with_sim_form(mut self, form: SimForm) -> Kernel {
        self.sim = Some(form);
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self
    }

    /// Adds the portable-source form (`entry` is the `extern "C"` kernel name).
    pub fn with_source(mut self, code: impl Into<String>, entry: impl Into<String>) -> Kernel {
        self.source = Some(Arc::new(KernelSource {
            code: code.into(),
            entry: entry.into(),
        }));
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self
    }

    /// A process-unique id, for backends' compiled-module caches: clones share it, and a kernel
    /// given other code ([`Kernel::with_source`], [`Kernel::with_sim_form`]) gets a new one, so
    /// that a clone given another source never runs the first one's compiled code.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The simulator's closure form, if any.
    pub fn sim_form(&self) -> Option<&(dyn Any + Send + Sync)> {
        self.sim.as_deref()
    }

    /// The portable source, if any.
    pub fn source(&self) -> Option<&KernelSource> {
        self.source.as_deref()
    }
}
