use crate::declare_rule;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::{Analysis, Place};
use crate::sources::SourceKind;

declare_rule! {
    /// ## What it does
    /// Reports a schedule registered inside application code (`cron.schedule(…)` of
    /// node-cron, `new Cron(…)` of croner, `new CronJob(…)` of `cron`, node-schedule's
    /// `scheduleJob`, NestJS's `@Cron`) that more than one process runs, when its callback
    /// is not guarded. The processes are counted from what starts the module, followed
    /// through relative imports from each entry file: a PM2 app's `instances`, a
    /// Deployment's `replicas` (its HPA's `minReplicas`), a Dockerfile's command, a
    /// `package.json` start script; runners nested in each other multiply (PM2 cluster of
    /// 4 in each of 3 pods is 12), and of several independent runners the largest is
    /// named. Guarded means the callback is wrapped by batchguard's Node.js guard
    /// (`guarded(…)` or `guard(…)` imported from the `batchguard` package), or node-cron's
    /// `distributed` option with a `coordinator`. A call gated on one instance is BG612
    /// instead.
    ///
    /// ## Why it matters
    /// This is the source article's incident in its own shape: no crontab, no CronJob, but
    /// a Node.js app that called `cron.schedule("0 * * * *", settle)` when it started, run
    /// by PM2 in cluster mode with 4 instances. Every process had its own scheduler, every
    /// scheduler fired every slot, and every slot was billed four times. Nothing outside
    /// the code says a job exists, so no other check can see it.
    ///
    /// ## Example
    /// ```js
    /// // src/jobs/settle.js, run by ecosystem.config.js: instances: 4, exec_mode: "cluster"
    /// const cron = require("node-cron");
    /// cron.schedule("0 * * * *", settle);
    /// ```
    ///
    /// Use instead:
    /// ```js
    /// const cron = require("node-cron");
    /// const { guarded } = require("batchguard");
    /// cron.schedule("0 * * * *",
    ///   guarded({ manifest: "billing.batchguard.yaml", job: "settle-payments" }, settle));
    /// ```
    pub struct InProcessScheduleReplicated {
        code: "BG611",
        name: "in-process-schedule-replicated",
        severity: Error,
        scope: Project,
        summary: "a schedule in application code (section 3.7) reached by more than one instance and not guarded; located on the call (or the decorator); names the schedule, the instance count and what runs it (the ecosystem file, the Deployment)",
        help: "wrap the callback in `guarded({ manifest, job }, fn)` from the batchguard npm package, so one instance works each slot",
    }
}

/// How a message names an in-process schedule: `"0 * * * *"`, or why it is not known.
pub fn schedule_words(reg: &crate::sources::Registration) -> String {
    let code = reg.code.as_deref();
    match (&reg.schedule, code) {
        (Some(s), _) => format!("`{}`", s.value),
        (None, Some(c)) if c.interval.is_some() => {
            format!("every {} ms", c.interval.as_deref().unwrap_or("?"))
        }
        (None, Some(c)) => format!(
            "schedule not static (`{}`)",
            c.not_static.as_deref().unwrap_or("?")
        ),
        (None, None) => "no schedule".to_owned(),
    }
}

impl Rule for InProcessScheduleReplicated {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for (r, reg) in cx.project.regs.iter().enumerate() {
            let Some(code) = reg.code.as_deref() else {
                continue;
            };
            if reg.kind != SourceKind::Code
                || reg.instances < 2
                || code.guarded
                || code.gate.is_some()
            {
                continue;
            }
            let runner = code.runner.as_deref().unwrap_or("its runner");
            let others = match code.other_runners {
                0 => String::new(),
                1 => " (1 other runner starts it too)".to_owned(),
                n => format!(" ({n} other runners start it too)"),
            };
            let zone = reg
                .timezone
                .as_ref()
                .map(|z| format!(" in {}", z.value))
                .unwrap_or_default();
            out.emit(
                cx.location(Place::Reg(r)),
                None,
                Some(reg.label.clone()),
                format!(
                    "{} ({}, {}{zone}) at {} runs in {} processes: {runner}{others}; each \
                     process fires every slot and the callback is not guarded",
                    code.call,
                    code.library,
                    schedule_words(reg),
                    cx.where_(Place::Reg(r)),
                    reg.instances,
                ),
                Self::META.help.to_owned(),
                Vec::new(),
            );
        }
    }
}
