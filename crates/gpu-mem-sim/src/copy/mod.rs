//! Copies: moving bytes between simulated device memory and host memory as a GPU's movers do.
//!
//! `movers` is how bytes move (the CPU's `memmove` for pageable memory, the copy engine's
//! streaming stores for page-locked memory and device memory, split with helpers when large);
//! `assist` is the help a stream's waiting thread gives the copy it waits for; `ranges` copies
//! between device ranges and host bytes under the regions' locks.

mod assist;
mod movers;
mod ranges;

pub(crate) use assist::Assist;
pub(crate) use movers::{ASSISTED_MIN, Mover, STREAMING_MIN};
pub(crate) use ranges::{copy_ranges, fill_range, read_range, write_range};
