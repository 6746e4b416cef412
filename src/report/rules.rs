//! The registry as text: the `rules` table and a rule's `explain` page.

use crate::finding::RuleMeta;

/// One line per rule and check: code, name, default severity, summary.
pub fn table() -> String {
    let mut s = String::new();
    for m in crate::REGISTRY.all() {
        s.push_str(&format!(
            "{:<6} {:<30} {:<8} {}\n",
            m.code, m.name, m.severity, m.summary
        ));
    }
    s
}

/// A rule's page: heading, default severity, when it fires, then its documentation.
pub fn explain(m: &RuleMeta) -> String {
    format!(
        "# {} {}\n\nDefault severity: {}. Fires when {}.\n\n{}",
        m.code,
        m.name,
        m.severity,
        m.summary,
        m.doc_text()
    )
}
