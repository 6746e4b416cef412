//! What lint reads and shows (docs/lint-inputs.md): files named on the command line that
//! are no source, secrets masked with one width in every output, and the summary's job
//! count. The fixture trees are in `fixtures/lint-inputs/`.

mod common;

use common::{NOW, bg, write};
use std::path::Path;

const EXPLICIT: &str = "fixtures/lint-inputs/explicit";

/// Exit code and stdout of `lint ARGS --now NOW`.
fn lint(args: &[&str]) -> (i32, String) {
    let out = bg()
        .arg("lint")
        .args(args)
        .args(["--now", NOW])
        .output()
        .expect("lint runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn codes(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).expect("json");
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

fn explicit(name: &str) -> String {
    format!("{EXPLICIT}/{name}")
}

/// A file named on the command line that is not text fails the run with BG001, whatever
/// its name: a pre-commit step that names the wrong file must not pass with "0 files".
#[test]
fn a_named_file_that_is_not_text_fails() {
    for name in ["logo.png", "binary.yaml", "latin1.yml"] {
        let (code, json) = lint(&["--format", "json", &explicit(name)]);
        assert_eq!(code, 1, "{name}: {json}");
        assert_eq!(codes(&json), ["BG001"], "{name}: {json}");
    }
    let (_, pretty) = lint(&[&explicit("logo.png")]);
    assert!(
        pretty.contains("named on the command line but not text (byte 8 is NUL)"),
        "{pretty}"
    );
    assert!(
        !pretty.contains("PNG"),
        "nothing of the file is shown: {pretty}"
    );
}

/// Nearly a manifest (a misspelt `version`, `jobs` misspelt beside `version`) named on the
/// command line is linted as one: the typo is BG002 with its suggestion, the missing key
/// BG003, and the run fails.
#[test]
fn a_named_near_manifest_is_linted_as_one() {
    let (code, json) = lint(&["--format", "json", &explicit("billing.yaml")]);
    assert_eq!(code, 1, "{json}");
    let found = codes(&json);
    assert!(found.contains(&"BG002".to_owned()), "{json}");
    assert!(json.contains("unknown field `verison`"), "{json}");
    assert!(json.contains("did you mean `version`?"), "{json}");
    let (code, json) = lint(&["--format", "json", &explicit("reports.yaml")]);
    assert_eq!(code, 1, "{json}");
    assert!(json.contains("did you mean `jobs`?"), "{json}");
}

/// A file plainly of another kind, as pre-commit passes every changed YAML file, is listed
/// as not read with the reason, and the run passes.
#[test]
fn a_named_file_of_another_kind_is_not_read() {
    for (name, reason) in [
        (
            "deployment.yaml",
            "a Kubernetes Deployment is no batchguard source",
        ),
        (
            "kustomization.yaml",
            "a kustomization is no batchguard source",
        ),
        ("ci.yml", "neither a batchguard manifest"),
        ("compose.yaml", "neither a batchguard manifest"),
    ] {
        let (code, out) = lint(&["--list-files", &explicit(name)]);
        assert_eq!(code, 0, "{name}: {out}");
        assert!(out.contains("not read"), "{name}: {out}");
        assert!(out.contains(reason), "{name}: {out}");
        assert!(out.contains("0 files"), "{name}: {out}");
    }
}

/// Walking a folder, a near manifest is not linted (only a name or `version` + `jobs`
/// makes a manifest there), but `--list-files` says what it nearly is.
#[test]
fn walking_lists_a_near_manifest_with_its_typo() {
    let (_, out) = lint(&["--list-files", EXPLICIT]);
    assert!(
        out.contains("nearly a batchguard manifest (`verison` for `version`)"),
        "{out}"
    );
    assert!(
        out.contains("nearly a batchguard manifest (`jbos` for `jobs`)"),
        "{out}"
    );
}

/// Every adversarial named file at once, as a pre-commit hook names them: one snapshot.
#[test]
fn named_files_snapshot() {
    let mut names: Vec<String> = std::fs::read_dir(EXPLICIT)
        .expect("fixtures")
        .filter_map(Result::ok)
        .map(|e| e.path().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut args: Vec<&str> = vec!["--list-files"];
    args.extend(names.iter().map(String::as_str));
    let (code, out) = lint(&args);
    assert_eq!(code, 1);
    insta::assert_snapshot!("lint_inputs_named_files", out);
}

/// A tree whose secrets have `len` characters.
fn secret_tree(dir: &Path, len: usize) {
    let secret: String = "Xq9vLm2Tz".chars().cycle().take(len).collect();
    let manifest = std::fs::read_to_string("fixtures/lint-inputs/masks/cronjob.yaml")
        .expect("fixture")
        .replace(":pw@", &format!(":{secret}@"))
        .replace(
            "sk_live_4eC39HqLyjWDarjtT1zdp7dcXq9vLm2Tz0",
            &format!("sk_live_{secret}"),
        );
    write(dir, "cronjob.yaml", manifest);
}

/// No output tells a secret's length: two trees that differ only in the length of their
/// secrets give the same pretty, json, sarif and github output.
#[test]
fn masks_have_one_width_in_every_output() {
    let (short, long) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    secret_tree(short.path(), 2);
    secret_tree(long.path(), 41);
    for format in ["pretty", "json", "sarif", "github"] {
        let run = |dir: &Path| {
            let out = bg()
                .current_dir(dir)
                .args(["lint", ".", "--format", format, "--now", NOW])
                .output()
                .expect("lint runs");
            assert_eq!(out.status.code(), Some(1), "{format}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let (a, b) = (run(short.path()), run(long.path()));
        assert!(a.contains("BG801"), "{format}: {a}");
        assert!(!b.contains("Xq9vLm2Tz"), "{format} leaks the secret: {b}");
        assert_eq!(a, b, "{format} output depends on the secret's length");
    }
}

#[test]
fn masks_snapshot() {
    let (code, out) = lint(&["fixtures/lint-inputs/masks"]);
    assert_eq!(code, 1);
    assert!(out.contains("postgres://billing:********@db"), "{out}");
    assert!(out.contains("value: \"********\""), "{out}");
    insta::assert_snapshot!("lint_inputs_masks", out);
    let (_, github) = lint(&["--format", "github", "fixtures/lint-inputs/masks"]);
    // The secret's span is its first character: col 76 to 77 on line 18.
    assert!(
        github.contains("line=18,col=76,endLine=18,endColumn=77,"),
        "{github}"
    );
}

/// 20 manifest jobs that share one command are 20 jobs (BG601 groups them, the count does
/// not); two crontab lines that duplicate each other and no manifest job are one job.
#[test]
fn the_job_count_counts_manifest_jobs() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut manifest = String::from("version: 1\nservice: tenants\njobs:\n");
    for i in 0..20 {
        manifest.push_str(&format!(
            "  - name: settle-{i:02}\n    schedule: \"0 * * * *\"\n    \
             expected_duration: 5m\n    command: [\"node\", \"jobs/settle.js\"]\n"
        ));
    }
    write(dir.path(), "tenants.batchguard.yaml", manifest);
    write(
        dir.path(),
        "crontab",
        "0 3 * * * /usr/local/bin/backup.sh\n0 3 * * * /usr/local/bin/backup.sh\n",
    );
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", ".", "--format", "json", "--now", NOW])
        .output()
        .expect("lint runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["summary"]["jobs"], 21, "{v:#}");
    assert!(
        v["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["code"] == "BG601"),
        "the shared command is still a duplicate: {v:#}"
    );
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", ".", "--now", NOW])
        .output()
        .expect("lint runs");
    let pretty = String::from_utf8_lossy(&out.stdout);
    assert!(pretty.contains(", 21 jobs, 2 registrations:"), "{pretty}");
}
