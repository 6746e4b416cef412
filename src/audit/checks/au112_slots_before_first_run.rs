use crate::audit::AuditFinding;
use crate::audit::view::{JobView, Sight, ts};
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// For a manifest job without `since:` whose first ledger event lies inside the window, counts the due slots of its schedule before that event and reports them once, with the count. They are not AU101s: without `since:` nothing says the job existed then. A job with no event at all in the window (and none before it) is not this: each of its due slots is an AU101 (from its `since:` when later).
    ///
    /// ## Why it matters
    /// "First sight" also hides real misses: a job whose first slots of the window never ran looks as if it was deployed later. A warning that says how many slots were not judged (and `--fail-on warning` to fail on it) keeps that visible; `since:` makes them count.
    ///
    /// ## Example
    /// An hourly job without `since:`, audited 00:00-06:00, whose first event is for 03:00 -> one AU112: 3 slots before the first run (03:00) are not counted.
    AU112 {
        code: "AU112",
        name: "slots-before-first-run",
        severity: Warning,
        summary: "due slots of a job without `since:` lie before its first ledger event: not counted as missed",
        help: "set the job's `since:` (when it was first deployed) so these slots count, or replay them if they were due",
    }
}

/// The job's due slots before its first event, when it has no `since`.
pub(super) fn check(job: &JobView, out: &mut Vec<AuditFinding>) {
    let Some(j) = job.checked() else {
        return;
    };
    let Sight::FirstEvent(first) = job.sight else {
        return;
    };
    if !j.enabled || job.expected.is_none() || job.not_counted == 0 {
        return;
    }
    let n = job.not_counted;
    let mut f = job.finding(&AU112, before_first_run(job, first), vec![]);
    f.count = Some(n);
    out.push(f);
}

/// "`hourly`: 3 slots before the first run (…) are not counted: set `since:`", the
/// finding's message and the note `watch` shows.
pub(crate) fn before_first_run(job: &JobView, first: i64) -> String {
    let n = job.not_counted;
    let are = if n == 1 { "is" } else { "are" };
    format!(
        "`{}`: {} before the first run ({}) {are} not counted: set `since:`",
        job.display,
        crate::text::plural(n as usize, "slot"),
        job.slot_text(ts(first))
    )
}
