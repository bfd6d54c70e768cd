//! The kinds of memory gpu-mem counts, one per way memory comes to a device.

/// What a counted allocation is: where the memory lives and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum MemoryKind {
    /// Device memory from `device_array`, `to_device` and the like (`cuMemAlloc`).
    Device,
    /// Device memory from the stream-ordered pool (`Stream::device_array`, `cuMemAllocAsync`).
    Pool,
    /// Page-locked host memory (`pinned_array`, and the staging buffers of pageable copies).
    PageLocked,
    /// Page-locked host memory mapped into the device's address space (`mapped_array`).
    Mapped,
    /// Existing host memory registered with the device (`Registered`).
    Registered,
    /// Managed (unified) memory (`managed_array`).
    Managed,
    /// Device memory another library owns, adopted as an array (DLPack, `from_raw_parts`).
    Foreign,
    /// Another process's allocation opened through an IPC handle.
    IpcOpened,
}

impl MemoryKind {
    /// Every kind, in the order tables list them.
    pub const ALL: [MemoryKind; 8] = [
        MemoryKind::Device,
        MemoryKind::Pool,
        MemoryKind::PageLocked,
        MemoryKind::Mapped,
        MemoryKind::Registered,
        MemoryKind::Managed,
        MemoryKind::Foreign,
        MemoryKind::IpcOpened,
    ];

    /// The name tables and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::Pool => "pool",
            MemoryKind::PageLocked => "page-locked",
            MemoryKind::Mapped => "mapped",
            MemoryKind::Registered => "registered",
            MemoryKind::Managed => "managed",
            MemoryKind::Foreign => "foreign",
            MemoryKind::IpcOpened => "ipc-opened",
        }
    }

    /// `true` for memory in the device's own memory (what `mem_info`'s free bytes shrink by);
    /// `false` for host memory the device can reach (managed memory counts as host memory: it
    /// lives where it was last used).
    pub fn on_device(self) -> bool {
        matches!(
            self,
            MemoryKind::Device | MemoryKind::Pool | MemoryKind::Foreign | MemoryKind::IpcOpened
        )
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryKind;

    #[test]
    fn all_lists_each_kind_at_its_index() {
        for (i, kind) in MemoryKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind}");
        }
    }
}
