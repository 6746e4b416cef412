use crate::audit::AuditFinding;
use crate::declare_check;
use crate::ledger::RowError;

declare_check! {
    /// ## What it does
    /// Reports, once per source (the events ledger, the outputs, the drill records), how many rows could not be read, with the locations and reasons of the first ones. The finding's `job` is the source, `count` the rejected rows and `keys` the first locations. When no event row at all can be read, the audit does not report: it exits 2 with the first reasons.
    ///
    /// ## Why it matters
    /// A rejected row is a run the audit did not see: its slot looks missed, or a duplicate goes unnoticed. A report that counts its rejected rows at the bottom and still says clean proves nothing.
    ///
    /// ## Example
    /// `2026-03-01T02:00:00` (no offset) in `scheduled_at` -> AU001 for `events.csv`, until the row says `+09:00` or the audit runs with `--assume-tz Asia/Seoul`.
    AU001 {
        code: "AU001",
        name: "rows-rejected",
        severity: Error,
        summary: "ledger rows could not be read: the audit is incomplete",
        help: "fix the rows at the locations shown (`--assume-tz ZONE` for timestamps written without an offset), then audit again",
    }
}

/// How many locations an AU001 finding lists.
const LOCATIONS: usize = 5;

/// AU001 for one source: `rejected` rows, the first of them in `errors`.
pub(crate) fn check(rejected: u64, errors: &[RowError]) -> Option<AuditFinding> {
    let first = errors.first()?;
    if rejected == 0 {
        return None;
    }
    let source = first.at.source.clone();
    let shown: Vec<String> = errors
        .iter()
        .take(LOCATIONS)
        .map(|e| e.to_string())
        .collect();
    let mut message = format!(
        "{} of {source} could not be read, so the audit is incomplete; first: {}",
        if rejected == 1 {
            "1 row".to_owned()
        } else {
            format!("{rejected} rows")
        },
        shown[0]
    );
    if rejected > 1 {
        message.push_str(&format!(
            " (the first {} are listed under rejected rows)",
            shown.len()
        ));
    }
    let mut f = super::finding(&AU001, message, &source, None, Vec::new());
    f.count = Some(rejected);
    f.keys = Some(
        errors
            .iter()
            .take(LOCATIONS)
            .map(|e| e.at.to_string())
            .collect(),
    );
    Some(f)
}
