//! The rules of barriers and collectives, which every runner's scheduling goes through: when
//! the threads waiting at a block barrier, a warp barrier or a collective are released, what
//! each participant of a collective gets (computed as the operation's row of the table says,
//! `crate::thread::Collective::info`), and the divergence reports when nothing can be released.
//!
//! A round ends ([`Block::end_round`]) when the runner has run every thread that may go on;
//! then, in order: a fault ends the block; every thread at one block barrier is released at
//! once (the common case); otherwise warps whose lanes all arrived at one warp barrier or
//! collective are released, then the block if all its live threads wait at one block barrier;
//! a block where nothing can go on is a [`Error::BarrierDivergence`] naming who waits where;
//! and the watchdog (`super::watchdog`) counts the round.

use super::block::Block;
use super::schedule::{Operands, Phase, Schedule, Slot, State, Wait, recount};
use crate::thread::{BarrierScope, Collective, Combine, Fence, Reduction, Site};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::Dim3;

impl Block<'_> {
    /// The block's slots, one per thread (sized on first use in a launch's block shape).
    #[inline]
    fn sized_slots(&self) -> std::cell::RefMut<'_, Vec<Slot>> {
        let count = self.block_dim.count() as usize;
        let mut slots = self.slots.borrow_mut();
        if slots.len() != count {
            slots.clear();
            slots.resize(count, Slot::default());
        }
        slots
    }

    /// Sets thread `linear`'s operands of a collective (sizing the block's slots first).
    #[inline]
    pub(super) fn set_operands(&self, linear: usize, operands: Operands) {
        if let Some(slot) = self.sized_slots().get_mut(linear) {
            slot.operands = operands;
        }
    }

    /// Every thread's operands at once (`operands(linear)`, `None` for one that has none): one
    /// borrow of the slots for a whole round of a collective.
    #[inline]
    pub(super) fn set_all_operands(&self, mut operands: impl FnMut(usize) -> Option<Operands>) {
        for (linear, slot) in self.sized_slots().iter_mut().enumerate() {
            if let Some(operands) = operands(linear) {
                slot.operands = operands;
            }
        }
    }

    /// Hands every thread's result to `take(linear, result)`, with one borrow of the slots.
    #[inline]
    pub(super) fn take_all_results(&self, mut take: impl FnMut(usize, u64)) {
        for (linear, slot) in self.slots.borrow().iter().enumerate() {
            take(linear, slot.result);
        }
    }

    /// Thread `linear`'s result of the collective it was released from.
    #[inline]
    pub(super) fn result_of(&self, linear: usize) -> u64 {
        self.slots
            .borrow()
            .get(linear)
            .map_or(0, |slot| slot.result)
    }

    /// Ends a round: releases what can be released; `Ok(false)` when every thread has ended,
    /// an error when no thread can proceed (or threads only spin for too long).
    #[inline(never)]
    pub(super) fn end_round(&self, s: &mut Schedule) -> Result<bool, Error> {
        let count = s.phases.len();
        if s.done == count {
            return Ok(false);
        }
        if self.fault.borrow().is_some() {
            // A thread faulted: that fault is the block's result (`fault_or` reports it before
            // any error), and as on a GPU the kernel stops; the threads left would only wait
            // for what the faulted thread never does, or spin until the no-progress limit.
            return Err(self.divergence("a thread of the block faulted".to_string()));
        }
        let released = match s.first_block_wait {
            // The common case: every thread waits at the same block barrier.
            Some(wait) if s.block_waiting == count && s.one_site => {
                self.release_block_now(wait)?;
                s.phases.fill(Phase::Ready);
                s.waiting = 0;
                s.block_waiting = 0;
                s.first_block_wait = None;
                s.one_site = true;
                true
            }
            _ if s.waiting > 0 => {
                let warp = self.warp_size.max(1) as usize;
                let mut states = s.states();
                let released = self.release_general(&mut states, warp)?;
                if released {
                    for (phase, state) in s.phases.iter_mut().zip(&states) {
                        if *phase == Phase::Waiting && *state == State::Ready {
                            *phase = Phase::Ready;
                        }
                    }
                    recount(s);
                }
                released
            }
            _ => false,
        };
        if released {
            s.progressed = true;
        }
        if s.waiting + s.done == count {
            return Err(self.divergence(describe_states(&s.states(), |i| {
                self.thread_index(i as u32)
            })));
        }
        if self.spun_too_long(s) {
            return Err(self.no_progress(s));
        }
        if self.barrier_stalled(s) {
            return Err(self.stalled_at_barrier(s));
        }
        s.next_stretch();
        Ok(true)
    }

    /// Warp barriers and collectives, then a block barrier with its checks.
    pub(super) fn release_general(&self, states: &mut [State], warp: usize) -> Result<bool, Error> {
        let mut released = false;
        for (w, members) in states.chunks_mut(warp).enumerate() {
            released |= self.release_warp(w * warp, members)?;
        }
        Ok(self.release_block(states)? || released)
    }

    /// Releases the groups of a warp's lanes that wait at the same warp barrier or collective
    /// once every lane its mask names is there. Lanes at one site may be several groups (the
    /// tiles of a warp, each calling with its own lanes, [`mask_groups`]): each completes on
    /// its own.
    fn release_warp(&self, base: usize, members: &mut [State]) -> Result<bool, Error> {
        let lanes = members.len();
        let existing = ballot_mask(lanes);
        let mut visited = 0u64;
        let mut released = false;
        for first in 0..lanes {
            let State::Waiting(wait) = members[first] else {
                continue;
            };
            if wait.scope != BarrierScope::Warp || visited & (1 << first) != 0 {
                continue;
            }
            let mut here = 0u64;
            // Lanes at the same call site and operation: two collectives on one line are
            // told apart by what they do (a tile's reduce and its shuffle after it, one tile
            // still at the first while another reached the second).
            for (lane, state) in members.iter().enumerate() {
                if matches!(state, State::Waiting(w) if w.scope == BarrierScope::Warp && w.at == wait.at && w.op == wait.op)
                {
                    here |= 1 << lane;
                }
            }
            visited |= here;
            // An active mask is complete once no lane of the warp can still arrive: the others
            // wait elsewhere or have ended; it is the lanes there, whatever they name.
            let groups: Vec<(u64, u64)> = if wait.op == Some(Collective::Active) {
                if members.contains(&State::Ready) {
                    continue;
                }
                vec![(here, here)]
            } else {
                let mask_of = |lane: usize| match members[lane] {
                    State::Waiting(w) => w.mask,
                    _ => 0,
                };
                mask_groups(here, lanes, mask_of).collect()
            };
            for (group, mask) in groups {
                let missing = mask & existing & !here;
                if missing != 0 {
                    if let Some(detail) = exited_lanes(
                        &wait,
                        group,
                        missing,
                        members,
                        base / self.warp_size.max(1) as usize,
                    ) {
                        return Err(self.divergence(detail));
                    }
                    continue;
                }
                if let Some(op) = wait.op {
                    self.combine_warp(op, base, group, lanes);
                }
                let mut clocks = self.warp_clocks.borrow_mut();
                if !clocks.is_empty() {
                    // racecheck: the lanes that named each other in their masks are ordered
                    // with each other from here on.
                    self.warp_ordered.set(true);
                    crate::sanitizer::synchronize(
                        &mut clocks,
                        self.warp_size as usize,
                        base,
                        group,
                    );
                }
                for (lane, state) in members.iter_mut().enumerate() {
                    if group & (1 << lane) != 0 {
                        *state = State::Ready;
                    }
                }
                released = true;
            }
        }
        Ok(released)
    }

    /// Computes every participant's result of a warp collective (in place: results and
    /// operands are separate fields of the slots).
    pub(super) fn combine_warp(&self, op: Collective, base: usize, here: u64, lanes: usize) {
        let mut slots = self.slots.borrow_mut();
        let Some(warp) = slots.get_mut(base..base + lanes) else {
            return;
        };
        let mut results = [0u64; 64];
        combine_lanes(
            op,
            here,
            lanes,
            |lane| warp[lane].operands,
            |lane, result| results[lane] = result,
        );
        for lane in lanes_of(here).filter(|&l| l < lanes) {
            warp[lane].result = results[lane];
        }
    }

    /// Releases the block when all its live threads wait at the same block barrier.
    fn release_block(&self, states: &mut [State]) -> Result<bool, Error> {
        let live = states.iter().filter(|s| **s != State::Done).count();
        let mut first: Option<Wait> = None;
        for state in states.iter() {
            match state {
                State::Waiting(w) if w.scope == BarrierScope::Block => match first {
                    None => first = Some(*w),
                    Some(f) if f.at != w.at => {
                        if states.iter().all(|s| {
                            matches!(s, State::Done)
                                || matches!(s, State::Waiting(x) if x.scope == BarrierScope::Block)
                        }) {
                            return Err(self.divergence(format!(
                                "threads wait at different barriers: {} and {}",
                                f.at, w.at
                            )));
                        }
                        return Ok(false);
                    }
                    Some(_) => {}
                },
                State::Done => {}
                _ => return Ok(false),
            }
        }
        let Some(wait) = first else {
            return Ok(false);
        };
        if live < states.len() {
            return Err(self.divergence(format!(
                "barrier at {} reached by {live} of {} threads; the others exited",
                wait.at,
                states.len()
            )));
        }
        self.release_block_now(wait)?;
        states.iter_mut().for_each(|s| *s = State::Ready);
        Ok(true)
    }

    /// Releases every thread of the block from `wait`, a block barrier or collective they all
    /// wait at; at a grid barrier, once every block of the grid has reached it.
    fn release_block_now(&self, wait: Wait) -> Result<(), Error> {
        match wait.op {
            Some(op) if op.combine() == Combine::Grid => self.wait_for_the_grid(wait.at)?,
            Some(op) => self.combine_block(op),
            None => {}
        }
        if wait.fence == Fence::Global {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Waits, with the block's OS thread, until every block of the grid is at its grid barrier.
    fn wait_for_the_grid(&self, at: Site) -> Result<(), Error> {
        let Some(grid) = self.grid else {
            return Err(self.divergence(format!(
                "this_grid().sync() at {at} needs a cooperative launch (LaunchConfig::cooperative), whose blocks all run at once: in another launch a GPU's blocks need not, and the grid barrier can hang"
            )));
        };
        grid.wait()
            .map_err(|why| self.divergence(format!("grid barrier at {at}: {why}")))?;
        // What other blocks wrote before the barrier is seen after it.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Computes every thread's result of a block collective (`syncthreads_count` & co).
    pub(super) fn combine_block(&self, op: Collective) {
        let mut slots = self.slots.borrow_mut();
        let count = slots.iter().filter(|s| s.operands.value != 0).count() as u64;
        let result = match op {
            Collective::SyncCount => count,
            Collective::SyncAnd => u64::from(count == slots.len() as u64),
            _ => u64::from(count > 0),
        };
        slots.iter_mut().for_each(|s| s.result = result);
    }
}

/// A warp collective or barrier (`wait`) that the lanes `here` of warp `warp` reached, waiting
/// for the `missing` ones: its divergence when some of those exited (`members`: the warp's
/// lanes' states), else `None` (they may still come).
fn exited_lanes(
    wait: &Wait,
    here: u64,
    missing: u64,
    members: &[State],
    warp: usize,
) -> Option<String> {
    let lanes = members.len();
    let exited = (0..lanes)
        .filter(|&lane| missing & (1 << lane) != 0 && members[lane] == State::Done)
        .count();
    (exited > 0).then(|| {
        let what = wait.op.map_or("wave barrier", Collective::name);
        format!(
            "{what} at {} reached by {} of the {lanes} threads of warp {warp}; {exited} lane(s) it waits for exited",
            wait.at,
            here.count_ones(),
        )
    })
}

/// What the scheduler reports where a round ends for a block (`states`), some of whose threads
/// wait at warp collectives that cannot complete (a block run as regions, `super::compiled`):
/// the first warp's collective some of whose lanes exited, as `release_warp` finds it; else,
/// when no thread goes on (`Ready`: released), who waits where; else nothing.
pub(super) fn verdict(
    states: &[State],
    warp: usize,
    index: impl Fn(usize) -> Dim3,
) -> Option<String> {
    let warp = warp.max(1);
    for (w, members) in states.chunks(warp).enumerate() {
        let lanes = members.len().min(64);
        let mut visited = 0u64;
        for first in 0..lanes {
            let State::Waiting(wait) = members[first] else {
                continue;
            };
            if wait.scope != BarrierScope::Warp || visited & (1 << first) != 0 {
                continue;
            }
            let here = (0..lanes)
                .filter(|&l| matches!(members[l], State::Waiting(x) if x.scope == BarrierScope::Warp && x.at == wait.at))
                .fold(0u64, |bits, l| bits | 1 << l);
            visited |= here;
            let missing = wait.mask & ballot_mask(lanes) & !here;
            if let Some(detail) = exited_lanes(&wait, here, missing, &members[..lanes], w) {
                return Some(detail);
            }
        }
    }
    (!states.contains(&State::Ready)).then(|| describe_states(states, index))
}

/// The bits of a warp's `lanes` lanes.
/// Every participant's result of a warp collective `op` among the lanes `here` of a warp of
/// `lanes` (at most 64): `operands(lane)` gives a participant's value, a shuffle's lane or
/// delta and width, and its mask; `result(lane, r)` receives each participant's result. The
/// lanes here combine in the groups their masks make ([`mask_groups`]: the tiles of a warp
/// that reach one call site together each vote and shuffle among their own lanes). Votes are
/// the same for every participant of a group; a shuffle from a lane that does not take part
/// (or lies outside the width's segment) gives the caller its own value.
pub(super) fn combine_lanes(
    op: Collective,
    here: u64,
    lanes: usize,
    operands: impl Fn(usize) -> Operands,
    mut result: impl FnMut(usize, u64),
) {
    if op.combine() == Combine::ActiveMask {
        // The lanes that are here, whatever they name.
        for lane in lanes_of(here).filter(|&l| l < lanes) {
            result(lane, here);
        }
        return;
    }
    for (group, _) in mask_groups(here, lanes, |lane| operands(lane).mask) {
        combine_group(op, group, lanes, &operands, &mut result);
    }
}

/// [`combine_lanes`] for one group of lanes, `here`.
fn combine_group(
    op: Collective,
    here: u64,
    lanes: usize,
    operands: &impl Fn(usize) -> Operands,
    result: &mut impl FnMut(usize, u64),
) {
    let taking_part = |lane: usize| lane < lanes && here & (1 << lane) != 0;
    let vote = match op.combine() {
        Combine::Shuffle => None,
        Combine::ActiveMask => Some(here),
        Combine::WarpVote | Combine::BlockVote | Combine::Grid => {
            let ballot = lanes_of(here)
                .filter(|&l| l < lanes && operands(l).value != 0)
                .fold(0u64, |bits, l| bits | 1 << l);
            Some(match op {
                Collective::All => u64::from(ballot == here & ballot_mask(lanes)),
                Collective::Any => u64::from(ballot != 0),
                _ => ballot,
            })
        }
        // The lanes' values in lane order, by the operation the first one names (every lane
        // of a group calls the same function, as CUDA requires); a tile's butterfly of floats
        // gives each lane its own.
        Combine::Reduce => {
            let first = operands(here.trailing_zeros() as usize);
            match Reduction::from_arg(first.arg) {
                Some(reduction) if reduction.is_butterfly() => {
                    let mut words: Vec<Option<u64>> = (0..lanes.min(64))
                        .map(|l| taking_part(l).then(|| operands(l).value))
                        .collect();
                    reduction.butterfly(&mut words, first.width as usize);
                    for lane in lanes_of(here).filter(|&l| l < lanes) {
                        result(lane, words[lane].unwrap_or(operands(lane).value));
                    }
                    return;
                }
                Some(reduction) => reduction.fold(
                    lanes_of(here)
                        .filter(|&l| l < lanes)
                        .map(|l| operands(l).value),
                ),
                None => None,
            }
        }
    };
    if let Some(vote) = vote {
        for lane in lanes_of(here).filter(|&l| l < lanes) {
            result(lane, vote);
        }
        return;
    }
    // A shuffle: the lanes of a group pass one width (CUDA requires it), so its segments are
    // worked out once; a lane passing another is worked out on its own.
    let first = operands(here.trailing_zeros() as usize).width;
    let segments = Segments::new(first, lanes);
    for lane in lanes_of(here).filter(|&l| l < lanes) {
        let Operands {
            value, arg, width, ..
        } = operands(lane);
        let source = if width == first {
            segments.source(op, lane, arg)
        } else {
            Segments::new(width, lanes).source(op, lane, arg)
        };
        result(
            lane,
            match source {
                Some(src) if taking_part(src) => operands(src).value,
                _ => value,
            },
        );
    }
}

/// The lanes whose bits `here` sets, lowest first.
fn lanes_of(mut here: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let lane = here.trailing_zeros() as usize;
        here &= here.checked_sub(1)?;
        Some(lane)
    })
}

/// The groups that the lanes `here` (of a warp of `lanes`) form at one warp barrier or
/// collective, lowest lane first: each group is the lanes here that the mask of its lowest lane
/// names (with that lane itself), and comes with that mask, which names the lanes the group
/// waits for. Two tiles of a warp that reach one site together are two groups.
pub(super) fn mask_groups(
    here: u64,
    lanes: usize,
    mask_of: impl Fn(usize) -> u64,
) -> impl Iterator<Item = (u64, u64)> {
    let mut left = here & ballot_mask(lanes);
    std::iter::from_fn(move || {
        let first = left.trailing_zeros() as usize;
        (left != 0).then(|| {
            let mask = mask_of(first) & ballot_mask(lanes);
            let group = (mask & left) | (1 << first);
            left &= !group;
            (group, mask)
        })
    })
}

pub(super) fn ballot_mask(lanes: usize) -> u64 {
    if lanes >= 64 {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
}

/// The segments of `width` lanes a shuffle reads within, in a warp of `lanes`.
#[derive(Clone, Copy)]
struct Segments {
    width: usize,
    /// `width - 1` where the width is a power of two (CUDA's always are: masks, where a
    /// division cost more than the rest of the shuffle).
    mask: Option<usize>,
    lanes: usize,
}

impl Segments {
    fn new(width: u32, lanes: usize) -> Segments {
        let width = (width as usize).clamp(1, lanes.max(1));
        Segments {
            width,
            mask: width.is_power_of_two().then(|| width - 1),
            lanes,
        }
    }

    /// The lane a shuffle reads for `lane`, or `None` when it reads its own value (CUDA: a
    /// source outside the lane's segment; for a butterfly, only one in a later segment: an
    /// earlier segment's lane is read). Deltas are CUDA's `unsigned int`s: a negative one, as
    /// the stackless form passes it, is a huge delta.
    fn source(self, op: Collective, lane: usize, arg: i64) -> Option<usize> {
        let (group, within) = match self.mask {
            Some(mask) => (lane & !mask, arg & mask as i64),
            None => (lane - lane % self.width, arg.rem_euclid(self.width as i64)),
        };
        let end = (group + self.width).min(self.lanes);
        let src = match op {
            Collective::Shfl => group as i64 + within,
            Collective::ShflUp => lane as i64 - i64::from(arg as u32),
            Collective::ShflDown => lane as i64 + i64::from(arg as u32),
            Collective::ShflXor => {
                return usize::try_from((lane as i64) ^ arg)
                    .ok()
                    .filter(|&s| s < end);
            }
            _ => return None,
        };
        usize::try_from(src).ok().filter(|&s| s >= group && s < end)
    }
}

/// [`Segments::source`] for a lane passing `width`.
#[cfg(test)]
fn shuffle_source(
    op: Collective,
    lane: usize,
    arg: i64,
    width: u32,
    lanes: usize,
) -> Option<usize> {
    Segments::new(width, lanes).source(op, lane, arg)
}

pub(super) fn describe_states(states: &[State], index: impl Fn(usize) -> Dim3) -> String {
    let mut parts: Vec<String> = Vec::new();
    let done = states.iter().filter(|s| **s == State::Done).count();
    if done > 0 {
        parts.push(format!("{done} thread(s) exited"));
    }
    let spinning = states.iter().filter(|s| **s == State::Ready).count();
    if spinning > 0 {
        parts.push(format!("{spinning} thread(s) spin"));
    }
    let mut seen: Vec<(Wait, usize, Dim3)> = Vec::new();
    for (i, s) in states.iter().enumerate() {
        if let State::Waiting(w) = s {
            match seen
                .iter_mut()
                .find(|(x, _, _)| x.at == w.at && x.scope == w.scope)
            {
                Some(entry) => entry.1 += 1,
                None => seen.push((*w, 1, index(i))),
            }
        }
    }
    for (w, n, first) in seen {
        let kind = match (w.op, w.scope) {
            (Some(op), _) => op.name(),
            (None, BarrierScope::Block) => "barrier",
            (None, BarrierScope::Warp) => "wave barrier",
        };
        parts.push(format!(
            "{n} thread(s) wait at the {kind} at {} (first: thread {first})",
            w.at
        ));
    }
    format!("no thread can proceed: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::shuffle_source;
    use crate::thread::Collective;

    /// The masks of power-of-two widths read the lanes that CUDA's rule (group = lane - lane %
    /// width, source = group + arg mod width) names, negative lanes included.
    #[test]
    fn power_of_two_widths_read_the_lanes_the_rule_names() {
        for width in [1u32, 2, 4, 8, 16, 32] {
            for lane in 0..32usize {
                for arg in -70i64..70 {
                    let w = width as usize;
                    let group = lane - lane % w;
                    let wanted = group + arg.rem_euclid(width as i64) as usize;
                    assert_eq!(
                        shuffle_source(Collective::Shfl, lane, arg, width, 32),
                        Some(wanted),
                        "width {width}, lane {lane}, arg {arg}"
                    );
                }
                let up = shuffle_source(Collective::ShflUp, lane, 3, width, 32);
                let group = lane - lane % width as usize;
                assert_eq!(up, lane.checked_sub(3).filter(|&s| s >= group));
            }
        }
        // Any other width takes the division.
        assert_eq!(shuffle_source(Collective::Shfl, 7, 4, 6, 32), Some(10));
    }
}
