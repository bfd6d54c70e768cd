//! `ManagedArray::prefetch` and `ManagedArray::advise` on the simulator, which records them per
//! allocation (`SimBackend::managed_hints`): they reach the backend for the whole array, a
//! prefetch as work of its stream that keeps the array alive, the data untouched; a stream of
//! another device and a device of another backend are errors, never panics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::backend::{ManagedAdvice, ManagedHints, ManagedLocation};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{Advice, MemoryLocation};
use ndarray::Array1;
use std::sync::Arc;

/// A simulator of two devices, its runtime and both devices.
fn two_devices() -> (Arc<SimBackend>, Runtime, Device, Device) {
    let sim = Arc::new(SimBackend::new(SimConfig::uniform(2, 1 << 20)));
    let runtime = Runtime::with_backend(Arc::clone(&sim) as _);
    let (dev0, dev1) = (runtime.device(0).unwrap(), runtime.device(1).unwrap());
    (sim, runtime, dev0, dev1)
}

fn hints<T: Element>(sim: &SimBackend, array: &ManagedArray<T>) -> ManagedHints {
    sim.managed_hints(array.device().ordinal(), array.device_view().device_ptr())
        .unwrap()
}

#[test]
fn prefetch_and_advice_reach_the_backend_and_leave_the_data() {
    let (sim, _runtime, dev0, dev1) = two_devices();
    let mut m = dev0.managed_array::<f32>(&[1000]).unwrap();
    let values = Array1::from_iter((0..1000).map(|i| i as f32 * 0.5));
    m.write(&values).unwrap();
    let stream = dev0.stream().unwrap();
    m.prefetch(&dev1, &stream).unwrap();
    m.prefetch(MemoryLocation::Host, &stream).unwrap();
    stream.synchronize().unwrap();
    let seen = hints(&sim, &m);
    assert_eq!(
        (seen.prefetched_to, seen.prefetches),
        (Some(ManagedLocation::Host), 2)
    );
    m.advise(Advice::SetReadMostly).unwrap();
    m.advise(Advice::SetPreferredLocation((&dev1).into()))
        .unwrap();
    m.advise(Advice::SetAccessedBy(MemoryLocation::Host))
        .unwrap();
    m.advise(Advice::SetAccessedBy((&dev0).into())).unwrap();
    m.advise(Advice::UnsetAccessedBy(MemoryLocation::Host))
        .unwrap();
    let seen = hints(&sim, &m);
    assert!(seen.read_mostly);
    assert_eq!(seen.preferred_location, Some(ManagedLocation::Device(1)));
    assert_eq!(seen.accessed_by, [ManagedLocation::Device(0)]);
    assert_eq!(
        seen.last_advice,
        Some(ManagedAdvice::UnsetAccessedBy(ManagedLocation::Host))
    );
    m.advise(Advice::UnsetPreferredLocation).unwrap();
    m.advise(Advice::UnsetReadMostly).unwrap();
    let seen = hints(&sim, &m);
    assert!(!seen.read_mostly && seen.preferred_location.is_none());
    assert_eq!(m.read().unwrap(), values.into_dyn());
}

#[test]
fn a_prefetch_keeps_the_array_alive_until_its_stream_is_synchronized() {
    let (sim, _runtime, dev0, _dev1) = two_devices();
    let m = dev0.managed_array::<u64>(&[4096]).unwrap();
    let stream = dev0.stream().unwrap();
    m.prefetch(&dev0, &stream).unwrap();
    drop(m);
    assert_eq!(
        sim.live_allocations(0).unwrap(),
        1,
        "the stream must keep the prefetched memory"
    );
    stream.synchronize().unwrap();
    assert_eq!(sim.live_allocations(0).unwrap(), 0);
}

#[test]
fn wrong_streams_and_devices_are_errors() {
    let (sim, _runtime, dev0, dev1) = two_devices();
    let m = dev0.managed_array::<i32>(&[64]).unwrap();
    let (_elsewhere, foreign) = {
        let other =
            Runtime::with_backend(Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20))));
        let device = other.device(0).unwrap();
        (other, device)
    };
    let on_dev1 = dev1.stream().unwrap();
    assert!(matches!(
        m.prefetch(MemoryLocation::Host, &on_dev1),
        Err(Error::DeviceMismatch { .. })
    ));
    let stream = dev0.stream().unwrap();
    assert!(matches!(
        m.prefetch(&foreign, &stream),
        Err(Error::DeviceMismatch { .. })
    ));
    let foreign_stream = foreign.stream().unwrap();
    assert!(matches!(
        m.prefetch(&dev0, &foreign_stream),
        Err(Error::DeviceMismatch { .. })
    ));
    for advice in [
        Advice::SetPreferredLocation((&foreign).into()),
        Advice::SetAccessedBy((&foreign).into()),
        Advice::UnsetAccessedBy((&foreign).into()),
    ] {
        assert!(matches!(
            m.advise(advice),
            Err(Error::DeviceMismatch { .. })
        ));
    }
    stream.synchronize().unwrap();
    assert_eq!(
        hints(&sim, &m),
        ManagedHints::default(),
        "nothing was recorded"
    );
}

#[test]
fn an_empty_array_takes_hints_and_keeps_none() {
    let (_sim, _runtime, dev0, dev1) = two_devices();
    let m = dev0.managed_array::<f64>(&[0, 3]).unwrap();
    let stream = dev0.stream().unwrap();
    m.prefetch(&dev1, &stream).unwrap();
    m.advise(Advice::SetReadMostly).unwrap();
    stream.synchronize().unwrap();
}
