use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a job without a `lock` section. A lock that is switched off on purpose,
    /// `lock: {disabled: true, reason: "..."}`, is a recorded decision and is not reported
    /// (BG602 still reports it when several instances run the job).
    ///
    /// ## Why it matters
    /// The incident behind batchguard: after a deploy, two instances ran the same cron at
    /// the same time, both logged "success", and customers were billed twice. A job with
    /// one executor needs a distributed lock even when the service runs "only one"
    /// instance: during a rolling deploy the old and the new pod overlap, and both wake on
    /// the same tick. The lock, keyed by job and slot, makes one of them the executor and
    /// the other one log a skip.
    ///
    /// The lock must live where every instance reaches it: `store: sqlite` serves the
    /// processes of one host; Kubernetes pods run on any node, so for a Kubernetes job the
    /// help names the shared stores (`postgres`, `mysql`, `redis`).
    ///
    /// ## Example
    /// ```yaml
    /// - name: settle-payments
    ///   schedule: "0 * * * *"
    ///   expected_duration: 10m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// - name: settle-payments
    ///   schedule: "0 * * * *"
    ///   expected_duration: 10m
    ///   lock:
    ///     key: "{job}:{scheduled_at}"
    ///     ttl: 25m
    ///     store: postgres
    /// ```
    pub struct MissingLock {
        code: "BG201",
        name: "missing-lock",
        severity: Error,
        scope: Job,
        summary: "the job has no lock: even one instance overlaps itself during a rolling deploy",
        help: "add `lock:` with `key: \"{job}:{scheduled_at}\"` and a `ttl` of 2-3x expected_duration",
    }
}

impl Rule for MissingLock {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        if !cx.job.lock.is_absent() {
            return;
        }
        let ttl = cx
            .job
            .expected_duration
            .value()
            .filter(|d| d.secs() > 0)
            .map(|d| crate::manifest::duration::Duration(d.secs() * 5 / 2));
        let pods = cx.manifest.deployment_of(cx.job).platform
            == Some(crate::manifest::model::Platform::Kubernetes);
        let store = if pods {
            " in a store every pod reaches (`store: postgres`, `mysql` or `redis`)"
        } else {
            ""
        };
        let help = match ttl {
            Some(ttl) => format!(
                "add `lock:` with `key: \"{{job}}:{{scheduled_at}}\"` and `ttl: {ttl}` (2-3x expected_duration){store}, or `lock: {{disabled: true, reason: \"...\"}}` if running twice is harmless"
            ),
            None => format!(
                "{}{store}, or `lock: {{disabled: true, reason: \"...\"}}` if running twice is harmless",
                Self::META.help
            ),
        };
        out.emit_with_help(
            cx.job.span,
            format!(
                "job `{}` has no lock: two instances woken by the same tick (a rolling deploy is enough) both run the slot",
                cx.job_name()
            ),
            help,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    const JOB: &str = "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n";

    #[test]
    fn fires_on_absent_lock_only() {
        let f = findings(JOB, "BG201");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("job `a` has no lock"));
        assert!(f[0].help.contains("ttl: 25m"));
        let disabled = format!("{JOB}    lock: {{disabled: true, reason: \"read-only\"}}\n");
        assert!(findings(&disabled, "BG201").is_empty());
        // Invalid lock value: BG004's business, not BG201's.
        let invalid = format!("{JOB}    lock: nope\n");
        assert!(findings(&invalid, "BG201").is_empty());
        // Pods on any node: the help names the stores they all reach.
        let pods = JOB.replace(
            "service: s\n",
            "service: s\ndeployment: {platform: kubernetes}\n",
        );
        let f = findings(&pods, "BG201");
        assert!(
            f[0].help
                .contains("in a store every pod reaches (`store: postgres`, `mysql` or `redis`)"),
            "{}",
            f[0].help
        );
        assert!(!findings(JOB, "BG201")[0].help.contains("store"));
    }
}
