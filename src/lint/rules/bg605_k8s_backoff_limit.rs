use crate::declare_rule;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};

/// Above this many retries of a pod, a failing slot keeps hammering its dependencies.
const MAX_BACKOFF_LIMIT: i128 = 10;

declare_rule! {
    /// ## What it does
    /// Checks that a Kubernetes CronJob's `jobTemplate.spec.backoffLimit` is set and at
    /// most 10.
    ///
    /// ## Why it matters
    /// Kubernetes retries a failed pod `backoffLimit` times (6 when unset), without knowing
    /// whether the error is worth retrying. The source article's third criterion is
    /// classified failures: retry a timeout, quarantine bad input at once; blind retries
    /// make an outage bigger. Set the limit on purpose, and keep the retry policy in the
    /// job (batchguard's `retry`), not in the platform's default.
    ///
    /// ## Example
    /// ```yaml
    /// jobTemplate:
    ///   spec:
    ///     template: ...
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// jobTemplate:
    ///   spec:
    ///     backoffLimit: 0     # retries are decided by the job's own retry policy
    ///     template: ...
    /// ```
    pub struct K8sBackoffLimit {
        code: "BG605",
        name: "k8s-backoff-limit",
        severity: Warning,
        scope: Registration,
        summary: "a Kubernetes CronJob whose `backoffLimit` is unset (default 6) or > 10",
        help: "set jobTemplate.spec.backoffLimit explicitly (0-10); classify retries in the job itself",
    }
}

impl Rule for K8sBackoffLimit {
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let Some(kube) = &cx.reg.kube else {
            return;
        };
        match &kube.backoff_limit {
            None => out.emit(
                cx.reg.span,
                format!(
                    "{}: backoffLimit is unset, so every failed slot is retried 6 times whatever the error",
                    cx.reg.label
                ),
            ),
            Some(b) if b.value > MAX_BACKOFF_LIMIT => out.emit(
                b.span,
                format!(
                    "{}: backoffLimit {} is above {MAX_BACKOFF_LIMIT}: a failing slot is retried {} times whatever the error",
                    cx.reg.label, b.value, b.value
                ),
            ),
            Some(_) => {}
        }
    }
}
