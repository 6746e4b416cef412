use crate::declare_rule;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Place;
use crate::sources::SourceKind;
use crate::sources::pm2::describe_instances;

declare_rule! {
    /// ## What it does
    /// Reports a PM2 app in cluster mode with more than one instance that schedules cron
    /// work without a lock: neither its manifest job declares an enabled lock nor its
    /// script runs under `batchguard run` / `flock`. Cluster mode is `exec_mode: cluster`,
    /// or, as PM2 decides it, `instances` with no `exec_mode` on a node script. Cron work
    /// is a `cron_restart` on an app with `autorestart: false`, or a tie to a manifest
    /// job; a `cron_restart` on an app that keeps running is a restart schedule (a nightly
    /// restart of a web cluster), registers no job and is not reported.
    /// `instances: max` counts as 4 cores and `-1` as 3 (a fixed number, so lint gives
    /// the same answer on every machine; the message says so). Reported instead of BG602
    /// for that job.
    ///
    /// ## Why it matters
    /// This is the source article's incident in its exact form: a Node.js settlement batch
    /// under PM2, each cluster worker running the same cron, and two of them firing the
    /// same tick. The logs said "success" twice and customers were billed twice.
    ///
    /// ## Example
    /// ```js
    /// { name: "settle", script: "jobs/settle.js", exec_mode: "cluster", instances: "max",
    ///   cron_restart: "0 * * * *", autorestart: false }
    /// ```
    ///
    /// Use instead:
    /// ```js
    /// { name: "settle", script: "batchguard",
    ///   args: "run --job settle-payments -- node jobs/settle.js",
    ///   exec_mode: "fork", instances: 1, cron_restart: "0 * * * *", autorestart: false }
    /// ```
    pub struct Pm2ClusterCron {
        code: "BG606",
        name: "pm2-cluster-cron",
        severity: Error,
        scope: Project,
        summary: "a PM2 app in cluster mode with instances > 1 that schedules cron work without a lock (reported instead of BG602)",
        help: "run the cron in one fork-mode instance, or take a lock: `batchguard run --job NAME -- CMD` with the manifest's lock",
    }
}

impl Rule for Pm2ClusterCron {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for (r, reg) in cx.project.regs.iter().enumerate() {
            if reg.kind != SourceKind::Pm2 || !reg.cluster || reg.instances < 2 {
                continue;
            }
            let tied = cx.ties.get(r).copied().flatten();
            let locked = reg.wrapped || tied.is_some_and(|j| cx.project.jobs[j].locked);
            if locked {
                continue;
            }
            let (service, job) = match tied {
                Some(j) => {
                    let m = &cx.project.jobs[j];
                    (Some(m.service.clone()), m.name.clone())
                }
                None => (None, reg.label.clone()),
            };
            let at = crate::finding::Location {
                file: reg.file,
                span: reg.instances_span.unwrap_or(reg.span),
            };
            let cron = reg
                .schedule
                .as_ref()
                .map_or(String::new(), |s| format!(" cron `{}`", s.value));
            let written = reg
                .instances_span
                .and_then(|s| {
                    cx.files
                        .get(reg.file)
                        .and_then(|f| f.text.get(s.start..s.end()))
                })
                .unwrap_or("");
            let instances = describe_instances(written, reg.instances);
            out.emit(
                at,
                service,
                Some(job),
                format!(
                    "{} runs{cron} in cluster mode with {instances} and no lock: every worker fires each slot (at {})",
                    reg.label,
                    cx.where_(Place::Reg(r))
                ),
                Self::META.help.to_owned(),
                Vec::new(),
            );
        }
    }
}
