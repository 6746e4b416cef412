use crate::declare_rule;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a schedule in application code that is registered on one instance only,
    /// by a condition around the call: `if (process.env.NODE_APP_INSTANCE === "0")`,
    /// `pm_id`, `cluster.isPrimary` (or `isMaster`), an env flag
    /// (`if (process.env.RUN_CRON)`), an early `return` on such a test before the call,
    /// or `cond && cron.schedule(…)`; and node-cron's `distributed` option without a
    /// shared `coordinator`. A callback wrapped by batchguard's guard is not reported.
    ///
    /// ## Why it matters
    /// The gate makes one replica set safe, and that is all it does. A second deploy
    /// during a rolling update, a blue/green overlap or a second cluster has its own
    /// instance 0 and runs the job again; and when that one instance restarts or is down,
    /// its slots are skipped with nobody noticing. The source article's incident was a
    /// job run twice after a deploy: a gate does not prevent it, a lock does.
    ///
    /// ## Example
    /// ```js
    /// if (process.env.NODE_APP_INSTANCE === "0") {
    ///   cron.schedule("0 * * * *", settle);
    /// }
    /// ```
    ///
    /// Use instead:
    /// ```js
    /// cron.schedule("0 * * * *",
    ///   guarded({ manifest: "billing.batchguard.yaml", job: "settle-payments" }, settle));
    /// ```
    pub struct InProcessScheduleGated {
        code: "BG612",
        name: "in-process-schedule-gated",
        severity: Warning,
        scope: Registration,
        summary: "an in-process schedule gated on one instance (`NODE_APP_INSTANCE`, `pm_id`, `cluster.isPrimary`, an env flag, node-cron's `distributed` without a shared coordinator): a second deploy or cluster runs it again, a restart of that instance skips slots",
        help: "guard the callback instead of gating the call: `guarded({ manifest, job }, fn)` from the batchguard npm package takes a lease per slot in a shared store",
    }
}

impl Rule for InProcessScheduleGated {
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let Some(code) = cx.reg.code.as_deref() else {
            return;
        };
        let Some(gate) = &code.gate else {
            return;
        };
        if code.guarded {
            return;
        }
        out.emit_full(
            cx.reg.span,
            format!(
                "{} ({}, {}) runs only {}: one replica set is safe, but a second \
                 deploy, a blue/green overlap or a second cluster runs it again, and a \
                 restart of that instance skips slots",
                code.call,
                code.library,
                super::bg611_in_process_schedule_replicated::schedule_words(cx.reg),
                gate.value
            ),
            Self::META.help.to_owned(),
            vec![(gate.span, "the gate".to_owned())],
        );
    }
}
