//! The simulator's model of NCCL's contract: communicators between simulated devices of one
//! process, and what one rank's collective call does on its stream. It is a simulator of the
//! engine's rules for tests, not a network layer.
//!
//! # Contract
//!
//! * **Cliques.** A communicator is a [`Clique`] of ranks (one device each) and one [`Member`]
//!   per rank, named by a handle. `ncclCommInitAll` makes all members at once; `ncclCommInitRank`
//!   waits, on a [`Joining`] keyed by the unique id, until every rank has joined (or the
//!   timeout passes: the ranks that never joined are named).
//! * **Matching.** Each member numbers its collective calls in the order they are enqueued; the
//!   stream job of call `n` posts its input to round `n` of the clique and waits there until
//!   every rank has posted. Then each rank checks that all posted the same call (name, count,
//!   type, reduction, root) — a mismatch fails every rank's call, naming each rank's — computes
//!   its own result from the inputs in rank order (so every rank gets the same bits), and writes
//!   it. A rank that does not post within the timeout fails the others' calls, naming it, and
//!   breaks the clique: every later call on it fails at once, as NCCL's communicator is unusable
//!   after an error.
//! * **Point to point.** A send posts its bytes to the (sender, receiver) mailbox; outside a
//!   group it then waits, up to the timeout, until its receive has taken them (a receiver that
//!   never calls is reported), inside one it completes at once (NCCL progresses a group's sends
//!   and receives together, so a ring exchange on one stream cannot wait for itself). A receive
//!   waits for the next message of its pair, up to the timeout, and fails when its size or type
//!   differs. Messages of a pair arrive in order.
//! * **Stream order.** All of this runs as jobs of the streams the calls were given, so each
//!   call is ordered after its stream's earlier work and complete when the stream says so.

use crate::copy::{Mover, read_range, write_range};
use crate::memory::Range;
use gpu_mem_core::backend::{CollectiveCall, CollectiveType, ReduceOp, UNIQUE_ID_BYTES, UniqueId};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a rank waits for the others by default (`GPU_MEM_SIM_COLLECTIVE_TIMEOUT_MS`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The first bytes of every unique id the simulator makes.
const ID_MAGIC: &[u8; 16] = b"gpu-mem-sim-nccl";

/// Every communicator of one simulator.
#[derive(Debug)]
pub(crate) struct Registry {
    members: Mutex<HashMap<u64, Arc<Member>>>,
    joining: Mutex<HashMap<[u8; UNIQUE_ID_BYTES], Arc<Joining>>>,
    joined: Condvar,
    next: AtomicU64,
    timeout_ms: AtomicU64,
}

/// One rank of a communicator.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) clique: Arc<Clique>,
    pub(crate) rank: usize,
    pub(crate) device: usize,
    /// The number of the next collective call of this rank.
    next_call: AtomicU64,
}

/// The ranks of one communicator and their meeting points.
#[derive(Debug)]
pub(crate) struct Clique {
    nranks: usize,
    state: Mutex<CliqueState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct CliqueState {
    /// Call number → what each rank posted for it.
    rounds: HashMap<u64, Round>,
    /// (sender, receiver) → messages not received yet, oldest first.
    mailboxes: HashMap<(usize, usize), VecDeque<Arc<Post>>>,
    /// Why the clique is unusable, once it is.
    broken: Option<String>,
}

#[derive(Debug)]
struct Round {
    posts: Vec<Option<Arc<Post>>>,
    /// Ranks done with the round (it goes when all are).
    done: usize,
}

/// One rank's side of a call: what it is, and the bytes it contributes.
#[derive(Debug)]
struct Post {
    signature: Signature,
    data: Vec<u8>,
}

/// What every rank of a call must agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    call: &'static str,
    count: usize,
    dtype: CollectiveType,
    op: Option<ReduceOp>,
    root: Option<usize>,
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} {}", self.call, self.count, self.dtype.name())?;
        if let Some(op) = self.op {
            write!(f, " ({})", op.name())?;
        }
        if let Some(root) = self.root {
            write!(f, " with root {root}")?;
        }
        Ok(())
    }
}

/// Ranks joining one communicator by its unique id.
#[derive(Debug)]
struct Joining {
    nranks: usize,
    /// Handle of each rank's member once it joined.
    slots: Mutex<Vec<Option<(usize, u64)>>>,
    clique: Mutex<Option<Arc<Clique>>>,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        let timeout = std::env::var("GPU_MEM_SIM_COLLECTIVE_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_TIMEOUT.as_millis() as u64);
        Registry {
            members: Mutex::new(HashMap::new()),
            joining: Mutex::new(HashMap::new()),
            joined: Condvar::new(),
            next: AtomicU64::new(1),
            timeout_ms: AtomicU64::new(timeout),
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn set_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// A fresh unique id: the magic, this simulator's id and a counter.
    pub(crate) fn unique_id(&self, backend: u64) -> UniqueId {
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes[..16].copy_from_slice(ID_MAGIC);
        bytes[16..24].copy_from_slice(&backend.to_le_bytes());
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        bytes[24..32].copy_from_slice(&n.to_le_bytes());
        bytes[32..40].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
        UniqueId(bytes)
    }

    fn add_member(&self, clique: &Arc<Clique>, rank: usize, device: usize) -> u64 {
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        let member = Arc::new(Member {
            clique: Arc::clone(clique),
            rank,
            device,
            next_call: AtomicU64::new(0),
        });
        lock(&self.members).insert(handle, member);
        handle
    }

    /// `ncclCommInitAll`: one clique over `devices`.
    pub(crate) fn init_all(&self, devices: &[usize]) -> Vec<u64> {
        let clique = Clique::new(devices.len());
        devices
            .iter()
            .enumerate()
            .map(|(rank, &device)| self.add_member(&clique, rank, device))
            .collect()
    }

    /// `ncclCommInitRank`: joins `rank` of `nranks` of the clique `id` names, waiting for the
    /// others.
    pub(crate) fn init_rank(
        &self,
        backend: u64,
        device: usize,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<u64> {
        let fail = |reason: String| Error::Collective {
            call: "ncclCommInitRank",
            rank,
            nranks,
            reason,
        };
        if id.0[..16] != ID_MAGIC[..] || id.0[16..24] != backend.to_le_bytes() {
            return Err(fail(
                "the unique id was not made by this simulator (UniqueId::generate on one of its \
                 devices)"
                    .into(),
            ));
        }
        let joining = {
            let mut table = lock(&self.joining);
            let entry = table.entry(id.0).or_insert_with(|| {
                Arc::new(Joining {
                    nranks,
                    slots: Mutex::new(vec![None; nranks]),
                    clique: Mutex::new(None),
                })
            });
            Arc::clone(entry)
        };
        if joining.nranks != nranks {
            return Err(fail(format!(
                "another rank joined this id with {} ranks",
                joining.nranks
            )));
        }
        let handle = {
            let mut slots = lock(&joining.slots);
            if slots[rank].is_some() {
                return Err(fail(format!("rank {rank} has joined this id already")));
            }
            let handle = self.next.fetch_add(1, Ordering::Relaxed);
            slots[rank] = Some((device, handle));
            if slots.iter().all(Option::is_some) {
                let clique = Clique::new(nranks);
                for (r, slot) in slots.iter().enumerate() {
                    if let Some((d, h)) = *slot {
                        let member = Arc::new(Member {
                            clique: Arc::clone(&clique),
                            rank: r,
                            device: d,
                            next_call: AtomicU64::new(0),
                        });
                        lock(&self.members).insert(h, member);
                    }
                }
                *lock(&joining.clique) = Some(clique);
                lock(&self.joining).remove(&id.0);
            }
            handle
        };
        // Wait for the others (on the registry's condition variable, under the table lock).
        let deadline = Instant::now() + self.timeout();
        let mut table = lock(&self.joining);
        self.joined.notify_all();
        loop {
            if lock(&joining.clique).is_some() {
                return Ok(handle);
            }
            let now = Instant::now();
            if now >= deadline {
                let mut slots = lock(&joining.slots);
                slots[rank] = None;
                let missing: Vec<String> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.is_none())
                    .map(|(r, _)| r.to_string())
                    .collect();
                if slots.iter().all(Option::is_none) {
                    table.remove(&id.0);
                }
                return Err(fail(format!(
                    "rank(s) {} never joined within {:?}",
                    missing.join(", "),
                    self.timeout()
                )));
            }
            table = wait_timeout(&self.joined, table, deadline - now).0;
        }
    }

    pub(crate) fn member(&self, handle: u64) -> Result<Arc<Member>> {
        lock(&self.members)
            .get(&handle)
            .cloned()
            .ok_or(Error::InvalidHandle {
                kind: "communicator",
                handle,
            })
    }

    pub(crate) fn destroy(&self, handle: u64) -> Result<()> {
        lock(&self.members)
            .remove(&handle)
            .map(|_| ())
            .ok_or(Error::InvalidHandle {
                kind: "communicator",
                handle,
            })
    }
}

impl Clique {
    fn new(nranks: usize) -> Arc<Clique> {
        Arc::new(Clique {
            nranks,
            state: Mutex::new(CliqueState::default()),
            changed: Condvar::new(),
        })
    }
}

/// One rank's call, ready to run as its stream's job: the device ranges it reads and writes
/// were resolved when it was enqueued.
pub(crate) struct Job {
    pub(crate) member: Arc<Member>,
    pub(crate) number: u64,
    pub(crate) call: CollectiveCall,
    pub(crate) dtype: CollectiveType,
    /// What the rank contributes (`None` where it contributes nothing: a broadcast's non-root).
    pub(crate) input: Option<Range>,
    /// Where the rank's result goes (`None` where it gets none: a reduce's non-root, a send).
    pub(crate) output: Option<Range>,
    pub(crate) timeout: Duration,
    /// For a send: whether it waits until its receive has taken it (outside a group), or
    /// completes at once (inside one, where NCCL progresses a rank's sends and receives
    /// together, so that a ring exchange on one stream cannot wait for itself).
    pub(crate) rendezvous: bool,
}

impl Member {
    /// The number of this rank's next collective call (in enqueue order).
    pub(crate) fn number_call(&self) -> u64 {
        self.next_call.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn nranks(&self) -> usize {
        self.clique.nranks
    }

    /// Why the communicator is unusable, once it is.
    pub(crate) fn broken(&self) -> Option<String> {
        lock(&self.clique.state).broken.clone()
    }
}

/// Waits on `condvar` for at most `timeout` (a poisoned lock is still consistent here: every
/// critical section leaves complete entries).
fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: std::sync::MutexGuard<'a, T>,
    timeout: Duration,
) -> (std::sync::MutexGuard<'a, T>, bool) {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, result)) => (guard, result.timed_out()),
        Err(poisoned) => {
            let (guard, result) = poisoned.into_inner();
            (guard, result.timed_out())
        }
    }
}

/// Reads a range into a new vector.
fn read(range: &Range) -> Vec<u8> {
    let mut bytes = vec![0u8; range.len];
    // SAFETY: the vector is writable for `range.len` bytes.
    unsafe { read_range(range, bytes.as_mut_ptr(), None, Mover::Cpu) };
    bytes
}

/// Writes `bytes` (exactly the range's length) into a range.
fn write(range: &Range, bytes: &[u8]) {
    debug_assert_eq!(bytes.len(), range.len);
    let len = bytes.len().min(range.len);
    let range = Range {
        region: Arc::clone(&range.region),
        offset: range.offset,
        len,
    };
    // SAFETY: `bytes` is readable for `len` bytes, the range's length.
    unsafe { write_range(&range, bytes.as_ptr(), None, Mover::Cpu) };
}

impl Job {
    /// Runs the call; an `Err` is the stream's failure, naming the call and rank.
    pub(crate) fn run(self) -> std::result::Result<(), String> {
        let name = self.call.name();
        let (rank, nranks) = (self.member.rank, self.member.nranks());
        self.run_inner()
            .map_err(|reason| format!("{name} on rank {rank} of {nranks}: {reason}"))
    }

    fn signature(&self) -> Signature {
        let (count, op, root) = match self.call {
            CollectiveCall::AllReduce { count, op, .. }
            | CollectiveCall::ReduceScatter { count, op, .. } => (count, Some(op), None),
            CollectiveCall::Reduce {
                count, op, root, ..
            } => (count, Some(op), Some(root)),
            CollectiveCall::Broadcast { count, root, .. } => (count, None, Some(root)),
            CollectiveCall::AllGather { count, .. }
            | CollectiveCall::Send { count, .. }
            | CollectiveCall::Recv { count, .. } => (count, None, None),
        };
        Signature {
            call: self.call.name(),
            count,
            dtype: self.dtype,
            op,
            root,
        }
    }

    fn run_inner(&self) -> std::result::Result<(), String> {
        let clique = &self.member.clique;
        let rank = self.member.rank;
        let data = self.input.as_ref().map(read).unwrap_or_default();
        let post = Arc::new(Post {
            signature: self.signature(),
            data,
        });
        match self.call {
            CollectiveCall::Send { peer, .. } => {
                {
                    let mut state = lock(&clique.state);
                    if let Some(why) = &state.broken {
                        return Err(format!("the communicator is unusable: {why}"));
                    }
                    state
                        .mailboxes
                        .entry((rank, peer))
                        .or_default()
                        .push_back(Arc::clone(&post));
                    clique.changed.notify_all();
                }
                if !self.rendezvous {
                    return Ok(());
                }
                // Outside a group the send completes once its receive has taken it.
                self.wait(|state| {
                    let waiting = state
                        .mailboxes
                        .get(&(rank, peer))
                        .is_some_and(|queue| queue.iter().any(|p| Arc::ptr_eq(p, &post)));
                    if waiting {
                        Err(format!("rank {peer} never received from rank {rank}"))
                    } else {
                        Ok(())
                    }
                })
            }
            CollectiveCall::Recv { peer, .. } => {
                let message = self.wait(|state| {
                    state
                        .mailboxes
                        .get_mut(&(peer, rank))
                        .and_then(VecDeque::pop_front)
                        .ok_or_else(|| format!("rank {peer} never sent to rank {rank}"))
                })?;
                let (mine, theirs) = (post.signature, message.signature);
                if (mine.count, mine.dtype) != (theirs.count, theirs.dtype) {
                    return Err(format!(
                        "rank {peer} sent {} {}, rank {rank} receives {} {}",
                        theirs.count,
                        theirs.dtype.name(),
                        mine.count,
                        mine.dtype.name()
                    ));
                }
                if let Some(out) = &self.output {
                    write(out, &message.data);
                }
                Ok(())
            }
            _ => self.meet(post),
        }
    }

    /// Waits, under the clique's lock, until `take` finds what it waits for, the clique breaks,
    /// or the timeout passes (which breaks the clique with `take`'s reason).
    fn wait<R>(
        &self,
        mut take: impl FnMut(&mut CliqueState) -> std::result::Result<R, String>,
    ) -> std::result::Result<R, String> {
        let clique = &self.member.clique;
        let deadline = Instant::now() + self.timeout;
        let mut state = lock(&clique.state);
        loop {
            if let Some(why) = &state.broken {
                return Err(format!("the communicator is unusable: {why}"));
            }
            let missing = match take(&mut state) {
                Ok(found) => return Ok(found),
                Err(missing) => missing,
            };
            let now = Instant::now();
            if now >= deadline {
                let why = format!("{missing} within {:?}", self.timeout);
                state.broken = Some(why.clone());
                clique.changed.notify_all();
                return Err(why);
            }
            state = wait_timeout(&clique.changed, state, deadline - now).0;
        }
    }

    /// A collective call: post, wait for every rank, check they agree, write the result.
    fn meet(&self, post: Arc<Post>) -> std::result::Result<(), String> {
        let clique = &self.member.clique;
        let (rank, nranks, number) = (self.member.rank, clique.nranks, self.number);
        {
            let mut state = lock(&clique.state);
            let round = state.rounds.entry(number).or_insert_with(|| Round {
                posts: vec![None; nranks],
                done: 0,
            });
            round.posts[rank] = Some(post);
            clique.changed.notify_all();
        }
        let posts: Vec<Arc<Post>> = self.wait(|state| {
            let round = state
                .rounds
                .get_mut(&number)
                .ok_or_else(|| "its round is gone".to_string())?;
            let missing: Vec<String> = round
                .posts
                .iter()
                .enumerate()
                .filter(|(_, p)| p.is_none())
                .map(|(r, _)| r.to_string())
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "rank(s) {} never made call #{number} of the communicator",
                    missing.join(", ")
                ));
            }
            let posts: Vec<Arc<Post>> = round.posts.iter().flatten().cloned().collect();
            round.done += 1;
            if round.done == nranks {
                state.rounds.remove(&number);
            }
            Ok(posts)
        })?;
        let mine = posts[rank].signature;
        if posts.iter().any(|p| p.signature != mine) {
            let calls: Vec<String> = posts
                .iter()
                .enumerate()
                .map(|(r, p)| format!("rank {r}: {}", p.signature))
                .collect();
            return Err(format!(
                "the ranks' calls #{number} do not match ({})",
                calls.join("; ")
            ));
        }
        let Some(out) = &self.output else {
            return Ok(());
        };
        let dtype = self.dtype;
        let result = match self.call {
            CollectiveCall::AllReduce { op, .. } | CollectiveCall::Reduce { op, .. } => {
                reduce_all(&posts, dtype, op, nranks)
            }
            CollectiveCall::ReduceScatter { count, op, .. } => {
                let all = reduce_all(&posts, dtype, op, nranks);
                let part = count * dtype.size();
                all[rank * part..(rank + 1) * part].to_vec()
            }
            CollectiveCall::Broadcast { root, .. } => posts[root].data.clone(),
            CollectiveCall::AllGather { .. } => {
                posts.iter().flat_map(|p| p.data.iter().copied()).collect()
            }
            CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } => return Ok(()),
        };
        if result.len() != out.len {
            return Err(format!(
                "the result has {} bytes, the destination {}",
                result.len(),
                out.len
            ));
        }
        write(out, &result);
        Ok(())
    }
}

/// `op` over every post's bytes, element by element, in rank order.
fn reduce_all(posts: &[Arc<Post>], dtype: CollectiveType, op: ReduceOp, nranks: usize) -> Vec<u8> {
    macro_rules! typed {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            let parse = |b: &[u8]| -> Vec<$t> {
                b.chunks_exact(N)
                    .map(|c| {
                        let mut a = [0u8; N];
                        a.copy_from_slice(c);
                        <$t>::from_ne_bytes(a)
                    })
                    .collect()
            };
            let mut acc = parse(&posts[0].data);
            for post in &posts[1..] {
                for (a, x) in acc.iter_mut().zip(parse(&post.data)) {
                    *a = match op {
                        ReduceOp::Sum | ReduceOp::Avg => a.wrapping_or_add(x),
                        ReduceOp::Prod => a.wrapping_or_mul(x),
                        ReduceOp::Max => {
                            if x > *a {
                                x
                            } else {
                                *a
                            }
                        }
                        ReduceOp::Min => {
                            if x < *a {
                                x
                            } else {
                                *a
                            }
                        }
                    };
                }
            }
            if op == ReduceOp::Avg {
                for a in &mut acc {
                    *a = a.divide_by(nranks);
                }
            }
            acc.iter().flat_map(|v| v.to_ne_bytes()).collect()
        }};
    }
    match dtype {
        CollectiveType::I8 => typed!(i8),
        CollectiveType::U8 => typed!(u8),
        CollectiveType::I32 => typed!(i32),
        CollectiveType::U32 => typed!(u32),
        CollectiveType::I64 => typed!(i64),
        CollectiveType::U64 => typed!(u64),
        CollectiveType::F32 => typed!(f32),
        CollectiveType::F64 => typed!(f64),
    }
}

/// Arithmetic as a GPU does it: integers wrap, floats follow IEEE.
trait Arith: Copy {
    fn wrapping_or_add(self, x: Self) -> Self;
    fn wrapping_or_mul(self, x: Self) -> Self;
    fn divide_by(self, n: usize) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn wrapping_or_add(self, x: Self) -> Self { self.wrapping_add(x) }
            fn wrapping_or_mul(self, x: Self) -> Self { self.wrapping_mul(x) }
            #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
            fn divide_by(self, n: usize) -> Self { self.wrapping_div(n as $t) }
        }
    )*};
}
int_arith!(i8, u8, i32, u32, i64, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn wrapping_or_add(self, x: Self) -> Self { self + x }
            fn wrapping_or_mul(self, x: Self) -> Self { self * x }
            fn divide_by(self, n: usize) -> Self { self / n as $t }
        }
    )*};
}
float_arith!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    fn post(data: Vec<u8>) -> Arc<Post> {
        Arc::new(Post {
            signature: Signature {
                call: "ncclAllReduce",
                count: 0,
                dtype: CollectiveType::I32,
                op: None,
                root: None,
            },
            data,
        })
    }

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn reductions_follow_nccls_operators() {
        let posts = [post(bytes_i32(&[1, -5, 7])), post(bytes_i32(&[4, 2, -9]))];
        let cases = [
            (ReduceOp::Sum, [5, -3, -2]),
            (ReduceOp::Prod, [4, -10, -63]),
            (ReduceOp::Max, [4, 2, 7]),
            (ReduceOp::Min, [1, -5, -9]),
            (ReduceOp::Avg, [2, -1, -1]),
        ];
        for (op, want) in cases {
            assert_eq!(
                reduce_all(&posts, CollectiveType::I32, op, 2),
                bytes_i32(&want),
                "{op:?}"
            );
        }
    }
}
