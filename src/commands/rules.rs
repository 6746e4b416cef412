//! `batchguard rules`: every lint rule and audit check, one line each or as the table of docs/rules.md.

use super::{Error, Outcome, print};
use crate::cli::RulesFormat;

pub(super) fn run(format: RulesFormat) -> Result<Outcome, Error> {
    print(&match format {
        RulesFormat::Text => crate::report::rules::table(),
        RulesFormat::Markdown => crate::lint::rules_markdown(),
    });
    Ok(Outcome::Clean)
}
