//! Regression test for issue 9, item 6: the simulator used to page-lock any amount of host
//! memory (`pinned_array::<u8>(&[8 << 30])` on a 1 MiB device took 8 GB). Page-locked memory now
//! has a limit per device (`GPU_MEM_SIM_PINNED_LIMIT`, `SimDeviceConfig::pinned_limit`), and
//! requests past it are `Error::HostOutOfMemory`.

use gpu_mem_core::{Device, Error, MapFlags};
use gpu_mem_sim::{DEFAULT_PINNED_LIMIT, SimBackend, SimConfig, SimDeviceConfig};
use std::sync::Arc;

fn device(pinned_limit: u64) -> (Arc<SimBackend>, Device) {
    let backend = Arc::new(SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            memory: 1 << 20,
            pinned_limit,
            ..SimDeviceConfig::default()
        }],
    }));
    let device = Device::new(Arc::clone(&backend) as _, 0).unwrap();
    (backend, device)
}

#[test]
fn huge_pinned_arrays_are_refused_by_default() {
    let (backend, dev) = device(DEFAULT_PINNED_LIMIT);
    let err = dev.pinned_array::<u8>(&[8 << 30]).unwrap_err();
    assert!(
        matches!(err, Error::HostOutOfMemory { requested, .. } if requested == 8 << 30),
        "{err}"
    );
    assert!(
        err.to_string().contains("GPU_MEM_SIM_PINNED_LIMIT"),
        "{err}"
    );
    assert_eq!(backend.live_host_memory(0).unwrap(), (0, 0));
}

/// The unit of the sizes below: 1 KiB, or 256 bytes under Miri (whose zeroing and reading of
/// each byte is the test's cost there); every size stays a whole number of 4 KiB pages.
const UNIT: usize = if cfg!(miri) { 256 } else { 1 << 10 };

#[test]
fn the_limit_counts_pinned_mapped_and_registered_memory() {
    let (backend, dev) = device(64 * UNIT as u64);
    let a = dev.pinned_array::<u8>(&[32 * UNIT]).unwrap();
    let b = dev
        .mapped_array::<u8>(&[16 * UNIT], MapFlags::default())
        .unwrap();
    // 48 units locked: another 32 do not fit, in any form.
    assert!(matches!(
        dev.pinned_array::<u8>(&[32 * UNIT]),
        Err(Error::HostOutOfMemory { .. })
    ));
    let rejected = dev
        .pinned(ndarray::Array1::<u8>::zeros(32 * UNIT))
        .unwrap_err();
    assert!(
        matches!(rejected.error, Error::HostOutOfMemory { .. }),
        "{}",
        rejected.error
    );
    // 16 units still fit; freeing gives the room back.
    let c = dev.pinned(ndarray::Array1::<u8>::zeros(16 * UNIT)).unwrap();
    drop((a, b, c));
    assert_eq!(backend.live_host_memory(0).unwrap(), (0, 0));
    let again = dev.pinned_array::<u8>(&[64 * UNIT]).unwrap();
    assert!(again.view().unwrap().iter().all(|&x| x == 0));
}
