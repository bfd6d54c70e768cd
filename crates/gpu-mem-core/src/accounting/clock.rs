//! The accounting's clock: a reading per allocation costs a few nanoseconds.
//!
//! On x86-64 it reads the time-stamp counter (`rdtsc`, about 7 ns; invariant on every CPU a GPU
//! sits beside since 2008), converted to seconds at read time from the ticks counted over the
//! device's lifetime against `Instant`; `Instant::now` (about 20-25 ns, a `clock_gettime`) would
//! cost more than the counters. Elsewhere, and under Miri, it is `Instant`, in nanoseconds.

use std::time::Instant;

/// A point on the clock, in its own ticks.
pub(crate) type Ticks = u64;

/// Reads the clock.
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) fn now() -> Ticks {
    // SAFETY: `rdtsc` exists on every x86-64 processor and has no preconditions.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Reads the clock.
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
pub(crate) fn now() -> Ticks {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Where a device's clock started, in both measures, to turn ticks into seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    instant: Instant,
    ticks: Ticks,
}

impl Origin {
    pub(crate) fn now() -> Origin {
        Origin {
            instant: Instant::now(),
            ticks: now(),
        }
    }

    /// Seconds per tick, from what both clocks counted since the origin (1 ns a tick where the
    /// clock is `Instant`'s, or before any tick has passed).
    fn seconds_per_tick(&self) -> f64 {
        if cfg!(not(all(target_arch = "x86_64", not(miri)))) {
            return 1e-9;
        }
        let seconds = self.instant.elapsed().as_secs_f64();
        let ticks = now().saturating_sub(self.ticks);
        if ticks == 0 || seconds <= 0.0 {
            1e-9
        } else {
            seconds / ticks as f64
        }
    }

    /// Seconds from the origin to `at`.
    pub(crate) fn seconds_at(&self, at: Ticks) -> f64 {
        at.saturating_sub(self.ticks) as f64 * self.seconds_per_tick()
    }

    /// Seconds from the origin to now.
    pub(crate) fn seconds_now(&self) -> f64 {
        self.instant.elapsed().as_secs_f64()
    }
}
