//! Grid and block shapes.

use std::fmt;

/// A 3-d extent or index (CUDA's `dim3`). Unused dimensions are 1 (extents) or 0 (indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x
    pub x: u32,
    /// y
    pub y: u32,
    /// z
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// `x * y * z`, as `u64` so it cannot overflow.
    pub fn count(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// As an array.
    pub fn to_array(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3::new(x, y, z)
    }
}

/// How to launch a kernel: grid and block shapes and dynamic shared memory (Numba's
/// `kernel[grid, block, stream, sharedmem]`; the stream is chosen by launching through
/// [`Stream::launch`](crate::Stream::launch) instead of [`Device::launch`](crate::Device::launch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: usize,
    /// A cooperative launch: every block of the grid runs at once, so the kernel may wait for
    /// the whole grid (`cooperative_groups::this_grid().sync()`). CUDA's
    /// `cuLaunchCooperativeKernel`: the grid must fit on the device at once, or the launch
    /// fails.
    pub cooperative: bool,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads and no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_bytes: 0,
            cooperative: false,
        }
    }

    /// As a cooperative launch (see [`LaunchConfig::cooperative`]).
    pub fn cooperative(mut self) -> LaunchConfig {
        self.cooperative = true;
        self
    }

    /// With `bytes` of dynamic shared memory per block.
    pub fn with_shared_bytes(mut self, bytes: usize) -> LaunchConfig {
        self.shared_bytes = bytes;
        self
    }

    /// Enough 1-d blocks of `block` threads to cover `n` items (Numba's `forall`).
    pub fn for_items(n: usize, block: u32) -> LaunchConfig {
        let block = block.max(1);
        let blocks = n.div_ceil(block as usize).max(1);
        LaunchConfig::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }
}
