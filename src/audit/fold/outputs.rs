//! The output rows' tally: per `(job, output_key)` a count, kept as 64-bit hashes.

use super::hash::{Fast, hash_bytes, run_hash};
use super::names::{IGNORED, JobNames};
use crate::audit::{InputCounts, MAX_ROW_ERRORS};
use crate::ledger::{Output, OutputRef, RowError};
use jiff::Timestamp;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// Run ids listed per duplicated output key, at most.
const DUP_RUN_IDS: usize = 20;

/// An output key applied more than once. `job` is the tally's local job id until the
/// auditor resolves it to its own; the first execution is resolved (from `first_run`, the
/// hash of the first row's run id) at finish.
pub(crate) struct DupOutput {
    pub(crate) key: String,
    pub(crate) job: u32,
    pub(crate) count: u64,
    pub(crate) run_ids: Vec<String>,
    pub(crate) first_run: u64,
}

/// The hash an output key of a (local) job is tallied under.
#[inline]
pub(crate) fn out_hash(local_job: u32, key: &str) -> u64 {
    hash_bytes(u64::from(local_job).wrapping_add(0x5151), key.as_bytes())
}

/// The output rows of an audit, folded on their own (they need nothing from the events, so
/// a reader thread can fill one while the events are read): per `(job, output_key)` hash a
/// count and the hash of the first row's run id. Job names are resolved as
/// [`Auditor`](crate::audit::Auditor) resolves them: a declared name (`service/name` or
/// bare `name`) is its manifest job, any other name is its own job. Get one from
/// [`Auditor::output_tally`](crate::audit::Auditor::output_tally), hand it back with
/// [`Auditor::merge_outputs`](crate::audit::Auditor::merge_outputs).
pub struct OutputTally {
    from: Timestamp,
    to: Timestamp,
    pub(crate) names: JobNames,
    /// Output rows per local job id.
    pub(crate) counts: Vec<u64>,
    /// `(local job, output_key)` hash -> hash of the first row's run id (a key seen again
    /// moves to `dups`, which counts).
    pub(crate) index: HashMap<u64, u64, Fast>,
    pub(crate) dups: HashMap<u64, DupOutput, Fast>,
    pub(crate) input: InputCounts,
    pub(crate) row_errors: Vec<RowError>,
}

impl OutputTally {
    /// An empty tally of the window `[from, to)`, `n_declared` manifest jobs resolved by
    /// `names`.
    pub(crate) fn new(from: Timestamp, to: Timestamp, names: JobNames, n_declared: usize) -> Self {
        OutputTally {
            from,
            to,
            names,
            counts: vec![0; n_declared],
            index: HashMap::default(),
            dups: HashMap::default(),
            input: InputCounts::default(),
            row_errors: Vec::new(),
        }
    }

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
            Entry::Vacant(v) => {
                v.insert(run_hash(o.run_id));
                return;
            }
            Entry::Occupied(e) => *e.get(),
        };
        let d = self.dups.entry(h).or_insert_with(|| DupOutput {
            key: o.output_key.to_owned(),
            job,
            count: 1,
            run_ids: Vec::new(),
            first_run,
        });
        d.count += 1;
        if d.run_ids.len() < DUP_RUN_IDS && !d.run_ids.iter().any(|r| r == o.run_id) {
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

    /// Whether output `key` of local job `local` was applied.
    pub(crate) fn contains(&self, local: u32, key: &str) -> bool {
        self.index.contains_key(&out_hash(local, key))
    }
}
