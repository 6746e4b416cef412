//! SPEC 7.1 item 19: a string that is not a store URL is a usage error, said as such by
//! every command that takes `--store`: `run` exits 125 without "unreachable" or a replay
//! line (there is nothing to replay until the URL is right), `store`, `watch` and
//! `metrics` exit 2; the forms a store URL takes are listed and a password is never shown.

mod common;

use common::bg;

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: [\"touch\", \"ran\"]\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 60s\n    retry:\n      max_attempts: 1\n";

/// Not store URLs, and what the message says of each.
const BAD: [(&str, &str); 4] = [
    (
        "postgress://u:hunter2@db/app",
        "unknown scheme `postgress:` (did you mean `postgres`?)",
    ),
    (
        "sqlite.db",
        "it has no scheme (a SQLite file is `sqlite:sqlite.db`)",
    ),
    ("redis:/x", "a `redis:` URL starts with `redis://HOST`"),
    ("mysql://u:hunter2@db:port/app", "not a MySQL URL"),
];

fn said(o: &std::process::Output, url: &str, why: &str) -> String {
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.contains("is not a store URL"), "{url}: {e}");
    assert!(e.contains(why), "{url}: {e}");
    assert!(e.contains("sqlite:PATH, postgres://"), "the forms: {e}");
    assert!(!e.contains("hunter2"), "{e}");
    assert!(!e.contains("unreachable"), "{e}");
    e
}

#[test]
fn run_refuses_a_string_that_is_no_store_url_with_125_and_no_replay_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.batchguard.yaml"), MANIFEST).unwrap();
    for (url, why) in BAD {
        let o = bg()
            .current_dir(dir.path())
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--store", url, "--scheduled-at", "2026-03-01T02:00:00Z"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(125), "{url}");
        let e = said(&o, url, why);
        assert!(!e.contains("replay it with"), "{e}");
        assert!(!dir.path().join("ran").exists(), "the command ran");
        assert!(
            !dir.path().join(".batchguard").exists(),
            "{url}: a store was made"
        );
    }
}

#[test]
fn store_watch_and_metrics_refuse_it_with_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.batchguard.yaml"), MANIFEST).unwrap();
    for (url, why) in BAD {
        for action in ["migrate", "status", "flush", "repair"] {
            let o = bg()
                .current_dir(dir.path())
                .args(["store", action, "--store", url])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "store {action} {url}");
            said(&o, url, why);
        }
        for cmd in [
            &["watch", "--once"][..],
            &["metrics", "--textfile", "m.prom"],
        ] {
            let o = bg()
                .current_dir(dir.path())
                .args(cmd)
                .args(["--manifest", "m.batchguard.yaml", "--store", url])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {url}");
            said(&o, url, why);
        }
    }
}
