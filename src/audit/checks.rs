//! The audit checks' registry: code, name, default severity and documentation of AU001, AU101-AU111
//! and AU201-AU204 (SPEC 6). `batchguard rules` and `explain` list them with the lint rules
//! (`crate::lint::registry::all` chains [`all`]); the logic lives in `engine.rs`, one block
//! per code, each marked with its code.

use super::AuditFinding;
use crate::finding::Severity;
use crate::lint::rule::RuleMeta;
use jiff::Timestamp;

macro_rules! check {
    ($id:ident, $code:literal, $name:literal, $sev:ident, $summary:literal, $help:literal, $docs:literal) => {
        pub static $id: RuleMeta = RuleMeta {
            code: $code,
            name: $name,
            severity: Severity::$sev,
            summary: $summary,
            help: $help,
            docs: $docs,
        };
    };
}

check!(
    AU001,
    "AU001",
    "rows-rejected",
    Error,
    "ledger rows could not be read: the audit is incomplete",
    "fix the rows at the locations shown (`--assume-tz ZONE` for timestamps written without an offset), then audit again",
    "## What it does\nReports, once per source (the events ledger, the outputs), how many rows could not be read, with the locations and reasons of the first ones. The finding's `job` is the source, `count` the rejected rows and `keys` the first locations. When no event row at all can be read, the audit does not report: it exits 2 with the first reasons.\n\n## Why it matters\nA rejected row is a run the audit did not see: its slot looks missed, or a duplicate goes unnoticed. A report that counts its rejected rows at the bottom and still says clean proves nothing.\n\n## Example\n`2026-03-01T02:00:00` (no offset) in `scheduled_at` -> AU001 for `events.csv`, until the row says `+09:00` or the audit runs with `--assume-tz Asia/Seoul`.\n"
);
check!(
    AU101,
    "AU101",
    "missed-run",
    Error,
    "an expected, due slot of the schedule has no `start` at all",
    "replay the slot (`batchguard drill` first), then find why the scheduler did not fire",
    "## What it does\nFor every job of the manifests, enumerates the slots of its schedule in `[from, to)` in the job's dialect and time zone (DST included) and reports each **due** slot (`scheduled_at + grace <= to`, grace = `alerts.max_latency`, else `lock.ttl`) that has no `start` event. Skip events do not count as a start.\n\n## Why it matters\nA missed settlement is money not collected; nobody notices a run that never happened unless something counts the slots.\n\n## Example\n`0 * * * *` with no `start` for `2026-03-01T05:00:00Z` -> AU101 for that slot.\n"
);
check!(
    AU102,
    "AU102",
    "duplicate-run",
    Error,
    "a slot was executed more than once: a second execution started while another was active, or after one had succeeded",
    "check the lock (key, ttl, store) and make the job idempotent",
    "## What it does\nWithin one slot `(job, scheduled_at)`, reports a second execution (`run_id`) whose `start` falls while an earlier one is **active** (from its `start` to its `end`; without `end`, until `start + lock.ttl`) or after an earlier one had **succeeded**. A retry after a failure is not a duplicate. Under the `kubernetes` dialect a local time in a repeated DST hour is two slots (two instants), so running it twice is expected.\n\n## Why it matters\nThis is the incident behind batchguard: two instances ran the same tick and customers were billed twice.\n"
);
check!(
    AU103,
    "AU103",
    "lost-run",
    Error,
    "a `start` with no `end`: the process died or never reported",
    "look at the instance's logs at the start time; replay the slot if its work is incomplete",
    "## What it does\nReports each execution with a `start` and no `end` in a due slot (one finding per `run_id`). A slot that only has lost executions is also a failed run (AU111).\n\n## Why it matters\nA run that vanished may have applied half of its input.\n"
);
check!(
    AU104,
    "AU104",
    "orphan-end",
    Error,
    "an `end` with no `start`",
    "make the runner write `start` before the work begins",
    "## What it does\nReports each execution (`run_id`) that has an `end` but no `start`.\n\n## Why it matters\nWithout the start, the run's duration, lock holding time and overlap with other runs are unknown.\n"
);
check!(
    AU105,
    "AU105",
    "ttl-exceeded",
    Error,
    "an execution ran longer than `lock.ttl`: another instance could have taken the lock",
    "raise lock.ttl to 2-3x the real duration, or stop the command before the ttl runs out",
    "## What it does\nReports each execution with both `start` and `end` whose duration exceeds the job's `lock.ttl`.\n\n## Why it matters\nOnce the lock expired, a second instance could acquire it for the same slot while the first still worked.\n"
);
check!(
    AU106,
    "AU106",
    "latency-breach",
    Warning,
    "the slot's first successful `end` came later than `scheduled_at + alerts.max_latency`",
    "shorten the work (chunk size) or change the schedule interval",
    "## What it does\nFor each slot, compares the first successful `end` with `scheduled_at + alerts.max_latency` (the on-call threshold) and reports a breach.\n\n## Why it matters\nThe team rule of the source article: latency over 15 minutes pages the on-call engineer.\n"
);
check!(
    AU107,
    "AU107",
    "unknown-job",
    Error,
    "the ledger has runs of a job that no manifest declares: an orphan registration",
    "declare the job in a manifest, or remove the registration that still runs it",
    "## What it does\nReports each job name in the ledger (inside the window) that matches no job of the given manifests (`name`, or `service/name`). One finding per name.\n\n## Why it matters\nA job running from a forgotten crontab line or an old CronJob is outside every lock and alert.\n"
);
check!(
    AU108,
    "AU108",
    "off-schedule-run",
    Warning,
    "`scheduled_at` is not a slot of the job's schedule (and the trigger is not manual or replay)",
    "check the scheduler's time zone and dialect against the manifest",
    "## What it does\nReports each slot whose `scheduled_at` is not an instant the job's schedule fires in `[from, to)`, unless every execution of it was triggered `manual` or `replay`.\n\n## Why it matters\nA run at an unexpected instant means the scheduler reads the expression differently from the manifest (dialect, zone), or an unknown trigger exists.\n"
);
check!(
    AU109,
    "AU109",
    "retry-limit-exceeded",
    Error,
    "the slot's highest `attempt` is above `retry.max_attempts`",
    "make the runner enforce retry.max_attempts",
    "## What it does\nCompares the highest `attempt` recorded for a slot with the job's `retry.max_attempts`.\n\n## Why it matters\nUnbounded retries during an external outage make the outage worse.\n"
);
check!(
    AU110,
    "AU110",
    "fatal-error-retried",
    Error,
    "a retry followed a failure whose error code the manifest classifies fatal",
    "send fatal failures to the dead letter instead of retrying",
    "## What it does\nReports a slot in which an execution started after another ended in failure with an `error_code` listed in `retry.fatal`.\n\n## Why it matters\nRetrying bad input makes incidents bigger; it belongs in the dead letter.\n"
);
check!(
    AU111,
    "AU111",
    "failed-run",
    Error,
    "a due slot was started but never succeeded",
    "replay the slot after fixing the cause; the dead letter holds its quarantined input",
    "## What it does\nReports each due slot with at least one `start` and no successful `end` (lost executions included).\n\n## Why it matters\nThe slot's work is not done, whatever the logs of individual attempts say.\n"
);
check!(
    AU201,
    "AU201",
    "duplicate-output",
    Error,
    "the same `(job, output_key)` was applied more than once",
    "guard the write with the idempotency key (processed_at, version or a unique key)",
    "## What it does\nCounts applied outputs per `(job, output_key)` and reports every key applied more than once, with the count and the runs that applied it.\n\n## Why it matters\nA duplicated output is the double charge or the second e-mail the customer sees.\n"
);
check!(
    AU202,
    "AU202",
    "missing-output",
    Error,
    "a record of the slot's input snapshot has no output (needs `--snapshots`)",
    "replay the slot: an idempotent job applies only the missing records",
    "## What it does\nReads the snapshot of each slot that ran (`snapshot.path` under `--snapshots DIR`) and reports, once per slot, the records whose `snapshot.key` value has no output of the job, with their count and the first keys.\n\n## Why it matters\nA run that \"succeeded\" but skipped records lost work silently.\n"
);
check!(
    AU203,
    "AU203",
    "snapshot-missing",
    Warning,
    "a slot inside the retention period has no snapshot file",
    "write the snapshot before the work starts, and keep it for snapshot.retention",
    "## What it does\nReports a slot that ran, lies within `snapshot.retention` of `to`, and has no file at its `snapshot.path` under `--snapshots DIR` (or whose path would leave that directory).\n\n## Why it matters\nWithout the input, an incident cannot be reproduced once the source data changed.\n"
);
check!(
    AU204,
    "AU204",
    "snapshot-digest-mismatch",
    Error,
    "the snapshot on disk differs from the digest recorded at `start`",
    "find who rewrote the snapshot; a replay of a changed input proves nothing",
    "## What it does\nComputes the sha256 of the slot's snapshot file and compares it with the `snapshot_digest` recorded on its `start`.\n\n## Why it matters\nA drill or replay must use the input the run really saw.\n"
);

static ALL: [&RuleMeta; 16] = [
    &AU001, &AU101, &AU102, &AU103, &AU104, &AU105, &AU106, &AU107, &AU108, &AU109, &AU110, &AU111,
    &AU201, &AU202, &AU203, &AU204,
];

/// Every audit check, in code order.
pub fn all() -> impl Iterator<Item = &'static RuleMeta> {
    ALL.iter().copied()
}

pub fn meta(code: &str) -> Option<&'static RuleMeta> {
    all().find(|m| m.code == code)
}

/// A finding of `code` with the registry's name and severity.
pub(crate) fn finding(
    code: &'static str,
    message: String,
    job: &str,
    scheduled_at: Option<Timestamp>,
    run_ids: Vec<String>,
) -> AuditFinding {
    let (name, severity) = meta(code)
        .map(|m| (m.name, m.severity))
        .unwrap_or(("unknown", Severity::Error));
    AuditFinding {
        code,
        name,
        severity,
        message,
        job: job.to_owned(),
        scheduled_at,
        run_ids,
        output_key: None,
        count: None,
        keys: None,
    }
}
