//! Crontab and Kubernetes sources read as cron and the CronJob controller read them
//! (SPEC 3.6 "What counts as each source"): file names, the user column of system-format
//! crontabs, bytes that are not UTF-8, CRLF and a missing final newline (BG610), the
//! assumed zone of lines without `CRON_TZ=`, namespaces and working directories of
//! CronJobs, and one BG609 per Helm template file.

mod common;

use assert_cmd::Command;
use batchguard::{Registration, SourceKind, SourceReadOptions};
use common::NOW;
use std::fs;
use std::path::Path;

fn lint_json(dir: &Path) -> serde_json::Value {
    let out = Command::cargo_bin("batchguard")
        .expect("binary builds")
        .env("NO_COLOR", "1")
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(dir)
        .output()
        .expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn findings<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["code"] == code).collect())
        .unwrap_or_default()
}

fn message(f: &serde_json::Value) -> &str {
    f["message"].as_str().unwrap_or("")
}

/// A tree with the given files (path, bytes).
fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    for (path, bytes) in files {
        let p = dir.path().join(path);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(p, bytes).expect("write");
    }
    dir
}

fn crontab(path: &str, bytes: &[u8], opts: &SourceReadOptions) -> batchguard::SourceRead {
    batchguard::read_source(SourceKind::Crontab, Path::new(path), bytes, opts)
}

fn commands(r: &batchguard::SourceRead) -> Vec<Vec<String>> {
    r.registrations.iter().map(|g| g.command.clone()).collect()
}

// ---- file names -------------------------------------------------------------------------

#[test]
fn busybox_star_cron_and_cron_d_files_are_crontabs() {
    for yes in [
        "crontab",
        "etc/crontab",
        "deploy/app.crontab",
        "docker/app.cron",
        "anywhere/deep/backup.cron",
        "etc/cron.d/billing",
        "etc/crontabs/root",
        "var/spool/cron/crontabs/www-data",
    ] {
        assert!(
            batchguard::is_source_name(Path::new(yes)),
            "{yes} is a crontab"
        );
    }
    for no in [
        "etc/cron.d/.placeholder",
        "etc/cron.d/billing~",
        "etc/cron.d/README",
        "etc/cron.d/billing.rpmsave",
        "etc/cron.d/billing.dpkg-old",
        "etc/cron.d/notes.md",
        "etc/crontabs/.keep",
        "etc/crontabs/README.md",
        "src/cron.rs",
        ".cron",
    ] {
        assert!(
            !batchguard::is_source_name(Path::new(no)),
            "{no} is no crontab"
        );
    }
}

#[test]
fn a_busybox_crontab_is_read_as_a_user_crontab() {
    let dir = tree(&[("docker/crontabs/root", b"*/5 * * * * /app/bin/sync --all\n")]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG607");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("`/app/bin/sync --all`"), "{v}");
}

#[test]
fn a_star_cron_file_is_read_as_a_cron_d_file() {
    let dir = tree(&[(
        "docker/app.cron",
        b"# copied to /etc/cron.d/app by the Dockerfile\n0 3 * * * www-data php /var/www/cron.php\n",
    )]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG607");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("`php /var/www/cron.php`"), "{v}");
    assert!(findings(&v, "BG001").is_empty(), "{v}");
}

// ---- the user column ------------------------------------------------------------------

#[test]
fn a_system_format_file_named_crontab_is_recognised() {
    // `COPY docker/crontab /etc/cron.d/app`: the user is not the command.
    let dir = tree(&[(
        "docker/crontab",
        b"SHELL=/bin/sh\n0 2 * * * root flock -n /tmp/report.lock /usr/local/bin/report\n*/10 * * * * www-data flock -n /tmp/q.lock php /var/www/artisan queue:work --once\n",
    )]);
    let v = lint_json(dir.path());
    assert!(findings(&v, "BG607").is_empty(), "{v}");
    let r = crontab(
        "docker/crontab",
        b"0 2 * * * root flock -n /l /usr/local/bin/report\n",
        &SourceReadOptions::default(),
    );
    assert_eq!(
        commands(&r),
        [["flock", "-n", "/l", "/usr/local/bin/report"]]
    );
    assert!(r.registrations[0].wrapped);
}

#[test]
fn recognition_decides_by_the_whole_file() {
    let opts = SourceReadOptions::default();
    // A header naming the user column makes `node` a user.
    let r = crontab(
        "crontab",
        b"# m h dom mon dow user command\n0 * * * * node /srv/app/jobs/settle.js\n",
        &opts,
    );
    assert_eq!(commands(&r), [["/srv/app/jobs/settle.js"]]);
    // Without any sign, `node` is the program.
    let r = crontab(
        "crontab",
        b"0 * * * * node /srv/app/jobs/settle.js\n",
        &opts,
    );
    assert_eq!(commands(&r), [["node", "/srv/app/jobs/settle.js"]]);
    // `root` on one line decides for the others.
    let r = crontab(
        "crontab",
        b"0 * * * * root /usr/bin/a\n5 * * * * node /srv/b.js\n",
        &opts,
    );
    assert_eq!(commands(&r), [vec!["/usr/bin/a"], vec!["/srv/b.js"]]);
    // A Laravel host crontab: `cd` is no user.
    let r = crontab(
        "crontab",
        b"* * * * * cd /var/www/shop && php artisan schedule:run >> /dev/null 2>&1\n",
        &opts,
    );
    assert_eq!(r.registrations[0].command[0], "cd");
    // One line whose sixth word is a path is a user crontab, whatever the others say.
    let r = crontab(
        "crontab",
        b"0 1 * * * root-report --daily\n0 2 * * * /usr/bin/cleanup\n",
        &opts,
    );
    assert_eq!(
        commands(&r),
        [vec!["root-report", "--daily"], vec!["/usr/bin/cleanup"]]
    );
    // A user word followed by an absolute path on every line.
    let r = crontab("crontab", b"@daily deploy /srv/bin/rotate\n", &opts);
    assert_eq!(commands(&r), [["/srv/bin/rotate"]]);
}

#[test]
fn a_declared_user_column_is_used() {
    let line = b"0 2 * * * deploy-user run-report --all\n";
    let r = crontab("ops/jobs", line, &SourceReadOptions::default());
    assert_eq!(commands(&r), [["deploy-user", "run-report", "--all"]]);
    let declared = SourceReadOptions {
        crontab_user_column: true,
        ..SourceReadOptions::default()
    };
    let r = crontab("ops/jobs", line, &declared);
    assert_eq!(commands(&r), [["run-report", "--all"]]);

    let dir = tree(&[
        (
            "batchguard.toml",
            b"[sources]\ncrontab_user_column = [\"ops/crontab\"]\n",
        ),
        ("ops/crontab", line),
    ]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG607");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("`run-report --all`"), "{v}");
}

// ---- bytes, CRLF, final newline (BG610) ------------------------------------------------

#[test]
fn a_latin1_byte_in_a_comment_drops_nothing() {
    let dir = tree(&[(
        "crontab",
        b"# r\xe9sum\xe9 nightly (latin-1)\n0 2 * * * /usr/local/bin/report\n",
    )]);
    let v = lint_json(dir.path());
    assert!(findings(&v, "BG609").is_empty(), "{v}");
    assert!(findings(&v, "BG610").is_empty(), "{v}");
    assert_eq!(findings(&v, "BG607").len(), 1, "{v}");
}

#[test]
fn a_non_utf8_byte_in_a_command_is_bg610_and_the_rest_is_read() {
    let dir = tree(&[(
        "crontab",
        b"0 2 * * * flock -n /l /usr/bin/echo caf\xe9\n0 3 * * * /usr/local/bin/other\n",
    )]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG610");
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["line"], 1, "{v}");
    assert_eq!(f[0]["column"], 40, "{v}");
    assert!(message(f[0]).contains("not UTF-8"), "{v}");
    assert_eq!(f[0]["severity"], "warning");
    // The other line is still read (and unguarded).
    let g = findings(&v, "BG607");
    assert_eq!(g.len(), 1, "{v}");
    assert!(message(g[0]).contains("other"), "{v}");
    assert!(findings(&v, "BG609").is_empty(), "{v}");
}

#[test]
fn crlf_is_one_bg610_per_file() {
    let dir = tree(&[(
        "crontab",
        b"MAILTO=ops@example.com\r\n0 2 * * * flock -n /l a\r\n0 3 * * * flock -n /l b\r\n",
    )]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG610");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("3 lines end in CRLF"), "{v}");
    assert_eq!(f[0]["line"], 1, "{v}");
    // The lines themselves are read without the carriage return.
    let r = crontab(
        "crontab",
        b"0 2 * * * flock -n /l a\r\n",
        &SourceReadOptions::default(),
    );
    assert_eq!(commands(&r), [["flock", "-n", "/l", "a"]]);
}

#[test]
fn a_last_job_line_without_newline_is_bg610() {
    let dir = tree(&[(
        "crontab",
        b"0 1 * * * flock -n /l a\n0 2 * * * flock -n /l b",
    )]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG610");
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["line"], 2, "{v}");
    assert!(message(f[0]).contains("never runs"), "{v}");
    // A last comment without newline is harmless.
    let r = crontab(
        "crontab",
        b"0 1 * * * flock -n /l a\n# end",
        &SourceReadOptions::default(),
    );
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

// ---- zones ----------------------------------------------------------------------------

fn only(r: &batchguard::SourceRead) -> &Registration {
    assert_eq!(r.registrations.len(), 1, "{:?}", r.problems);
    &r.registrations[0]
}

#[test]
fn crontab_timezone_is_the_assumed_zone() {
    let berlin = SourceReadOptions {
        crontab_timezone: Some("Europe/Berlin".into()),
        ..SourceReadOptions::default()
    };
    let r = crontab("crontab", b"0 2 * * * /bin/a\n", &berlin);
    let g = only(&r);
    assert_eq!(g.zone(), "Europe/Berlin");
    assert!(g.zone_assumed);
    let r = crontab(
        "crontab",
        b"0 2 * * * /bin/a\n",
        &SourceReadOptions::default(),
    );
    let g = only(&r);
    assert_eq!(g.zone(), "UTC");
    assert!(g.zone_assumed);
    let r = crontab(
        "crontab",
        b"CRON_TZ=Asia/Seoul\n0 2 * * * /bin/a\n",
        &berlin,
    );
    let g = only(&r);
    assert_eq!(g.zone(), "Asia/Seoul");
    assert!(!g.zone_assumed);
    // `TZ=` is the command's environment only (cronie, Debian cron): the zone stays assumed.
    let r = crontab("crontab", b"TZ=Asia/Seoul\n0 2 * * * /bin/a\n", &berlin);
    assert_eq!(only(&r).zone(), "Europe/Berlin");
}

const MANIFEST: &str = "version: 1\nservice: billing\njobs:\n  - name: report\n    schedule: \"0 2 * * *\"\n    timezone: UTC\n    command: [\"/usr/local/bin/report\"]\n";

#[test]
fn drift_against_an_assumed_zone_says_it_was_assumed() {
    let dir = tree(&[
        (
            "batchguard.toml",
            b"[sources]\ncrontab_timezone = \"Europe/Berlin\"\n",
        ),
        ("billing.batchguard.yaml", MANIFEST.as_bytes()),
        (
            "crontab",
            b"0 2 * * * batchguard run --job report -- /usr/local/bin/report\n",
        ),
    ]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG608");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("Europe/Berlin"), "{v}");
    assert!(message(f[0]).contains("crontab_timezone"), "{v}");
}

#[test]
fn a_bad_crontab_timezone_is_a_located_config_error() {
    let dir = tree(&[
        (
            "batchguard.toml",
            b"[sources]\ncrontab_timezone = \"Europe/Berlni\"\n",
        ),
        ("crontab", b"0 2 * * * /bin/a\n"),
    ]);
    let out = Command::cargo_bin("batchguard")
        .expect("binary builds")
        .env("NO_COLOR", "1")
        .args(["lint", "--now", NOW])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Europe/Berlni"), "{err}");
    assert!(err.contains("crontab_timezone"), "{err}");
    assert!(err.contains("batchguard.toml:2"), "{err}");
}

// ---- Kubernetes -----------------------------------------------------------------------

const CRONJOB: &str = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: settle\n  namespace: staging\nspec:\n  schedule: \"0 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: settle\n              workingDir: /srv/app\n              command: [node, jobs/settle.js]\n            - name: sidecar\n              workingDir: /other\n";

#[test]
fn namespace_and_working_dir_are_read_and_located() {
    let r = batchguard::read_source(
        SourceKind::Kubernetes,
        Path::new("k8s/cronjobs.yaml"),
        CRONJOB.as_bytes(),
        &SourceReadOptions::default(),
    );
    let g = only(&r);
    let ns = g.namespace.as_ref().expect("namespace");
    assert_eq!(ns.value, "staging");
    assert_eq!(&CRONJOB[ns.span.start..ns.span.end()], "staging");
    let wd = g.workdir.as_ref().expect("workingDir");
    assert_eq!(wd.value, "/srv/app");
    assert_eq!(&CRONJOB[wd.span.start..wd.span.end()], "/srv/app");
}

#[test]
fn a_helm_template_is_one_bg609_per_file() {
    let template = "{{- if .Values.cron.enabled }}\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {{ include \"app.fullname\" . }}-a\nspec:\n  schedule: {{ .Values.cron.a | quote }}\n{{- end }}\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {{ include \"app.fullname\" . }}-b\nspec:\n  schedule: {{ .Values.cron.b | quote }}\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: \"{{ .Release.Name }}-c\"\nspec:\n  schedule: \"{{ .Values.cron.c }}\"\n";
    let dir = tree(&[("chart/templates/cronjobs.yaml", template.as_bytes())]);
    let v = lint_json(dir.path());
    let f = findings(&v, "BG609");
    assert_eq!(f.len(), 1, "{v}");
    assert!(message(f[0]).contains("3 YAML documents"), "{v}");
    assert_eq!(f[0]["line"], 1, "{v}");
    // A quoted template value is no schedule to check.
    assert!(findings(&v, "BG101").is_empty(), "{v}");
}
