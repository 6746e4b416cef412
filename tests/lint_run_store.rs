//! Lint and the store `batchguard run` resolves (SPEC 7.1 item 13): BG614 when a job locked
//! in a shared store gets none on several hosts, or one of another kind; and the HA
//! pattern (every registration a `batchguard run` on one shared store) is guarded, not a
//! BG601 duplicate, as `--list-files` and `graph` say.

mod common;

use common::{NOW, bg, lint_json};
use std::fs;
use std::path::Path;

/// The BG614 manifest: `settle-payments` and `nightly-report`, both locked in PostgreSQL.
fn manifest() -> String {
    fs::read_to_string("fixtures/rules/BG614/good/billing.batchguard.yaml").expect("fixture")
}

const SETTLE: &str = "node jobs/settle.js >> /var/log/settle.log 2>&1";

/// A deploy tree: the manifest and `files` (path, text) beside it.
fn tree(manifest: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("billing.batchguard.yaml"), manifest).expect("write");
    for (path, text) in files {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }
    dir
}

/// Root's crontab on one host and `/etc/cron.d/billing` (user column) on another, each
/// running `settle-payments` with the options given.
fn two_hosts(a: &str, b: &str) -> [(String, String); 2] {
    [
        (
            "hosts/batch-01/crontab".into(),
            format!(
                "CRON_TZ=UTC\n0 * * * * cd /srv/billing && batchguard run --job settle-payments {a} -- {SETTLE}\n"
            ),
        ),
        (
            "hosts/batch-02/etc/cron.d/billing".into(),
            format!(
                "CRON_TZ=UTC\n0 * * * * billing cd /srv/billing && batchguard run --job settle-payments {b} -- {SETTLE}\n"
            ),
        ),
    ]
}

fn stdout(args: &[&str], dir: &Path) -> String {
    let out = bg()
        .args(args)
        .args(["--now", NOW])
        .arg(dir)
        .output()
        .expect("runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn found<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["code"] == code).collect())
        .unwrap_or_default()
}

fn lint_hosts(a: &str, b: &str) -> serde_json::Value {
    let files = two_hosts(a, b);
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let dir = tree(&manifest(), &refs);
    lint_json(dir.path())
}

#[test]
fn two_crontabs_on_one_postgres_store_are_guarded_not_duplicates() {
    // Passwords differ by host; the stores are compared with them masked.
    let files = two_hosts(
        "--store postgres://batch:one@db.internal/ops",
        "--store 'postgres://batch:two@db.internal/ops'",
    );
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let dir = tree(&manifest(), &refs);
    let v = lint_json(dir.path());
    assert!(found(&v, "BG601").is_empty(), "{v}");
    assert!(found(&v, "BG614").is_empty(), "{v}");

    let listed = stdout(&["lint", "--list-files"], dir.path());
    let note = "guarded by batchguard run on postgres://batch:***@db.internal/ops";
    assert_eq!(listed.matches(note).count(), 2, "{listed}");
    assert!(
        listed.contains("crontab line 2: one of 2 registrations of job `billing/settle-payments`"),
        "{listed}"
    );
    let json = stdout(&["lint", "--list-files", "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let notes: Vec<&str> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .flat_map(|f| f["notes"].as_array().into_iter().flatten())
        .filter_map(|n| n.as_str())
        .collect();
    assert_eq!(
        notes.iter().filter(|n| n.contains(note)).count(),
        2,
        "{json}"
    );
    let graph = stdout(&["graph"], dir.path());
    assert!(
        graph.contains(&format!("2 registrations, {note}")),
        "{graph}"
    );
    assert!(!graph.contains("DUPLICATE"), "{graph}");
    for shown in [&listed, &graph] {
        assert!(
            !shown.contains("one@") && !shown.contains("two@"),
            "{shown}"
        );
    }
}

#[test]
fn registrations_not_all_guarded_by_one_shared_store_stay_duplicates() {
    let pg = "--store postgres://batch@db.internal/ops";
    let cases = [
        // Another store.
        (pg, "--store postgres://batch@db2.internal/ops"),
        // A store of another kind (also BG614).
        (pg, "--store redis://redis.internal:6379/0"),
        // Each host's own SQLite file.
        (
            "--store sqlite:/var/lib/batchguard/store.db",
            "--store sqlite:/var/lib/batchguard/store.db",
        ),
        // No store at all (BG614 says so).
        ("", ""),
        // A store on one host only.
        (pg, ""),
    ];
    for (a, b) in cases {
        let v = lint_hosts(a, b);
        assert_eq!(found(&v, "BG601").len(), 1, "{a} | {b}: {v}");
    }
    // One of the two is not under `batchguard run`.
    let dir = tree(
        &manifest(),
        &[
            (
                "hosts/batch-01/crontab",
                &format!(
                    "0 * * * * cd /srv/billing && batchguard run --job settle-payments {pg} -- {SETTLE}\n"
                ),
            ),
            (
                "hosts/batch-02/crontab",
                &format!("0 * * * * cd /srv/billing && flock -n /var/lock/settle {SETTLE}\n"),
            ),
        ],
    );
    let v = lint_json(dir.path());
    assert_eq!(found(&v, "BG601").len(), 1, "{v}");
    let listed = stdout(&["lint", "--list-files"], dir.path());
    assert!(!listed.contains("guarded by"), "{listed}");
}

#[test]
fn the_store_from_the_environment_or_the_config_guards_too() {
    // An env line on one host, `--store` on the other: one store.
    let files = [
        (
            "hosts/batch-01/crontab",
            format!(
                "BATCHGUARD_STORE=postgres://batch@db.internal/ops\n0 * * * * cd /srv/billing && batchguard run --job settle-payments -- {SETTLE}\n"
            ),
        ),
        (
            "hosts/batch-02/crontab",
            format!(
                "0 * * * * cd /srv/billing && BATCHGUARD_STORE=postgres://batch@db.internal/ops batchguard run --job settle-payments -- {SETTLE}\n"
            ),
        ),
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let dir = tree(&manifest(), &refs);
    let v = lint_json(dir.path());
    assert!(found(&v, "BG601").is_empty(), "{v}");
    assert!(found(&v, "BG614").is_empty(), "{v}");

    // `[run] store` in batchguard.toml gives every registration its store.
    let files = two_hosts("", "");
    let mut refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    refs.push((
        "batchguard.toml",
        "[run]\nstore = \"postgres://batch@db.internal/ops\"\n",
    ));
    let dir = tree(&manifest(), &refs);
    let v = lint_json(dir.path());
    assert!(found(&v, "BG601").is_empty(), "{v}");
    assert!(found(&v, "BG614").is_empty(), "{v}");
    let listed = stdout(&["lint", "--list-files"], dir.path());
    assert!(
        listed.contains("guarded by batchguard run on postgres://batch@db.internal/ops"),
        "{listed}"
    );
}

#[test]
fn bg614_names_the_job_the_registration_and_the_three_ways() {
    let v = lint_hosts("", "");
    let f = found(&v, "BG614");
    assert_eq!(f.len(), 2, "{v}");
    for f in &f {
        let message = f["message"].as_str().expect("message");
        assert!(
            message.contains("job `billing/settle-payments`"),
            "{message}"
        );
        assert!(message.contains("crontab line 2"), "{message}");
        assert!(message.contains("registered in 2 places"), "{message}");
        assert!(message.contains("exit 125"), "{message}");
        let help = f["help"].as_str().expect("help");
        for way in [
            "--store postgres://",
            "BATCHGUARD_STORE=postgres://",
            "[run] store",
        ] {
            assert!(help.contains(way), "{help}");
        }
    }
}

#[test]
fn a_store_of_another_kind_is_bg614_on_its_value() {
    for (store, says) in [
        (
            "redis://redis.internal:6379/0",
            "a redis store, but the job's lock.store is postgres",
        ),
        ("postgress://db.internal/ops", "not a store URL"),
        ("store.db", "not a store URL"),
    ] {
        let line = format!(
            "0 * * * * cd /srv/billing && batchguard run --job settle-payments --store {store} -- {SETTLE}\n"
        );
        // One host: the kind is wrong wherever it runs.
        let dir = tree(&manifest(), &[("hosts/batch-01/crontab", &line)]);
        let v = lint_json(dir.path());
        let f = found(&v, "BG614");
        assert_eq!(f.len(), 1, "{store}: {v}");
        let message = f[0]["message"].as_str().expect("message");
        assert!(message.contains(says), "{message}");
        // Located on the value itself.
        let col = line.find(store).expect("in line") + 1;
        assert_eq!(f[0]["line"], 1, "{v}");
        assert_eq!(f[0]["column"], col, "{v}");
    }
}

#[test]
fn references_one_host_and_sqlite_jobs_are_not_bg614() {
    let quiet = |v: &serde_json::Value, what: &str| {
        assert!(found(v, "BG614").is_empty(), "{what}: {v}");
    };
    // `--store "$VAR"` cannot be read: it counts as given.
    quiet(
        &lint_hosts("--store \"$BATCHGUARD_PG\"", "--store \"$BATCHGUARD_PG\""),
        "reference",
    );
    // A reference whose scheme is written out is still checked.
    let v = lint_hosts(
        "--store postgres://batch:$PGPASS@db.internal/ops",
        "--store redis://:$PW@redis.internal/0",
    );
    assert_eq!(found(&v, "BG614").len(), 1, "{v}");
    // One crontab line on one host: no several hosts to tell apart.
    let dir = tree(
        &manifest(),
        &[(
            "hosts/batch-01/crontab",
            &format!("0 * * * * batchguard run --job settle-payments -- {SETTLE}\n"),
        )],
    );
    quiet(&lint_json(dir.path()), "one host");
    // A SQLite job falls back to the local file, as its manifest says.
    let sqlite = manifest().replace("store: postgres", "store: sqlite");
    let files = two_hosts("", "");
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let dir = tree(&sqlite, &refs);
    let v = lint_json(dir.path());
    quiet(&v, "sqlite job");
    assert_eq!(found(&v, "BG601").len(), 1, "{v}");
}

/// A CronJob running `nightly-report` under `batchguard run`, with `env` entries.
fn cronjob(env: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly-report\nspec:\n  schedule: \"30 2 * * *\"\n  timeZone: UTC\n  concurrencyPolicy: Forbid\n  startingDeadlineSeconds: 300\n  jobTemplate:\n    spec:\n      backoffLimit: 0\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n            - name: report\n              image: registry.example.com/billing:1.4.2\n              command: [batchguard, run, --job, nightly-report, --, node, jobs/report.js]\n{env}"
    )
}

#[test]
fn kubernetes_and_pm2_registrations() {
    let k8s = |env: &str| {
        let dir = tree(&manifest(), &[("k8s/cronjobs.yaml", &cronjob(env))]);
        found(&lint_json(dir.path()), "BG614").len()
    };
    assert_eq!(k8s(""), 1, "a CronJob's pods run on any node");
    let value_from = "              env:\n                - name: BATCHGUARD_STORE\n                  valueFrom: {secretKeyRef: {name: batchguard, key: url}}\n";
    assert_eq!(k8s(value_from), 0);
    let env_from = "              envFrom:\n                - secretRef: {name: billing-env}\n";
    assert_eq!(k8s(env_from), 0);
    let literal = "              env:\n                - name: BATCHGUARD_STORE\n                  value: mysql://batch@db.internal/ops\n";
    assert_eq!(k8s(literal), 1, "mysql for a postgres job");

    let pm2 = |extra: &str| {
        let eco = format!(
            "{{\"apps\": [{{\"name\": \"settle\", \"script\": \"batchguard\", \"args\": \"run --job settle-payments -- node jobs/settle.js\", \"exec_mode\": \"cluster\", \"instances\": 4, \"cron_restart\": \"0 * * * *\", \"autorestart\": false{extra}}}]}}\n"
        );
        let dir = tree(&manifest(), &[("ecosystem.config.json", &eco)]);
        let v = lint_json(dir.path());
        found(&v, "BG614")
            .iter()
            .map(|f| f["message"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    let bare = pm2("");
    assert_eq!(bare.len(), 1, "{bare:?}");
    assert!(
        bare[0].contains("a PM2 app in cluster mode with 4 instances"),
        "{bare:?}"
    );
    assert!(
        pm2(", \"env\": {\"BATCHGUARD_STORE\": \"postgres://batch@db.internal/ops\"}").is_empty()
    );
}
