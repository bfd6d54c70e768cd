//! [`Streams`] on CUDA: blocking `CUstream`s (flags 0), so the legacy default stream waits for
//! them; a [`StreamHandle`] holds the `CUstream` address. A device fault makes a
//! synchronisation [`Error::AsyncFailure`](gpu_mem_core::Error::AsyncFailure) (the work will
//! never run); other errors stay as they are, so the work's buffers are kept.

use super::{CudaBackend, as_async_failure, flags, raw_event, raw_stream, released};
use gpu_mem_core::Result;
use gpu_mem_core::backend::{EventHandle, StreamHandle, Streams};

// SAFETY: cuStreamSynchronize and cuStreamQuery report success only once the stream's work has
// completed; cuStreamWaitEvent orders later work after the event's; a device fault is reported
// as a failure, never as completion.
unsafe impl Streams for CudaBackend {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        let _cx = self.current(device)?;
        let stream = self.driver.stream_create(flags::stream_flags())?;
        self.streams.insert(device, stream as usize as u64, ());
        Ok(StreamHandle(stream as usize as u64))
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.streams.remove(device, stream.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the caller guarantees the stream came from stream_create and is destroyed once.
        released(unsafe { self.driver.stream_destroy(raw_stream(stream)) })
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "stream work", stream.0))?;
        // SAFETY: the caller guarantees the stream came from stream_create on this device and
        // is not destroyed (the trait's contract).
        unsafe { self.driver.stream_synchronize(raw_stream(stream)) }
            .map_err(|e| as_async_failure(e, "stream work", stream.0))
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "stream work", stream.0))?;
        // SAFETY: as in stream_synchronize.
        unsafe { self.driver.stream_query(raw_stream(stream)) }
            .map_err(|e| as_async_failure(e, "stream work", stream.0))
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both handles came from this backend's create calls on
        // this device and are not destroyed (the trait's contract).
        unsafe {
            self.driver
                .stream_wait_event(raw_stream(stream), raw_event(event))
        }
    }
}
