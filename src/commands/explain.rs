//! `batchguard explain CODE|NAME`: a rule's or check's whole documentation.

use super::{Error, Outcome, print};
use crate::lint::registry;

pub(super) fn run(rule: &str) -> Result<Outcome, Error> {
    let Some(meta) = registry::find(rule) else {
        let names: Vec<&str> = registry::all().flat_map(|m| [m.code, m.name]).collect();
        let hint = crate::manifest::load::closest(rule, &names)
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
