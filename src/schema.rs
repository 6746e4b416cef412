//! JSON Schemas (draft-07) generated from the Rust types: the checked-in files in
//! `schemas/` are these strings, and a test fails when they are stale.

use schemars::generate::SchemaSettings;

fn render<T: schemars::JsonSchema>() -> String {
    let generator = SchemaSettings::draft07().into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

pub fn manifest() -> String {
    render::<crate::manifest::model::Manifest>()
}

pub fn config() -> String {
    render::<crate::config::Config>()
}

/// One ledger event row (`schemas/ledger-event.schema.json`).
pub fn ledger_event_schema() -> String {
    render::<crate::ledger::format::LedgerEvent>()
}

/// One ledger output row (`schemas/ledger-output.schema.json`).
pub fn ledger_output_schema() -> String {
    render::<crate::ledger::format::LedgerOutput>()
}

/// One drill record (`schemas/drill-record.schema.json`).
pub fn drill_record_schema() -> String {
    render::<crate::ledger::format::LedgerDrill>()
}

/// A ledger row: an event (SPEC 5.1), an applied output (SPEC 5.2) or a drill record
/// (SPEC 5.3). Each file or table holds one kind; this schema accepts any, for editors and
/// validators.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum LedgerRow {
    Event(crate::ledger::format::LedgerEvent),
    Output(crate::ledger::format::LedgerOutput),
    Drill(crate::ledger::format::LedgerDrill),
}

/// `batchguard schema ledger` (`schemas/ledger.schema.json`).
pub fn ledger() -> String {
    render::<LedgerRow>()
}

#[cfg(test)]
mod tests {
    use super::manifest;

    /// Every key the loader knows is in the schema, and the other way round: one declaration,
    /// but a test makes sure it stays one.
    #[test]
    fn schema_keys_match_loader_keys() {
        use crate::manifest::model::*;
        let schema: serde_json::Value = serde_json::from_str(&manifest()).expect("schema is JSON");
        let defs = &schema["definitions"];
        for (name, fields) in [
            ("Job", Job::FIELDS),
            ("Lock", Lock::FIELDS),
            ("Retry", Retry::FIELDS),
            ("Runbook", Runbook::FIELDS),
            ("Snapshot", Snapshot::FIELDS),
            ("Alerts", Alerts::FIELDS),
            ("Deployment", Deployment::FIELDS),
        ] {
            let props = defs[name]["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{name} has properties"));
            let mut a: Vec<&str> = props.keys().map(String::as_str).collect();
            let mut b: Vec<&str> = fields.to_vec();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{name}");
        }
    }
}
