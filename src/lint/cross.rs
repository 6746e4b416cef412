//! The project rules (SPEC 3.5) over the cross-file model [`crate::project::Analysis`].

use crate::finding::{Finding, Location, RuleMeta};
use crate::project::Analysis;

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

/// Runs every project rule over the cross-file model; their suppressions are judged with
/// every other finding's, at the end of the run.
pub fn run(analysis: &Analysis) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in crate::lint::rules::all() {
        let mut em = CrossEmitter {
            meta: rule.meta(),
            out: &mut out,
        };
        rule.check_project(analysis, &mut em);
    }
    out
}
