//! `batchguard audit` from arguments to an [`AuditResult`]: load the manifests, stream the
//! ledger through the [`Auditor`], with a progress bar on a terminal. `main` only maps the
//! result to an exit code.

use super::{AuditOptions, AuditResult, Auditor, jobs_from_manifest, service_name};
use crate::ledger::read::{self, ReadOptions, Source};
use jiff::Timestamp;
use std::path::PathBuf;

/// What `audit` was asked (SPEC 1).
pub struct RunOptions {
    pub ledger: String,
    pub outputs: Option<String>,
    pub manifests: Vec<PathBuf>,
    pub snapshots: Option<PathBuf>,
    pub from: Timestamp,
    pub to: Timestamp,
    pub assume_tz: Option<String>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
}

/// Why the audit could not run (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CannotRun(pub String);

pub fn run(o: &RunOptions) -> Result<AuditResult, CannotRun> {
    if o.from >= o.to {
        return Err(CannotRun(format!(
            "--from {} is not before --to {}",
            o.from, o.to
        )));
    }
    let assume_tz = match &o.assume_tz {
        None => None,
        Some(z) => Some(
            jiff::tz::TimeZone::get(z).map_err(|e| CannotRun(format!("--assume-tz `{z}`: {e}")))?,
        ),
    };
    let mut jobs = Vec::new();
    for path in &o.manifests {
        let bytes = std::fs::read(path)
            .map_err(|e| CannotRun(format!("cannot read manifest {}: {e}", path.display())))?;
        let (_, loaded) = crate::manifest::load::load(&bytes);
        if loaded.root.is_none() {
            let why = loaded
                .diags
                .first()
                .map(|d| d.message.clone())
                .unwrap_or_else(|| "not a manifest".into());
            return Err(CannotRun(format!(
                "manifest {} cannot be read: {why} (`batchguard lint` shows where)",
                path.display()
            )));
        }
        let service = service_name(&loaded, path);
        jobs.extend(jobs_from_manifest(&loaded, &service));
    }
    let ledger = Source::parse(&o.ledger).map_err(|e| CannotRun(e.0))?;
    // A database ledger holds its outputs table too; a file ledger needs --outputs.
    let outputs = match &o.outputs {
        Some(s) => Some(Source::parse(s).map_err(|e| CannotRun(e.0))?),
        None => match &ledger {
            Source::Sqlite(_) | Source::Postgres { .. } => Some(ledger.clone()),
            _ => None,
        },
    };
    if let Some(dir) = &o.snapshots
        && !dir.is_dir()
    {
        return Err(CannotRun(format!(
            "--snapshots {} is not a directory",
            dir.display()
        )));
    }
    let opts = AuditOptions {
        from: o.from,
        to: o.to,
        snapshots: o.snapshots.clone(),
        with_manifest: !o.manifests.is_empty(),
        with_outputs: outputs.is_some(),
    };
    let ropts = ReadOptions { assume_tz };
    let mut auditor = Auditor::new(jobs, opts);
    let bar = o.progress.then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {pos} rows ({per_sec})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb
    });
    let tick = |n: &mut u64, bar: &Option<indicatif::ProgressBar>| {
        *n += 1;
        if *n & 0xFFFF == 0
            && let Some(b) = bar
        {
            b.set_position(*n);
        }
    };
    let mut n = 0u64;
    if let Some(b) = &bar {
        b.set_message(format!("reading events from {}", ledger.display()));
    }
    {
        let cell = std::cell::RefCell::new(&mut auditor);
        read::read_events(
            &ledger,
            &ropts,
            &mut |e| {
                cell.borrow_mut().event(e);
                tick(&mut n, &bar);
            },
            &mut |err| cell.borrow_mut().row_error(err),
        )
        .map_err(|e| CannotRun(format!("cannot read {}: {}", ledger.display(), e.0)))?;
        if let Some(src) = &outputs {
            if let Some(b) = &bar {
                b.set_message(format!("reading outputs from {}", src.display()));
            }
            read::read_outputs(
                src,
                &ropts,
                &mut |x| {
                    cell.borrow_mut().output(x);
                    tick(&mut n, &bar);
                },
                &mut |err| cell.borrow_mut().row_error(err),
            )
            .map_err(|e| CannotRun(format!("cannot read {}: {}", src.display(), e.0)))?;
        }
    }
    if let Some(b) = &bar {
        b.set_message("checking");
    }
    let result = auditor.finish();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(result)
}
