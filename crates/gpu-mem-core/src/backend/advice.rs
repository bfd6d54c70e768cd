//! Plain data of the managed-memory hints ([`ManagedMemory::managed_prefetch`] and
//! [`ManagedMemory::managed_advise`](super::ManagedMemory::managed_advise)): where memory may
//! live, the advice CUDA knows, and what a backend that records them keeps per allocation.
//!
//! [`ManagedMemory::managed_prefetch`]: super::ManagedMemory::managed_prefetch

/// Where managed memory may live: host memory or a device's (CUDA's `CUmemLocation` of type
/// `CU_MEM_LOCATION_TYPE_HOST` or `CU_MEM_LOCATION_TYPE_DEVICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ManagedLocation {
    /// Host (system) memory, the former `CU_DEVICE_CPU`.
    Host,
    /// The memory of the backend's device with this ordinal.
    Device(usize),
}

impl ManagedLocation {
    /// The device ordinal, for a device location.
    pub fn device(self) -> Option<usize> {
        match self {
            ManagedLocation::Host => None,
            ManagedLocation::Device(ordinal) => Some(ordinal),
        }
    }
}

/// Advice about how a range of managed memory will be used: one variant per value of CUDA's
/// `CUmem_advise`. Advice is a hint to the driver's migration policy; it never changes a byte of
/// the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManagedAdvice {
    /// `CU_MEM_ADVISE_SET_READ_MOSTLY`: mostly read, so readers may get copies of their own.
    SetReadMostly,
    /// `CU_MEM_ADVISE_UNSET_READ_MOSTLY`: undoes [`ManagedAdvice::SetReadMostly`].
    UnsetReadMostly,
    /// `CU_MEM_ADVISE_SET_PREFERRED_LOCATION`: keep the memory here where possible.
    SetPreferredLocation(ManagedLocation),
    /// `CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION`: no preferred location any more.
    UnsetPreferredLocation,
    /// `CU_MEM_ADVISE_SET_ACCESSED_BY`: keep the memory mapped for this processor.
    SetAccessedBy(ManagedLocation),
    /// `CU_MEM_ADVISE_UNSET_ACCESSED_BY`: undoes [`ManagedAdvice::SetAccessedBy`] for it.
    UnsetAccessedBy(ManagedLocation),
}

impl ManagedAdvice {
    /// The location the advice names, where it names one.
    pub fn location(self) -> Option<ManagedLocation> {
        match self {
            ManagedAdvice::SetPreferredLocation(at)
            | ManagedAdvice::SetAccessedBy(at)
            | ManagedAdvice::UnsetAccessedBy(at) => Some(at),
            ManagedAdvice::SetReadMostly
            | ManagedAdvice::UnsetReadMostly
            | ManagedAdvice::UnsetPreferredLocation => None,
        }
    }
}

/// What the advice and prefetches given for one managed allocation amount to, as a backend that
/// records them keeps it (the simulator, and ROC, whose managed memory never migrates). It is
/// kept per allocation, whatever part of it each call named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedHints {
    /// [`ManagedAdvice::SetReadMostly`] is in force.
    pub read_mostly: bool,
    /// The location of the latest [`ManagedAdvice::SetPreferredLocation`], until unset.
    pub preferred_location: Option<ManagedLocation>,
    /// The processors [`ManagedAdvice::SetAccessedBy`] named and no unset took back, sorted.
    pub accessed_by: Vec<ManagedLocation>,
    /// The latest advice given.
    pub last_advice: Option<ManagedAdvice>,
    /// Where the latest prefetch that has run moved the memory.
    pub prefetched_to: Option<ManagedLocation>,
    /// How many prefetches have run.
    pub prefetches: u64,
}

impl ManagedHints {
    /// Records `advice`, as `cuMemAdvise` applies it.
    pub fn advise(&mut self, advice: ManagedAdvice) {
        match advice {
            ManagedAdvice::SetReadMostly => self.read_mostly = true,
            ManagedAdvice::UnsetReadMostly => self.read_mostly = false,
            ManagedAdvice::SetPreferredLocation(at) => self.preferred_location = Some(at),
            ManagedAdvice::UnsetPreferredLocation => self.preferred_location = None,
            ManagedAdvice::SetAccessedBy(at) => {
                if let Err(index) = self.accessed_by.binary_search(&at) {
                    self.accessed_by.insert(index, at);
                }
            }
            ManagedAdvice::UnsetAccessedBy(at) => self.accessed_by.retain(|&by| by != at),
        }
        self.last_advice = Some(advice);
    }

    /// Records a prefetch to `to` that has run.
    pub fn prefetched(&mut self, to: ManagedLocation) {
        self.prefetched_to = Some(to);
        self.prefetches += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{ManagedAdvice, ManagedHints, ManagedLocation};

    #[test]
    fn hints_follow_set_and_unset() {
        let mut hints = ManagedHints::default();
        let (host, gpu1) = (ManagedLocation::Host, ManagedLocation::Device(1));
        hints.advise(ManagedAdvice::SetReadMostly);
        hints.advise(ManagedAdvice::SetPreferredLocation(gpu1));
        hints.advise(ManagedAdvice::SetAccessedBy(gpu1));
        hints.advise(ManagedAdvice::SetAccessedBy(host));
        hints.advise(ManagedAdvice::SetAccessedBy(gpu1));
        assert!(hints.read_mostly);
        assert_eq!(hints.preferred_location, Some(gpu1));
        assert_eq!(hints.accessed_by, [host, gpu1]);
        hints.advise(ManagedAdvice::UnsetReadMostly);
        hints.advise(ManagedAdvice::UnsetPreferredLocation);
        hints.advise(ManagedAdvice::UnsetAccessedBy(gpu1));
        assert!(!hints.read_mostly);
        assert_eq!(hints.preferred_location, None);
        assert_eq!(hints.accessed_by, [host]);
        assert_eq!(
            hints.last_advice,
            Some(ManagedAdvice::UnsetAccessedBy(gpu1))
        );
        hints.prefetched(host);
        hints.prefetched(gpu1);
        assert_eq!((hints.prefetched_to, hints.prefetches), (Some(gpu1), 2));
    }
}
