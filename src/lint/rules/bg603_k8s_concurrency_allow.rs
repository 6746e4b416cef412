use crate::declare_rule;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Checks that a Kubernetes CronJob sets `concurrencyPolicy` to `Forbid` or `Replace`.
    ///
    /// ## Why it matters
    /// `Allow` is the default: when a run is still going at the next tick, Kubernetes starts
    /// a second Job beside it. The source article's incident was exactly this, two
    /// executors of one cron at the same time, and its first criterion is "one executor".
    /// `Forbid` skips the new slot while the old run lives (`batchguard audit` then reports
    /// it as missed, which is visible); `Replace` stops the old run.
    ///
    /// ## Example
    /// ```yaml
    /// kind: CronJob
    /// spec:
    ///   schedule: "0 * * * *"
    ///   # concurrencyPolicy missing: Allow
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// kind: CronJob
    /// spec:
    ///   schedule: "0 * * * *"
    ///   concurrencyPolicy: Forbid
    /// ```
    pub struct K8sConcurrencyAllow {
        code: "BG603",
        name: "k8s-concurrency-allow",
        severity: Warning,
        scope: Registration,
        summary: "a Kubernetes CronJob with `concurrencyPolicy: Allow` (the default)",
        help: "set spec.concurrencyPolicy: Forbid (or Replace) so two runs never overlap",
    }
}

impl Rule for K8sConcurrencyAllow {
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let Some(kube) = &cx.reg.kube else {
            return;
        };
        match &kube.concurrency_policy {
            Some(p) if p.value == "Allow" => out.emit(
                p.span,
                format!(
                    "{}: concurrencyPolicy is Allow, so a slot that starts while the previous run is still going runs beside it",
                    cx.reg.label
                ),
            ),
            None => out.emit(
                cx.reg.span,
                format!(
                    "{}: no concurrencyPolicy, so Kubernetes uses Allow and a slot that starts while the previous run is still going runs beside it",
                    cx.reg.label
                ),
            ),
            Some(_) => {}
        }
    }
}
