//! The integration tests of the public API on the simulator, in one test binary (one link
//! instead of one per file): each module is one concern.
//!
//! * `checked_kernels`: the simulator's checks naming where arrays were allocated;
//! * `device_allocator`: a user's allocator under a device (`Device::set_allocator`);
//! * `dlpack`: DLPack export and import, counted against the simulator's allocations;
//! * `hostile_inputs`: shapes, strides, indices and sizes chosen to break the layout math;
//! * `interop`: raw pointers, foreign memory, external work and IPC handles;
//! * `kernel_reentry`: kernels that call back into the host API;
//! * `managed_hints`: prefetch and advice on managed arrays;
//! * `memory_usage`: statistics, snapshots, leak reports and out-of-memory explanations;
//! * `oom_injection`: random work on tiny devices, many allocations failing;
//! * `per_thread_stream`: a stream per thread (`Device::per_thread_stream`);
//! * `soak`: a long seeded run of mixed operations (`soak::` alone, in release, on a GPU);
//! * `stream_order_props`: any sequence of stream work matches a serial model (proptest);
//! * `stream_callbacks`: host callbacks after a stream's work.

mod checked_kernels;
mod device_allocator;
mod dlpack;
mod hostile_inputs;
mod interop;
mod kernel_reentry;
mod managed_hints;
mod memory_usage;
mod oom_injection;
mod per_thread_stream;
mod soak;
mod stream_callbacks;
mod stream_order_props;
