//! `lock.store` names every store `run` has (SPEC 2, 7.2), and BG602 knows which of them
//! several hosts share: a Kubernetes job locked in a SQLite file (one host's) is unguarded;
//! the same job on PostgreSQL, MySQL or Redis is not; a SQLite lock on one host is.

mod common;

use common::{NOW, bg};

/// The BG201 fixed twin (a Kubernetes job with a lock), with its store and instances set.
fn manifest(store: &str, platform: &str, instances: u32) -> String {
    std::fs::read_to_string("fixtures/rules/BG201/good.batchguard.yaml")
        .expect("fixture")
        .replace("store: postgres", &format!("store: {store}"))
        .replace("platform: kubernetes", &format!("platform: {platform}"))
        .replace("instances: 1", &format!("instances: {instances}"))
}

fn codes(yaml: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.batchguard.yaml"), yaml).expect("write");
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", "--format", "json", "--now", NOW])
        .output()
        .expect("lint");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_fixture_changes_what_the_test_says() {
    let m = manifest("mysql", "kubernetes", 3);
    assert!(
        m.contains("store: mysql") && m.contains("instances: 3"),
        "{m}"
    );
}

#[test]
fn every_store_is_a_valid_lock_store() {
    for store in ["postgres", "sqlite", "redis", "mysql", "other"] {
        let c = codes(&manifest(store, "kubernetes", 1));
        assert!(!c.contains(&"BG004".to_owned()), "{store}: {c:?}");
    }
    let c = codes(&manifest("mariadb", "kubernetes", 1));
    assert!(c.contains(&"BG004".to_owned()), "{c:?}");
}

#[test]
fn a_sqlite_lock_does_not_guard_pods_on_other_nodes() {
    assert!(codes(&manifest("sqlite", "kubernetes", 3)).contains(&"BG602".to_owned()));
    for store in ["postgres", "mysql", "redis"] {
        let c = codes(&manifest(store, "kubernetes", 3));
        assert!(!c.contains(&"BG602".to_owned()), "{store}: {c:?}");
    }
    // Processes of one host share its SQLite file.
    for platform in ["pm2", "crontab", "systemd"] {
        let c = codes(&manifest("sqlite", platform, 3));
        assert!(!c.contains(&"BG602".to_owned()), "{platform}: {c:?}");
    }
    // One pod at a time has nothing to share.
    assert!(!codes(&manifest("sqlite", "kubernetes", 1)).contains(&"BG602".to_owned()));
}
