//! `batchguard explain CODE|NAME`: a rule's or check's whole documentation.

use super::{Error, Outcome, print};

pub(super) fn run(rule: &str) -> Result<Outcome, Error> {
    let Some(meta) = crate::REGISTRY.find(rule) else {
        let names: Vec<&str> = crate::REGISTRY
            .all()
            .flat_map(|m| [m.code, m.name])
            .collect();
        let hint = crate::text::closest(rule, &names)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        return Err(Error::UnknownRule {
            rule: rule.to_owned(),
            hint,
        });
    };
    print(&crate::report::rules::explain(meta));
    Ok(Outcome::Clean)
}
