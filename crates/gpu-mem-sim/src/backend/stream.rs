//! [`Streams`] on the simulator: each stream is a worker thread running its jobs in order.

use crate::stream::SimStream;
use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{EventHandle, StreamHandle, Streams};
use gpu_mem_core::sync::write;
use gpu_mem_core::{BackendKind, Error, Result};
use std::sync::Arc;

// SAFETY: a stream's worker runs its jobs in order; `stream_synchronize` returns, and
// `stream_query` answers `true`, only once the worker has finished every job enqueued before
// (`SimStream`); an event wait is a job that blocks until the event's generation completes.
unsafe impl Streams for SimBackend {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        let d = self.device(device)?;
        let handle = self.handle();
        let stream = SimStream::spawn(
            format!("gpu-mem-sim-d{device}-s{handle}"),
            Arc::clone(&d.activity),
        )
        .map_err(|reason| Error::NotSupportedByBackend {
            backend: BackendKind::Sim,
            feature: "streams",
            reason,
        })?;
        write(&d.streams).insert(handle, Arc::new(stream));
        Ok(StreamHandle(handle))
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        reentry::refuse_in_kernel("stream destruction")?;
        let d = self.device(device)?;
        let removed = write(&d.streams).remove(&stream.0);
        match removed {
            Some(stream) => {
                stream.shut_down();
                Ok(())
            }
            None => Err(Error::InvalidHandle {
                kind: "stream",
                handle: stream.0,
            }),
        }
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        reentry::refuse_in_kernel("stream synchronize")?;
        let d = self.device(device)?;
        // Done already (the usual case after small copies): answered without a reference to
        // the stream; otherwise the wait happens with one.
        let result =
            match self.on_stream(d, stream, |s| s.finished().ok_or_else(|| Arc::clone(s)))? {
                Ok(result) => result,
                Err(running) => running.synchronize(),
            };
        result.map_err(|(operation, reason)| Error::AsyncFailure {
            operation,
            stream: stream.0,
            reason,
        })
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        let d = self.device(device)?;
        let sim_stream = self.stream(d, stream)?;
        if !sim_stream.is_idle() {
            return Ok(false);
        }
        // Finished, but with a failure: say so (as `cuStreamQuery` returns the error), leaving
        // it for the stream's synchronization, which reports it to the stream's owner.
        match sim_stream.peek_failure() {
            Ok(()) => Ok(true),
            Err((operation, reason)) => Err(Error::AsyncFailure {
                operation,
                stream: stream.0,
                reason,
            }),
        }
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        let generation = event.current_generation();
        self.enqueue(
            d,
            stream,
            "event wait",
            Box::new(move || {
                event.wait_for(generation);
                Ok(())
            }),
        )
    }
}
