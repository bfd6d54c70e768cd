//! [`Kernel`]: a kernel's code: an entry point of a CUDA C++ [`Module`] for every backend, and
//! optionally a Rust closure for the simulator.
//!
//! Depends on `module` only, never the other way round: a kernel's source form holds its
//! [`Module`], so [`Module::kernel`], which makes a kernel of a module, is written here.

use super::module::Module;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The simulator's closure form of a kernel, which the core carries without interpreting it
/// (the simulator crate's `SimKernel` trait makes and reads it).
pub type SimForm = Arc<dyn Any + Send + Sync>;

/// A kernel's source form: an entry point of a [`Module`] (CUDA C++, compiled with the
/// `gpu_mem.h` prelude, [`crate::KERNEL_PRELUDE`], by NVRTC (CUDA), hiprtc (ROC) and the host
/// C++ compiler (the simulator)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// The module: the source text (without the prelude, which the backend adds) and the
    /// template instantiations it is compiled with.
    pub module: Module,
    /// The entry point: a `__global__` function's name as the source spells it, or a name
    /// expression of a template's instantiation (`reduce<float, 256>`).
    pub entry: String,
}

impl KernelSource {
    /// The source text.
    pub fn code(&self) -> &str {
        self.module.code()
    }
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

    /// A kernel from CUDA C++ source: `entry` is a `__global__` function's name as the source
    /// spells it (`extern "C"` or not, qualified by its namespace), or a template kernel's
    /// instantiation (`"reduce<float, 256>"`, which the module is then compiled with). The
    /// kernel's name is the entry's. Kernels made from the same source (and instantiations)
    /// share one [`Module`] and its variables.
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

    /// Adds the source form (`entry` as for [`Kernel::from_source`]).
    pub fn with_source(mut self, code: impl Into<String>, entry: impl Into<String>) -> Kernel {
        let entry = entry.into().trim().to_string();
        let mut module = Module::from_source(code);
        if entry.contains('<') {
            module = module.with_name_expressions([entry.clone()]);
        }
        self.source = Some(Arc::new(KernelSource { module, entry }));
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

    /// The simulator's closure form, shared: what a launch keeps until the kernel has run.
    pub fn sim_form_shared(&self) -> Option<SimForm> {
        self.sim.clone()
    }

    /// The source form, if any.
    pub fn source(&self) -> Option<&KernelSource> {
        self.source.as_deref()
    }

    /// The module of its source form, if it has one.
    pub fn module(&self) -> Option<&Module> {
        self.source.as_deref().map(|s| &s.module)
    }
}

impl Module {
    /// The kernel `name` of this module: a `__global__` function's name as the source spells it
    /// (qualified by its namespaces), or one of the module's name expressions. A name the module
    /// lacks is an [`Error::InvalidLaunch`](crate::Error::InvalidLaunch) when it is launched.
    pub fn kernel(&self, name: impl Into<String>) -> Kernel {
        let entry = name.into().trim().to_string();
        let mut kernel = Kernel::new(entry.clone());
        kernel.source = Some(Arc::new(KernelSource {
            module: self.clone(),
            entry,
        }));
        kernel
    }
}
