//! Any bytes given as a manifest or a ledger: the binary exits 0, 1 or 2, never anything else.

use assert_cmd::Command;
use proptest::prelude::*;

fn exit_code(bytes: &[u8]) -> Option<i32> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("any.batchguard.yaml");
    std::fs::write(&path, bytes).ok()?;
    Command::cargo_bin("batchguard")
        .ok()?
        .args(["lint", "--format", "json", "--now", "2026-03-01T00:00:00Z"])
        .arg(&path)
        .output()
        .ok()?
        .status
        .code()
}

/// YAML-ish fragments, so that generated input reaches past the parser's first error.
fn yamlish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just("version: 1\n".to_string()),
        Just("jobs:\n".to_string()),
        Just("  - name: a\n".to_string()),
        Just("    lock: {ttl: 5m}\n".to_string()),
        Just("&a ".to_string()),
        Just("*a ".to_string()),
        Just("<<: *a\n".to_string()),
        Just("[".to_string()),
        Just("{".to_string()),
        Just("\"".to_string()),
        Just("# batchguard: allow BG202\n".to_string()),
        "[ -~]{0,12}",
        "[\t\n :\\-]{0,4}",
    ];
    prop::collection::vec(token, 0..40).prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_exit_0_1_or_2(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let code = exit_code(&bytes);
        prop_assert!(matches!(code, Some(0..=2)), "exit {code:?}");
    }

    #[test]
    fn yamlish_text_exits_0_1_or_2(bytes in yamlish()) {
        let code = exit_code(&bytes);
        prop_assert!(matches!(code, Some(0..=2)), "exit {code:?}");
    }
}

/// Runs `batchguard audit` over a ledger file with the given body (after a valid header).
fn audit_exit_code(ext: &str, body: &[u8]) -> Option<i32> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join(format!("events.{ext}"));
    let mut bytes = if ext == "csv" {
        b"run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,trigger\n".to_vec()
    } else {
        Vec::new()
    };
    bytes.extend_from_slice(body);
    std::fs::write(&path, bytes).ok()?;
    Command::cargo_bin("batchguard")
        .ok()?
        .args(["audit", "--format", "json", "--ledger"])
        .arg(&path)
        .args([
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
        ])
        .args(["--manifest", "fixtures/demo/billing.batchguard.yaml"])
        .output()
        .ok()?
        .status
        .code()
}

/// CSV-ish and JSON-ish ledger rows, valid and broken.
fn ledgerish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just("r1,settle-payments,2026-03-01T01:00:00Z,start,2026-03-01T01:00:01Z,a,1,,,\n".to_string()),
        Just("r1,settle-payments,2026-03-01T01:00:00Z,end,2026-03-01T01:05:00Z,a,1,success,,\n".to_string()),
        Just("{\"run_id\":\"r\",\"job\":\"x\",\"scheduled_at\":\"2026-03-01T01:00:00Z\",\"event\":\"start\",\"at\":\"2026-03-01T01:00:00Z\"}\n".to_string()),
        Just("\"".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("99999999999999999999".to_string()),
        Just("2026-13-45T99:99:99+99:99".to_string()),
        "[ -~]{0,16}",
    ];
    prop::collection::vec(token, 0..30).prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_csv_ledger_exits_0_1_or_2(body in prop_oneof![ledgerish(), prop::collection::vec(any::<u8>(), 0..512)]) {
        let code = audit_exit_code("csv", &body);
        prop_assert!(matches!(code, Some(0..=2)), "exit {code:?}");
    }

    #[test]
    fn any_jsonl_ledger_exits_0_1_or_2(body in prop_oneof![ledgerish(), prop::collection::vec(any::<u8>(), 0..512)]) {
        let code = audit_exit_code("jsonl", &body);
        prop_assert!(matches!(code, Some(0..=2)), "exit {code:?}");
    }
}
