use crate::declare_rule;
use crate::lint::cross::RegCx;
use crate::lint::rule::{Emitter, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Checks that a Kubernetes CronJob sets `startingDeadlineSeconds`.
    ///
    /// ## Why it matters
    /// Without it, a slot missed while the controller was down or the cluster was full is
    /// started whenever Kubernetes gets to it, however late, and a CronJob that missed more
    /// than 100 slots stops being scheduled at all. The source article asks that a batch be
    /// judged by "did every slot run exactly once": a deadline makes a late slot a visible
    /// miss instead of a surprise run at the wrong time.
    ///
    /// ## Example
    /// ```yaml
    /// kind: CronJob
    /// spec:
    ///   schedule: "0 * * * *"
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// kind: CronJob
    /// spec:
    ///   schedule: "0 * * * *"
    ///   startingDeadlineSeconds: 300
    /// ```
    pub struct K8sMissingStartingDeadline {
        code: "BG604",
        name: "k8s-missing-starting-deadline",
        severity: Warning,
        summary: "a Kubernetes CronJob without `startingDeadlineSeconds`",
        help: "set spec.startingDeadlineSeconds (for example 300) so a missed slot is not started arbitrarily late",
    }
}

impl Rule for K8sMissingStartingDeadline {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        if let Some(kube) = &cx.reg.kube
            && kube.starting_deadline_seconds.is_none()
        {
            out.emit(
                cx.reg.span,
                format!(
                    "{}: no startingDeadlineSeconds, so a missed slot may start arbitrarily late (and after 100 misses the CronJob stops)",
                    cx.reg.label
                ),
            );
        }
    }
}
