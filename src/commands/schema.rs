//! `batchguard schema KIND`: the JSON Schema of a file format, generated from its types.

use super::{Error, Outcome, print};
use crate::cli::SchemaKind;

pub(super) fn run(kind: SchemaKind) -> Result<Outcome, Error> {
    print(&match kind {
        SchemaKind::Manifest => crate::schema::manifest(),
        SchemaKind::Config => crate::schema::config(),
        SchemaKind::Ledger => crate::schema::ledger(),
    });
    Ok(Outcome::Clean)
}
