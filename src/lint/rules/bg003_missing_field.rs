use crate::declare_rule;
use crate::finding::Location;
use crate::lint::JobCx;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::{Emitter, Rule};
use crate::project::Analysis;

declare_rule! {
    /// ## What it does
    /// Reports a job without `name`, `schedule` or `expected_duration`, a lock without
    /// `ttl`, and a Sentry monitor without `monitor_slug` (Sentry Crons files check-ins by
    /// slug: without one `run` can send it nothing). (A missing lock,
    /// idempotency, retry, dead letter or runbook field has a rule of its own.)
    ///
    /// Also a Kubernetes CronJob without `spec.schedule` where it would be deployed: the
    /// field is required, so the API server rejects the CronJob and nothing runs. Not for
    /// a kustomize patch (a file a kustomization names under `patches`,
    /// `patchesStrategicMerge` or `patchesJson6902`, or a CronJob with no container image:
    /// a partial resource whose schedule comes from its base), and not in a test, fixture
    /// or example folder (docs/deploy-units.md). `lint --list-files` says which it was.
    ///
    /// ## Why it matters
    /// Without a name a job cannot be found in the run ledger; without a schedule nothing
    /// can tell which slots it owes; without an expected duration nobody can say whether
    /// its lock TTL is long enough (BG202) or whether two slots overlap. These are the
    /// numbers every other check is computed from.
    ///
    /// ## Example
    /// ```yaml
    /// jobs:
    ///   - name: settle-payments
    ///     schedule: "0 * * * *"
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// jobs:
    ///   - name: settle-payments
    ///     schedule: "0 * * * *"
    ///     expected_duration: 10m
    /// ```
    pub struct MissingField {
        code: "BG003",
        name: "missing-field",
        severity: Error,
        scope: Job,
        summary: "a required field is absent",
        help: "add the field",
    }
}

impl Rule for MissingField {
    /// CronJobs without a schedule, once every file's deploy unit is known.
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for u in &cx.project.unscheduled {
            if crate::lint::unscheduled_excuse(cx.project, u).is_some() {
                continue;
            }
            out.emit(
                Location {
                    file: u.file,
                    span: u.span,
                },
                None,
                Some(u.label.clone()),
                format!(
                    "{} has no `spec.schedule`: the field is required, so the API server rejects this CronJob and it never runs",
                    u.label
                ),
                "add `spec.schedule` with a cron expression; if this file patches a base CronJob, name it under the kustomization's `patches`".into(),
                Vec::new(),
            );
        }
    }

    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let job = cx.job;
        let missing = [
            (
                "name",
                job.name.is_absent(),
                "add `name:` ([a-z0-9][a-z0-9._-]{0,62})",
            ),
            (
                "schedule",
                job.schedule.is_absent(),
                "add `schedule:` with a cron expression",
            ),
            (
                "expected_duration",
                job.expected_duration.is_absent(),
                "add `expected_duration:` (how long one run normally takes, e.g. 10m)",
            ),
        ];
        // A lock without a TTL never expires after a crash (or expires when the store's
        // default says, which nobody reviewed): the TTL is part of a lock.
        if let Some(lock) = job.active_lock()
            && lock.ttl.is_absent()
        {
            out.emit_with_help(
                lock.span,
                format!("job `{}`: the lock has no `ttl`", cx.job_name()),
                "add `ttl:` of 2-3x expected_duration, so a crashed run's lock expires",
            );
        }
        if let Some(sentry) = job.monitor.value().and_then(|m| m.sentry.value())
            && sentry.monitor_slug.is_absent()
        {
            out.emit_with_help(
                sentry.span,
                format!(
                    "job `{}`: the Sentry monitor has no `monitor_slug`, so `run` can send it no check-in",
                    cx.job_name()
                ),
                "add `monitor_slug:` (the slug of the Sentry Crons monitor; `{job}` fills in the job's name)",
            );
        }
        for (field, absent, help) in missing {
            if absent {
                out.emit_with_help(
                    job.span,
                    format!("job `{}` has no `{field}`", cx.job_name()),
                    help,
                );
            }
        }
    }
}
