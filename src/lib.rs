//! batchguard: keeps scheduled batch jobs from doing the same work twice, or not at all.
//!
//! Every module is crate-private. The public surface is the re-export list below, and
//! nothing else: the binary's entry point, and the models and analyses that the
//! integration tests, the benchmarks and `crates/ledger-gen` drive directly. Keeping it a
//! list means internals can move between modules without touching a test, and the
//! compiler reports whatever in them nothing uses. Names that two stages share get the
//! stage as a prefix (`LedgerReadOptions`, `SourceReadOptions`).

mod audit;
mod cli;
mod commands;
mod config;
mod db;
mod drill;
mod finding;
mod graph;
mod guard;
mod init;
mod ledger;
mod lint;
mod live;
mod manifest;
mod notify;
mod process;
mod project;
mod report;
mod schedule;
mod schema;
mod slots;
mod snapshot;
mod sources;
mod store;
mod text;

// The binary: parse the arguments, run the subcommand, map its outcome to an exit code.
pub use cli::Cli;
pub use commands::{CANNOT_RUN, Error, Outcome, dispatch};

// Shared vocabulary: spans, source files, findings and the rules' metadata.
pub use finding::{Finding, Registry, RuleMeta, Scope, Severity};
pub use text::{SourceFile, Span, Spanned};

// Schedules (SPEC 4): a dialect's parse, its slots, its DST behaviour.
pub use schedule::{CronErrorKind, Dialect, DstAction, DstKind, Schedule, format_slot};

// Manifests and registration sources (SPEC 2, 3.6), and the cross-file model on them.
pub use config::Settings;
pub use manifest::load::load as load_manifest;
pub use project::{Analysis, ManifestJob, Project};
pub use sources::crontab::is_crontab_path;
pub use sources::{
    Read as SourceRead, ReadOptions as SourceReadOptions, Registration, SourceKind, Tie,
    is_source_name, read as read_source, split_words,
};

// Lint (SPEC 3) and the pictures and reports drawn from it.
pub use graph::{Format as GraphFormat, render as render_graph};
pub use lint::{
    LintOptions, LintRun, WalkOptions, lint_bytes, read_project, rules_markdown, run as lint,
};
pub use report::pretty::render as render_pretty;

// JSON Schemas (SPEC 2, 5, 8).
pub use schema::{
    config as config_schema, drill_record_schema, ledger as ledger_schema, ledger_event_schema,
    ledger_output_schema, manifest as manifest_schema,
};

// The run ledger (SPEC 5): rows, their sources, following one, drill records.
pub use ledger::drills::{
    COLUMNS as DRILL_COLUMNS, DrillRead, DrillRecord, format_scenarios, parse_scenarios,
    read as read_drills,
};
pub use ledger::read::{EVENT_COLUMNS, OUTPUT_COLUMNS};
pub use ledger::tail::{Polled, Tail, TailEvent, TailSink};
pub use ledger::{
    Event, EventKind, Output, OutputRef, ReadOptions as LedgerReadOptions, RowError, RowLocation,
    Source as LedgerSource, SourceError as LedgerError, Status, Trigger, read_events, read_outputs,
};

// Stores (SPEC 7.2): the lock and fence contract, SQLite's implementation, drill records.
pub use store::drills::{append as append_drill, line as drill_line};
pub use store::sqlite::SqliteStore;
pub use store::{
    AcquireRequest, AcquireResult, ClockBound, EventRow, Finish, Finished, Refusal, SlotState,
    Store,
};

// Audit (SPEC 6): the streaming fold, a whole run over a ledger, its JSON report.
pub use audit::run::{RunOptions as AuditRunOptions, run as audit};
pub use audit::{AuditJob, AuditOptions, AuditResult, Auditor, jobs_from_manifest};
pub use report::audit_json::render as render_audit_json;
pub use snapshot::{compact as snapshot_name, digest as snapshot_digest};

/// Every lint rule, then every audit check: chained here, above both analyses, so that
/// neither imports the other.
pub static REGISTRY: finding::Registry =
    finding::Registry::new(&[lint::rules::register, audit::checks::register]);
