//! Any bytes given as a manifest: the binary exits 0, 1 or 2, never anything else.

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
