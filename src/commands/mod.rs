//! The commands layer: one file per subcommand turns its parsed arguments ([`crate::cli`])
//! into plain options, calls the library once and returns an [`Outcome`] or an [`Error`].
//! `main` parses, calls [`dispatch`] and maps the result to the exit code (SPEC 1):
//! 0 nothing at or above the failing severity, 1 findings, 2 could not run; `run` ends
//! with its command's code instead (SPEC 7.1).
//!
//! Library modules never see a clap type: the mapping from arguments to options lives here.

mod audit;
mod claim;
mod completions;
mod drill;
mod explain;
mod graph;
mod init;
mod lint;
mod metrics;
mod rules;
mod run;
mod schema;
mod slots;
mod store;
mod watch;

use crate::cli::{Command, FailOn};
use crate::config::{self, ConfigError, Settings};
use crate::finding::Severity;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Exit code of a run that found something at or above the failing severity.
pub const FOUND: u8 = 1;
/// Exit code of every [`Error`].
pub const CANNOT_RUN: u8 = 2;

/// How a command that ran ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing at or above the failing severity (exit 0).
    Clean,
    /// Findings at or above it (exit 1).
    Found,
    /// `run` and `store` end with a code of their own (SPEC 7.1, 7.2).
    Code(u8),
}

impl Outcome {
    /// `Found` when `failing` is not zero.
    fn of(failing: usize) -> Outcome {
        if failing > 0 {
            Outcome::Found
        } else {
            Outcome::Clean
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Clean => 0,
            Outcome::Found => FOUND,
            Outcome::Code(c) => c,
        }
    }
}

/// Every way a command can fail to run: exit 2. [`Error::render`] is the one place these
/// become text; causes that have a place in a file (a config error, a broken manifest, a
/// bad expression) are miette diagnostics with labelled spans.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `batchguard.toml` could not be read or is invalid; it knows its span.
    #[error(transparent)]
    Config(Box<ConfigError>),
    /// Files given or found that could not be read (lint, graph).
    #[error("cannot read {} file(s)", .0.len())]
    Unreadable(Vec<(PathBuf, String)>),
    #[error(transparent)]
    Slots(#[from] crate::slots::SlotsError),
    #[error(transparent)]
    Init(#[from] crate::init::InitError),
    /// Manifest jobs the audit cannot evaluate, each shown at its place.
    #[error(transparent)]
    AuditManifest(Box<crate::audit::manifests::NotEvaluable>),
    /// The audit could not read its sources.
    #[error("{0}")]
    Audit(String),
    #[error("cannot write {path}: {why}")]
    Write { path: String, why: String },
    #[error("`{rule}` is not a rule code or name{hint}; `batchguard rules` lists them")]
    UnknownRule { rule: String, hint: String },
    /// `watch` or `metrics` could not read what they follow.
    #[error("{0}")]
    Live(String),
    /// The lock store could not be opened or read; `action` is `store`, `store flush`…
    /// The drill could not run (SPEC 7.3).
    #[error("{0}")]
    Drill(String),
    #[error("{message}")]
    Store {
        action: &'static str,
        message: String,
    },
}

impl Error {
    /// The text for stderr, newline-terminated.
    pub fn render(self) -> String {
        match self {
            Error::Config(e) => format!("{:?}\n", miette::Report::new(*e)),
            Error::Slots(e) => format!("{:?}\n", miette::Report::new(e)),
            Error::Init(e) => format!("{:?}\n", miette::Report::new(e)),
            Error::AuditManifest(e) => {
                crate::report::audit_pretty::render_not_evaluable(&e, stderr_color())
            }
            Error::Unreadable(files) => files
                .iter()
                .map(|(path, why)| format!("error: cannot read {}: {why}\n", path.display()))
                .collect(),
            Error::Store { action, message } => format!("batchguard {action}: {message}\n"),
            Error::Drill(m) => format!("batchguard drill: {m}\n"),
            e @ (Error::Audit(_)
            | Error::Live(_)
            | Error::Write { .. }
            | Error::UnknownRule { .. }) => {
                format!("error: {e}\n")
            }
        }
    }
}

/// Runs one subcommand.
pub fn dispatch(command: Command) -> Result<Outcome, Error> {
    match command {
        Command::Lint(args) => lint::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Rules { format } => rules::run(format),
        Command::Explain { rule } => explain::run(&rule),
        Command::Schema { format } => schema::run(format),
        Command::Slots(args) => slots::run(args),
        Command::Graph(args) => graph::run(args),
        Command::Init(args) => init::run(args),
        Command::Run(args) => run::run(args),
        Command::Store(args) => store::run(args),
        Command::Claim(args) => claim::run(args),
        Command::Drill(args) => drill::run(args),
        Command::DrillJob { argv } => Ok(Outcome::Code(crate::drill::shim::main(&argv))),
        Command::Watch(args) => watch::run(args),
        Command::Metrics(args) => metrics::run(args),
        Command::Completions { shell } => completions::run(shell),
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Colour on stdout: a terminal, and `NO_COLOR` unset or empty.
fn use_color() -> bool {
    std::io::stdout().is_terminal() && !no_color_env()
}

/// Colour on stderr, by the same rule.
fn stderr_color() -> bool {
    std::io::stderr().is_terminal() && !no_color_env()
}

/// The paths to read: the current directory when none are given.
fn paths_or_cwd(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths
    }
}

/// `--config`, else `batchguard.toml` found above the first path, else the defaults.
fn settings_for(config: Option<PathBuf>, paths: &[PathBuf]) -> Result<Settings, Error> {
    let found = config.or_else(|| paths.first().and_then(|p| config::discover(p)));
    match found {
        Some(p) => config::load(&p, |k| crate::REGISTRY.find(k).is_some()).map_err(Error::Config),
        None => Ok(Settings::default()),
    }
}

/// The store of `store`, `watch` and `metrics` when `--store` does not say (SPEC 7.1 item
/// 13, for commands that serve every job): `BATCHGUARD_STORE`, then `[run] store`. `None`
/// when neither says; the caller decides what the default is.
fn store_given(flag: Option<String>, settings: &Settings) -> Option<String> {
    flag.or_else(|| {
        std::env::var("BATCHGUARD_STORE")
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    })
    .or_else(|| settings.config.run.store.clone())
}

/// The lowest severity `--fail-on` counts.
fn fail_on(f: FailOn) -> Severity {
    match f {
        FailOn::Error => Severity::Error,
        FailOn::Warning => Severity::Warning,
    }
}
