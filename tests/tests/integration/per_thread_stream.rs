//! `Device::per_thread_stream` (Numba's `cuda.per_thread_default_stream()`): one stream per
//! thread and device, the same on every call from a thread, another on another thread, gone
//! when its thread ends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use std::sync::Arc;

#[test]
fn each_thread_has_its_own_stream_until_it_ends() {
    let rt = Runtime::with_backend(Arc::new(gpu_mem::sim::SimBackend::new(
        gpu_mem::sim::SimConfig::uniform(2, 16 << 20),
    )));
    let dev = rt.device(0).unwrap();
    let mine = dev.per_thread_stream().unwrap();
    assert!(Arc::ptr_eq(&mine, &dev.per_thread_stream().unwrap()));
    // Another handle of the same device gives the same stream; another device another.
    assert!(Arc::ptr_eq(
        &mine,
        &rt.device(0).unwrap().per_thread_stream().unwrap()
    ));
    let second = rt.device(1).unwrap().per_thread_stream().unwrap();
    assert!(!Arc::ptr_eq(&mine, &second));

    let (theirs, handle) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let theirs = dev.per_thread_stream().unwrap();
                let d = theirs
                    .to_device(&ndarray::Array1::<u32>::ones(256))
                    .unwrap();
                theirs.synchronize().unwrap();
                assert_eq!(d.copy_to_host().unwrap().sum(), 256);
                (Arc::downgrade(&theirs), theirs.handle())
            })
            .join()
            .unwrap()
    });
    assert_ne!(handle, mine.handle());
    assert!(
        theirs.upgrade().is_none(),
        "the thread's stream outlived it"
    );
}
