//! The project rules (SPEC 3.5) over the cross-file model [`crate::project::Analysis`].

use crate::finding::{Finding, Location, RuleMeta};
use crate::project::Analysis;
use std::collections::HashMap;

/// Collects one cross-file rule's findings.
pub struct CrossEmitter<'a> {
    pub(crate) meta: &'static RuleMeta,
    pub(crate) out: &'a mut Vec<Finding>,
}

impl CrossEmitter<'_> {
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &mut self,
        at: Location,
        service: Option<String>,
        job: Option<String>,
        message: String,
        help: String,
        related: Vec<(Location, String)>,
    ) {
        self.out.push(
            Finding::new(self.meta, at, message)
                .help(help)
                .subject(service, job, None)
                .related(related),
        );
    }
}

/// Codes whose findings come from the cross-file pass. A per-file pass cannot tell whether
/// an `allow` of one of them is used, so it leaves them to [`run`] (which never reports
/// them as unused: BG902 does not cover these codes).
pub const CROSS_CODES: &[&str] = &[
    "BG601", "BG602", "BG606", "BG608", "BG701", "BG702", "BG703",
];

/// True for a code or name of a cross-file rule.
pub fn is_cross_code(code: &str) -> bool {
    crate::REGISTRY
        .find(code)
        .is_some_and(|m| CROSS_CODES.contains(&m.code))
}

/// Runs every cross-file rule over the project and applies `batchguard: allow` comments on
/// the line of each finding (or alone on the line above it).
pub fn run(analysis: &Analysis) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in crate::lint::rules::all() {
        let mut em = CrossEmitter {
            meta: rule.meta(),
            out: &mut out,
        };
        rule.check_project(analysis, &mut em);
    }
    let mut scanned: HashMap<usize, Vec<super::suppress::Suppression>> = HashMap::new();
    for f in &mut out {
        let Some(file) = analysis.files.get(f.at.file) else {
            continue;
        };
        let sups = scanned
            .entry(f.at.file)
            .or_insert_with(|| super::suppress::scan(&file.text));
        let line = file.line_col(f.at.span.start).0;
        for s in sups.iter().filter(|s| s.reason.is_some()) {
            let applies = s.line == line || (s.own_line && s.line + 1 == line);
            if applies && s.codes.iter().any(|c| c.0 == f.code || c.0 == f.name) {
                f.suppressed = s.reason.clone();
            }
        }
    }
    out
}
