//! The conformance cases, one module per area of Numba's memory-management API.

mod arrays;
mod assign;
mod collectives;
mod corpus;
mod cuda_source;
mod dlpack;
mod host_memory;
mod kernels;
mod records;
mod smart;
mod soundness;
pub mod source_kernels;
mod streams;
mod transfers;

use crate::Case;

/// Every case.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(arrays::cases());
    cases.extend(assign::cases());
    cases.extend(records::cases());
    cases.extend(transfers::cases());
    cases.extend(host_memory::cases());
    cases.extend(streams::cases());
    cases.extend(kernels::cases());
    cases.extend(source_kernels::cases());
    cases.extend(cuda_source::cases());
    cases.extend(corpus::cases());
    cases.extend(smart::cases());
    cases.extend(soundness::cases());
    cases.extend(dlpack::cases());
    cases.extend(collectives::cases());
    cases
}

/// Shorthand for the cases' registration lists.
#[macro_export]
macro_rules! cases {
    ($prefix:literal: $($name:ident),* $(,)?) => {
        $crate::cases![$prefix, $crate::Requires::Nothing; $($name),*]
    };
    ($prefix:literal, $requires:path; $($name:ident),* $(,)?) => {
        vec![$($crate::Case {
            name: concat!($prefix, "::", stringify!($name)),
            run: $name,
            requires: $requires,
        }),*]
    };
}
