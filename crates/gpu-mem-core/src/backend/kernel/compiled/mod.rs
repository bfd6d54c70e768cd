//! Reading compiled kernel code back in the source's terms: the symbol table of a compiled
//! module ([`symbols`]: a simulator library, an AMD GPU code object) and the names a compiler
//! gives what the source declares ([`source_name`], [`is_named`]: `_ZN2ns5innerE` is
//! `ns::inner`). Every backend finds kernels and variables in what its compiler produced by the
//! names the source spells, with these.

mod elf;
mod names;

pub use elf::{STT_FUNC, STT_OBJECT, STT_TLS, Symbol, symbols};
pub use names::{is_named, normalized, source_name, unscoped_name};
