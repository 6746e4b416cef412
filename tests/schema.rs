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
        batchguard::manifest_schema(),
    );
}

#[test]
fn ledger_schema_is_current() {
    check("schemas/ledger.schema.json", batchguard::ledger_schema());
}

#[test]
fn config_schema_is_current() {
    check("schemas/config.schema.json", batchguard::config_schema());
}
