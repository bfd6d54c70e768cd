//! A block's shared memory: the static buffers handed out in call order, and the dynamic
//! buffer, within the per-block limit.

use std::cell::RefCell;

/// Shared memory of one block (only touched by that block's OS thread).
#[derive(Debug)]
pub(crate) struct SharedMemory {
    limit: usize,
    /// Owns the dynamic buffer; `dynamic_ptr` was taken from it mutably once.
    _dynamic: Vec<u128>,
    dynamic_ptr: *mut u8,
    dynamic_bytes: usize,
    statics: RefCell<Vec<StaticBuffer>>,
    used: RefCell<usize>,
}

#[derive(Debug)]
struct StaticBuffer {
    storage: Vec<u128>,
    bytes: usize,
    dtype: &'static str,
}

impl SharedMemory {
    /// 16-byte aligned storage; `u128` gives the alignment, zeroed gives defined contents.
    /// The reason when the host cannot give the dynamic part (a huge request allowed by a huge
    /// `GPU_MEM_SIM_SHARED_MEMORY`).
    pub(crate) fn new(limit: usize, dynamic_bytes: usize) -> Result<SharedMemory, String> {
        let words = dynamic_bytes.div_ceil(16);
        let mut dynamic: Vec<u128> = Vec::new();
        dynamic.try_reserve_exact(words).map_err(|_| {
            format!(
                "the host cannot allocate the {dynamic_bytes} bytes of dynamic shared memory a block asks for"
            )
        })?;
        dynamic.resize(words, 0);
        let dynamic_ptr = dynamic.as_mut_ptr().cast::<u8>();
        Ok(SharedMemory {
            limit,
            _dynamic: dynamic,
            dynamic_ptr,
            dynamic_bytes,
            statics: RefCell::new(Vec::new()),
            used: RefCell::new(dynamic_bytes),
        })
    }

    pub(crate) fn dynamic_ptr(&self) -> (*mut u8, usize) {
        (self.dynamic_ptr, self.dynamic_bytes)
    }

    /// The `index`-th static buffer, created by the first thread that asks for it.
    pub(crate) fn get(
        &self,
        index: usize,
        bytes: usize,
        align: usize,
        dtype: &'static str,
    ) -> Result<*mut u8, String> {
        if align > 16 {
            return Err(format!(
                "shared arrays of {dtype} need {align}-byte alignment; at most 16 is supported"
            ));
        }
        let mut statics = self.statics.borrow_mut();
        if let Some(existing) = statics.get_mut(index) {
            if existing.bytes != bytes || existing.dtype != dtype {
                return Err(format!(
                    "shared array #{index} was declared as {} bytes of {} by another thread but {bytes} bytes of {dtype} here",
                    existing.bytes, existing.dtype
                ));
            }
            return Ok(existing.storage.as_mut_ptr().cast::<u8>());
        }
        if index != statics.len() {
            return Err(format!(
                "shared array #{index} requested before #{}",
                statics.len()
            ));
        }
        let mut used = self.used.borrow_mut();
        let total = used.saturating_add(bytes);
        if total > self.limit {
            return Err(format!(
                "shared memory of the block would reach {total} bytes, over the limit of {} bytes",
                self.limit
            ));
        }
        *used = total;
        statics.push(StaticBuffer {
            storage: vec![0u128; bytes.div_ceil(16)],
            bytes,
            dtype,
        });
        let last = statics.len() - 1;
        Ok(statics[last].storage.as_mut_ptr().cast::<u8>())
    }
}

#[cfg(test)]
mod tests {
    use super::SharedMemory;

    /// A dynamic request the host cannot give (allowed by a huge `GPU_MEM_SIM_SHARED_MEMORY`) is
    /// an error, not the end of the process.
    #[test]
    #[cfg_attr(miri, ignore = "Miri aborts on an allocation it cannot make")]
    fn shared_memory_the_host_cannot_give_is_an_error() {
        let huge = usize::MAX / 4;
        let message = SharedMemory::new(usize::MAX, huge).unwrap_err();
        assert!(message.contains("cannot allocate"), "{message}");
        assert!(SharedMemory::new(48 << 10, 1024).is_ok());
    }
}
