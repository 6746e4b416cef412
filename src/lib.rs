//! batchguard: keeps scheduled batch jobs from doing the same work twice, or not at all.
//!
//! The public surface is deliberate: `cli` and `commands` for the binary; the models and
//! analyses the integration tests, the benchmarks and `crates/ledger-gen` drive directly
//! (`audit`, `config`, `finding`, `graph`, `ledger`, `lint`, `manifest`, `project`,
//! `report`, `schedule`, `schema`, `sources`, `store`, `text`). The guard, the drill and
//! the services under them (`db`, `process`, `snapshot`, `slots`, `init`) are reached only
//! through the command line, so they are crate-private and the compiler reports what in
//! them nothing uses.

pub mod audit;
pub mod cli;
pub mod commands;
pub mod config;
pub(crate) mod db;
pub(crate) mod drill;
pub mod finding;
pub mod graph;
pub(crate) mod guard;
pub(crate) mod init;
pub mod ledger;
pub mod lint;
pub mod live;
pub mod manifest;
pub(crate) mod process;
pub mod project;
pub mod report;
pub mod schedule;
pub mod schema;
pub(crate) mod slots;
pub(crate) mod snapshot;
pub mod sources;
pub mod store;
pub mod text;

/// Every lint rule, then every audit check: chained here, above both analyses, so that
/// neither imports the other.
pub static REGISTRY: finding::Registry =
    finding::Registry::new(&[lint::rules::register, audit::checks::register]);
