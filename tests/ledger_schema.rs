//! The checked-in ledger schemas are what the code generates; regenerate with
//! `BATCHGUARD_BLESS=1 cargo test --test ledger_schema`.

fn check(path: &str, generated: String) {
    if std::env::var_os("BATCHGUARD_BLESS").is_some() {
        std::fs::write(path, &generated).expect("write schema");
    }
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{path} is stale: run `BATCHGUARD_BLESS=1 cargo test --test ledger_schema`"
    );
}

#[test]
fn ledger_event_schema_is_current() {
    check(
        "schemas/ledger-event.schema.json",
        batchguard::ledger_event_schema(),
    );
}

#[test]
fn ledger_output_schema_is_current() {
    check(
        "schemas/ledger-output.schema.json",
        batchguard::ledger_output_schema(),
    );
}

#[test]
fn drill_record_schema_is_current() {
    check(
        "schemas/drill-record.schema.json",
        batchguard::drill_record_schema(),
    );
}

/// The schema's properties are the reader's columns, and its required ones are the reader's.
#[test]
fn schema_columns_match_reader_columns() {
    use batchguard::DRILL_COLUMNS;
    use batchguard::{EVENT_COLUMNS, OUTPUT_COLUMNS};
    for (schema, columns, required) in [
        (batchguard::ledger_event_schema(), &EVENT_COLUMNS[..], 5),
        (batchguard::ledger_output_schema(), &OUTPUT_COLUMNS[..], 5),
        (batchguard::drill_record_schema(), &DRILL_COLUMNS[..], 6),
    ] {
        let v: serde_json::Value = serde_json::from_str(&schema).expect("json");
        assert_eq!(v["$schema"], "http://json-schema.org/draft-07/schema#");
        let mut props: Vec<&str> = v["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = columns.to_vec();
        props.sort();
        want.sort();
        assert_eq!(props, want);
        let mut req: Vec<&str> = v["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|x| x.as_str())
            .collect();
        let mut want_req = columns[..required].to_vec();
        req.sort();
        want_req.sort();
        assert_eq!(req, want_req);
    }
}

/// Every line of the JSONL fixture is valid against the schema's enums and required keys
/// (a light check without a validator crate).
#[test]
fn fixture_lines_use_only_schema_words() {
    let schema: serde_json::Value =
        serde_json::from_str(&batchguard::ledger_event_schema()).expect("json");
    let words = serde_json::to_string(&schema["definitions"]).expect("defs");
    let text = std::fs::read_to_string("fixtures/ledger/events.jsonl").expect("fixture");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("line");
        let ev = v["event"].as_str().expect("event");
        assert!(words.contains(&format!("\"{ev}\"")), "{ev}");
    }
}

/// The schema's `scenarios` pattern accepts what the writer formats and refuses what the
/// reader refuses.
#[test]
fn drill_scenarios_pattern_agrees_with_the_reader() {
    use batchguard::{format_scenarios, parse_scenarios};
    let schema: serde_json::Value =
        serde_json::from_str(&batchguard::drill_record_schema()).expect("json");
    let pattern = schema["properties"]["scenarios"]["pattern"]
        .as_str()
        .expect("pattern");
    let re = regex::Regex::new(pattern).expect("pattern compiles");
    let written = format_scenarios([("clean", true), ("rerun", false), ("concurrent", true)]);
    for good in [written.as_str(), "", "stale:failed", "retry-2:passed"] {
        assert!(re.is_match(good), "{good}");
        assert!(parse_scenarios(good).is_ok(), "{good}");
    }
    for bad in [
        "clean",
        "clean:ok",
        "Clean:passed",
        "clean:passed,",
        ",clean:passed",
    ] {
        assert!(!re.is_match(bad), "{bad}");
        assert!(parse_scenarios(bad).is_err(), "{bad}");
    }
}

/// The columns of `CREATE TABLE … table (…)` in a DDL file, in order: the first word of
/// each line inside the parentheses, unquoted; constraint and key lines left out.
fn ddl_columns(ddl: &str, table: &str) -> Vec<String> {
    let head = format!("CREATE TABLE IF NOT EXISTS {table} (");
    let start = ddl
        .find(&head)
        .unwrap_or_else(|| panic!("no `{head}` in the DDL"))
        + head.len();
    let mut out = Vec::new();
    for line in ddl[start..].lines() {
        let t = line.trim();
        if t.starts_with(')') {
            break;
        }
        let word = t.split_whitespace().next().unwrap_or("");
        if word.is_empty()
            || word.starts_with("--")
            || ["CHECK", "KEY", "PRIMARY", "UNIQUE", "INDEX", "CONSTRAINT"].contains(&word)
        {
            continue;
        }
        out.push(word.trim_matches(['"', '`']).to_owned());
    }
    out
}

/// Every checked-in DDL creates the columns the JSON schemas name (and the row number
/// `id` where a ledger is followed by it), for every database.
#[test]
fn ddl_columns_match_the_schemas() {
    let props = |schema: String| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&schema).expect("json");
        let mut p: Vec<String> = v["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect();
        p.sort();
        p
    };
    let events = props(batchguard::ledger_event_schema());
    let outputs = props(batchguard::ledger_output_schema());
    let drills = props(batchguard::drill_record_schema());
    for db in ["sqlite", "postgres", "mysql"] {
        let ledger = std::fs::read_to_string(format!("schemas/ledger.{db}.sql")).expect("ddl");
        let drill = std::fs::read_to_string(format!("schemas/drills.{db}.sql")).expect("ddl");
        for (ddl, table, want) in [
            (&ledger, "batchguard_events", &events),
            (&ledger, "batchguard_outputs", &outputs),
            (&drill, "batchguard_drills", &drills),
        ] {
            let cols = ddl_columns(ddl, table);
            let mut named: Vec<String> = cols.iter().filter(|c| *c != "id").cloned().collect();
            named.sort();
            assert_eq!(&named, want, "{db}: {table}");
            if table != "batchguard_drills" && db != "sqlite" {
                // `watch` follows the ledger tables by `id` (SQLite: by rowid).
                let numbered = cols.iter().any(|c| c == "id")
                    || ddl.contains(&format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS id "));
                assert!(numbered, "{db}: {table} has no `id`");
            }
        }
    }
}
