//! Simulator settings, from the environment or set in code.
//!
//! * `GPU_MEM_SIM_DEVICES` — number of simulated devices (default 1, at most 64).
//! * `GPU_MEM_SIM_MEMORY` — capacity of each device: bytes, or with a unit (`256MiB`, `4GiB`,
//!   `512M`, `1G`, `64KiB`, `1TiB`, `1PiB`); default 4 GiB, at most 1 PiB. Memory is only taken
//!   from the host when allocated; freed memory stays resident for reuse, up to the capacity or
//!   1 GiB (`SimBackend::cached_memory`, `SimBackend::trim_memory_cache`).
//! * `GPU_MEM_SIM_PINNED_LIMIT` — page-locked host memory (pinned and mapped allocations and
//!   registrations) each device may hold at once, same units; default 4 GiB. Page-locked memory
//!   cannot be swapped out, so a real driver refuses what the machine cannot lock; past the limit
//!   the simulator refuses with [`Error::HostOutOfMemory`] instead of letting the host run out.
//! * `GPU_MEM_SIM_WARP_SIZE` — threads per warp: 32 (default) or 64, or a comma-separated list
//!   giving each device its own (`32,64`).
//! * `GPU_MEM_SIM_SHARED_MEMORY` — shared memory per block (default `48KiB`).
//! * `GPU_MEM_SIM_WATCHDOG` — seconds a block may go without progress before it is reported
//!   (default 10; [`Watchdog`]).
//! * `GPU_MEM_SIM_CHECK` — what the simulator checks of compiled kernels beyond `gm_array`
//!   indices: `none` (default), `memcheck`, `racecheck` or `initcheck`, comma-separated
//!   ([`Checks`]).
//! * `GPU_MEM_SIM_THREAD_ORDER` — the order a block's threads run in between barriers:
//!   `index` (default), `reverse`, `random:SEED` or `random` (a seed drawn and logged)
//!   ([`ThreadOrder`]).

use gpu_mem_core::{Error, Result};

/// Settings of a simulated machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// One entry per device.
    pub devices: Vec<SimDeviceConfig>,
}

/// Settings of one simulated device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimDeviceConfig {
    /// Capacity in bytes.
    pub memory: u64,
    /// Warp (wavefront) size: 32 or 64.
    pub warp_size: u32,
    /// Shared memory a block may use, in bytes (static + dynamic).
    pub shared_memory: usize,
    /// Page-locked host memory the device may hold at once, in bytes.
    pub pinned_limit: u64,
    /// When a block that makes no progress is reported rather than left to hang.
    pub watchdog: Watchdog,
    /// What is checked of the compiled kernels it runs.
    pub checks: Checks,
    /// The order a block's threads run in between barriers.
    pub thread_order: ThreadOrder,
}

/// What the simulator checks of a compiled kernel's memory accesses, beyond `gm_array` indices
/// (always checked), as NVIDIA's compute-sanitizer tools do on a GPU.
///
/// Off by default: a checked kernel calls into the simulator at every load and store and runs
/// its threads on stacks (never as coroutines), several times slower; turn it on where a kernel
/// is being tested (`GPU_MEM_SIM_CHECK=memcheck cargo test`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Checks {
    /// Every load, store and atomic of the kernel's code lands in memory its thread may touch
    /// (live allocations, its block's shared memory, its own stack), or the thread ends with a
    /// `KernelFault` naming the access, the nearest allocation and the source line, before
    /// anything is written.
    pub memcheck: bool,
    /// Two threads touching the same byte, at least one writing, with nothing ordering them,
    /// make the launch fail with a `KernelFault` naming both accesses, their threads (and
    /// blocks) and lines: in a block's shared memory, threads with no barrier between them
    /// (block barriers; warp barriers and collectives within a warp); in global memory, threads
    /// of any blocks with no barrier, grid barrier or atomic between them. Atomics never race
    /// with each other, and a write that leaves the bytes as they were is not reported. Its
    /// kernels are built checked, so memcheck's checks come with it.
    pub racecheck: bool,
    /// A kernel reading device memory that no copy, fill or kernel wrote since it was allocated
    /// (zeros on the simulator, whatever the memory held before on a GPU), or shared memory
    /// no thread of its block wrote, fails with a `KernelFault` naming the access, the first
    /// unwritten byte and the line. Its device's allocations keep a bit per byte; its kernels
    /// are built checked, so memcheck's checks come with it.
    pub initcheck: bool,
}

impl Checks {
    /// The checks `value` names: `none`, `memcheck`, `racecheck` or `initcheck`
    /// (comma-separated).
    pub fn parse(value: &str) -> Result<Checks> {
        let mut checks = Checks::default();
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "none" => {}
                "memcheck" => checks.memcheck = true,
                "racecheck" => checks.racecheck = true,
                "initcheck" => checks.initcheck = true,
                _ => {
                    return Err(invalid(
                        "GPU_MEM_SIM_CHECK",
                        value,
                        "`none`, `memcheck`, `racecheck` or `initcheck` (comma-separated)",
                    ));
                }
            }
        }
        Ok(checks)
    }

    /// Whether kernels are built checked.
    pub fn any(&self) -> bool {
        self.memcheck || self.racecheck || self.initcheck
    }
}

/// The order in which the simulator runs a block's threads between two barriers.
///
/// Any order is one a GPU may take, so a correct kernel computes the same in each; a kernel
/// that reads what another thread writes without a barrier between them gets that value only
/// when the writer happens to run first. `Index` (thread 0 first) hides the bugs where the lower
/// thread writes; `Reverse` and `Random` expose them, as wrong results in the user's own checks
/// (racecheck names the two accesses). Any order other than `Index` runs every kernel's threads
/// on stacks of their own (never as a loop or as coroutines), so it costs several times the
/// time: it is for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ThreadOrder {
    /// In index order (x fastest), each thread until it waits.
    #[default]
    Index,
    /// The highest thread first.
    Reverse,
    /// A pseudo-random order drawn from `seed`, the block's index and the number of barriers
    /// passed: each block and each stretch between barriers gets its own, the same in every
    /// run with the same seed.
    Random {
        /// What the orders are drawn from.
        seed: u64,
    },
}

impl ThreadOrder {
    /// The order `value` names: `index`, `reverse`, `random:SEED` (a decimal or `0x` number)
    /// or `random` (a seed drawn from the clock, logged with `tracing` and printed by
    /// `Display`).
    pub fn parse(value: &str) -> Result<ThreadOrder> {
        let expected = "`index`, `reverse`, `random` or `random:SEED`";
        let value = value.trim();
        match value {
            "index" => return Ok(ThreadOrder::Index),
            "reverse" => return Ok(ThreadOrder::Reverse),
            "random" => {
                let seed = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |t| t.as_nanos() as u64);
                let order = ThreadOrder::Random { seed };
                tracing::info!(%order, "simulated threads run in a random order; set GPU_MEM_SIM_THREAD_ORDER={order} to run this order again");
                return Ok(order);
            }
            _ => {}
        }
        let seed = value
            .strip_prefix("random:")
            .map(str::trim)
            .and_then(|s| match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            })
            .ok_or_else(|| invalid("GPU_MEM_SIM_THREAD_ORDER", value, expected))?;
        Ok(ThreadOrder::Random { seed })
    }
}

impl std::fmt::Display for ThreadOrder {
    /// As [`ThreadOrder::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadOrder::Index => f.write_str("index"),
            ThreadOrder::Reverse => f.write_str("reverse"),
            ThreadOrder::Random { seed } => write!(f, "random:{seed}"),
        }
    }
}

/// When the simulator reports a block that makes no progress — threads that only spin
/// (atomics, spin-wait hints), or threads kept at a barrier the others never reach — where a
/// GPU would hang. A block is reported once both its count and the time have passed: an atomic
/// looks like a spin to the simulator, so a thread adding up a large input with atomics is at
/// work, and only the time tells it from a spin-wait that never ends; the count keeps a slow
/// machine's short stall from being taken for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watchdog {
    /// How long.
    pub time: std::time::Duration,
    /// Scheduling rounds of the block in which its threads only spun, or in which threads
    /// waited at a block barrier while the others ran without reaching it.
    pub rounds: u64,
    /// Atomics (and other spins) one thread of an async kernel makes without awaiting: it holds
    /// its block's only OS thread, so a thread it waits for can never run.
    pub spins: u64,
}

/// Default time a block may go without progress ([`Watchdog::time`]).
pub const DEFAULT_WATCHDOG: std::time::Duration = std::time::Duration::from_secs(10);

impl Watchdog {
    /// The counts for the default time, which a thread adding up a large input with atomics
    /// passes in a fraction of it: 2^20 rounds of a block whose last live thread makes 16
    /// atomics per round (~16 M atomics, 0.14 s), 2^24 atomics of an async thread.
    const ROUNDS: u64 = 1 << 20;
    const SPINS: u64 = 1 << 24;
    /// The least counts, whatever the time: the executor starts reading the clock at half of
    /// them (`executor::watchdog`).
    const MIN_ROUNDS: u64 = 1 << 11;
    const MIN_SPINS: u64 = 1 << 17;

    /// The watchdog of `time`: the default counts, proportionally fewer for a shorter time, so
    /// that a short watchdog (as tests set) is short.
    pub fn after(time: std::time::Duration) -> Watchdog {
        let share = (time.as_secs_f64() / DEFAULT_WATCHDOG.as_secs_f64()).min(1.0);
        let scaled = |count: u64, least: u64| ((count as f64 * share) as u64).max(least);
        Watchdog {
            time,
            rounds: scaled(Self::ROUNDS, Self::MIN_ROUNDS),
            spins: scaled(Self::SPINS, Self::MIN_SPINS),
        }
    }
}

impl Default for Watchdog {
    fn default() -> Self {
        Watchdog::after(DEFAULT_WATCHDOG)
    }
}

/// Default capacity of a simulated device.
pub const DEFAULT_MEMORY: u64 = 4 << 30;

/// Default shared memory per block (48 KiB, as CUDA).
pub const DEFAULT_SHARED_MEMORY: usize = 48 << 10;

/// Default page-locked host memory per device (4 GiB).
pub const DEFAULT_PINNED_LIMIT: u64 = 4 << 30;

impl Default for SimDeviceConfig {
    fn default() -> Self {
        SimDeviceConfig {
            memory: DEFAULT_MEMORY,
            warp_size: 32,
            shared_memory: DEFAULT_SHARED_MEMORY,
            pinned_limit: DEFAULT_PINNED_LIMIT,
            watchdog: Watchdog::default(),
            checks: Checks::default(),
            thread_order: ThreadOrder::Index,
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            devices: vec![SimDeviceConfig::default()],
        }
    }
}

impl SimConfig {
    /// `count` devices with `memory` bytes each and 32-thread warps.
    pub fn uniform(count: usize, memory: u64) -> SimConfig {
        SimConfig {
            devices: vec![
                SimDeviceConfig {
                    memory,
                    ..SimDeviceConfig::default()
                };
                count
            ],
        }
    }

    /// Reads `GPU_MEM_SIM_DEVICES`, `GPU_MEM_SIM_MEMORY`, `GPU_MEM_SIM_WARP_SIZE`,
    /// `GPU_MEM_SIM_SHARED_MEMORY`, `GPU_MEM_SIM_PINNED_LIMIT`, `GPU_MEM_SIM_WATCHDOG`
    /// (seconds, such as `10` or `0.5`), `GPU_MEM_SIM_CHECK` and `GPU_MEM_SIM_THREAD_ORDER`.
    pub fn from_env() -> Result<SimConfig> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let count = match var("GPU_MEM_SIM_DEVICES") {
            Some(v) => parse_count(&v)?,
            None => 1,
        };
        let memory = match var("GPU_MEM_SIM_MEMORY") {
            Some(v) => parse_size_of("GPU_MEM_SIM_MEMORY", &v)?,
            None => DEFAULT_MEMORY,
        };
        let pinned_limit = match var("GPU_MEM_SIM_PINNED_LIMIT") {
            Some(v) => parse_size_of("GPU_MEM_SIM_PINNED_LIMIT", &v)?,
            None => DEFAULT_PINNED_LIMIT,
        };
        let warps = match var("GPU_MEM_SIM_WARP_SIZE") {
            Some(v) => parse_warps(&v)?,
            None => vec![32],
        };
        let shared_memory = match var("GPU_MEM_SIM_SHARED_MEMORY") {
            Some(v) => {
                usize::try_from(parse_size_of("GPU_MEM_SIM_SHARED_MEMORY", &v)?).map_err(|_| {
                    invalid(
                        "GPU_MEM_SIM_SHARED_MEMORY",
                        &v,
                        "a size that fits in memory",
                    )
                })?
            }
            None => DEFAULT_SHARED_MEMORY,
        };
        let watchdog = match var("GPU_MEM_SIM_WATCHDOG") {
            Some(v) => Watchdog::after(parse_watchdog(&v)?),
            None => Watchdog::default(),
        };
        let checks = match var("GPU_MEM_SIM_CHECK") {
            Some(v) => Checks::parse(&v)?,
            None => Checks::default(),
        };
        let thread_order = match var("GPU_MEM_SIM_THREAD_ORDER") {
            Some(v) => ThreadOrder::parse(&v)?,
            None => ThreadOrder::Index,
        };
        let devices = (0..count)
            .map(|i| SimDeviceConfig {
                checks,
                thread_order,
                memory,
                warp_size: *warps.get(i).or(warps.last()).unwrap_or(&32),
                shared_memory,
                pinned_limit,
                watchdog,
            })
            .collect();
        Ok(SimConfig { devices })
    }
}

fn invalid(name: &'static str, value: &str, expected: &str) -> Error {
    Error::InvalidArgument {
        name,
        reason: format!("{value:?} is not {expected}"),
    }
}

fn parse_count(value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(invalid(
            "GPU_MEM_SIM_DEVICES",
            value,
            "a device count from 1 to 64",
        )),
    }
}

fn parse_watchdog(value: &str) -> Result<std::time::Duration> {
    match value.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(seconds))
        }
        _ => Err(invalid(
            "GPU_MEM_SIM_WATCHDOG",
            value,
            "a number of seconds above 0, up to a day",
        )),
    }
}

fn parse_warps(value: &str) -> Result<Vec<u32>> {
    value
        .split(',')
        .map(|w| match w.trim().parse::<u32>() {
            Ok(n @ (32 | 64)) => Ok(n),
            _ => Err(invalid(
                "GPU_MEM_SIM_WARP_SIZE",
                value,
                "32 or 64 (or a comma-separated list)",
            )),
        })
        .collect()
}

/// Parses `4096`, `64KiB`, `256MiB`, `4GiB`, `512M`, `1G`, `1.5GiB`, `2TiB`, `1PiB`: a number
/// of bytes from 1 byte to 1 PiB, with an optional binary unit (`K`/`KB`/`KiB` = 1024 bytes, up
/// to `P`/`PB`/`PiB`; case-insensitive). Errors name `GPU_MEM_SIM_MEMORY`; see [`parse_size_of`].
pub fn parse_size(value: &str) -> Result<u64> {
    parse_size_of("GPU_MEM_SIM_MEMORY", value)
}

/// [`parse_size`], with errors naming the setting `name` the value came from.
pub fn parse_size_of(name: &'static str, value: &str) -> Result<u64> {
    let text = value.trim();
    let expected = "a size such as 268435456, 256MiB or 4GiB";
    // GPU memory sizes are binary: a bare K, M, G, T or P (with or without B) means KiB, MiB,
    // ... as in the environment variables' documentation; the `bytesize` crate does the rest.
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim();
    let binary_unit = match unit.to_ascii_lowercase().as_str() {
        "k" | "kb" => "KiB",
        "m" | "mb" => "MiB",
        "g" | "gb" => "GiB",
        "t" | "tb" => "TiB",
        "p" | "pb" => "PiB",
        _ => unit,
    };
    if number.is_empty()
        || !matches!(
            binary_unit.to_ascii_lowercase().as_str(),
            "" | "b" | "kib" | "mib" | "gib" | "tib" | "pib"
        )
    {
        return Err(invalid(name, value, expected));
    }
    let size: bytesize::ByteSize = format!("{number}{binary_unit}")
        .parse()
        .map_err(|_| invalid(name, value, expected))?;
    let bytes = size.as_u64();
    if !(1..=1 << 50).contains(&bytes) {
        return Err(invalid(name, value, "a size from 1 byte to 1 PiB"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("0").is_err());
        // The documented range goes up to 1 PiB, in any unit.
        assert_eq!(parse_size("1PiB").unwrap(), 1 << 50);
        assert_eq!(parse_size("1p").unwrap(), 1 << 50);
        assert_eq!(parse_size("2TiB").unwrap(), 2 << 40);
        assert_eq!(parse_size("1024TiB").unwrap(), 1 << 50);
        assert!(parse_size("2PiB").is_err());
    }

    #[test]
    fn checks_are_named() {
        assert_eq!(Checks::parse("none").unwrap(), Checks::default());
        assert_eq!(Checks::parse("").unwrap(), Checks::default());
        assert!(Checks::parse("memcheck").unwrap().memcheck);
        assert!(Checks::parse(" none , memcheck ").unwrap().any());
        assert!(Checks::parse("racecheck").unwrap().racecheck);
        assert!(Checks::parse("initcheck").unwrap().initcheck);
        assert!(Checks::parse("initcheck").unwrap().any());
        let Err(Error::InvalidArgument { name, reason }) = Checks::parse("memcheck,synccheck")
        else {
            panic!("an unknown check is refused");
        };
        assert_eq!(name, "GPU_MEM_SIM_CHECK");
        assert!(
            reason.contains("synccheck") && reason.contains("initcheck"),
            "{reason}"
        );
    }

    #[test]
    fn thread_orders_are_named_as_they_print() {
        assert_eq!(ThreadOrder::parse("index").unwrap(), ThreadOrder::Index);
        assert_eq!(
            ThreadOrder::parse(" reverse ").unwrap(),
            ThreadOrder::Reverse
        );
        assert_eq!(
            ThreadOrder::parse("random:0x10").unwrap(),
            ThreadOrder::Random { seed: 16 }
        );
        for order in [
            ThreadOrder::Index,
            ThreadOrder::Reverse,
            ThreadOrder::Random { seed: u64::MAX },
        ] {
            assert_eq!(ThreadOrder::parse(&order.to_string()).unwrap(), order);
        }
        // (A drawn seed reads the clock, which Miri's isolation refuses.)
        if !cfg!(miri) {
            assert!(matches!(
                ThreadOrder::parse("random").unwrap(),
                ThreadOrder::Random { .. }
            ));
        }
        for bad in ["", "random:", "random:-1", "shuffled", "random:0xg"] {
            let Err(Error::InvalidArgument { name, reason }) = ThreadOrder::parse(bad) else {
                panic!("{bad:?} is refused");
            };
            assert_eq!(name, "GPU_MEM_SIM_THREAD_ORDER");
            assert!(reason.contains("random:SEED"), "{reason}");
        }
    }

    #[test]
    fn watchdog_in_seconds() {
        assert_eq!(
            parse_watchdog("0.5").unwrap(),
            std::time::Duration::from_millis(500)
        );
        assert_eq!(parse_watchdog("10").unwrap(), DEFAULT_WATCHDOG);
        for bad in ["0", "-1", "soon", "1e9", "NaN"] {
            assert!(
                matches!(
                    parse_watchdog(bad),
                    Err(Error::InvalidArgument {
                        name: "GPU_MEM_SIM_WATCHDOG",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn size_errors_name_their_setting() {
        let err = parse_size_of("GPU_MEM_SIM_SHARED_MEMORY", "lots").unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    name: "GPU_MEM_SIM_SHARED_MEMORY",
                    ..
                }
            ),
            "{err}"
        );
        let err = parse_size_of("GPU_MEM_SIM_PINNED_LIMIT", "0").unwrap_err();
        assert!(
            err.to_string().contains("GPU_MEM_SIM_PINNED_LIMIT"),
            "{err}"
        );
    }

    #[test]
    fn warps_and_counts() {
        assert_eq!(parse_warps("32,64").unwrap(), vec![32, 64]);
        assert!(parse_warps("48").is_err());
        assert!(parse_count("0").is_err());
        assert_eq!(parse_count("2").unwrap(), 2);
    }
}
