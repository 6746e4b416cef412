use crate::declare_rule;
use crate::lint::cross::{Analysis, CrossEmitter, group_subject};
use crate::lint::rule::{Rule, RuleMeta};

/// Places named in the message; every place is still a related location.
const MAX_LISTED: usize = 10;

declare_rule! {
    /// ## What it does
    /// Finds a job that is registered in more than one place: two or more registrations
    /// tied to the same manifest job (a CronJob annotated `batchguard.dev/job`, a
    /// `batchguard run --job` line), two manifests that declare the same `service/name`, or
    /// a registration or manifest job that runs the same command (same argv, wrappers
    /// removed) on a schedule that shares at least one slot with it in the 12 months from
    /// `--now`. Schedules are compared by their slots in their own dialect and time zone,
    /// not as strings: `0 2 * * *` in Asia/Seoul and `0 17 * * *` in UTC are the same slots.
    ///
    /// One finding per duplicated job: it points at the first place in path order and
    /// labels every other place.
    ///
    /// ## Why it matters
    /// This is the source article's incident: after a deploy, one settlement job was
    /// registered in two places, both runs said "success", and customers were billed twice.
    /// Its pre-deploy checklist asks exactly this: is any job registered twice?
    ///
    /// ## Example
    /// ```text
    /// deploy/billing.batchguard.yaml   settle-payments: node jobs/settle.js, "0 * * * *"
    /// deploy/k8s/cronjobs.yaml         CronJob settle: node jobs/settle.js, "0 * * * *"
    /// deploy/crontab                   0 * * * * node jobs/settle.js
    /// ```
    ///
    /// Use instead: keep one registration and tie it to the manifest job:
    /// ```yaml
    /// metadata:
    ///   name: settle
    ///   annotations:
    ///     batchguard.dev/job: billing/settle-payments
    /// ```
    pub struct DuplicateRegistration {
        code: "BG601",
        name: "duplicate-registration",
        severity: Error,
        summary: "the same job (same service and name, or same command and overlapping schedule) is registered in more than one place; every place is labelled",
        help: "keep one registration per job: remove the others, or tie the one that stays to the manifest job",
    }
}

impl Rule for DuplicateRegistration {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for g in cx.groups.iter().filter(|g| g.duplicate) {
            let Some((&first, rest)) = g.places.split_first() else {
                continue;
            };
            let (service, job) = group_subject(cx, g);
            let subject = match &service {
                Some(s) => format!("job `{s}/{job}`"),
                None => format!("the command of {job}"),
            };
            let mut places: Vec<String> = g
                .places
                .iter()
                .take(MAX_LISTED)
                .map(|p| match cx.command_text(*p) {
                    Some(cmd) => format!("{} at {} runs `{cmd}`", cx.describe(*p), cx.where_(*p)),
                    None => format!("{} at {}", cx.describe(*p), cx.where_(*p)),
                })
                .collect();
            if g.places.len() > MAX_LISTED {
                places.push(format!("and {} more", g.places.len() - MAX_LISTED));
            }
            out.emit(
                cx.location(first),
                service,
                Some(job),
                format!(
                    "{subject} is registered in {} places: {}",
                    g.places.len(),
                    places.join("; ")
                ),
                Self::META.help.to_owned(),
                rest.iter()
                    .map(|p| {
                        (
                            cx.location(*p),
                            format!("also registered here: {}", cx.describe(*p)),
                        )
                    })
                    .collect(),
            );
        }
    }
}
