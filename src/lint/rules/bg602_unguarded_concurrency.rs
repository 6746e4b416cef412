use crate::declare_rule;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Place;
use crate::project::group_subject;
use crate::sources::SourceKind;

declare_rule! {
    /// ## What it does
    /// Adds up how many processes fire each slot of a job (its effective instances) and
    /// reports a job that has more than one and no lock. A manifest job with no
    /// registration counts `deployment.instances`; each registration counts its own
    /// instances (PM2 `instances`, 1 for a CronJob or a crontab line), so several
    /// registrations of one job add up. A job counts as locked when its manifest declares
    /// a lock that is not `disabled` (a disabled lock is a recorded decision, and this rule
    /// still applies), or, for a job with no manifest, when every registration runs under
    /// `batchguard run` or `flock`. PM2 cluster mode is BG606 instead, and a schedule in
    /// application code is BG611.
    ///
    /// Every store guards the processes that reach it: `postgres`, `mysql` and `redis`
    /// are shared by every host, while `sqlite` is a file on one host. A Kubernetes job
    /// (its platform, or a CronJob registration) whose instances are pods on any node and
    /// whose lock is `store: sqlite` is reported too: each pod has its own file.
    ///
    /// ## Why it matters
    /// The source article's first criterion: under PM2 or Kubernetes the same cron must not
    /// run on several instances at once. Each instance's scheduler fires the same tick, and
    /// without a lock each one does the work.
    ///
    /// ## Example
    /// ```yaml
    /// deployment: {platform: kubernetes, instances: 3}
    /// jobs:
    ///   - name: settle-payments
    ///     lock: {disabled: true, reason: "idempotent"}
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// jobs:
    ///   - name: settle-payments
    ///     lock: {key: "{job}:{scheduled_at}", ttl: 25m}
    /// ```
    pub struct UnguardedConcurrency {
        code: "BG602",
        name: "unguarded-concurrency",
        severity: Error,
        scope: Project,
        summary: "effective instances > 1 (instances, PM2 cluster workers, replicas, or several registrations) and no lock",
        help: "declare a lock (key with {job} and {scheduled_at}) so one instance runs each slot",
    }
}

impl Rule for UnguardedConcurrency {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for g in cx.groups.iter().filter(|g| g.instances > 1) {
            // The places of the deploy set that fires it most (docs/deploy-units.md).
            let places = &g.duplicated;
            let jobs: Vec<usize> = places
                .iter()
                .filter_map(|p| match p {
                    Place::Job(j) => Some(*j),
                    Place::Reg(_) => None,
                })
                .collect();
            let regs: Vec<usize> = places
                .iter()
                .filter_map(|p| match p {
                    Place::Reg(r) => Some(*r),
                    Place::Job(_) => None,
                })
                .collect();
            let locked = if jobs.is_empty() {
                regs.iter().all(|&r| cx.project.regs[r].wrapped)
            } else {
                jobs.iter().any(|&j| cx.project.jobs[j].locked)
            };
            let pm2_cluster = regs.iter().any(|&r| {
                let reg = &cx.project.regs[r];
                reg.kind == SourceKind::Pm2 && reg.cluster && reg.instances > 1
            });
            // An in-process schedule's instances are BG611's.
            let in_process = regs
                .iter()
                .any(|&r| cx.project.regs[r].kind == SourceKind::Code);
            if pm2_cluster || in_process {
                continue;
            }
            // A lock in one host's file does not guard pods on other nodes.
            let one_host = locked
                && !jobs.is_empty()
                && jobs
                    .iter()
                    .filter(|&&j| cx.project.jobs[j].locked)
                    .all(|&j| cx.project.jobs[j].one_host_lock)
                && (jobs.iter().any(|&j| cx.project.jobs[j].kubernetes)
                    || regs
                        .iter()
                        .any(|&r| cx.project.regs[r].kind == SourceKind::Kubernetes));
            if locked && !one_host {
                continue;
            }
            let mut parts = Vec::new();
            let mut primary = None;
            for p in places {
                match *p {
                    Place::Job(j) => {
                        let job = &cx.project.jobs[j];
                        let tied = cx.ties.contains(&Some(j));
                        if !tied {
                            parts.push(format!(
                                "deployment.instances {} of {}",
                                job.instances,
                                cx.display(job.file)
                            ));
                            if job.instances > 1 {
                                primary = primary.or(job.instances_span.map(|span| {
                                    crate::finding::Location {
                                        file: job.file,
                                        span,
                                    }
                                }));
                            }
                        }
                    }
                    Place::Reg(r) => {
                        let reg = &cx.project.regs[r];
                        parts.push(format!(
                            "{} x{} at {}",
                            reg.label,
                            reg.instances,
                            cx.where_(*p)
                        ));
                    }
                }
            }
            let Some(&first) = places.first() else {
                continue;
            };
            let at = primary.unwrap_or_else(|| cx.location(first));
            let (service, job) = group_subject(cx, g);
            let subject = match &service {
                Some(s) => format!("job `{s}/{job}`"),
                None => job.clone(),
            };
            let lock_note = if one_host {
                "its lock is `store: sqlite`, a file on one host that pods on other nodes do not share"
            } else if jobs.is_empty() {
                "not every registration runs under `batchguard run` or `flock`"
            } else {
                "its manifest declares no lock (or disables it)"
            };
            let help = if one_host {
                "use a store every instance reaches: `lock.store: postgres`, `mysql` or `redis`, and `batchguard run --store URL`".to_owned()
            } else {
                Self::META.help.to_owned()
            };
            out.emit(
                at,
                service,
                Some(job),
                format!(
                    "{subject} fires each slot in {} processes ({}) and {lock_note}",
                    g.instances,
                    parts.join(" + ")
                ),
                help,
                Vec::new(),
            );
        }
    }
}
