//! Backend-free core of gpu-mem.
//!
//! This crate has no FFI. It holds the element types, the layout math, the one error enum, the
//! object-safe [`Backend`] trait, and the user-facing types written once against that trait.

pub mod backend;
pub mod element;
pub mod error;
pub mod layout;

pub use backend::Backend;
pub use element::Element;
pub use error::{BackendKind, Error, Result};
