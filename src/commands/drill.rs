//! `batchguard drill`: arguments -> the drill -> the report in one format. Exit 0 when
//! every scenario passed, 1 when one failed (or the snapshot is not the slot's input), 2
//! when the drill could not run.

use super::{Error, Outcome, print, use_color};
use crate::cli::{DrillArgs, DrillFormat};
use crate::drill::{self, Options, Scenario};

pub(super) fn run(args: DrillArgs) -> Result<Outcome, Error> {
    let scenarios = Scenario::parse_list(&args.scenarios).map_err(Error::Drill)?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::Drill(format!("cannot find the batchguard binary: {e}")))?;
    let opts = Options {
        manifest: args.manifest,
        job: args.job,
        snapshot: args.snapshot,
        scheduled_at: args.scheduled_at,
        ledger: args.ledger,
        scenarios,
        store: args.store,
        sandbox: args.sandbox,
        time_limit: args.time_limit,
        jobs: args.jobs.map(usize::from),
        exe,
        rule_code: |issue| crate::lint::rule_of(issue).code,
    };
    let done = drill::drill(&opts).map_err(|e| Error::Drill(e.0))?;
    let r = &done.report;
    if let Some(src) = &args.record {
        drill::record(src, r).map_err(Error::Drill)?;
    }
    let text = match args.format {
        DrillFormat::Pretty => {
            crate::report::drill::pretty(r, args.out.is_none() && use_color(), done.kept.as_deref())
        }
        DrillFormat::Json => crate::report::drill::json(r),
        DrillFormat::Markdown => crate::report::drill::markdown(r),
    };
    match &args.out {
        Some(path) => std::fs::write(path, text).map_err(|e| Error::Write {
            path: path.display().to_string(),
            why: e.to_string(),
        })?,
        None => print(&text),
    }
    // The pretty report on a terminal names the kept sandboxes itself.
    let named = matches!(args.format, DrillFormat::Pretty) && args.out.is_none();
    if let Some(dir) = done.kept.as_ref().filter(|_| !r.passed && !named) {
        eprintln!(
            "batchguard drill: the sandboxes are kept in {}",
            dir.display()
        );
    }
    Ok(if r.passed {
        Outcome::Clean
    } else {
        Outcome::Found
    })
}
