//! Pure translations from gpu-mem's flag structs to the driver's flag words.

use gpu_mem_core::backend::{HostAllocFlags, HostRegisterFlags};
use gpu_mem_cuda_sys::driver::{
    CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_WRITECOMBINED,
    CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE, CUevent_flags, CUstream_flags,
};
use std::ffi::c_uint;

/// `cuMemHostAlloc` flags: pinned = 0, plus PORTABLE / DEVICEMAP / WRITECOMBINED as asked.
pub fn host_alloc_flags(flags: HostAllocFlags) -> c_uint {
    let mut word = 0;
    if flags.portable {
        word |= CU_MEMHOSTALLOC_PORTABLE;
    }
    if flags.mapped {
        word |= CU_MEMHOSTALLOC_DEVICEMAP;
    }
    if flags.write_combined {
        word |= CU_MEMHOSTALLOC_WRITECOMBINED;
    }
    word
}

/// `cuMemHostRegister` flags: page-locking only = 0, plus PORTABLE / DEVICEMAP as asked.
pub fn host_register_flags(flags: HostRegisterFlags) -> c_uint {
    let mut word = 0;
    if flags.portable {
        word |= CU_MEMHOSTREGISTER_PORTABLE;
    }
    if flags.mapped {
        word |= CU_MEMHOSTREGISTER_DEVICEMAP;
    }
    word
}

/// Streams are created with flags 0 (`CU_STREAM_DEFAULT`), as Numba does: they synchronise with
/// the legacy default stream, which the synchronous calls of the `Backend` contract rely on.
pub fn stream_flags() -> c_uint {
    CUstream_flags::CU_STREAM_DEFAULT.0
}

/// `CU_EVENT_DEFAULT` for timed events, `CU_EVENT_DISABLE_TIMING` otherwise (cheaper to record
/// and to wait on).
pub fn event_flags(timing: bool) -> c_uint {
    if timing {
        CUevent_flags::CU_EVENT_DEFAULT.0
    } else {
        CUevent_flags::CU_EVENT_DISABLE_TIMING.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_alloc_flag_bits_follow_each_request() {
        for portable in [false, true] {
            for mapped in [false, true] {
                for write_combined in [false, true] {
                    let word = host_alloc_flags(HostAllocFlags {
                        portable,
                        mapped,
                        write_combined,
                    });
                    assert_eq!(word & CU_MEMHOSTALLOC_PORTABLE != 0, portable);
                    assert_eq!(word & CU_MEMHOSTALLOC_DEVICEMAP != 0, mapped);
                    assert_eq!(word & CU_MEMHOSTALLOC_WRITECOMBINED != 0, write_combined);
                    let known = CU_MEMHOSTALLOC_PORTABLE
                        | CU_MEMHOSTALLOC_DEVICEMAP
                        | CU_MEMHOSTALLOC_WRITECOMBINED;
                    assert_eq!(word & !known, 0, "no other bits");
                }
            }
        }
    }

    #[test]
    fn plain_pinned_allocation_passes_zero_like_numba() {
        assert_eq!(host_alloc_flags(HostAllocFlags::default()), 0);
        assert_eq!(host_register_flags(HostRegisterFlags::default()), 0);
    }

    #[test]
    fn register_flag_bits_follow_each_request() {
        for portable in [false, true] {
            for mapped in [false, true] {
                let word = host_register_flags(HostRegisterFlags { portable, mapped });
                assert_eq!(word & CU_MEMHOSTREGISTER_PORTABLE != 0, portable);
                assert_eq!(word & CU_MEMHOSTREGISTER_DEVICEMAP != 0, mapped);
                assert_eq!(
                    word & !(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
                    0
                );
            }
        }
    }

    #[test]
    fn event_timing_toggles_only_disable_timing() {
        let disable = CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        assert_eq!(event_flags(true) & disable, 0);
        assert_eq!(event_flags(false) & disable, disable);
        assert_eq!(event_flags(false) & !disable, event_flags(true));
    }
}
