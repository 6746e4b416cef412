use crate::declare_rule;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Place;
use crate::project::group_subject;

/// Places named in the message; every place is still a related location.
const MAX_LISTED: usize = 10;

declare_rule! {
    /// ## What it does
    /// Finds a job that is registered in more than one place: two or more registrations
    /// tied to the same manifest job (a CronJob annotated `batchguard.dev/job`, a
    /// `batchguard run --job` line), two manifests that declare the same `service/name`, or
    /// a registration or manifest job that runs the same command on a schedule that shares
    /// at least one slot with it in the 12 months from `--now`. Schedules are compared by
    /// their slots in their own dialect and time zone, not as strings: `0 2 * * *` in
    /// Asia/Seoul and `0 17 * * *` in UTC are the same slots.
    ///
    /// "The same command" is decided the way the commands really run (SPEC 3.6): env
    /// assignments, `batchguard run … --` and `flock …` wrappers, `sh -c "…"`, output
    /// redirections and a trailing `| logger`/`| tee` are looked through; `cd DIR &&`, PM2
    /// `cwd` and a container's `workingDir` give the working directory that relative paths
    /// are resolved against; programs are compared by basename. So
    /// `cd /srv/payments && node jobs/settle.js >> log 2>&1`,
    /// `/usr/bin/node /srv/payments/jobs/settle.js | logger` and a PM2 app with
    /// `cwd: /srv/payments, script: jobs/settle.js` are one command, while the same
    /// `php artisan schedule:run` in `/var/www/shop` and in `/var/www/blog` are two. A
    /// relative path matches an absolute one with the same tail only when one side has no
    /// known working directory. CronJobs in different namespaces (staging and production)
    /// are never duplicates of each other, also when both are tied to one manifest job.
    ///
    /// Places are compared within one deploy unit, or across units the tree ties together
    /// (docs/deploy-units.md). A folder with its own kustomization, Helm chart, PM2
    /// ecosystem file, `package.json` or `.git` is a unit of its own, and so is every file
    /// under a test, fixture or example folder (`tests/`, `testdata/`, `fixtures/`,
    /// `examples/` …): a linter's eight test cases of one CronJob, two alternative
    /// examples, or two repositories linted together are not one job registered twice.
    /// Units are tied by a kustomization that includes both (`resources`, `bases`,
    /// `components`, followed transitively: an overlay and its base), a Helm chart and its
    /// subcharts, and a manifest whose jobs are registered in both (a CronJob in one unit
    /// and a crontab line in another, each tied to a job of the same manifest). The message
    /// names the tie when the places lie in several units. `lint --list-files` shows the
    /// units when there are several.
    ///
    /// One finding per duplicated job: it points at the first place in path order, labels
    /// every other place, and shows each place's command as its source writes it.
    ///
    /// Not a duplicate: the HA pattern, where every place is a `batchguard run` of the same
    /// manifest job (which declares a lock) on one shared store: PostgreSQL, MySQL or
    /// Redis, the same URL everywhere (compared with the password masked), given by
    /// `--store`, `BATCHGUARD_STORE` or `[run] store`. The store's lock lets one of them
    /// work each slot, so two crontabs on two hosts both calling
    /// `batchguard run --job settle --store postgres://…` are one guarded job;
    /// `lint --list-files` and `graph` say so ("guarded by batchguard run on postgres://…").
    /// Places stay duplicates when one of them is not under `batchguard run`, when they
    /// name different stores or jobs, or a store of one host (SQLite), or none at all
    /// (BG614 says which store is missing). Two registrations that write the same
    /// reference (`--store "$STORE"`) count as one store when the job's `lock.store` is a
    /// shared one, since `run` refuses a URL of any other kind.
    ///
    /// ## Why it matters
    /// This is the source article's incident: after a deploy, one settlement job was
    /// registered in two places, both runs said "success", and customers were billed twice.
    /// Its pre-deploy checklist asks exactly this: is any job registered twice? The second
    /// registration rarely looks like the first: one is a CronJob, the other a host crontab
    /// line with a `cd`, a log redirection and a full path to `node`. A check that compares
    /// the words as written misses it; one that ignores the working directory calls two
    /// sites on one host a duplicate, and is switched off.
    ///
    /// ## Example
    /// ```text
    /// deploy/billing.batchguard.yaml   settle-payments: node jobs/settle.js, "0 * * * *"
    /// deploy/k8s/cronjobs.yaml         CronJob settle: node jobs/settle.js, "0 * * * *"
    /// deploy/crontab                   0 * * * * cd /srv/payments && node jobs/settle.js >> log 2>&1
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
        scope: Project,
        summary: "the same job (same service and name, or same command and overlapping schedule) is registered in more than one place; every place is labelled. Not when every place calls `batchguard run` for the job on one shared store (PostgreSQL, MySQL, Redis): the store's lock guards them (the HA pattern)",
        help: "keep one registration per job: remove the others, or tie the one that stays to the manifest job",
    }
}

impl Rule for DuplicateRegistration {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        // Registrations guarded by one shared store's lock are the HA pattern.
        for g in cx
            .groups
            .iter()
            .filter(|g| g.duplicate && g.guarded.is_none())
        {
            // The places of the deploy set that runs the job most often.
            let dup = &g.duplicated;
            let Some((&first, rest)) = dup.split_first() else {
                continue;
            };
            let (service, job) = group_subject(cx, g);
            let subject = match &service {
                Some(s) => format!("job `{s}/{job}`"),
                None => format!("the command of {job}"),
            };
            let mut places: Vec<String> = dup
                .iter()
                .take(MAX_LISTED)
                .map(|p| match cx.command_text(*p) {
                    Some(cmd) => format!("{} at {} runs `{cmd}`", cx.describe(*p), cx.where_(*p)),
                    None => format!("{} at {}", cx.describe(*p), cx.where_(*p)),
                })
                .collect();
            if dup.len() > MAX_LISTED {
                places.push(format!("and {} more", dup.len() - MAX_LISTED));
            }
            // Slots were compared in a zone no file states: say so (SPEC 3.6).
            let assumed = dup.iter().find_map(|p| match *p {
                Place::Reg(r) if cx.project.regs[r].zone_assumed => {
                    Some(cx.project.regs[r].zone_label())
                }
                _ => None,
            });
            let assumed = assumed
                .map(|z| format!(" (crontab lines compared in {z})"))
                .unwrap_or_default();
            out.emit(
                cx.location(first),
                service,
                Some(job),
                format!(
                    "{subject} is registered in {} places{}: {}{assumed}",
                    dup.len(),
                    g.tie
                        .as_ref()
                        .map(|t| format!(" of deploy units tied by {t}"))
                        .unwrap_or_default(),
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
