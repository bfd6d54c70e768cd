//! How much is recorded beside the counters, chosen once per process by `GPU_MEM_TRACK` (or
//! [`set_tracking`] before the first device is opened):
//!
//! | value | live allocations | backtraces | history |
//! |---|---|---|---|
//! | `off` | not listed (counters only) | no | no |
//! | `location` (default) | size, kind, stream, age, caller's location | no | no |
//! | `backtrace` | as `location` | captured at each allocation | no |
//! | `history` | as `location` | no | the last [`HISTORY_EVENTS`] allocations and frees |
//!
//! Values combine with commas (`backtrace,history`). The default lists live allocations with
//! their locations: it costs one uncontended lock of one of eight shards per allocation and
//! free, next to a driver call that costs microseconds; that listing is what snapshots, leak
//! reports and out-of-memory explanations are made of.

use std::sync::OnceLock;

/// Events kept in a device's history when history is on (older ones are dropped first).
pub const HISTORY_EVENTS: usize = 100_000;

/// What is recorded beside the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    /// List live allocations with their locations.
    pub locations: bool,
    /// Capture a backtrace at each allocation (costly: for hunting a leak).
    pub backtraces: bool,
    /// Keep a bounded history of allocations and frees.
    pub history: bool,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking {
            locations: true,
            backtraces: false,
            history: false,
        }
    }
}

impl Tracking {
    /// Reads `GPU_MEM_TRACK`'s value; unknown words are an error naming them.
    pub fn parse(value: &str) -> Result<Tracking, String> {
        let mut tracking = Tracking {
            locations: true,
            backtraces: false,
            history: false,
        };
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "off" | "0" | "none" => {
                    tracking = Tracking {
                        locations: false,
                        backtraces: false,
                        history: false,
                    }
                }
                "location" | "locations" | "1" => tracking.locations = true,
                "backtrace" | "backtraces" => {
                    tracking.locations = true;
                    tracking.backtraces = true;
                }
                "history" => {
                    tracking.locations = true;
                    tracking.history = true;
                }
                other => {
                    return Err(format!(
                        "GPU_MEM_TRACK: `{other}` is not one of off, location, backtrace, history"
                    ));
                }
            }
        }
        Ok(tracking)
    }
}

static TRACKING: OnceLock<Tracking> = OnceLock::new();

/// Chooses what is recorded, for the whole process; `false` when it was already chosen (by an
/// earlier call, or by the first device opened, which reads `GPU_MEM_TRACK`).
pub fn set_tracking(tracking: Tracking) -> bool {
    TRACKING.set(tracking).is_ok()
}

/// What is recorded: set once, from `GPU_MEM_TRACK` unless [`set_tracking`] came first.
pub fn tracking() -> Tracking {
    *TRACKING.get_or_init(|| match std::env::var("GPU_MEM_TRACK") {
        Ok(value) => Tracking::parse(&value).unwrap_or_else(|message| {
            tracing::warn!("{message}; using the default (location)");
            Tracking::default()
        }),
        Err(_) => Tracking::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::Tracking;

    #[test]
    fn words_combine_and_unknown_ones_are_named() {
        let t = Tracking::parse("backtrace,history").unwrap();
        assert!(t.locations && t.backtraces && t.history);
        let off = Tracking::parse("off").unwrap();
        assert!(!off.locations && !off.backtraces && !off.history);
        assert_eq!(Tracking::parse("").unwrap(), Tracking::default());
        let err = Tracking::parse("location,bogus").unwrap_err();
        assert!(err.contains("`bogus`"), "{err}");
    }
}
