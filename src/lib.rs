//! batchguard: keeps scheduled batch jobs from doing the same work twice, or not at all.

pub mod audit;
pub mod cli;
pub mod commands;
pub mod config;
pub mod db;
pub mod finding;
pub mod graph;
pub mod guard;
pub mod init;
pub mod ledger;
pub mod lint;
pub mod live;
pub mod manifest;
pub mod process;
pub mod project;
pub mod report;
pub mod schedule;
pub mod schema;
pub mod slots;
pub mod snapshot;
pub mod sources;
pub mod store;
pub mod text;

/// Every lint rule, then every audit check: chained here, above both analyses, so that
/// neither imports the other.
pub static REGISTRY: finding::Registry =
    finding::Registry::new(&[lint::rules::register, audit::checks::register]);
