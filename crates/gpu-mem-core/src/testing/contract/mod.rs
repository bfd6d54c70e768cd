//! The raw-[`Backend`] contract, written once and run on every backend by its own tests.
//!
//! Each [`Check`] gets the backend's [`Contract`] and a factory of fresh backends, uses nothing
//! but the trait, and passes, is skipped with a reason, or names the rule that broke. The rules,
//! after CUDA's driver API as Numba uses it:
//!
//! * Devices are `0..device_count()`; any other ordinal is [`Error::NoSuchDevice`].
//! * Allocations are non-empty, 256-byte aligned and disjoint, and show in `mem_info`; one that
//!   does not fit is [`Error::OutOfMemory`] naming the sizes; freeing what is not a live
//!   allocation is an error, after which the backend works on.
//! * Copies and fills move exactly the bytes asked for, at any offset, zero bytes included;
//!   synchronous ones come after all work already on the device's streams (CUDA's legacy
//!   default stream).
//! * A stream runs its work in order; `stream_synchronize`, `synchronize`, `event_synchronize`
//!   and a `true` from `stream_query` or `event_query` mean that work is complete; an event never
//!   recorded is complete; `stream_wait_event` orders a stream after another's recorded work;
//!   only completed timed events have an elapsed time.
//! * Page-locked memory is 256-byte aligned, mapped when asked, and serves asynchronous copies;
//!   the device address of mapped or managed memory serves copies and fills as any other;
//!   registration follows `cuMemHostRegister`: one per range, none over memory locked already,
//!   undone only at its start.
//! * Optional capabilities (peer access, managed memory, IPC, stream-ordered pools) are handed
//!   out by their accessor ([`Backend::peer`], ...) exactly where the backend has them, and then
//!   work; nothing panics.
//! * Collectives, where handed out ([`Backend::collectives`]), name their engine, make one
//!   communicator per device, and sum and broadcast between the devices on their streams.
//! * Managed memory takes prefetches and advice (`cuMemPrefetchAsync`, `cuMemAdvise`) that
//!   change no byte, or refuses them as `NotSupportedByBackend`; bad ranges, locations, devices
//!   and streams are errors.
//!
//! Where backends legitimately differ, the [`Contract`] says what to expect ([`Expect`] per
//! feature, the device count, whether memory accounting is exact). Run the checks as
//! libtest-mimic trials from [`checks`], or as one `#[test]` each with
//! [`contract_tests!`](crate::contract_tests).

mod collectives;
mod devices;
mod extras;
mod host;
mod managed_hints;
mod memory;
mod streams;

use crate::backend::{Backend, DevicePtr};
use crate::error::{Error, Result};
use std::fmt::Debug;
use std::sync::Arc;

/// Makes a fresh backend for one check (each check starts from a backend no other check used).
pub type Factory<'a> = &'a dyn Fn() -> Result<Arc<dyn Backend>, String>;

/// A check's body: its outcome, or what broke.
type Body = fn(&Contract, Factory<'_>) -> Result<Outcome, String>;

/// What a check found when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every rule of the check held.
    Passed,
    /// The check could not run here, for the reason given: report it as skipped, never passed.
    Skipped(String),
}

/// What the backend under test does with one optional feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The feature works: its check asserts the capability's accessor answers `Some`, and
    /// exercises it.
    Works,
    /// The backend does not provide it: its check asserts the capability's accessor answers
    /// `None` (which the core reports as [`Error::NotSupportedByBackend`]).
    NotSupported,
    /// The backend provides it but it cannot be checked here, for the reason given (a stand-in
    /// driver without it, a test environment that forbids it): its check asserts the accessor
    /// answers `Some`, and is skipped.
    Skip(&'static str),
}

/// What the backend under test is expected to do where backends may legitimately differ.
///
/// [`Contract::new`] expects everything to work; a backend's tests then change the fields
/// where it differs, each difference with its reason in a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    /// How many devices the backend drives. Checks across devices skip below two.
    pub devices: usize,
    /// The capacity every device reports, where the test knows it.
    pub capacity: Option<u64>,
    /// Whether `mem_info().free` moves by exactly the bytes allocated and freed: true of a
    /// simulator or stand-in driver, not of a GPU (allocations round up to pages, and other
    /// processes share the device).
    pub exact_accounting: bool,
    /// Registering host memory (`host_register` / `host_unregister`).
    pub host_register: Expect,
    /// Host memory mapped into the device (`mapped` page-locked memory and registrations).
    pub mapped_host: Expect,
    /// Elapsed time between timed events.
    pub event_timing: Expect,
    /// Peer access and copies between devices.
    pub peer: Expect,
    /// Managed (unified) memory.
    pub managed: Expect,
    /// Stream-ordered allocation and the device's memory pool.
    pub stream_ordered_pool: Expect,
    /// Exporting allocations to other processes.
    pub ipc: Expect,
    /// Collectives between the backend's devices (NCCL's calls).
    pub collectives: Expect,
    /// Whether the exporting process may open its own handle: CUDA refuses
    /// (`cuIpcOpenMemHandle` answers `CUDA_ERROR_INVALID_CONTEXT` for a handle of its own
    /// process), and so does the simulator after it; HSA maps the memory again.
    pub ipc_open_in_exporting_process: bool,
}

impl Contract {
    /// A backend of `devices` devices on which every feature works, of unknown capacity and
    /// inexact accounting (a GPU's), refusing its own IPC handles (CUDA's rule).
    pub fn new(devices: usize) -> Contract {
        Contract {
            devices,
            capacity: None,
            exact_accounting: false,
            host_register: Expect::Works,
            mapped_host: Expect::Works,
            event_timing: Expect::Works,
            peer: Expect::Works,
            managed: Expect::Works,
            stream_ordered_pool: Expect::Works,
            ipc: Expect::Works,
            collectives: Expect::Works,
            ipc_open_in_exporting_process: false,
        }
    }
}

/// One rule of the contract, checked on fresh backends.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// The check's name, which is also the name of the function that documents its rule.
    pub name: &'static str,
    body: Body,
}

impl Check {
    /// Runs the check. A panic, in the backend or in the check, is a failure naming it: a
    /// backend returns its errors.
    pub fn run(&self, contract: &Contract, factory: Factory<'_>) -> Result<Outcome, String> {
        // The check's state is dropped with the panic; nothing of it is looked at again.
        let run = std::panic::AssertUnwindSafe(|| (self.body)(contract, factory));
        std::panic::catch_unwind(run).unwrap_or_else(|payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(format!("panicked: {message}"))
        })
    }
}

/// Every check of the contract, in a fixed order.
pub fn checks() -> Vec<Check> {
    crate::contract_tests!(@list [checks])
}

/// The check named `name`, if there is one.
pub fn check(name: &str) -> Option<Check> {
    checks().into_iter().find(|c| c.name == name)
}

/// One `#[test]` per check of the contract, each calling `$run` with the check's name (the
/// test harness has no run-time skip, so `$run` decides what a skipped check means there).
///
/// ```ignore
/// fn run(name: &str) { /* look the check up with `contract::check`, run it, assert */ }
/// gpu_mem_core::contract_tests!(run);
/// ```
///
/// Checks that need what Miri's isolation forbids (IPC's shared files) are ignored under Miri.
/// The `@list` and `@emit` arms are this crate's own (`checks` is built from the same list).
#[macro_export]
macro_rules! contract_tests {
    ($run:path) => {
        $crate::contract_tests! { @list [tests $run] }
    };
    // The one list of checks, for `checks()` and for the tests.
    (@list $mode:tt) => {
        $crate::contract_tests! { @emit $mode
            [devices_report_their_ordinal_and_capacity]
            [bad_device_index_is_an_error]
            [allocations_are_aligned_and_disjoint]
            [empty_allocations_are_refused]
            [mem_info_follows_allocations]
            [out_of_memory_names_the_sizes]
            [freeing_what_is_not_allocated_is_an_error]
            [copies_round_trip_at_offsets]
            [memset_fills_exactly_its_range]
            [zero_byte_transfers_do_nothing]
            [synchronous_calls_wait_for_stream_work]
            [stream_work_runs_in_order]
            [stream_query_and_synchronize]
            [events_record_query_and_synchronize]
            [event_timing]
            [stream_wait_event_orders_streams]
            [work_from_several_threads]
            [page_locked_memory_follows_its_flags]
            [registered_memory_serves_async_copies]
            [registration_rules]
            [overlapping_registrations_are_refused]
            [host_memory_device_addresses_serve_copies]
            [devices_are_separate]
            [peer_access_and_copies]
            [managed_memory_allocates_and_frees]
            [managed_prefetch_and_advise]
            [stream_ordered_allocation]
            [ipc_handles #[cfg_attr(miri, ignore = "IPC needs shared files, which Miri's isolation forbids")]]
            [collectives_meet_between_devices]
        }
    };
    (@emit [checks] $([$name:ident $(#[$attr:meta])*])*) => {
        vec![$($crate::testing::contract::Check::new(
            stringify!($name),
            $crate::testing::contract::bodies::$name,
        )),*]
    };
    (@emit [tests $run:path] $([$name:ident $(#[$attr:meta])*])*) => {
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                $run(stringify!($name))
            }
        )*
    };
}

impl Check {
    const fn new(name: &'static str, body: Body) -> Check {
        Check { name, body }
    }
}

/// The checks' bodies under one path, for the list in [`contract_tests!`](crate::contract_tests).
mod bodies {
    pub(super) use super::collectives::collectives_meet_between_devices;
    pub(super) use super::devices::{
        bad_device_index_is_an_error, devices_are_separate,
        devices_report_their_ordinal_and_capacity, work_from_several_threads,
    };
    pub(super) use super::extras::{
        ipc_handles, managed_memory_allocates_and_frees, peer_access_and_copies,
        stream_ordered_allocation,
    };
    pub(super) use super::host::{
        host_memory_device_addresses_serve_copies, overlapping_registrations_are_refused,
        page_locked_memory_follows_its_flags, registered_memory_serves_async_copies,
        registration_rules,
    };
    pub(super) use super::managed_hints::managed_prefetch_and_advise;
    pub(super) use super::memory::{
        allocations_are_aligned_and_disjoint, copies_round_trip_at_offsets,
        empty_allocations_are_refused, freeing_what_is_not_allocated_is_an_error,
        mem_info_follows_allocations, memset_fills_exactly_its_range,
        out_of_memory_names_the_sizes, synchronous_calls_wait_for_stream_work,
        zero_byte_transfers_do_nothing,
    };
    pub(super) use super::streams::{
        event_timing, events_record_query_and_synchronize, stream_query_and_synchronize,
        stream_wait_event_orders_streams, stream_work_runs_in_order,
    };
}

// ----- what the checks share -------------------------------------------------------------

/// A check's result.
type Verdict = Result<Outcome, String>;

/// `Err(message())` unless `condition` holds.
fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}

/// A backend call's error as a check failure naming the call.
trait Context<T> {
    fn ctx(self, what: &str) -> Result<T, String>;
}

impl<T> Context<T> for Result<T> {
    fn ctx(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what} failed: {e}"))
    }
}

/// The capability an accessor answered (`found`, from [`Backend::peer`] or its like, named
/// `accessor`) checked against what the contract expects of it: `Ok(Ok(capability))` to exercise
/// where it works; `Ok(Err(outcome))`, the check's outcome, where the backend lacks it (the
/// accessor answered `None`, as expected) or it cannot be checked here; `Err` where the answer is
/// not the expected one.
fn expected<'a, C: ?Sized>(
    expect: Expect,
    found: Option<&'a C>,
    accessor: &str,
) -> Result<Result<&'a C, Outcome>, String> {
    match (expect, found) {
        (Expect::Works, Some(capability)) => Ok(Ok(capability)),
        (Expect::Skip(reason), Some(_)) => Ok(Err(Outcome::Skipped(reason.into()))),
        (Expect::NotSupported, None) => Ok(Err(Outcome::Passed)),
        (Expect::NotSupported, Some(_)) => Err(format!(
            "Backend::{accessor} answered Some, but the contract says the backend lacks it"
        )),
        (_, None) => Err(format!(
            "Backend::{accessor} answered None, but the contract says the backend provides it"
        )),
    }
}

/// `Ok(())` when `result` is [`Error::NotSupportedByBackend`], as for a feature the backend lacks.
fn not_supported<T: Debug>(result: Result<T>, what: &str) -> Result<(), String> {
    match result {
        Err(Error::NotSupportedByBackend { .. }) => Ok(()),
        other => Err(format!(
            "{what} gave {other:?}; a feature the backend lacks must answer NotSupportedByBackend"
        )),
    }
}

/// Bytes of a buffer large enough that work on it takes a while on a device, so that work
/// run out of order shows; small under Miri, which interprets every byte.
const LARGE: usize = if cfg!(miri) { 4 << 10 } else { 64 << 10 };

/// Recognisable bytes: `n` of them, different for each `seed`.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ ((i >> 8) as u8))
        .collect()
}

/// A new allocation on `device` holding `data` (which must not be empty).
fn upload(b: &dyn Backend, device: usize, data: &[u8]) -> Result<DevicePtr, String> {
    let ptr = b.alloc(device, data.len()).ctx("alloc")?;
    // SAFETY: `ptr` was just allocated with `data.len()` bytes; `data` is readable for as many.
    unsafe { b.copy_htod(device, ptr, data.as_ptr(), data.len()) }.ctx("copy_htod")?;
    Ok(ptr)
}

/// The `n` bytes at `ptr` on `device`, read synchronously.
///
/// # Safety
/// `ptr..ptr+n` lies in a live allocation of `device` (or mapped memory it reaches).
unsafe fn download(
    b: &dyn Backend,
    device: usize,
    ptr: DevicePtr,
    n: usize,
) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; n];
    // SAFETY: `out` is writable for `n` bytes; the caller vouches for the device range.
    unsafe { b.copy_dtoh(device, out.as_mut_ptr(), ptr, n) }.ctx("copy_dtoh")?;
    Ok(out)
}

/// `ptr + bytes`.
fn offset(ptr: DevicePtr, bytes: usize) -> DevicePtr {
    DevicePtr(ptr.0 + bytes as u64)
}

/// The skip reason of a check that needs two devices, when the backend has fewer.
fn needs_two_devices(b: &dyn Backend) -> Option<Outcome> {
    (b.device_count() < 2).then(|| {
        Outcome::Skipped(format!(
            "needs two devices; the backend has {}",
            b.device_count()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{Expect, Outcome, expected};

    #[test]
    fn a_capability_is_checked_against_what_the_contract_expects() {
        let have = Some(&1u8);
        assert_eq!(expected(Expect::Works, have, "peer"), Ok(Ok(&1u8)));
        assert_eq!(
            expected(Expect::Skip("no driver"), have, "peer"),
            Ok(Err(Outcome::Skipped("no driver".into())))
        );
        assert_eq!(
            expected::<u8>(Expect::NotSupported, None, "pool"),
            Ok(Err(Outcome::Passed))
        );
        for (expect, found) in [
            (Expect::NotSupported, have),
            (Expect::Works, None),
            (Expect::Skip("no driver"), None),
        ] {
            let wrong = expected(expect, found, "ipc").unwrap_err();
            assert!(wrong.starts_with("Backend::ipc answered"), "{wrong}");
        }
    }
}
