//! Slots and executions: a fixed-size record each, never one per row.
//!
//! A slot `(job, scheduled_at)` is a 24-byte [`Slot`], indexed per job in a B-tree by
//! time. An execution (`run_id`) is a 48-byte [`Exec`] holding the 64-bit hash of its run
//! id, chained into its slot: while folding, a run id is looked up in its slot's chain
//! only (hot in cache), or in a hash map for slots with many executions. A run id seen in
//! several slots gets an execution in each; [`Slots::merge_runs`] makes them one again.

use super::NONE;
use super::arena::Arena;
use super::hash::{Fast, mix, run_hash};
use rayon::slice::ParallelSliceMut;
use std::collections::{BTreeMap, HashMap};

/// An execution's `start` or `end` not seen yet.
pub(crate) const NO_TIME: i64 = i64::MIN;

/// How an execution ended, as far as its `end` rows say. Ordered so that merging two
/// views of one execution is `max`: a success anywhere wins, a failure beats a
/// superseded end (which gives no verdict), anything beats nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum RunStatus {
    /// No `end` yet.
    Open,
    /// Its `end` says `superseded` (SPEC 7.1 item 24): a newer holder took the slot over.
    Superseded,
    Failure,
    Success,
}

/// What an execution's rows said besides times and status.
#[derive(Clone, Copy, Default)]
pub(crate) struct ExecFlags(u8);

impl ExecFlags {
    /// A `start` triggered `manual` or `replay`.
    const MANUAL_TRIGGER: u8 = 1;
    /// An `end` in failure with an error code the manifest classifies fatal.
    const FATAL_FAILURE: u8 = 2;

    pub(crate) fn manual_trigger(self) -> bool {
        self.0 & Self::MANUAL_TRIGGER != 0
    }
    pub(crate) fn fatal_failure(self) -> bool {
        self.0 & Self::FATAL_FAILURE != 0
    }
    fn set_manual_trigger(&mut self) {
        self.0 |= Self::MANUAL_TRIGGER;
    }
    fn set_fatal_failure(&mut self) {
        self.0 |= Self::FATAL_FAILURE;
    }
    fn union(&mut self, other: ExecFlags) {
        self.0 |= other.0;
    }
}

/// What a slot's rows said besides its executions.
#[derive(Clone, Copy, Default)]
pub(crate) struct SlotFlags(u8);

impl SlotFlags {
    const DEAD_LETTERED: u8 = 1;
    const MANUAL: u8 = 2;

    pub(crate) fn dead_lettered(self) -> bool {
        self.0 & Self::DEAD_LETTERED != 0
    }
    /// A `manual` event, or a `start` triggered `manual`.
    pub(crate) fn manual(self) -> bool {
        self.0 & Self::MANUAL != 0
    }
    pub(crate) fn set_dead_lettered(&mut self) {
        self.0 |= Self::DEAD_LETTERED;
    }
    pub(crate) fn set_manual(&mut self) {
        self.0 |= Self::MANUAL;
    }
}

/// One execution (`run_id`).
pub(crate) struct Exec {
    /// 64-bit hash of the run id.
    pub(crate) hash: u64,
    /// The run id in the [`Arena`].
    name: u64,
    /// Earliest `start` (ms), or [`NO_TIME`].
    pub(crate) start: i64,
    /// Latest `end` (ms), or [`NO_TIME`].
    pub(crate) end: i64,
    /// The next execution of the slot's chain.
    next: u32,
    /// The slot whose chain holds it.
    slot: u32,
    /// Highest `attempt` recorded.
    pub(crate) attempt: u32,
    pub(crate) status: RunStatus,
    pub(crate) flags: ExecFlags,
}

const _: () = assert!(size_of::<Exec>() == 48);

impl Exec {
    pub(crate) fn has_start(&self) -> bool {
        self.start != NO_TIME
    }
    pub(crate) fn has_end(&self) -> bool {
        self.end != NO_TIME
    }
    pub(crate) fn succeeded(&self) -> bool {
        self.status == RunStatus::Success
    }
    /// Ended `superseded`: one holder at a time held the slot, this one gave no verdict.
    pub(crate) fn superseded(&self) -> bool {
        self.status == RunStatus::Superseded
    }

    /// A `start` row at `at` (ms).
    pub(crate) fn started(&mut self, at: i64, attempt: u32, manual_trigger: bool) {
        if self.start == NO_TIME || at < self.start {
            self.start = at;
        }
        self.attempt = self.attempt.max(attempt);
        if manual_trigger {
            self.flags.set_manual_trigger();
        }
    }

    /// An `end` row at `at` (ms) with `status`.
    pub(crate) fn ended(&mut self, at: i64, attempt: u32, status: RunStatus, fatal: bool) {
        if self.end == NO_TIME || at > self.end {
            self.end = at;
        }
        self.attempt = self.attempt.max(attempt);
        self.status = self.status.max(status);
        if fatal {
            self.flags.set_fatal_failure();
        }
    }

    /// Takes in what another record of the same run id saw.
    fn absorb(&mut self, o: &ExecSummary) {
        if o.start != NO_TIME && (self.start == NO_TIME || o.start < self.start) {
            self.start = o.start;
        }
        self.end = self.end.max(o.end);
        self.attempt = self.attempt.max(o.attempt);
        self.status = self.status.max(o.status);
        self.flags.union(o.flags);
    }
}

/// The facts of an execution that merging carries over.
struct ExecSummary {
    start: i64,
    end: i64,
    attempt: u32,
    status: RunStatus,
    flags: ExecFlags,
}

/// One slot `(job, scheduled_at)`.
pub(crate) struct Slot {
    /// `scheduled_at` (ms).
    pub(crate) at: i64,
    /// Executions chained (a slot with more than [`BIG_SLOT`] is also indexed in `big`).
    n_execs: u32,
    first: u32,
    /// `skip` rows.
    pub(crate) skips: u32,
    pub(crate) flags: SlotFlags,
}

const _: () = assert!(size_of::<Slot>() == 24);

const EXEC_CHUNK: usize = 1 << 16;

/// Slots with more executions than this index them in a hash map rather than walking the
/// chain.
const BIG_SLOT: u32 = 16;

#[inline]
fn big_key(run_hash: u64, slot: u32) -> u64 {
    run_hash ^ mix(u64::from(slot) + 1, 0x9E37_79B9_7F4A_7C15)
}

/// Every slot and execution of the audit, and the run ids.
#[derive(Default)]
pub(crate) struct Slots {
    /// Per job, `scheduled_at` (ms) -> slot. A B-tree per job rather than one hash map:
    /// ledgers are written roughly in time order, so a lookup or insert lands on the
    /// rightmost, cache-hot leaf instead of a random bucket; and finish gets each job's
    /// slots in time order for free.
    index: Vec<BTreeMap<i64, u32>>,
    slots: Vec<Slot>,
    /// After [`Slots::merge_runs`]: the sorted `(run id hash, execution)` pairs.
    runs: Vec<(u64, u32)>,
    big: HashMap<u64, u32, Fast>,
    runs_merged: bool,
    execs: Vec<Vec<Exec>>,
    exec_count: u32,
    arena: Arena,
    /// The last slot and run looked up: rows of one run tend to follow each other, and
    /// these save the look-ups then.
    last_slot: (u32, i64, u32),
    last_run: (String, u32),
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            last_slot: (NONE, NO_TIME, NONE),
            last_run: (String::new(), NONE),
            ..Slots::default()
        }
    }

    /// Room for about `n` slots.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.slots.reserve(n);
    }

    /// The slot of `job` at `at` (ms), created when new.
    #[inline]
    pub(crate) fn slot_id(&mut self, job: u32, at: i64) -> u32 {
        let (lj, la, ls) = self.last_slot;
        if lj == job && la == at {
            return ls;
        }
        let id = self.slot_id_uncached(job, at);
        self.last_slot = (job, at, id);
        id
    }

    fn slot_id_uncached(&mut self, job: u32, at: i64) -> u32 {
        if self.index.len() <= job as usize {
            self.index.resize_with(job as usize + 1, Default::default);
        }
        let next = self.slots.len() as u32;
        let id = *self.index[job as usize].entry(at).or_insert(next);
        if id == next {
            self.slots.push(Slot {
                at,
                n_execs: 0,
                first: NONE,
                skips: 0,
                flags: SlotFlags::default(),
            });
        }
        id
    }

    #[inline]
    pub(crate) fn slot(&self, id: u32) -> &Slot {
        &self.slots[id as usize]
    }

    #[inline]
    pub(crate) fn slot_mut(&mut self, id: u32) -> &mut Slot {
        &mut self.slots[id as usize]
    }

    /// The slot of `job` at `at` (ms), if the ledger has one.
    pub(crate) fn find(&self, job: usize, at: i64) -> Option<u32> {
        self.index.get(job).and_then(|m| m.get(&at)).copied()
    }

    /// The slots of each job (by job id), in time order.
    pub(crate) fn by_job(&self, n_jobs: usize) -> Vec<Vec<u32>> {
        let mut by_job: Vec<Vec<u32>> = vec![Vec::new(); n_jobs];
        for (j, m) in self.index.iter().enumerate() {
            by_job[j] = m.values().copied().collect();
        }
        by_job
    }

    #[inline]
    pub(crate) fn exec(&self, i: u32) -> &Exec {
        &self.execs[i as usize / EXEC_CHUNK][i as usize % EXEC_CHUNK]
    }

    #[inline]
    fn exec_mut_at(&mut self, i: u32) -> &mut Exec {
        &mut self.execs[i as usize / EXEC_CHUNK][i as usize % EXEC_CHUNK]
    }

    /// The execution of `run_id` in `slot`, created when new.
    #[inline]
    pub(crate) fn exec_mut(&mut self, run_id: &str, slot: u32) -> &mut Exec {
        let i = if self.last_run.1 != NONE && self.last_run.0 == run_id {
            self.last_run.1
        } else {
            let id = self.exec_id_uncached(run_id, slot);
            self.last_run.0.clear();
            self.last_run.0.push_str(run_id);
            self.last_run.1 = id;
            id
        };
        self.exec_mut_at(i)
    }

    fn exec_id_uncached(&mut self, run_id: &str, slot: u32) -> u32 {
        let h = run_hash(run_id);
        let n_execs = self.slots[slot as usize].n_execs;
        if n_execs > BIG_SLOT {
            if let Some(&i) = self.big.get(&big_key(h, slot)) {
                return i;
            }
        } else {
            let mut x = self.slots[slot as usize].first;
            while x != NONE {
                let e = self.exec(x);
                if e.hash == h {
                    return x;
                }
                x = e.next;
            }
        }
        let i = self.exec_count;
        self.exec_count += 1;
        // Events after `merge_runs`: settle again at finish (merging is idempotent).
        self.runs_merged = false;
        if self.execs.last().is_none_or(|c| c.len() == EXEC_CHUNK) {
            self.execs.push(Vec::with_capacity(EXEC_CHUNK));
        }
        let name = self.arena.push(run_id);
        let s = &mut self.slots[slot as usize];
        let next = s.first;
        s.first = i;
        s.n_execs += 1;
        let n_execs = s.n_execs;
        if let Some(c) = self.execs.last_mut() {
            c.push(Exec {
                hash: h,
                name,
                start: NO_TIME,
                end: NO_TIME,
                next,
                slot,
                attempt: 0,
                status: RunStatus::Open,
                flags: ExecFlags::default(),
            });
        }
        if n_execs == BIG_SLOT + 1 {
            let chain: Vec<u32> = self.chain(slot).collect();
            for x in chain {
                let k = big_key(self.exec(x).hash, slot);
                self.big.insert(k, x);
            }
        } else if n_execs > BIG_SLOT {
            self.big.insert(big_key(h, slot), i);
        }
        i
    }

    /// A run id seen in several slots got an execution in each: merge them into the first
    /// one created (where a global index would have put every row), unlink the others from
    /// their slots, and keep the sorted `(hash, execution)` pairs for look-ups.
    pub(crate) fn merge_runs(&mut self) {
        if self.runs_merged {
            return;
        }
        self.runs_merged = true;
        let mut pairs: Vec<(u64, u32)> = (0..self.exec_count)
            .map(|i| (self.exec(i).hash, i))
            .collect();
        pairs.par_sort_unstable();
        let mut i = 0;
        while i < pairs.len() {
            let mut j = i + 1;
            while j < pairs.len() && pairs[j].0 == pairs[i].0 {
                j += 1;
            }
            let keep = pairs[i].1;
            for &(_, x) in &pairs[i + 1..j] {
                self.unlink(x);
                let e = self.exec(x);
                let seen = ExecSummary {
                    start: e.start,
                    end: e.end,
                    attempt: e.attempt,
                    status: e.status,
                    flags: e.flags,
                };
                self.exec_mut_at(keep).absorb(&seen);
            }
            i = j;
        }
        pairs.dedup_by_key(|p| p.0);
        self.runs = pairs;
        self.big = HashMap::default();
    }

    /// Takes execution `x` out of its slot's chain.
    fn unlink(&mut self, x: u32) {
        let slot = self.exec(x).slot;
        let next = self.exec(x).next;
        let mut cur = self.slots[slot as usize].first;
        if cur == x {
            self.slots[slot as usize].first = next;
            return;
        }
        while cur != NONE {
            let n = self.exec(cur).next;
            if n == x {
                self.exec_mut_at(cur).next = next;
                return;
            }
            cur = n;
        }
    }

    /// The executions of a slot.
    #[inline]
    pub(crate) fn chain(&self, slot: u32) -> impl Iterator<Item = u32> + '_ {
        let mut x = self.slots[slot as usize].first;
        std::iter::from_fn(move || {
            if x == NONE {
                return None;
            }
            let cur = x;
            x = self.exec(x).next;
            Some(cur)
        })
    }

    /// The execution of a run id hash (after [`Slots::merge_runs`]).
    pub(crate) fn by_hash(&self, h: u64) -> Option<u32> {
        self.runs
            .binary_search_by_key(&h, |p| p.0)
            .ok()
            .map(|k| self.runs[k].1)
    }

    /// The run id of execution `x`.
    pub(crate) fn run_id(&self, x: u32) -> String {
        self.arena.get(self.exec(x).name).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots_with(run: &str) -> (Slots, u32) {
        let mut s = Slots::new();
        let slot = s.slot_id(0, 1_000);
        s.exec_mut(run, slot);
        (s, slot)
    }

    #[test]
    fn a_success_anywhere_wins_and_a_failure_beats_no_end() {
        let (mut s, slot) = slots_with("r1");
        let e = s.exec_mut("r1", slot);
        assert_eq!(e.status, RunStatus::Open);
        e.ended(2_000, 1, RunStatus::Failure, false);
        assert_eq!(e.status, RunStatus::Failure);
        e.ended(3_000, 2, RunStatus::Success, false);
        e.ended(4_000, 2, RunStatus::Failure, true);
        assert_eq!(e.status, RunStatus::Success);
        assert!(e.flags.fatal_failure());
        assert_eq!((e.end, e.attempt), (4_000, 2));
    }

    #[test]
    fn a_run_id_in_two_slots_is_one_execution_after_merging() {
        let mut s = Slots::new();
        let a = s.slot_id(0, 1_000);
        let b = s.slot_id(0, 2_000);
        s.exec_mut("r1", a).started(1_500, 1, true);
        s.exec_mut("other", b);
        s.exec_mut("r1", b)
            .ended(2_500, 3, RunStatus::Success, false);
        s.merge_runs();
        let in_a: Vec<u32> = s.chain(a).collect();
        assert_eq!(in_a.len(), 1);
        let e = s.exec(in_a[0]);
        assert_eq!((e.start, e.end, e.attempt), (1_500, 2_500, 3));
        assert!(e.succeeded() && e.flags.manual_trigger());
        assert_eq!(s.chain(b).count(), 1, "the copy left slot b");
        assert_eq!(s.by_hash(run_hash("r1")), Some(in_a[0]));
        assert_eq!(s.run_id(in_a[0]), "r1");
    }
}
