//! `batchguard graph`: jobs, dependencies and registrations drawn as DOT or Mermaid.

use super::{Error, Outcome, paths_or_cwd, print, settings_for};
use crate::cli::{GraphArgs, GraphFormat};
use crate::graph::{self, Format};
use crate::lint::{self, LintOptions};

pub(super) fn run(args: GraphArgs) -> Result<Outcome, Error> {
    let paths = paths_or_cwd(args.paths);
    let settings = settings_for(args.config, &paths)?;
    let now = args.now.unwrap_or_else(jiff::Timestamp::now);
    // The model lint checks. The picture needs no findings: of the rules, only those that
    // mask values run, so it redacts each secret lint would.
    let run = lint::read_project(
        &LintOptions {
            paths,
            settings,
            now,
        },
        lint::WalkOptions::default(),
    );
    if !run.unreadable.is_empty() {
        return Err(Error::Unreadable(run.unreadable));
    }
    let format = match args.format {
        GraphFormat::Dot => Format::Dot,
        GraphFormat::Mermaid => Format::Mermaid,
    };
    print(&graph::render(&run, now, format));
    Ok(Outcome::Clean)
}
