//! What the crate's unit tests share.

use proptest::prelude::ProptestConfig;

/// A property test's configuration: 256 cases, or under Miri (which runs the crate's unit
/// tests to check them for undefined behaviour) `miri_cases`, without the file of failures
/// (Miri has no file system).
pub(crate) fn proptest_config(miri_cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { miri_cases } else { 256 },
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::default()
    }
}
