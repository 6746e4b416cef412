use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::duration::Duration;
use crate::manifest::model::Field;
use crate::text::Spanned;

declare_rule! {
    /// ## What it does
    /// Reports a value of the wrong type, a bad duration, a word outside its set, an unknown
    /// template placeholder, a job name outside `[a-z0-9][a-z0-9._-]{0,62}`, a duration that
    /// must be positive but is zero, and `lock.disabled: true` without a `reason`.
    ///
    /// ## Why it matters
    /// A value the tool cannot read is a value nobody has checked. `ttl: 600` (no unit)
    /// could mean seconds or minutes; `{scheduled}` in a lock key is not replaced and makes
    /// every slot share one lock; a disabled lock without a reason is a decision nobody can
    /// review later.
    ///
    /// ## Example
    /// ```yaml
    /// expected_duration: 600
    /// lock:
    ///   key: "{job}:{scheduled}"
    ///   ttl: 0m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// expected_duration: 10m
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 25m
    /// ```
    pub struct InvalidValue {
        code: "BG004",
        name: "invalid-value",
        severity: Error,
        scope: Job,
        summary: "wrong type, bad duration, bad enum value, unknown template placeholder",
        help: "fix the value as the manifest format describes",
    }
}

fn positive(out: &mut Emitter, job: &str, field: &str, value: &Field<Duration>) {
    if let Some(Spanned { value, span }) = value.get()
        && value.secs() == 0
    {
        out.emit_with_help(
            *span,
            format!("job `{job}`: {field} is {value}; it must be positive"),
            format!("give {field} a positive duration"),
        );
    }
}

fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

impl Rule for InvalidValue {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let job = cx.job;
        let name = cx.job_name();
        if let Some(n) = job.name.get()
            && !valid_name(&n.value)
        {
            out.emit_with_help(
                n.span,
                format!("job name `{}` is not [a-z0-9][a-z0-9._-]{{0,62}}", n.value),
                "use lower-case letters, digits, `.`, `_` and `-` (at most 63 characters)",
            );
        }
        positive(out, name, "expected_duration", &job.expected_duration);
        if let Some(lock) = job.lock.value() {
            positive(out, name, "lock.ttl", &lock.ttl);
            if lock.is_disabled() && lock.reason.value().is_none_or(|r| r.trim().is_empty()) {
                let span = lock.disabled.get().map_or(lock.span, |d| d.span);
                out.emit_with_help(
                    span,
                    format!("job `{name}`: lock.disabled is true but no reason is given"),
                    "add `reason:` saying why this job may run without a lock",
                );
            }
        }
        if let Some(retry) = job.retry.value() {
            positive(out, name, "retry.max_delay", &retry.max_delay);
        }
        if let Some(alerts) = job.alerts.value() {
            positive(out, name, "alerts.max_latency", &alerts.max_latency);
        }
        if let Some(snapshot) = job.snapshot.value() {
            positive(out, name, "snapshot.retention", &snapshot.retention);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn job_names() {
        assert!(super::valid_name("settle-payments"));
        assert!(super::valid_name("a.b_c-1"));
        assert!(!super::valid_name("Settle"));
        assert!(!super::valid_name("-x"));
        assert!(!super::valid_name(&"a".repeat(64)));
    }
}
