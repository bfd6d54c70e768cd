//! [`PeerAccess`]: devices of one backend reaching each other's memory (optional, through
//! [`Backend::peer`](super::Backend::peer)).

use super::types::{DevicePtr, StreamHandle};
use crate::error::Result;

/// Peer access and copies between devices of one backend (`cuCtxEnablePeerAccess`,
/// `cuMemcpyPeer`; HSA: access to the peer's pools, async copies between the agents).
///
/// # Safety
///
/// An implementation must uphold [`Backend`](super::Backend)'s contract, and:
///
/// * **Ranges.** A peer copy reads and writes only the ranges it is given, on the devices named
///   with them.
/// * **Completion.** [`PeerAccess::copy_peer`] is ordered after all work on both devices and
///   returns only once its reads and writes have completed; [`PeerAccess::copy_peer_async`] is
///   work of its stream, ordered after that stream's earlier work only.
/// * **Access.** Once [`PeerAccess::enable_peer_access`] returned `Ok`, kernels on `device` may
///   address `peer`'s allocations.
pub unsafe trait PeerAccess: Send + Sync {
    /// `true` when kernels and copies on `device` can address memory of `peer` directly
    /// (`cuDeviceCanAccessPeer`; HSA: the peer's pool is accessible to the agent).
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool>;

    /// Lets `device` address memory of `peer` (`cuCtxEnablePeerAccess`; HSA:
    /// `hsa_amd_agents_allow_access` on the peer's allocations). Enabling it twice is not an
    /// error.
    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()>;

    /// Copies `bytes` from `src` on `src_device` to `dst` on `dst_device`, synchronously, ordered
    /// after all work on both devices (`cuMemcpyPeer`; HSA: `hsa_amd_memory_async_copy` between
    /// the agents, waited for).
    ///
    /// # Safety
    /// `dst..dst+bytes` lies in a live allocation of `dst_device` and `src..src+bytes` in one of
    /// `src_device`.
    unsafe fn copy_peer(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()>;

    /// Enqueues a copy of `bytes` from `src` on `src_device` to `dst` on `dst_device` on
    /// `stream`, a stream of `dst_device` (`cuMemcpyPeerAsync`). It is ordered after earlier work
    /// on `stream` only.
    ///
    /// # Safety
    /// As [`PeerAccess::copy_peer`], and both ranges stay valid until the operation completes.
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on
    /// `dst_device` and is not destroyed.
    unsafe fn copy_peer_async(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;
}
