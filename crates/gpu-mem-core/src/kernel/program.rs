//! [`Kernel`]: a kernel's code in each backend's form.

use crate::kernel::ThreadCtx;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The simulator's form of a kernel: run once per simulated thread.
pub type SimKernelFn = dyn Fn(&ThreadCtx<'_>) + Send + Sync;

/// Portable GPU source: compiled with the `gpu_mem.h` prelude ([`crate::KERNEL_PRELUDE`]) by
/// NVRTC (CUDA) or hiprtc (ROC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// The source text (without the prelude, which the backend adds).
    pub code: String,
    /// The `extern "C" __global__` entry point.
    pub entry: String,
}

/// A kernel: a name, and its code for the backends that can run it.
#[derive(Clone)]
pub struct Kernel {
    id: u64,
    name: String,
    sim: Option<Arc<SimKernelFn>>,
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
    /// A kernel with no code yet; add forms with [`Kernel::with_sim`] and
    /// [`Kernel::with_source`].
    pub fn new(name: impl Into<String>) -> Kernel {
        Kernel {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            sim: None,
            source: None,
        }
    }

    /// A simulator kernel from a closure run once per thread.
    pub fn sim(
        name: impl Into<String>,
        body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Kernel {
        Kernel::new(name).with_sim(body)
    }

    /// Adds the simulator form.
    pub fn with_sim(mut self, body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static) -> Kernel {
        self.sim = Some(Arc::new(body));
        self
    }

    /// Adds the portable-source form (`entry` is the `extern "C"` kernel name).
    pub fn with_source(mut self, code: impl Into<String>, entry: impl Into<String>) -> Kernel {
        self.source = Some(Arc::new(KernelSource {
            code: code.into(),
            entry: entry.into(),
        }));
        self
    }

    /// A process-unique id, for backends' compiled-module caches.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The simulator form, if any.
    pub fn sim_body(&self) -> Option<&Arc<SimKernelFn>> {
        self.sim.as_ref()
    }

    /// The portable source, if any.
    pub fn source(&self) -> Option<&KernelSource> {
        self.source.as_deref()
    }
}
