use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::template::placeholders;

declare_rule! {
    /// ## What it does
    /// Checks that the lock key template contains `{job}` and a slot placeholder,
    /// `{scheduled_at}` or `{scheduled_at_compact}`. A lock without a `key` is reported
    /// too: nothing then says what the lock is taken on. A disabled lock has no key to check.
    ///
    /// ## Why it matters
    /// The source article builds the lock key from `job_name + scheduled_at`. Each part
    /// has a job to do:
    /// - without `{job}`, different jobs (or two services using the same literal key)
    ///   share one lock, and one job's run makes the other one skip its slot;
    /// - without the slot, every slot of the job shares one lock: a slow or crashed run
    ///   makes the next slot skip, and a run that finishes early and releases the lock
    ///   cannot be told apart from the next slot, so a late instance re-runs a slot that
    ///   already ran.
    ///
    /// Keyed by job and slot, exactly one instance executes each slot, and each slot's
    /// skip or run is visible in the ledger.
    ///
    /// ## Example
    /// ```yaml
    /// lock:
    ///   key: "invoices"
    ///   ttl: 45m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 45m
    /// ```
    pub struct LockKeyNotUnique {
        code: "BG204",
        name: "lock-key-not-unique",
        severity: Error,
        scope: Job,
        summary: "the lock key template lacks {job} or {scheduled_at} ({scheduled_at_compact} counts)",
        help: "build the key from the job and the slot: `key: \"{job}:{scheduled_at}\"`",
    }
}

/// The placeholders a lock key must have and lacks, in the order they are reported.
pub fn missing_parts(key: &str) -> Vec<&'static str> {
    let names: Vec<&str> = placeholders(key).iter().map(|p| p.name).collect();
    let mut missing = Vec::new();
    if !names.contains(&"job") {
        missing.push("{job}");
    }
    if !names
        .iter()
        .any(|n| *n == "scheduled_at" || *n == "scheduled_at_compact")
    {
        missing.push("{scheduled_at}");
    }
    missing
}

impl Rule for LockKeyNotUnique {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(lock) = cx.job.active_lock() else {
            return;
        };
        let name = cx.job_name();
        let Some(key) = lock.key.get() else {
            if lock.key.is_absent() {
                out.emit(
                    lock.span,
                    format!(
                        "job `{name}`: the lock has no `key`, so nothing says which slot it guards"
                    ),
                );
            }
            return;
        };
        let missing = missing_parts(&key.value.0);
        if missing.is_empty() {
            return;
        }
        let why = match missing.as_slice() {
            ["{job}"] => "other jobs with the same key share this lock and skip each other's slots",
            ["{scheduled_at}"] => {
                "every slot of the job shares one lock: a slow or crashed run blocks the next slot"
            }
            _ => "every slot of every job with this key shares one lock",
        };
        let mut fixed = key.value.0.clone();
        for part in &missing {
            if *part == "{job}" {
                fixed = if fixed.is_empty() {
                    "{job}".to_owned()
                } else {
                    format!("{{job}}:{fixed}")
                };
            } else if fixed.is_empty() {
                fixed = "{scheduled_at}".to_owned();
            } else {
                fixed.push_str(":{scheduled_at}");
            }
        }
        out.emit_with_help(
            key.span,
            format!(
                "job `{name}`: lock.key `{}` lacks {}: {why}",
                key.value.0,
                missing.join(" and ")
            ),
            format!("write `key: \"{fixed}\"`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::missing_parts;
    use crate::lint::rules::testing::findings;

    #[test]
    fn what_a_key_lacks() {
        assert!(missing_parts("{job}:{scheduled_at}").is_empty());
        assert!(missing_parts("{service}/{job}@{scheduled_at_compact}").is_empty());
        assert_eq!(missing_parts("invoices:{scheduled_at}"), ["{job}"]);
        assert_eq!(missing_parts("{job}"), ["{scheduled_at}"]);
        assert_eq!(missing_parts("invoices"), ["{job}", "{scheduled_at}"]);
        // `{jobs}` and `{scheduled}` are not the placeholders (and are BG004 anyway).
        assert_eq!(missing_parts("{scheduled_at}{jobs}"), ["{job}"]);
    }

    const HEAD: &str = "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n";

    #[test]
    fn reports_with_a_fixed_key() {
        let yaml =
            format!("{HEAD}    lock:\n      key: \"invoices:{{scheduled_at}}\"\n      ttl: 25m\n");
        let f = findings(&yaml, "BG204");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("lacks {job}"), "{}", f[0].message);
        assert_eq!(f[0].help, "write `key: \"{job}:invoices:{scheduled_at}\"`");
        let ok = format!(
            "{HEAD}    lock:\n      key: \"{{job}}:{{scheduled_at_compact}}\"\n      ttl: 25m\n"
        );
        assert!(findings(&ok, "BG204").is_empty());
        let no_key = format!("{HEAD}    lock:\n      ttl: 25m\n");
        assert_eq!(findings(&no_key, "BG204").len(), 1);
        let disabled = format!("{HEAD}    lock: {{disabled: true, reason: \"read-only\"}}\n");
        assert!(findings(&disabled, "BG204").is_empty());
    }
}
