//! [`Events`] on CUDA: `CUevent`s (timing disabled unless asked), an [`EventHandle`] holding
//! the `CUevent` address; which events time is remembered, so elapsed time between untimed
//! ones is [`Error::EventTiming`] rather than the driver's error.

use super::{CudaBackend, as_async_failure, flags, is_code, raw_event, raw_stream, released};
use crate::driver::sys::CUresult;
use gpu_mem_core::backend::{EventHandle, Events, StreamHandle};
use gpu_mem_core::{Error, Result};

// SAFETY: cuEventSynchronize and cuEventQuery report success only once the work recorded before
// the event has completed (a never-recorded event is complete); a device fault is reported as a
// failure, never as completion.
unsafe impl Events for CudaBackend {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        let _cx = self.current(device)?;
        let event = self.driver.event_create(flags::event_flags(timing))?;
        let handle = event as usize as u64;
        self.events.insert(device, handle, timing);
        Ok(EventHandle(handle))
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.events.remove(device, event.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the caller guarantees the event came from event_create and is destroyed once.
        released(unsafe { self.driver.event_destroy(raw_event(event)) })
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both handles came from this backend on this device and
        // are not destroyed (the trait's contract).
        unsafe {
            self.driver
                .event_record(raw_event(event), raw_stream(stream))
        }
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "work before an event", 0))?;
        // SAFETY: as in event_record. A never-recorded event reports complete (CUDA_SUCCESS).
        unsafe { self.driver.event_query(raw_event(event)) }
            .map_err(|e| as_async_failure(e, "work before an event", 0))
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "work before an event", 0))?;
        // SAFETY: as in event_record.
        unsafe { self.driver.event_synchronize(raw_event(event)) }
            .map_err(|e| as_async_failure(e, "work before an event", 0))
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        let _cx = self.current(device)?;
        for event in [start, end] {
            if self.events.get(device, event.0) == Some(false) {
                return Err(Error::EventTiming {
                    reason: "an event was created without timing",
                });
            }
        }
        // SAFETY: as in event_record.
        match unsafe {
            self.driver
                .event_elapsed_time(raw_event(start), raw_event(end))
        } {
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_NOT_READY) => Err(Error::EventTiming {
                reason: "an event has not completed yet",
            }),
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_INVALID_HANDLE) => {
                Err(Error::EventTiming {
                    reason: "an event was never recorded",
                })
            }
            other => other,
        }
    }
}
