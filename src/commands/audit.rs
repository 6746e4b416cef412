//! `batchguard audit`: read the ledger (and the manifests), run the checks over the
//! window, write the report in one format to stdout or `--out`.

use super::{Error, Outcome, fail_on, print, settings_for, use_color};
use crate::audit::run::{AuditError, RunOptions};
use crate::cli::{AuditArgs, AuditFormat, LedgerFormat};
use crate::ledger::read::FileFormat;
use crate::report;
use std::io::IsTerminal;
use std::path::PathBuf;

pub(super) fn run(args: AuditArgs) -> Result<Outcome, Error> {
    // The config is looked for above the current directory: the ledger need not be a file.
    let settings = settings_for(args.config, &[PathBuf::from(".")])?;
    let (from, to) = match (&args.from, args.to, args.since) {
        (_, _, Some(_)) => (None, jiff::Timestamp::UNIX_EPOCH),
        (Some(f), Some(t), None) => (Some(f.clone()), t),
        (f, t, None) => {
            let missing = match (f, t) {
                (None, None) => "--since D, or --from and --to",
                (None, Some(_)) => "--from (with --to), or --since D alone",
                _ => "--to (with --from), or --since D alone",
            };
            return Err(Error::Audit(format!(
                "audit needs a window: give {missing} (`--since 30m` audits the half hour that ends now)"
            )));
        }
    };
    let outputs_unwritten = args
        .outputs
        .as_deref()
        .is_some_and(|out| crate::live::unwritten_outputs(&args.ledger, out));
    let opts = RunOptions {
        settings,
        ledger: args.ledger,
        outputs: args.outputs,
        outputs_unwritten,
        manifests: args.manifests,
        snapshots: args.snapshots,
        drills: args.drills,
        from: from.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |f| f.at),
        from_offset: from.as_ref().and_then(|f| f.offset),
        timezone: args.timezone,
        to,
        since: args.since,
        assume_tz: args.assume_tz,
        progress: std::io::stderr().is_terminal(),
        jobs: args.jobs,
        ledger_format: args.ledger_format.map(|f| match f {
            LedgerFormat::Csv => FileFormat::Csv,
            LedgerFormat::Jsonl => FileFormat::Jsonl,
        }),
        diagnose: Some(crate::lint::diagnose_manifest),
    };
    let result = crate::audit::run::run(&opts).map_err(|e| match e {
        AuditError::Manifest(e) => Error::AuditManifest(e),
        e @ AuditError::CannotRun(_) => Error::Audit(e.to_string()),
    })?;
    let color = args.out.is_none() && use_color();
    let text = match args.format {
        AuditFormat::Pretty => report::audit_pretty::render(&result, color),
        AuditFormat::Json => report::audit_json::render(&result),
        AuditFormat::Markdown => report::audit_markdown::render(&result),
        AuditFormat::Html => report::audit_html::render(&result),
        AuditFormat::Csv => report::audit_csv::render(&result),
    };
    match &args.out {
        Some(path) => std::fs::write(path, text).map_err(|e| Error::Write {
            path: path.display().to_string(),
            why: e.to_string(),
        })?,
        None => print(&text),
    }
    Ok(Outcome::of(result.failing(fail_on(args.fail_on))))
}
