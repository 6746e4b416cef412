use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::{Field, Runbook};
use crate::text::Span;

declare_rule! {
    /// ## What it does
    /// Reports each of the runbook fields `owner`, `on_call`, `emergency_stop`, `resume`
    /// and `communication` that is absent or empty, one finding per field. Values set
    /// under `defaults.runbook` count for every job.
    ///
    /// ## Why it matters
    /// The source article's runbook holds the commands, the emergency-stop conditions,
    /// the resume procedure and the communication channel; its team rules page the
    /// on-call engineer when latency passes 15 minutes. When a batch double-bills
    /// customers at 3 a.m., the person paged needs, without searching: who owns the job
    /// (`owner`), who is paged (`on_call`), how to stop it right now (`emergency_stop`),
    /// how to restart it without losing or repeating slots (`resume`), and where to tell
    /// everyone else (`communication`). Each missing answer is minutes of an incident
    /// spent looking for it.
    ///
    /// ## Example
    /// ```yaml
    /// runbook:
    ///   owner: billing-team
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// runbook:
    ///   owner: billing-team
    ///   on_call: "#billing-oncall"
    ///   emergency_stop: "Set SETTLE_ENABLED=false and scale the worker to 0"
    ///   resume: "Re-enable, then `batchguard audit` the gap and replay missed slots"
    ///   communication: "#billing-incidents"
    /// ```
    pub struct MissingRunbookField {
        code: "BG501",
        name: "missing-runbook-field",
        severity: Error,
        scope: Job,
        summary: "a runbook field (owner, on_call, emergency_stop, resume, communication) is absent or empty",
        help: "fill in the runbook field",
    }
}

/// The runbook fields and what each one answers.
const FIELDS: [(&str, &str); 5] = [
    ("owner", "who owns the job"),
    ("on_call", "who is paged"),
    ("emergency_stop", "how to stop the job now"),
    ("resume", "how to resume without losing or repeating slots"),
    ("communication", "where the incident is announced"),
];

/// A value to start from, built from the job and service at hand (never another
/// service's names): a team and channels named after the service, the rest a marked
/// placeholder for the person who knows the answer.
fn example(field: &str, service: &str, job: &str) -> String {
    let team = if service.trim().is_empty() {
        job
    } else {
        service
    };
    match field {
        "owner" => format!("{team}-team"),
        "on_call" => format!("\"#{team}-oncall\""),
        "emergency_stop" => format!("\"<how to stop {job} right now>\""),
        "resume" => format!("\"<how to restart {job} without losing or repeating slots>\""),
        _ => format!("\"#{team}-incidents\""),
    }
}

fn field<'a>(runbook: &'a Runbook, name: &str) -> &'a Field<String> {
    match name {
        "owner" => &runbook.owner,
        "on_call" => &runbook.on_call,
        "emergency_stop" => &runbook.emergency_stop,
        "resume" => &runbook.resume,
        _ => &runbook.communication,
    }
}

/// Each missing field with where to point: an empty value at itself, an absent one at
/// the runbook section, or at the job (`job_span`) when there is no runbook at all.
/// An invalid runbook or field (BG004) yields nothing.
pub fn missing(runbook: &Field<Runbook>, job_span: Span) -> Vec<(&'static str, Span, bool)> {
    let section = match runbook {
        Field::Invalid => return Vec::new(),
        Field::Absent => None,
        Field::Ok(r) => Some(&r.value),
    };
    let mut out = Vec::new();
    for (name, _) in FIELDS {
        let Some(section) = section else {
            out.push((name, job_span, false));
            continue;
        };
        match field(section, name) {
            Field::Absent => out.push((name, section.span, false)),
            Field::Ok(v) if v.value.trim().is_empty() => out.push((name, v.span, true)),
            _ => {}
        }
    }
    out
}

impl Rule for MissingRunbookField {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        let no_runbook = cx.job.runbook.is_absent();
        for (field, span, empty) in missing(&cx.job.runbook, cx.job.span) {
            let Some((_, answers)) = FIELDS.iter().find(|f| f.0 == field) else {
                continue;
            };
            let state = if no_runbook {
                "has no runbook, so no".to_owned()
            } else if empty {
                "has an empty".to_owned()
            } else {
                "has no".to_owned()
            };
            out.emit_with_help(
                span,
                format!("job `{name}` {state} runbook.{field}: nobody can tell {answers}"),
                format!(
                    "set `runbook.{field}: {}` (or under `defaults.runbook` for every job)",
                    example(field, cx.service, name)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    const HEAD: &str = "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n";

    #[test]
    fn one_finding_per_missing_field() {
        let f = findings(HEAD, "BG501");
        assert_eq!(f.len(), 5);
        assert!(f[0].message.contains("has no runbook, so no runbook.owner"));
        // Examples come from this job and service, never from another one's values.
        let helps: Vec<&str> = f.iter().map(|f| f.help.as_str()).collect();
        assert!(
            helps
                .iter()
                .all(|h| !h.contains("billing") && !h.contains("SETTLE")),
            "{helps:?}"
        );
        assert!(helps[0].contains("`runbook.owner: s-team`"), "{}", helps[0]);
        assert!(
            helps[2].contains("<how to stop a right now>"),
            "{}",
            helps[2]
        );
        let partial = format!(
            "{HEAD}    runbook:\n      owner: team\n      on_call: \"  \"\n      emergency_stop: stop it\n      resume: resume it\n"
        );
        let f = findings(&partial, "BG501");
        let fields: Vec<_> = f
            .iter()
            .map(|f| {
                f.message
                    .split("runbook.")
                    .nth(1)
                    .unwrap_or("")
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        assert_eq!(fields, ["on_call", "communication"]);
        assert!(f[0].message.contains("has an empty runbook.on_call"));
        // The empty value is underlined itself.
        let on_call = partial.find("\"  \"").unwrap();
        assert_eq!(f[0].at.span.start, on_call);
    }

    #[test]
    fn defaults_fill_in_and_invalid_is_bg004s() {
        let yaml = "version: 1\nservice: s\ndefaults:\n  runbook:\n    owner: team\n    on_call: \"#oncall\"\n    communication: \"#incidents\"\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n    runbook:\n      emergency_stop: stop\n      resume: resume\n";
        assert!(findings(yaml, "BG501").is_empty());
        let invalid = format!("{HEAD}    runbook: see the wiki\n");
        assert!(findings(&invalid, "BG501").is_empty());
        let bad_field = format!(
            "{HEAD}    runbook:\n      owner: 42\n      on_call: x\n      emergency_stop: x\n      resume: x\n      communication: x\n"
        );
        assert!(findings(&bad_field, "BG501").is_empty());
    }
}
