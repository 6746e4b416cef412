//! `batchguard lint`: discover, read and check the tree, print the report in one format.

use super::{Error, Outcome, paths_or_cwd, print, settings_for, use_color};
use crate::cli::{FailOn, LintArgs, LintFormat};
use crate::finding::Severity;
use crate::lint::{self, LintOptions, WalkOptions};
use crate::report;

pub(super) fn run(args: LintArgs) -> Result<Outcome, Error> {
    let paths = paths_or_cwd(args.paths);
    let settings = settings_for(args.config, &paths)?;
    let opts = LintOptions {
        paths,
        settings,
        now: args.now.unwrap_or_else(jiff::Timestamp::now),
    };
    let run = lint::run_with(
        &opts,
        WalkOptions {
            hidden: args.hidden,
        },
    );
    print(&match (args.format, args.list_files) {
        (LintFormat::Pretty, false) => report::pretty::render(&run, use_color()),
        (LintFormat::Pretty, true) => report::pretty::list_files(&run),
        (LintFormat::Json, list) => report::json::render_with(&run, list),
        (LintFormat::Sarif, _) => report::sarif::render(&run),
        (LintFormat::Github, _) => report::github::render(&run),
    });
    if args.list_files && matches!(args.format, LintFormat::Sarif | LintFormat::Github) {
        eprint!("{}", report::pretty::list_files(&run));
    }
    // The report is printed first: what could be read was checked.
    if !run.unreadable.is_empty() {
        return Err(Error::Unreadable(run.unreadable));
    }
    let failing = match args.fail_on {
        FailOn::Error => run.count(Severity::Error),
        FailOn::Warning => run.count(Severity::Error) + run.count(Severity::Warning),
    };
    Ok(Outcome::of(failing))
}
