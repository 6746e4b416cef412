use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::Field;

declare_rule! {
    /// ## What it does
    /// Checks that `snapshot.retention` is at least 92 days
    /// (`thresholds.min_snapshot_retention` in `batchguard.toml`). A snapshot section
    /// without `retention` is reported too: the article asks for a *defined* period.
    /// A job with no snapshot at all is BG503's.
    ///
    /// ## Why it matters
    /// The source article keeps batch input "for a defined retention period" so that an
    /// incident can be reproduced after the source data changed, and asks for recovery to
    /// be rehearsed every quarter, because cron code is written once and forgotten. A
    /// quarterly drill replays slots from up to a quarter ago, and incidents are often
    /// noticed weeks late (a monthly invoice, a customer complaint). Snapshots deleted
    /// after 30 days leave those slots impossible to replay or audit (AU203).
    ///
    /// ## Example
    /// ```yaml
    /// snapshot:
    ///   path: "snapshots/send-invoices/{scheduled_at_compact}.jsonl"
    ///   retention: 30d
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// snapshot:
    ///   path: "snapshots/send-invoices/{scheduled_at_compact}.jsonl"
    ///   retention: 120d
    /// ```
    pub struct SnapshotRetentionTooShort {
        code: "BG504",
        name: "snapshot-retention-too-short",
        severity: Error,
        scope: Job,
        summary: "snapshot.retention is less than 92 days: a quarterly drill cannot reach back a quarter (configurable)",
        help: "keep snapshots at least 92 days",
    }
}

impl Rule for SnapshotRetentionTooShort {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(snapshot) = cx.job.snapshot.value() else {
            return;
        };
        let min = cx.settings.min_retention;
        let name = cx.job_name();
        match &snapshot.retention {
            Field::Absent => out.emit_with_help(
                snapshot.span,
                format!(
                    "job `{name}`: snapshot has no `retention`, so nothing says its input is still there for a drill {min} later"
                ),
                format!("add `retention: {min}` or longer"),
            ),
            // Zero is BG004's.
            Field::Ok(r) if r.value.secs() > 0 && r.value < min => out.emit_with_help(
                r.span,
                format!(
                    "job `{name}`: snapshot.retention {} is less than the minimum {min}: a quarterly drill cannot replay the slots of a quarter ago",
                    r.value
                ),
                format!("set `retention: {min}` or longer"),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn snapshot(body: &str) -> String {
        format!(
            "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n    snapshot:\n      path: \"snapshots/{{job}}/{{scheduled_at_compact}}.jsonl\"\n{body}"
        )
    }

    #[test]
    fn short_absent_and_zero_retention() {
        let f = findings(&snapshot("      retention: 30d\n"), "BG504");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("30d is less than the minimum 92d"));
        assert!(findings(&snapshot("      retention: 92d\n"), "BG504").is_empty());
        assert_eq!(findings(&snapshot(""), "BG504").len(), 1);
        // Zero is BG004's.
        assert!(findings(&snapshot("      retention: 0d\n"), "BG504").is_empty());
    }
}
