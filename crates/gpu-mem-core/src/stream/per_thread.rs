//! A stream per host thread and device ([`Device::per_thread_stream`], Numba's
//! `cuda.per_thread_default_stream()`): work a thread puts on it is ordered with that thread's
//! other work there and with nobody else's, as CUDA's per-thread default stream orders it.
//!
//! Made the first time a thread asks for it on a device (a stream like any other, on every
//! backend), kept in the thread's storage, and dropped (after its work: `Stream`'s drop waits)
//! when the thread ends.

use super::Stream;
use crate::device::Device;
use crate::error::Result;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

thread_local! {
    /// This thread's streams, by backend instance (its address) and device ordinal. A stream
    /// holds its device, so an address cannot be reused while its entry is here.
    static STREAMS: RefCell<HashMap<(usize, usize), Arc<Stream>>> = RefCell::new(HashMap::new());
}

impl Device {
    /// The calling thread's own stream on this device, made on first use (Numba's
    /// `cuda.per_thread_default_stream()`): every call from one thread gets the same stream,
    /// other threads get theirs. It lives until the thread ends.
    pub fn per_thread_stream(&self) -> Result<Arc<Stream>> {
        let key = (
            Arc::as_ptr(self.backend()).cast::<()>() as usize,
            self.ordinal(),
        );
        if let Some(stream) = STREAMS.with(|streams| streams.borrow().get(&key).cloned()) {
            return Ok(stream);
        }
        // Made outside the borrow: making a stream may run code that asks for this one.
        let stream = Arc::new(Stream::new(self)?);
        STREAMS.with(|streams| {
            Ok(Arc::clone(
                streams.borrow_mut().entry(key).or_insert(stream),
            ))
        })
    }
}
