//! Snapshot checks (AU202-AU204): the slot's input file under `--snapshots DIR`, found by
//! the job's `snapshot.path` template, its sha256 against the digest recorded at `start`,
//! and its records against the applied outputs.
//!
//! Paths are confined to the snapshot root (SPEC 9): the resolved template must be
//! relative, must not contain `..`, and after resolving symlinks must still lie under the
//! root. Only `{job}`, `{service}`, `{scheduled_at}` and `{scheduled_at_compact}` can be
//! resolved for a slot; a template with another placeholder is refused.

use super::AuditJob;
use super::SnapshotSpec;
pub use crate::snapshot::{SnapshotCheck, compact, digest};
use jiff::Timestamp;

/// At most this many missing keys are listed in an AU202 finding (the count is exact).
pub const MAX_KEYS: usize = 20;

pub enum Outcome {
    /// No file at the resolved path.
    Missing(String),
    /// The template resolves outside the root, or uses a placeholder a slot cannot fill.
    Refused(String),
    Found {
        path: String,
        digest_ok: bool,
        actual: String,
        missing: Vec<String>,
        missing_count: u64,
    },
}

/// Fills a snapshot template for one slot with the model's one renderer; `Err` names the
/// placeholder a slot cannot fill (only `{job}`, `{service}`, `{scheduled_at}` and
/// `{scheduled_at_compact}` have values for a past slot).
pub fn resolve(template: &str, job: &AuditJob, t: Timestamp) -> Result<String, String> {
    use crate::manifest::template;
    let (at, compact) = (t.to_string(), compact(t));
    let values = [
        ("job", job.name.as_str()),
        ("service", job.service.as_str()),
        ("scheduled_at", at.as_str()),
        ("scheduled_at_compact", compact.as_str()),
    ];
    template::render(template, &values).map_err(|_| {
        let unclosed = template::placeholders(template)
            .iter()
            .any(|p| p.end == template.len() && !template.ends_with('}'));
        match template::placeholders(template)
            .into_iter()
            .find(|p| !values.iter().any(|(k, _)| *k == p.name))
        {
            Some(p) if !unclosed => {
                format!(
                    "snapshot.path uses `{{{}}}`, which a slot cannot fill",
                    p.name
                )
            }
            _ => "an unclosed `{` in snapshot.path".into(),
        }
    })
}

impl SnapshotCheck {
    pub fn check(
        &mut self,
        job: &AuditJob,
        spec: &SnapshotSpec,
        t: Timestamp,
        recorded: Option<&str>,
        output_seen: impl Fn(&str) -> bool,
    ) -> Outcome {
        let rel = match resolve(&spec.path, job, t) {
            Ok(r) => r,
            Err(why) => return Outcome::Refused(why),
        };
        let full = match self.confine(&rel) {
            Ok(f) => f,
            Err(why) => return Outcome::Refused(why),
        };
        let bytes = match std::fs::read(&full) {
            Ok(b) => b,
            Err(_) => return Outcome::Missing(rel),
        };
        let actual = digest(&bytes);
        let digest_ok = recorded.is_none_or(|r| r.trim().eq_ignore_ascii_case(&actual));
        let mut missing = Vec::new();
        let mut missing_count = 0u64;
        if let Some(key) = &spec.key {
            let text = String::from_utf8_lossy(&bytes);
            let mut visit = |k: &str| {
                if !output_seen(k) {
                    missing_count += 1;
                    if missing.len() < MAX_KEYS {
                        missing.push(k.to_owned());
                    }
                }
            };
            if spec.csv {
                csv_keys(&text, key, &mut visit);
            } else {
                jsonl_keys(&text, key, &mut visit);
            }
        }
        Outcome::Found {
            path: rel,
            digest_ok,
            actual,
            missing,
            missing_count,
        }
    }
}

fn jsonl_keys(text: &str, key: &str, visit: &mut dyn FnMut(&str)) {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            continue;
        };
        match obj.get(key) {
            Some(serde_json::Value::String(s)) => visit(s),
            Some(v @ serde_json::Value::Number(_)) => visit(&v.to_string()),
            _ => {}
        }
    }
}

/// Splits one CSV line, honouring double quotes (`""` inside quotes is one quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn csv_keys(text: &str, key: &str, visit: &mut dyn FnMut(&str)) {
    let mut lines = text.lines();
    let Some(header) = lines.next() else { return };
    let Some(col) = split_csv(header.trim_end_matches('\r'))
        .iter()
        .position(|h| h.trim() == key)
    else {
        return;
    };
    for line in lines {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        if let Some(v) = split_csv(line).get(col) {
            visit(v.trim());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn confinement_refuses_escapes() {
        let c = SnapshotCheck::new(PathBuf::from("/tmp"));
        assert!(c.confine("../etc/passwd").is_err());
        assert!(c.confine("a/../../b").is_err());
        assert!(c.confine("/etc/passwd").is_err());
        assert!(c.confine("snapshots/x.jsonl").is_ok());
    }

    #[test]
    fn templates_fill_what_a_slot_has_and_name_what_it_has_not() {
        let job = crate::audit::AuditJob {
            service: "billing".into(),
            name: "settle".into(),
            schedule: None,
            schedule_error: None,
            tz: jiff::tz::TimeZone::UTC,
            tz_name: "UTC".into(),
            enabled: true,
            ttl_s: None,
            max_latency_s: None,
            max_attempts: None,
            fatal: Vec::new(),
            snapshot: None,
            since: None,
        };
        let t: Timestamp = "2026-03-01T02:00:00Z".parse().expect("instant");
        assert_eq!(
            resolve("s/{service}/{job}/{scheduled_at_compact}.jsonl", &job, t).as_deref(),
            Ok("s/billing/settle/20260301T020000Z.jsonl")
        );
        assert_eq!(
            resolve("{job}/{run_id}", &job, t),
            Err("snapshot.path uses `{run_id}`, which a slot cannot fill".into())
        );
        assert_eq!(
            resolve("{job", &job, t),
            Err("an unclosed `{` in snapshot.path".into())
        );
    }

    #[test]
    fn csv_split_honours_quotes() {
        assert_eq!(split_csv(r#"a,"b,c","d""e""#), vec!["a", "b,c", "d\"e"]);
    }
}
