//! `.pre-commit-hooks.yaml` with the real pre-commit (from PyPI): `pre-commit try-repo`
//! runs the published hook definition, copied byte for byte into a hook repository of its
//! own, on fixture repositories made here. A clean tree passes; a tree with a lint error
//! fails with the finding in pre-commit's output; a commit that touches no file lint reads
//! skips the hook. The hook run is `batchguard-lint-system` with this build's binary on
//! PATH (`batchguard-lint` builds from source with cargo, a whole release build), and a
//! test checks the two hooks differ only in `language`.
//!
//! pre-commit: the one on PATH, else installed into a venv under `CARGO_TARGET_TMPDIR`
//! (kept for the next run). Without python3 or PyPI the tests fail under `CI=true` and
//! skip with a message elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn works(cmd: &mut Command) -> bool {
    cmd.output().is_ok_and(|o| o.status.success())
}

fn skip_or_fail(why: &str) -> Option<PathBuf> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "pre-commit is required in CI: {why}"
    );
    eprintln!("skipped: {why}");
    None
}

/// The pre-commit executable: on PATH, else pip-installed into a venv of the target dir
/// (once: the tests of this file share it).
fn pre_commit() -> Option<PathBuf> {
    static ONCE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ONCE.get_or_init(install).clone()
}

fn install() -> Option<PathBuf> {
    if works(Command::new("pre-commit").arg("--version")) {
        return Some("pre-commit".into());
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pre-commit-venv");
    let exe = venv.join("bin/pre-commit");
    if works(Command::new(&exe).arg("--version")) {
        return Some(exe);
    }
    if !works(Command::new("python3").arg("-m").arg("venv").arg(&venv)) {
        return skip_or_fail("python3 -m venv failed (install python3 and python3-venv)");
    }
    let pip = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "pre-commit",
        ])
        .output();
    match pip {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => skip_or_fail(&format!(
            "pip install pre-commit failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => skip_or_fail(&format!("pip: {e}")),
    }
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args([
            "-c",
            "user.name=batchguard tests",
            "-c",
            "user.email=tests@batchguard.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A git repository in a temp dir with `files` (path, text) added.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    git(d.path(), &["init", "-q"]);
    for (path, text) in files {
        let p = d.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(d.path(), &["add", "-A"]);
    git(d.path(), &["commit", "-q", "-m", "fixture"]);
    d
}

/// What the tests share: pre-commit, a hook repository holding this repository's
/// `.pre-commit-hooks.yaml` as committed, a PATH with this build's `batchguard` first,
/// and pre-commit's own cache in a temp dir.
struct Harness {
    pre_commit: PathBuf,
    hooks: tempfile::TempDir,
    bin: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Harness {
    fn new() -> Option<Harness> {
        let pre_commit = pre_commit()?;
        let published = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml"))
            .expect(".pre-commit-hooks.yaml at the repository root");
        let hooks = repo(&[(".pre-commit-hooks.yaml", &published)]);
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_batchguard"),
            bin.path().join("batchguard"),
        )
        .unwrap();
        Some(Harness {
            pre_commit,
            hooks,
            bin,
            home: tempfile::tempdir().unwrap(),
        })
    }

    /// `pre-commit try-repo HOOKS batchguard-lint-system ARGS` in `fixture`.
    fn try_repo(&self, fixture: &Path, args: &[&str]) -> (Option<i32>, String) {
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let o: Output = Command::new(&self.pre_commit)
            .arg("try-repo")
            .arg(self.hooks.path())
            .arg("batchguard-lint-system")
            .args(args)
            .current_dir(fixture)
            .env("PATH", path)
            .env("PRE_COMMIT_HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env_remove("PRE_COMMIT_COLOR")
            .output()
            .expect("pre-commit runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    }
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("fixtures/rules").join(name)).unwrap()
}

#[test]
fn pre_commit_passes_a_clean_tree_and_fails_one_with_a_lint_error() {
    let Some(h) = Harness::new() else {
        return;
    };
    // Another job and command than the bad one's: not one job registered twice (BG601).
    let good = fixture("BG202/good.batchguard.yaml").replace("settle", "reconcile");
    let clean = repo(&[
        ("deploy/billing.batchguard.yaml", &good),
        ("README.md", "# billing\n"),
        ("src/main.py", "print('hello')\n"),
    ]);
    let (code, out) = h.try_repo(clean.path(), &["--all-files"]);
    assert_eq!(code, Some(0), "a clean tree passes:\n{out}");
    assert!(
        out.contains("batchguard lint") && out.contains("Passed"),
        "{out}"
    );

    let bad = fixture("BG202/bad.batchguard.yaml");
    let broken = repo(&[
        ("deploy/billing.batchguard.yaml", &good),
        ("deploy/settle.batchguard.yaml", &bad),
        ("README.md", "# billing\n"),
    ]);
    let (code, out) = h.try_repo(broken.path(), &["--all-files"]);
    assert_eq!(code, Some(1), "a lint error fails the hook:\n{out}");
    assert!(out.contains("Failed"), "{out}");
    assert!(
        out.contains("BG202"),
        "the finding is in the output:\n{out}"
    );
    assert!(
        out.contains("deploy/settle.batchguard.yaml"),
        "with its file:\n{out}"
    );

    // pass_filenames: only the files named are linted; a commit of other files skips.
    let (code, out) = h.try_repo(
        broken.path(),
        &["--files", "deploy/billing.batchguard.yaml"],
    );
    assert_eq!(code, Some(0), "the good manifest alone passes:\n{out}");
    let (code, out) = h.try_repo(broken.path(), &["--files", "README.md"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no files to check"), "{out}");
}

/// The two hooks are one definition but for `language`, so the one the test runs stands
/// for the one that builds from source; pre-commit accepts the file as a hooks manifest.
#[test]
fn the_two_hooks_differ_only_in_language() {
    let text = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml")).unwrap();
    let hooks: Vec<serde_json::Value> = serde_saphyr::from_str(&text).expect("the hooks are YAML");
    let by_id = |id: &str| {
        hooks
            .iter()
            .find(|h| h["id"] == id)
            .unwrap_or_else(|| panic!("hook {id}"))
            .as_object()
            .unwrap()
            .clone()
    };
    let (mut rust, mut system) = (by_id("batchguard-lint"), by_id("batchguard-lint-system"));
    assert_eq!(rust["language"], "rust");
    assert_eq!(system["language"], "system");
    assert_eq!(rust["pass_filenames"], true);
    for h in [&mut rust, &mut system] {
        h.remove("language");
        h.remove("id");
        h.remove("description");
    }
    assert_eq!(rust, system);
    let Some(pre_commit) = pre_commit() else {
        return;
    };
    let o = Command::new(pre_commit)
        .arg("validate-manifest")
        .arg(root().join(".pre-commit-hooks.yaml"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
