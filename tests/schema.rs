//! The checked-in schemas are what the binary prints; regenerate with
//! `cargo run -- schema manifest > schemas/manifest.schema.json` (and `config`).

fn check(path: &str, generated: String) {
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{path} is stale: run `cargo run -q -- schema {} > {path}`",
        path.trim_start_matches("schemas/")
            .split('.')
            .next()
            .unwrap_or("")
    );
}

#[test]
fn manifest_schema_is_current() {
    check(
        "schemas/manifest.schema.json",
        batchguard::schema::manifest(),
    );
}

#[test]
fn ledger_schema_is_current() {
    check("schemas/ledger.schema.json", batchguard::schema::ledger());
}

#[test]
fn config_schema_is_current() {
    check("schemas/config.schema.json", batchguard::schema::config());
}

/// Every key the loader knows is in the schema, and the other way round: one declaration,
/// but a test makes sure it stays one.
#[test]
fn schema_keys_match_loader_keys() {
    use batchguard::manifest::model::*;
    let schema: serde_json::Value =
        serde_json::from_str(&batchguard::schema::manifest()).expect("schema is JSON");
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
