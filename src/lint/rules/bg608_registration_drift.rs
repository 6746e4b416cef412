use crate::declare_rule;
use crate::finding::Location;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::year_slots;

declare_rule! {
    /// ## What it does
    /// For every registration tied to a manifest job (annotation `batchguard.dev/job`, or
    /// `batchguard run --job`), compares what the registration runs with what the manifest
    /// declares: the slots of the registration's schedule in its dialect and time zone
    /// against the slots of the manifest's, over the 12 months from `--now`. Meaning is
    /// compared, not text: `0 2 * * *` in Asia/Seoul and `0 17 * * *` in UTC agree, while
    /// the same expression in another zone does not.
    ///
    /// ## Why it matters
    /// A manifest edited without redeploying the CronJob (or the reverse) leaves the
    /// platform running a schedule nobody reviewed: the audit then expects slots that never
    /// run and finds runs it did not expect. The source article asks that every slot run
    /// exactly once; that starts with the platform running the declared slots.
    ///
    /// ## Example
    /// ```yaml
    /// # billing.batchguard.yaml
    /// schedule: "0 * * * *"
    /// # k8s/cronjobs.yaml (annotated batchguard.dev/job: billing/settle-payments)
    /// schedule: "*/30 * * * *"
    /// ```
    ///
    /// Use instead: deploy the manifest's schedule and zone (`schedule: "0 * * * *"`).
    pub struct RegistrationDrift {
        code: "BG608",
        name: "registration-drift",
        severity: Error,
        scope: Project,
        summary: "a registration tied to a manifest job runs another schedule or timezone than the manifest declares (a stale deploy)",
        help: "redeploy the registration with the manifest's schedule and timezone (or fix the manifest)",
    }
}

impl Rule for RegistrationDrift {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for (r, reg) in cx.project.regs.iter().enumerate() {
            let Some(j) = cx.ties.get(r).copied().flatten() else {
                continue;
            };
            let job = &cx.project.jobs[j];
            let (Some(rs), Some(js)) = (&reg.schedule, &job.schedule) else {
                continue;
            };
            let (Some(a), Some(b)) = (
                year_slots(&rs.value, reg.dialect, reg.zone(), cx.now),
                year_slots(&js.value, job.dialect, job.zone(), cx.now),
            ) else {
                continue; // unreadable schedules and zones are other rules' findings
            };
            if a == b {
                continue;
            }
            let zone_only = rs.value.split_whitespace().eq(js.value.split_whitespace())
                && reg.zone() != job.zone();
            let (span, what) = if zone_only {
                (
                    reg.timezone.as_ref().map_or(reg.span, |t| t.span),
                    format!(
                        "timezone {} where the manifest declares {}",
                        reg.zone_label(),
                        job.zone()
                    ),
                )
            } else {
                (
                    rs.span,
                    format!(
                        "`{}` ({}, {}) where the manifest declares `{}` ({}, {}): {} slots against {} in the next 12 months",
                        rs.value,
                        reg.dialect,
                        reg.zone_label(),
                        js.value,
                        job.dialect,
                        job.zone(),
                        a.len(),
                        b.len()
                    ),
                )
            };
            out.emit(
                Location {
                    file: reg.file,
                    span,
                },
                Some(job.service.clone()),
                Some(job.name.clone()),
                format!(
                    "{} is tied to job `{}` but runs {what}",
                    reg.label,
                    job.key()
                ),
                Self::META.help.to_owned(),
                vec![(
                    Location {
                        file: job.file,
                        span: job
                            .timezone
                            .as_ref()
                            .filter(|_| zone_only)
                            .map_or(js.span, |t| t.span),
                    },
                    "the manifest declares this".to_owned(),
                )],
            );
        }
    }
}
