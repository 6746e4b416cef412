//! The streaming fold behind `batchguard audit`.
//!
//! State per distinct thing, never per row:
//! - a job: its interned name and, for a manifest job, its [`AuditJob`];
//! - a slot `(job, scheduled_at)`: a 24-byte [`Slot`] (first execution, skip count, flags),
//!   indexed per job in a B-tree by time;
//! - an execution (`run_id`): a 48-byte [`Exec`] with the 64-bit hash of its run id,
//!   chained into its slot (run ids are looked up in the slot's chain while folding; a run
//!   id seen in several slots is merged at finish, see [`Auditor::events_done`]), and its
//!   run id once in a chunked byte arena (read back only for findings);
//! - an output key: a 64-bit hash of `(job, output_key)` with the hash of its first run id
//!   ([`OutputTally`], which may be filled on another thread).
//!
//! 64-bit hashes of distinct strings collide with probability about n²/2⁶⁵ (below 10⁻⁶
//! for 5 million run ids); `docs/audit.md` states it.

use super::hist::Histogram;
use super::snapshot::{self, SnapshotCheck};
use super::{
    AuditJob, AuditOptions, AuditResult, InputCounts, JobReport, MAX_ROW_ERRORS, Metrics, Skipped,
    checks,
};
use crate::ledger::{Event, EventKind, EventRef, Output, OutputRef, RowError, Status, Trigger};
use jiff::Timestamp;
use rayon::iter::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const NONE: u32 = u32::MAX;
const NO_TIME: i64 = i64::MIN;

/// Keys that already are hashes (or small integers) need no more hashing than a multiply.
#[derive(Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = hash_bytes(self.0, bytes);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0 ^ n, 0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type Fast = BuildHasherDefault<MixHasher>;

#[inline]
fn mix(a: u64, b: u64) -> u64 {
    let r = u128::from(a).wrapping_mul(u128::from(b));
    (r as u64) ^ ((r >> 64) as u64)
}

/// A 64-bit string hash (wyhash-style multiply-mix over 8-byte words).
#[inline]
pub(crate) fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    const P0: u64 = 0xa076_1d64_78bd_642f;
    const P1: u64 = 0xe703_7ed1_a0b4_28db;
    let mut h = seed ^ P0 ^ (bytes.len() as u64).wrapping_mul(P1);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h ^ u64::from_le_bytes(w), P1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(w) ^ P0, P1);
    }
    mix(h, P0 ^ P1)
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

/// Run ids, each stored once, in 1 MiB chunks (no doubling copies as the ledger grows).
#[derive(Default)]
struct Arena {
    chunks: Vec<Vec<u8>>,
}

const CHUNK: usize = 1 << 20;

impl Arena {
    /// Returns a reference packing chunk index, offset and length.
    fn push(&mut self, s: &str) -> u64 {
        let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        let need_new = match self.chunks.last() {
            Some(c) => c.len() + b.len() > c.capacity(),
            None => true,
        };
        if need_new {
            self.chunks.push(Vec::with_capacity(CHUNK.max(b.len())));
        }
        let ci = self.chunks.len() - 1;
        let c = &mut self.chunks[ci];
        let off = c.len();
        c.extend_from_slice(b);
        ((ci as u64) << 40) | ((off as u64) << 16) | b.len() as u64
    }
    fn get(&self, r: u64) -> &str {
        let ci = (r >> 40) as usize;
        let off = ((r >> 16) & 0xFF_FFFF) as usize;
        let len = (r & 0xFFFF) as usize;
        self.chunks
            .get(ci)
            .and_then(|c| c.get(off..off + len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("?")
    }
}

/// Execution flags.
const F_TRIG_MANUAL: u8 = 1; // trigger manual or replay
const F_FATAL_FAIL: u8 = 2; // ended in failure with a fatal error code
const F_TRIG_SCHEDULE: u8 = 4; // a start with trigger schedule or retry

/// One execution (`run_id`).
struct Exec {
    /// 64-bit hash of the run id.
    hash: u64,
    name: u64,
    start: i64,
    end: i64,
    next: u32,
    /// The slot whose chain holds it.
    slot: u32,
    attempt: u32,
    /// 0 none, 1 success, 2 failure.
    status: u8,
    flags: u8,
}

/// Slot flags.
const S_DEAD: u8 = 1;
const S_MANUAL: u8 = 2;

struct Slot {
    at: i64,
    /// Executions chained (a slot with more than [`BIG_SLOT`] is also indexed in `big`).
    n_execs: u32,
    first: u32,
    skips: u32,
    flags: u8,
}

struct JobState {
    /// The name findings use.
    display: String,
    /// Index into `jobs` of the manifest, when declared.
    manifest: Option<usize>,
    /// Runs counted for an undeclared job (AU107).
    rows: u64,
    outputs: u64,
    skips: u64,
    start_events: u64,
}

/// An output key applied more than once. `job` is the tally's local job id; the first
/// execution is resolved (from `first_run`, the hash of the first row's run id) at finish.
struct DupOutput {
    key: String,
    job: u32,
    count: u64,
    run_ids: Vec<String>,
    first_run: u64,
}

#[inline]
fn out_hash(local_job: u32, key: &str) -> u64 {
    hash_bytes(u64::from(local_job).wrapping_add(0x5151), key.as_bytes())
}

/// The output rows of an audit, folded on their own (they need nothing from the events, so
/// a reader thread can fill one while the events are read): per `(job, output_key)` hash a
/// count and the hash of the first row's run id. Job names are resolved as
/// [`Auditor`] resolves them: a declared name (`service/name` or bare `name`) is its
/// manifest job, any other name is its own job. Get one from [`Auditor::output_tally`],
/// hand it back with [`Auditor::merge_outputs`].
pub struct OutputTally {
    from: Timestamp,
    to: Timestamp,
    names: JobNames,
    /// Output rows per local job id.
    counts: Vec<u64>,
    /// `(local job, output_key)` hash -> hash of the first row's run id (a key seen again
    /// moves to `dups`, which counts).
    index: HashMap<u64, u64, Fast>,
    dups: HashMap<u64, DupOutput, Fast>,
    input: InputCounts,
    row_errors: Vec<RowError>,
}

/// Ledger job names -> job ids: a declared name (`service/name` or bare `name`) is its
/// manifest job's index; an undeclared name gets the next id (`n_declared + i`). The
/// auditor and the outputs' tally each keep one; the last name looked up is remembered,
/// since rows of one job tend to follow each other.
#[derive(Clone)]
struct JobNames {
    declared: HashMap<String, usize>,
    n_declared: u32,
    by_name: HashMap<String, u32, Fast>,
    /// Undeclared names in the order they were met.
    undeclared: Vec<String>,
    last: (String, u32),
    /// `--job`: the undeclared names to fold (`None`: all); others map to [`IGNORED`].
    keep: Option<std::sync::Arc<Vec<String>>>,
}

/// The job id of ledger rows that `--job` leaves out.
pub(crate) const IGNORED: u32 = u32::MAX - 1;

/// Whether ledger job `name` (`name` or `service/name`) is one of `keep`.
fn selected(name: &str, keep: &[String]) -> bool {
    keep.iter()
        .any(|k| k == name || name.rsplit_once('/').is_some_and(|(_, n)| n == k))
}

impl JobNames {
    fn new(declared: HashMap<String, usize>, n_declared: usize) -> Self {
        JobNames {
            declared,
            n_declared: n_declared as u32,
            by_name: HashMap::default(),
            undeclared: Vec::new(),
            last: (String::new(), NONE),
            keep: None,
        }
    }

    /// The id of `name`, and whether it is an undeclared job met for the first time.
    fn id(&mut self, name: &str) -> (u32, bool) {
        if self.last.1 != NONE && self.last.0 == name {
            return (self.last.1, false);
        }
        let (id, new) = match self.by_name.get(name) {
            Some(&id) => (id, false),
            None => {
                let (id, new) = match self.declared.get(name) {
                    Some(&m) => (m as u32, false),
                    None if self.keep.as_ref().is_some_and(|k| !selected(name, k)) => {
                        (IGNORED, false)
                    }
                    None => {
                        self.undeclared.push(name.to_owned());
                        (self.n_declared + self.undeclared.len() as u32 - 1, true)
                    }
                };
                self.by_name.insert(name.to_owned(), id);
                (id, new)
            }
        };
        self.last.0.clear();
        self.last.0.push_str(name);
        self.last.1 = id;
        (id, new)
    }

    /// Every ledger job name met (left-out ones included).
    fn seen(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// The name of an undeclared job's id.
    fn undeclared_name(&self, id: u32) -> Option<&str> {
        let i = id.checked_sub(self.n_declared)? as usize;
        self.undeclared.get(i).map(String::as_str)
    }
}

impl OutputTally {
    /// Room for about `rows` output rows, so the index does not grow (and rehash) on the way.
    pub fn reserve(&mut self, rows: usize) {
        self.index.reserve(rows);
    }

    fn job(&mut self, name: &str) -> u32 {
        let (id, new) = self.names.id(name);
        if new {
            self.counts.push(0);
        }
        id
    }

    /// One output row.
    pub fn output(&mut self, o: Output) {
        self.output_ref(&o.as_ref());
    }

    /// One output row, borrowed.
    pub fn output_ref(&mut self, o: &OutputRef<'_>) {
        self.input.rows_read += 1;
        self.input.outputs += 1;
        if !(o.scheduled_at >= self.from && o.scheduled_at < self.to) {
            self.input.rows_outside_window += 1;
            return;
        }
        let job = self.job(o.job);
        if job == IGNORED {
            return;
        }
        self.counts[job as usize] += 1;
        let h = out_hash(job, o.output_key);
        let first_run = match self.index.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(hash_bytes(0, o.run_id.as_bytes()));
                return;
            }
            std::collections::hash_map::Entry::Occupied(e) => *e.get(),
        };
        let d = self.dups.entry(h).or_insert_with(|| DupOutput {
            key: o.output_key.to_owned(),
            job,
            count: 1,
            run_ids: Vec::new(),
            first_run,
        });
        d.count += 1;
        if d.run_ids.len() < 20 && !d.run_ids.iter().any(|r| r == o.run_id) {
            d.run_ids.push(o.run_id.to_owned());
        }
    }

    /// An output row that could not be read.
    pub fn row_error(&mut self, e: RowError) {
        self.input.rows_read += 1;
        self.input.rows_rejected += 1;
        if self.row_errors.len() < MAX_ROW_ERRORS {
            self.row_errors.push(e);
        }
    }
}

/// The streaming audit. Feed rows in any order; call [`Auditor::finish`] once.
pub struct Auditor {
    jobs: Vec<AuditJob>,
    opts: AuditOptions,
    to_ms: i64,
    names: JobNames,
    states: Vec<JobState>,
    /// Per job, `scheduled_at` (ms) -> slot. A B-tree per job rather than one hash map:
    /// ledgers are written roughly in time order, so a lookup or insert lands on the
    /// rightmost, cache-hot leaf instead of a random bucket; and finish gets each job's
    /// slots in time order for free.
    slot_index: Vec<std::collections::BTreeMap<i64, u32>>,
    slots: Vec<Slot>,
    /// While folding, a run id is looked up in its slot's chain only (hot in cache), or in
    /// `big` for slots with many executions; a run id seen in several slots is one
    /// execution again after [`Auditor::merge_runs`] at finish, which leaves here the
    /// sorted `(run id hash, execution)` pairs.
    runs: Vec<(u64, u32)>,
    big: HashMap<u64, u32, Fast>,
    runs_merged: bool,
    execs: Vec<Vec<Exec>>,
    exec_count: u32,
    arena: Arena,
    /// The last slot and run looked up: rows of one run tend to follow each other, and
    /// these save the hash lookups then.
    last_slot: (u32, i64, u32),
    last_run: (String, u32),
    outputs: OutputTally,
    /// After finish merged the outputs: global job id -> the tally's local id.
    out_local: HashMap<u32, u32, Fast>,
    /// First digest recorded at `start` per slot (only with `--snapshots`).
    digests: HashMap<u32, String, Fast>,
    input: InputCounts,
    row_errors: Vec<RowError>,
    /// The one zone the report shows times in (`None`: each job's own, days in UTC).
    report_tz: Option<jiff::tz::TimeZone>,
}

const EXEC_CHUNK: usize = 1 << 16;

/// Slots with more executions than this index them in a hash map rather than walking the
/// chain.
const BIG_SLOT: u32 = 16;

#[inline]
fn big_key(run_hash: u64, slot: u32) -> u64 {
    run_hash ^ mix(u64::from(slot) + 1, 0x9E37_79B9_7F4A_7C15)
}

impl Auditor {
    /// `jobs`: every job of every `--manifest` (empty without manifests).
    pub fn new(jobs: Vec<AuditJob>, opts: AuditOptions) -> Auditor {
        let mut declared = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            declared
                .entry(format!("{}/{}", j.service, j.name))
                .or_insert(i);
            declared.entry(j.name.clone()).or_insert(i);
        }
        let services: std::collections::HashSet<&str> =
            jobs.iter().map(|j| j.service.as_str()).collect();
        let qualify = services.len() > 1;
        let (from, to) = (opts.from, opts.to);
        let mut a = Auditor {
            to_ms: ms(opts.to),
            opts,
            names: JobNames::new(declared.clone(), jobs.len()),
            states: Vec::new(),
            slot_index: Vec::new(),
            slots: Vec::new(),
            runs: Vec::new(),
            big: HashMap::default(),
            runs_merged: false,
            execs: Vec::new(),
            exec_count: 0,
            arena: Arena::default(),
            outputs: OutputTally {
                from,
                to,
                names: JobNames::new(declared, jobs.len()),
                counts: vec![0; jobs.len()],
                index: HashMap::default(),
                dups: HashMap::default(),
                input: InputCounts::default(),
                row_errors: Vec::new(),
            },
            out_local: HashMap::default(),
            last_slot: (NONE, NO_TIME, NONE),
            last_run: (String::new(), NONE),
            digests: HashMap::default(),
            input: InputCounts::default(),
            row_errors: Vec::new(),
            report_tz: None,
            jobs: Vec::new(),
        };
        // Every manifest job has a state, so its expected slots are checked even when the
        // ledger never mentions it.
        for (i, j) in jobs.iter().enumerate() {
            let display = if qualify {
                format!("{}/{}", j.service, j.name)
            } else {
                j.name.clone()
            };
            a.states.push(JobState {
                display,
                manifest: Some(i),
                rows: 0,
                outputs: 0,
                skips: 0,
                start_events: 0,
            });
        }
        a.jobs = jobs;
        a
    }

    /// Shows every time of the findings, and buckets the per-day counts, in `tz`.
    pub fn report_zone(&mut self, tz: jiff::tz::TimeZone) {
        self.report_tz = Some(tz);
    }

    /// `--job`: fold only the ledger rows of these jobs (`name` or `service/name`). With
    /// manifests, pass only the kept manifest jobs to [`Auditor::new`] and `None` here
    /// leaves every undeclared job out; without, `Some(names)` keeps those.
    pub fn only_jobs(&mut self, undeclared: Option<Vec<String>>) {
        let keep = std::sync::Arc::new(undeclared.unwrap_or_default());
        self.names.keep = Some(keep.clone());
        self.outputs.names.keep = Some(keep);
    }

    /// `--job` names that no ledger row had (meaningful without manifests), each with the
    /// closest name met.
    pub fn unmatched_jobs(&self, wanted: &[String]) -> Vec<(String, Option<String>)> {
        let seen: Vec<&str> = self.names.seen().chain(self.outputs.names.seen()).collect();
        wanted
            .iter()
            .filter(|w| !seen.iter().any(|s| selected(s, std::slice::from_ref(w))))
            .map(|w| {
                let close = crate::manifest::load::closest(w, &seen).map(str::to_owned);
                (w.clone(), close)
            })
            .collect()
    }

    fn job_id(&mut self, name: &str) -> u32 {
        let (id, new) = self.names.id(name);
        if new {
            self.states.push(JobState {
                display: name.to_owned(),
                manifest: None,
                rows: 0,
                outputs: 0,
                skips: 0,
                start_events: 0,
            });
        }
        id
    }

    fn in_window(&self, t: Timestamp) -> bool {
        t >= self.opts.from && t < self.opts.to
    }

    fn slot_id(&mut self, job: u32, at: Timestamp) -> u32 {
        let (lj, la, ls) = self.last_slot;
        if lj == job && la == ms(at) {
            return ls;
        }
        let id = self.slot_id_uncached(job, at);
        self.last_slot = (job, ms(at), id);
        id
    }

    fn slot_id_uncached(&mut self, job: u32, at: Timestamp) -> u32 {
        if self.slot_index.len() <= job as usize {
            self.slot_index
                .resize_with(job as usize + 1, Default::default);
        }
        let next = self.slots.len() as u32;
        let id = *self.slot_index[job as usize].entry(ms(at)).or_insert(next);
        if id == next {
            self.slots.push(Slot {
                at: ms(at),
                n_execs: 0,
                first: NONE,
                skips: 0,
                flags: 0,
            });
        }
        id
    }

    fn exec(&self, i: u32) -> &Exec {
        &self.execs[i as usize / EXEC_CHUNK][i as usize % EXEC_CHUNK]
    }

    fn exec_mut(&mut self, i: u32) -> &mut Exec {
        &mut self.execs[i as usize / EXEC_CHUNK][i as usize % EXEC_CHUNK]
    }

    fn exec_id(&mut self, run_id: &str, slot: u32) -> u32 {
        if self.last_run.1 != NONE && self.last_run.0 == run_id {
            return self.last_run.1;
        }
        let id = self.exec_id_uncached(run_id, slot);
        self.last_run.0.clear();
        self.last_run.0.push_str(run_id);
        self.last_run.1 = id;
        id
    }

    fn exec_id_uncached(&mut self, run_id: &str, slot: u32) -> u32 {
        let h = hash_bytes(0, run_id.as_bytes());
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
        // Events after `events_done`: settle again at finish (merging is idempotent).
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
                status: 0,
                flags: 0,
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
    fn merge_runs(&mut self) {
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
                let (start, end, attempt, status, flags) =
                    (e.start, e.end, e.attempt, e.status, e.flags);
                let k = self.exec_mut(keep);
                if start != NO_TIME && (k.start == NO_TIME || start < k.start) {
                    k.start = start;
                }
                k.end = k.end.max(end);
                k.attempt = k.attempt.max(attempt);
                if status == 1 || (status == 2 && k.status != 1) {
                    k.status = status;
                }
                k.flags |= flags;
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
                self.exec_mut(cur).next = next;
                return;
            }
            cur = n;
        }
    }

    /// Says that the event rows are done (output rows and row errors may follow): the
    /// executions are settled now, while outputs may still be read, rather than in
    /// [`Auditor::finish`]. Optional; event rows after it are settled again at finish.
    pub fn events_done(&mut self) {
        self.merge_runs();
    }

    /// One event row.
    pub fn event(&mut self, e: Event) {
        self.event_ref(&e.as_ref());
    }

    /// One event row, borrowed.
    pub fn event_ref(&mut self, e: &EventRef<'_>) {
        self.input.rows_read += 1;
        self.input.events += 1;
        if !self.in_window(e.scheduled_at) {
            self.input.rows_outside_window += 1;
            return;
        }
        let job = self.job_id(e.job);
        if job == IGNORED {
            return;
        }
        self.states[job as usize].rows += 1;
        let slot = self.slot_id(job, e.scheduled_at);
        match e.event {
            EventKind::Skip => {
                self.slots[slot as usize].skips += 1;
                self.states[job as usize].skips += 1;
            }
            EventKind::DeadLetter => self.slots[slot as usize].flags |= S_DEAD,
            EventKind::Manual => self.slots[slot as usize].flags |= S_MANUAL,
            EventKind::Start => {
                self.states[job as usize].start_events += 1;
                let x = self.exec_id(e.run_id, slot);
                if self.opts.snapshots.is_some()
                    && let Some(d) = e.snapshot_digest
                {
                    self.digests.entry(slot).or_insert_with(|| d.to_owned());
                }
                if e.trigger == Trigger::Manual {
                    self.slots[slot as usize].flags |= S_MANUAL;
                }
                let ex = self.exec_mut(x);
                let at = ms(e.at);
                if ex.start == NO_TIME || at < ex.start {
                    ex.start = at;
                }
                ex.attempt = ex.attempt.max(e.attempt.unwrap_or(1));
                ex.flags |= match e.trigger {
                    Trigger::Manual | Trigger::Replay => F_TRIG_MANUAL,
                    Trigger::Schedule | Trigger::Retry => F_TRIG_SCHEDULE,
                };
            }
            EventKind::End => {
                let fatal = e.status == Some(Status::Failure)
                    && e.error_code.is_some_and(|c| {
                        self.states[job as usize]
                            .manifest
                            .and_then(|m| self.jobs.get(m))
                            .is_some_and(|j| j.fatal.iter().any(|f| f == c))
                    });
                let x = self.exec_id(e.run_id, slot);
                let ex = self.exec_mut(x);
                let at = ms(e.at);
                if ex.end == NO_TIME || at > ex.end {
                    ex.end = at;
                }
                ex.attempt = ex.attempt.max(e.attempt.unwrap_or(1));
                match e.status {
                    Some(Status::Success) => ex.status = 1,
                    _ => {
                        if ex.status != 1 {
                            ex.status = 2;
                        }
                    }
                }
                if fatal {
                    ex.flags |= F_FATAL_FAIL;
                }
            }
        }
    }

    /// One output row (see [`OutputTally`] to fold outputs on another thread).
    pub fn output(&mut self, o: Output) {
        self.outputs.output(o);
    }

    /// An empty [`OutputTally`] for this audit's jobs and window.
    pub fn output_tally(&self) -> OutputTally {
        OutputTally {
            from: self.opts.from,
            to: self.opts.to,
            names: JobNames {
                keep: self.names.keep.clone(),
                ..JobNames::new(self.names.declared.clone(), self.jobs.len())
            },
            counts: vec![0; self.jobs.len()],
            index: HashMap::default(),
            dups: HashMap::default(),
            input: InputCounts::default(),
            row_errors: Vec::new(),
        }
    }

    /// Takes the outputs folded in `t` (from [`Auditor::output_tally`]); they replace any
    /// fed through [`Auditor::output`], so use one way or the other.
    pub fn merge_outputs(&mut self, t: OutputTally) {
        self.outputs = t;
    }

    /// Room for about `rows` event rows (slots and executions), so the indexes do not grow
    /// (and rehash) on the way.
    pub fn reserve(&mut self, rows: usize) {
        let n = rows / 2;
        self.slots.reserve(n);
    }

    /// Resolves the outputs' jobs to this auditor's: counts, row counts and row errors
    /// (event errors first, as when outputs are read after events).
    fn resolve_outputs(&mut self) {
        let n_local = self.outputs.counts.len();
        let mut local_to_global = Vec::with_capacity(n_local);
        for l in 0..n_local {
            let g = match self.outputs.names.undeclared_name(l as u32) {
                None => l as u32,
                Some(_) if self.outputs.counts[l] == 0 => {
                    local_to_global.push(NONE);
                    continue;
                }
                Some(name) => {
                    let name = name.to_owned();
                    self.job_id(&name)
                }
            };
            local_to_global.push(g);
            self.states[g as usize].outputs += self.outputs.counts[l];
            self.out_local.insert(g, l as u32);
        }
        for d in self.outputs.dups.values_mut() {
            d.job = local_to_global[d.job as usize];
        }
        let t = &mut self.outputs.input;
        self.input.rows_read += t.rows_read;
        self.input.rows_rejected += t.rows_rejected;
        self.input.outputs += t.outputs;
        self.input.rows_outside_window += t.rows_outside_window;
        for e in self.outputs.row_errors.drain(..) {
            if self.row_errors.len() < MAX_ROW_ERRORS {
                self.row_errors.push(e);
            }
        }
    }

    /// A row that could not be read: counted and kept for the report (the first 100).
    pub fn row_error(&mut self, e: RowError) {
        self.input.rows_read += 1;
        self.input.rows_rejected += 1;
        if self.row_errors.len() < MAX_ROW_ERRORS {
            self.row_errors.push(e);
        }
    }

    /// Event rows accepted and rejected so far (outputs not included).
    pub fn event_rows(&self) -> (u64, u64) {
        (self.input.events, self.input.rows_rejected)
    }

    /// The first rejected event rows, with their location.
    pub fn first_row_errors(&self) -> &[RowError] {
        &self.row_errors
    }

    /// Whether the output key of `job` was applied (for AU202).
    fn output_seen(&self, job: u32, key: &str) -> bool {
        self.out_local
            .get(&job)
            .is_some_and(|&l| self.outputs.index.contains_key(&out_hash(l, key)))
    }

    fn run_name(&self, x: u32) -> String {
        self.arena.get(self.exec(x).name).to_owned()
    }

    /// Runs the checks and computes the metrics.
    pub fn finish(mut self) -> AuditResult {
        self.merge_runs();
        // AU001, one per source: events, then outputs (before the outputs' errors join
        // the events' in the report's list).
        let mut au001 = Vec::new();
        au001.extend(rows_rejected(self.input.rows_rejected, &self.row_errors));
        au001.extend(rows_rejected(
            self.outputs.input.rows_rejected,
            &self.outputs.row_errors,
        ));
        self.resolve_outputs();
        self.input.rows_accepted = self.input.rows_read - self.input.rows_rejected;
        let mut findings = Vec::new();
        let mut skipped = Vec::new();
        let with_manifest = self.opts.with_manifest;
        if !with_manifest {
            skipped.push(Skipped {
                codes: vec![
                    "AU101", "AU105", "AU106", "AU107", "AU108", "AU109", "AU110", "AU111",
                    "AU202", "AU203", "AU204",
                ],
                reason: "no --manifest: expected slots, lock.ttl, alerts.max_latency and the retry policy come from the manifest".into(),
            });
        } else if self.opts.snapshots.is_none() {
            skipped.push(Skipped {
                codes: vec!["AU202", "AU203", "AU204"],
                reason: "no --snapshots DIR: snapshot files cannot be checked".into(),
            });
        }
        if !self.opts.with_outputs {
            skipped.push(Skipped {
                codes: vec!["AU201", "AU202"],
                reason: "no --outputs source: applied outputs cannot be checked".into(),
            });
        }
        for j in &self.jobs {
            if let Some(why) = &j.schedule_error {
                skipped.push(Skipped {
                    codes: vec!["AU101", "AU108"],
                    reason: format!("job `{}`: {why}", j.name),
                });
            }
        }

        // Slots of each job, sorted by time.
        let mut by_job: Vec<Vec<u32>> = vec![Vec::new(); self.states.len()];
        for (j, m) in self.slot_index.iter().enumerate() {
            by_job[j] = m.values().copied().collect();
        }
        let mut reports = Vec::with_capacity(self.states.len());
        let mut rate_parts: Vec<(u64, u64, u64)> = Vec::with_capacity(self.states.len());
        let mut per_day: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        let mut totals_lat = Histogram::default();
        let mut totals_dur = Histogram::default();

        // Jobs are independent: checked in parallel, merged in job order.
        let snap_dir = self.opts.snapshots.clone();
        let job_out = |jid: usize, slot_ids: &Vec<u32>| -> JobOut {
            let mut findings = Vec::new();
            let mut per_day: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
            let mut snap = snap_dir.clone().map(SnapshotCheck::new);
            let st = &self.states[jid];
            let display = st.display.clone();
            let mj = st.manifest.and_then(|m| self.jobs.get(m)).cloned();
            let declared = mj.is_some();
            let mut m = Metrics {
                skipped: st.skips,
                outputs: st.outputs,
                ..Metrics::default()
            };
            let starts = st.start_events;
            if with_manifest && !declared && st.rows + st.outputs > 0 {
                findings.push(checks::finding(
                    "AU107",
                    format!(
                        "the ledger has {} of job `{}`, which no manifest declares: an orphan registration",
                        crate::report::plural((st.rows + st.outputs) as usize, "row"),
                        display
                    ),
                    &display,
                    None,
                    vec![],
                ));
            }
            let ttl_ms = mj.as_ref().and_then(|j| j.ttl_s).map(|s| s as i64 * 1000);
            let grace_ms = mj.as_ref().map(|j| j.grace_s() as i64 * 1000).unwrap_or(0);
            // Expected slots: every slot of the schedule in [from, to) (for AU108), and the
            // due ones among them (AU101 and the metrics).
            let expected: Option<Vec<i64>> = mj.as_ref().and_then(|j| {
                let s = j.schedule.as_ref()?;
                if !j.enabled {
                    return Some(Vec::new());
                }
                Some(
                    s.slots(&j.tz, self.opts.from, self.opts.to)
                        .into_iter()
                        .map(ms)
                        .collect(),
                )
            });
            let is_due = |at: i64| at.saturating_add(grace_ms) <= self.to_ms;
            let mut lat = Histogram::default();
            let mut dur = Histogram::default();
            let mut first_attempt_ok = 0u64;
            let mut first_failed = 0u64;
            let mut recovered = 0u64;

            // AU101 over expected due slots without a start.
            if let Some(exp) = &expected {
                for &at in exp.iter().filter(|&&at| is_due(at)) {
                    m.expected += 1;
                    let slot = self.slot_index.get(jid).and_then(|m| m.get(&at)).copied();
                    let has_start =
                        slot.is_some_and(|s| self.chain(s).any(|x| self.exec(x).start != NO_TIME));
                    if !has_start {
                        m.missed += 1;
                        let t = ts(at);
                        bump_day(&mut per_day, t, true, self.report_tz.as_ref());
                        findings.push(checks::finding(
                            "AU101",
                            format!(
                                "slot {} of `{}` has no `start`: the run never happened",
                                slot_text(t, mj.as_ref(), self.report_tz.as_ref()),
                                display
                            ),
                            &display,
                            Some(t),
                            vec![],
                        ));
                    }
                }
            }

            // Reused for every slot of the job.
            let mut execs: Vec<u32> = Vec::new();
            let mut started: Vec<u32> = Vec::new();
            for &sid in slot_ids.iter() {
                let slot = &self.slots[sid as usize];
                let at = slot.at;
                let t = ts(at);
                let due = if with_manifest && declared {
                    is_due(at)
                } else {
                    true
                };
                let on_schedule = expected
                    .as_ref()
                    .map(|e| e.binary_search(&at).is_ok())
                    .unwrap_or(!declared || !with_manifest);
                let counts_expected = due && (on_schedule || expected.is_none());
                if slot.flags & S_DEAD != 0 {
                    m.dead_lettered += 1;
                }
                if slot.flags & S_MANUAL != 0 {
                    m.manual_recoveries += 1;
                }
                execs.clear();
                execs.extend(self.chain(sid));
                execs.sort_unstable_by_key(|&x| {
                    let e = self.exec(x);
                    (e.start, e.end)
                });
                started.clear();
                started.extend(
                    execs
                        .iter()
                        .copied()
                        .filter(|&x| self.exec(x).start != NO_TIME),
                );
                let success_end = execs
                    .iter()
                    .filter(|&&x| self.exec(x).status == 1 && self.exec(x).end != NO_TIME)
                    .map(|&x| self.exec(x).end)
                    .min();
                if expected.is_none() && due {
                    // No schedule to expect from: a slot seen in the ledger is expected.
                    m.expected += 1;
                }
                if counts_expected && !started.is_empty() {
                    m.started += 1;
                }
                if counts_expected && success_end.is_some() {
                    m.succeeded += 1;
                }

                // AU104, AU103, AU105: per execution.
                let mut lost_here = false;
                for &x in &execs {
                    let e = self.exec(x);
                    if e.start == NO_TIME && e.end != NO_TIME {
                        findings.push(checks::finding(
                            "AU104",
                            format!(
                                "run `{}` of `{display}` (slot {}) has an `end` but no `start`",
                                self.run_name(x),
                                slot_text(t, mj.as_ref(), self.report_tz.as_ref())
                            ),
                            &display,
                            Some(t),
                            vec![self.run_name(x)],
                        ));
                    } else if e.start != NO_TIME && e.end == NO_TIME {
                        if due {
                            lost_here = true;
                            findings.push(checks::finding(
                                "AU103",
                                format!(
                                    "run `{}` of `{display}` (slot {}) started at {} and never reported an `end`",
                                    self.run_name(x),
                                    slot_text(t, mj.as_ref(), self.report_tz.as_ref()),
                                    slot_text(ts(e.start), mj.as_ref(), self.report_tz.as_ref())
                                ),
                                &display,
                                Some(t),
                                vec![self.run_name(x)],
                            ));
                        }
                    } else if e.start != NO_TIME {
                        let d = (e.end - e.start).max(0);
                        dur.record(d as u64);
                        if with_manifest
                            && let Some(ttl) = ttl_ms
                            && d > ttl
                        {
                            findings.push(checks::finding(
                                "AU105",
                                format!(
                                    "run `{}` of `{display}` (slot {}) ran {}, longer than lock.ttl {}: another instance could have taken the lock",
                                    self.run_name(x),
                                    slot_text(t, mj.as_ref(), self.report_tz.as_ref()),
                                    human(d),
                                    human(ttl)
                                ),
                                &display,
                                Some(t),
                                vec![self.run_name(x)],
                            ));
                        }
                    }
                }
                if lost_here && counts_expected {
                    m.lost += 1;
                }

                // AU102: a start while another execution was active, or after a success.
                let mut dup_runs: Vec<u32> = Vec::new();
                for (k, &x) in started.iter().enumerate() {
                    let e = self.exec(x);
                    let clash = started[..k].iter().any(|&y| {
                        let p = self.exec(y);
                        let active_until = if p.end != NO_TIME {
                            p.end
                        } else {
                            ttl_ms.map_or(i64::MAX, |ttl| p.start.saturating_add(ttl))
                        };
                        let overlapping = e.start >= p.start && e.start < active_until;
                        let after_success = p.status == 1 && p.end != NO_TIME && e.start >= p.end;
                        overlapping || after_success
                    });
                    if clash {
                        if dup_runs.is_empty() {
                            // Name the earlier execution(s) it clashed with.
                            for &y in &started[..k] {
                                dup_runs.push(y);
                            }
                        }
                        dup_runs.push(x);
                    }
                }
                if !dup_runs.is_empty() {
                    if counts_expected || !with_manifest || !declared {
                        m.duplicated += 1;
                    }
                    bump_day(&mut per_day, t, false, self.report_tz.as_ref());
                    let names: Vec<String> = dup_runs.iter().map(|&x| self.run_name(x)).collect();
                    findings.push(checks::finding(
                        "AU102",
                        format!(
                            "slot {} of `{display}` was executed {} times ({}): a second execution started while another was active or after one had succeeded",
                            slot_text(t, mj.as_ref(), self.report_tz.as_ref()),
                            dup_runs.len(),
                            names.join(", ")
                        ),
                        &display,
                        Some(t),
                        names,
                    ));
                }

                if !with_manifest || !declared {
                    if !started.is_empty() {
                        if let Some(end) = success_end {
                            lat.record((end - at).max(0) as u64);
                        }
                        self.attempt_stats(
                            &started,
                            success_end.is_some(),
                            &mut first_attempt_ok,
                            &mut first_failed,
                            &mut recovered,
                        );
                    }
                    continue;
                }
                let Some(j) = mj.as_ref() else { continue };

                // AU108: off schedule (unless every execution was manual or a replay).
                if !on_schedule && expected.is_some() {
                    let scheduled = execs
                        .iter()
                        .any(|&x| self.exec(x).flags & F_TRIG_MANUAL == 0);
                    if scheduled {
                        findings.push(checks::finding(
                            "AU108",
                            format!(
                                "`{display}` ran for {} ({}), which is not a slot of its schedule `{}` in {}",
                                slot_text(t, Some(j), self.report_tz.as_ref()),
                                t,
                                j.schedule.as_ref().map(|s| s.expr()).unwrap_or(""),
                                j.tz_name
                            ),
                            &display,
                            Some(t),
                            execs.iter().map(|&x| self.run_name(x)).collect(),
                        ));
                    }
                }

                // AU109: the slot's highest attempt above max_attempts.
                if let Some(max) = j.max_attempts {
                    let hi = execs
                        .iter()
                        .map(|&x| self.exec(x).attempt)
                        .max()
                        .unwrap_or(0);
                    if u64::from(hi) > max {
                        findings.push(checks::finding(
                            "AU109",
                            format!(
                                "slot {} of `{display}` reached attempt {hi}, above retry.max_attempts {max}",
                                slot_text(t, Some(j), self.report_tz.as_ref())
                            ),
                            &display,
                            Some(t),
                            execs.iter().map(|&x| self.run_name(x)).collect(),
                        ));
                    }
                }

                // AU110: an execution started after a failure classified fatal.
                let fatal = started.iter().find_map(|&y| {
                    let p = self.exec(y);
                    if p.flags & F_FATAL_FAIL == 0 || p.end == NO_TIME {
                        return None;
                    }
                    let later: Vec<u32> = started
                        .iter()
                        .copied()
                        .filter(|&x| x != y && self.exec(x).start >= p.end)
                        .collect();
                    (!later.is_empty()).then_some((y, later))
                });
                if let Some((y, later)) = fatal {
                    let mut names = vec![self.run_name(y)];
                    names.extend(later.iter().map(|&x| self.run_name(x)));
                    findings.push(checks::finding(
                        "AU110",
                        format!(
                            "slot {} of `{display}` was retried after run `{}` failed with a fatal error code (retry.fatal): the input should have gone to the dead letter",
                            slot_text(t, Some(j), self.report_tz.as_ref()),
                            self.run_name(y)
                        ),
                        &display,
                        Some(t),
                        names,
                    ));
                }

                // AU111: due, started, never succeeded.
                if due && !started.is_empty() && success_end.is_none() {
                    if counts_expected {
                        m.failed += 1;
                    }
                    findings.push(checks::finding(
                        "AU111",
                        format!(
                            "slot {} of `{display}` was started ({}) but never succeeded",
                            slot_text(t, Some(j), self.report_tz.as_ref()),
                            crate::report::plural(started.len(), "execution")
                        ),
                        &display,
                        Some(t),
                        started.iter().map(|&x| self.run_name(x)).collect(),
                    ));
                }

                // AU106: first successful end later than scheduled_at + max_latency.
                if let Some(end) = success_end {
                    let latency = (end - at).max(0);
                    if counts_expected {
                        lat.record(latency as u64);
                    }
                    if let Some(max) = j.max_latency_s
                        && latency > max as i64 * 1000
                    {
                        findings.push(checks::finding(
                            "AU106",
                            format!(
                                "slot {} of `{display}` first succeeded {} after its scheduled time, over alerts.max_latency {}",
                                slot_text(t, Some(j), self.report_tz.as_ref()),
                                human(latency),
                                human(max as i64 * 1000)
                            ),
                            &display,
                            Some(t),
                            execs
                                .iter()
                                .filter(|&&x| self.exec(x).end == end)
                                .map(|&x| self.run_name(x))
                                .collect(),
                        ));
                    }
                }
                if counts_expected && !started.is_empty() {
                    self.attempt_stats(
                        &started,
                        success_end.is_some(),
                        &mut first_attempt_ok,
                        &mut first_failed,
                        &mut recovered,
                    );
                }

                // AU202-AU204: snapshots of slots that ran.
                if let Some(sc) = snap.as_mut()
                    && let Some(spec) = &j.snapshot
                    && !started.is_empty()
                {
                    let retained = spec
                        .retention_s
                        .is_none_or(|r| at.saturating_add(r as i64 * 1000) >= self.to_ms);
                    let digest = self.digests.get(&sid).cloned();
                    let names = || started.iter().map(|&x| self.run_name(x)).collect();
                    match sc.check(j, spec, t, digest.as_deref(), |k| {
                        self.output_seen(jid as u32, k)
                    }) {
                        snapshot::Outcome::Missing(path) => {
                            if retained {
                                findings.push(checks::finding(
                                    "AU203",
                                    format!(
                                        "slot {} of `{display}` is inside snapshot.retention but has no snapshot file `{path}`",
                                        slot_text(t, Some(j), self.report_tz.as_ref())
                                    ),
                                    &display,
                                    Some(t),
                                    names(),
                                ));
                            }
                        }
                        snapshot::Outcome::Refused(why) => {
                            findings.push(checks::finding(
                                "AU203",
                                format!(
                                    "slot {} of `{display}`: snapshot path refused: {why}",
                                    slot_text(t, Some(j), self.report_tz.as_ref())
                                ),
                                &display,
                                Some(t),
                                names(),
                            ));
                        }
                        snapshot::Outcome::Found {
                            path,
                            digest_ok,
                            actual,
                            missing,
                            missing_count,
                        } => {
                            if !digest_ok {
                                findings.push(checks::finding(
                                    "AU204",
                                    format!(
                                        "snapshot `{path}` of slot {} of `{display}` is {actual}, but the `start` recorded {}",
                                        slot_text(t, Some(j), self.report_tz.as_ref()),
                                        digest.as_deref().unwrap_or("?")
                                    ),
                                    &display,
                                    Some(t),
                                    names(),
                                ));
                            }
                            if self.opts.with_outputs && missing_count > 0 {
                                m.missing_outputs += missing_count;
                                let mut f = checks::finding(
                                    "AU202",
                                    format!(
                                        "{missing_count} record(s) of the snapshot of slot {} of `{display}` have no output",
                                        slot_text(t, Some(j), self.report_tz.as_ref())
                                    ),
                                    &display,
                                    Some(t),
                                    names(),
                                );
                                f.count = Some(missing_count);
                                f.keys = Some(missing);
                                findings.push(f);
                            }
                        }
                        snapshot::Outcome::NotApplicable => {}
                    }
                }
            }

            // AU201: outputs of this job applied more than once.
            let mut dups: Vec<&DupOutput> = self
                .outputs
                .dups
                .values()
                .filter(|d| d.job == jid as u32)
                .collect();
            dups.sort_by(|a, b| a.key.cmp(&b.key));
            for d in dups {
                m.duplicate_outputs += 1;
                let mut runs = Vec::new();
                if let Ok(k) = self.runs.binary_search_by_key(&d.first_run, |p| p.0) {
                    runs.push(self.run_name(self.runs[k].1));
                }
                for r in &d.run_ids {
                    if !runs.contains(r) {
                        runs.push(r.clone());
                    }
                }
                let mut f = checks::finding(
                    "AU201",
                    format!(
                        "output `{}` of `{display}` was applied {} times",
                        d.key, d.count
                    ),
                    &display,
                    None,
                    runs,
                );
                f.output_key = Some(d.key.clone());
                f.count = Some(d.count);
                findings.push(f);
            }

            let total_attempted = starts + m.skipped;
            m.lock_contention_ratio =
                (total_attempted > 0).then(|| round6(m.skipped as f64 / total_attempted as f64));
            let started_slots = first_attempt_ok + first_failed;
            m.first_attempt_success_rate =
                (started_slots > 0).then(|| round6(first_attempt_ok as f64 / started_slots as f64));
            m.success_after_retry_rate =
                (first_failed > 0).then(|| round6(recovered as f64 / first_failed as f64));
            fill_percentiles(&mut m, &dur, &lat);
            JobOut {
                report: JobReport {
                    job: display,
                    declared: declared && with_manifest,
                    metrics: m,
                    latency_hist: lat,
                    duration_hist: dur,
                },
                findings,
                per_day,
                rate: (first_attempt_ok, first_failed, recovered),
            }
        };
        let outs: Vec<JobOut> = by_job
            .par_iter()
            .enumerate()
            .map(|(jid, ids)| job_out(jid, ids))
            .collect();
        for o in outs {
            rate_parts.push(o.rate);
            totals_lat.merge(&o.report.latency_hist);
            totals_dur.merge(&o.report.duration_hist);
            reports.push(o.report);
            findings.extend(o.findings);
            for (d, (a, b)) in o.per_day {
                let e = per_day.entry(d).or_default();
                e.0 += a;
                e.1 += b;
            }
        }

        // Totals: sums, rates over the summed numerators and denominators, percentiles
        // over the merged histograms.
        let mut t = Metrics::default();
        let (mut skips, mut starts) = (0u64, 0u64);
        let (mut fa_ok, mut fa_failed, mut rec) = (0u64, 0u64, 0u64);
        for ((r, st), parts) in reports.iter().zip(&self.states).zip(&rate_parts) {
            let m = &r.metrics;
            t.expected += m.expected;
            t.started += m.started;
            t.succeeded += m.succeeded;
            t.missed += m.missed;
            t.failed += m.failed;
            t.duplicated += m.duplicated;
            t.lost += m.lost;
            t.skipped += m.skipped;
            t.dead_lettered += m.dead_lettered;
            t.manual_recoveries += m.manual_recoveries;
            t.outputs += m.outputs;
            t.duplicate_outputs += m.duplicate_outputs;
            t.missing_outputs += m.missing_outputs;
            skips += m.skipped;
            starts += st.start_events;
            fa_ok += parts.0;
            fa_failed += parts.1;
            rec += parts.2;
        }
        t.lock_contention_ratio =
            (starts + skips > 0).then(|| round6(skips as f64 / (starts + skips) as f64));
        t.first_attempt_success_rate =
            (fa_ok + fa_failed > 0).then(|| round6(fa_ok as f64 / (fa_ok + fa_failed) as f64));
        t.success_after_retry_rate = (fa_failed > 0).then(|| round6(rec as f64 / fa_failed as f64));
        fill_percentiles(&mut t, &totals_dur, &totals_lat);

        findings.sort_by(|a, b| {
            (a.job.as_str(), a.scheduled_at, a.code, &a.run_ids).cmp(&(
                b.job.as_str(),
                b.scheduled_at,
                b.code,
                &b.run_ids,
            ))
        });
        reports.sort_by(|a, b| a.job.cmp(&b.job));
        // Rejected rows first: every other finding is judged without them.
        au001.append(&mut findings);
        let findings = au001;
        AuditResult {
            from: self.opts.from,
            to: self.opts.to,
            input: self.input.clone(),
            row_errors: std::mem::take(&mut self.row_errors),
            findings,
            jobs: reports,
            totals: t,
            skipped,
            per_day: per_day.into_iter().map(|(d, (a, b))| (d, a, b)).collect(),
            tz: self.report_tz.clone().unwrap_or(jiff::tz::TimeZone::UTC),
        }
    }

    /// The executions of a slot.
    fn chain(&self, slot: u32) -> impl Iterator<Item = u32> + '_ {
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

    fn attempt_stats(
        &self,
        started: &[u32],
        succeeded: bool,
        first_ok: &mut u64,
        first_failed: &mut u64,
        recovered: &mut u64,
    ) {
        // The first attempt is the earliest start (execs are sorted by start).
        let Some(&first) = started.first() else {
            return;
        };
        if self.exec(first).status == 1 {
            *first_ok += 1;
        } else {
            *first_failed += 1;
            if succeeded {
                *recovered += 1;
            }
        }
    }
}

/// How many locations an AU001 finding lists.
const AU001_LOCATIONS: usize = 5;

/// AU001 for one source: `rejected` rows, the first of them in `errors`.
fn rows_rejected(rejected: u64, errors: &[RowError]) -> Option<super::AuditFinding> {
    let first = errors.first()?;
    if rejected == 0 {
        return None;
    }
    let source = first.at.source.clone();
    let shown: Vec<String> = errors
        .iter()
        .take(AU001_LOCATIONS)
        .map(|e| e.to_string())
        .collect();
    let mut message = format!(
        "{} of {source} could not be read, so the audit is incomplete; first: {}",
        if rejected == 1 {
            "1 row".to_owned()
        } else {
            format!("{rejected} rows")
        },
        shown[0]
    );
    if rejected > 1 {
        message.push_str(&format!(
            " (the first {} are listed under rejected rows)",
            shown.len()
        ));
    }
    let mut f = checks::finding("AU001", message, &source, None, Vec::new());
    f.count = Some(rejected);
    f.keys = Some(
        errors
            .iter()
            .take(AU001_LOCATIONS)
            .map(|e| e.at.to_string())
            .collect(),
    );
    Some(f)
}

/// What checking one job yields.
struct JobOut {
    report: JobReport,
    findings: Vec<super::AuditFinding>,
    per_day: std::collections::BTreeMap<String, (u64, u64)>,
    rate: (u64, u64, u64),
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn fill_percentiles(m: &mut Metrics, dur: &Histogram, lat: &Histogram) {
    let s = |v: Option<f64>| v.map(|ms| round6(ms / 1000.0));
    m.duration_p50_s = s(dur.percentile(50.0));
    m.duration_p95_s = s(dur.percentile(95.0));
    m.duration_p99_s = s(dur.percentile(99.0));
    m.duration_max_s = s(dur.max().map(|v| v as f64));
    m.latency_p50_s = s(lat.percentile(50.0));
    m.latency_p95_s = s(lat.percentile(95.0));
    m.latency_p99_s = s(lat.percentile(99.0));
    m.latency_max_s = s(lat.max().map(|v| v as f64));
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Counts a missed (or duplicated) slot on its day in the report's zone (UTC without one).
fn bump_day(
    per_day: &mut std::collections::BTreeMap<String, (u64, u64)>,
    t: Timestamp,
    missed: bool,
    tz: Option<&jiff::tz::TimeZone>,
) {
    let day = match tz {
        Some(tz) => t
            .to_zoned_datetime(tz.clone())
            .strftime("%Y-%m-%d")
            .to_string(),
        None => t.strftime("%Y-%m-%d").to_string(),
    };
    let e = per_day.entry(day).or_default();
    if missed {
        e.0 += 1;
    } else {
        e.1 += 1;
    }
}

/// A slot as the report's zone shows it (`2026-03-01T02:00:00+09:00`), else the job's.
fn slot_text(t: Timestamp, j: Option<&AuditJob>, report: Option<&jiff::tz::TimeZone>) -> String {
    match (report, j) {
        (Some(tz), _) => crate::schedule::format_slot(t, tz),
        (None, Some(j)) => crate::schedule::format_slot(t, &j.tz),
        (None, None) => t.to_string(),
    }
}

/// `1h02m03s`-style length of a millisecond duration.
/// Under 10 s with a fraction: tenths (`4.2s`); else rounded to the whole second shown,
/// never truncated (299 999 ms is `5m00s`).
pub(crate) fn human(ms: i64) -> String {
    if ms % 1000 != 0 && ms.abs() < 9_950 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let s = (ms as f64 / 1000.0).round() as i64;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}
