//! `action.yml` run as a GitHub runner runs a composite action: its `run:` steps with
//! `bash --noprofile --norc -eo pipefail`, `${{ … }}` expressions substituted (inputs,
//! `github.*`, `runner.*`, step outputs), `if:` conditions, `env:`, and the files and
//! variables a runner gives each step (GITHUB_WORKSPACE, GITHUB_ACTION_PATH,
//! GITHUB_OUTPUT, GITHUB_PATH, GITHUB_ENV, GITHUB_STEP_SUMMARY, RUNNER_TEMP…). The npm
//! install step installs `batchguard@VERSION` with the real npm from a registry served
//! here that holds the two tarballs `npm/pack.sh` makes of this build's binary: the
//! install a user's runner does, without the network. Checked: the `::error file=…,line=…`
//! annotations, the SARIF file (JSON, SARIF 2.1.0, the rule id) and `$GITHUB_OUTPUT`.
//!
//! The from-source step (`cargo install`, a whole release build) is not run here; its
//! condition is. Fails when node or npm is missing under `CI=true`; skips elsewhere.

use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn node_and_npm() -> bool {
    if have("node") && have("npm") {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "node and npm are required in CI (.ci/run installs Debian's nodejs and npm)"
    );
    eprintln!("skipped: node or npm is not installed");
    false
}

/// The two tarballs of this build (`npm/pack.sh` with this test's binary), once.
fn tarballs() -> &'static [PathBuf] {
    static ONCE: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let o = Command::new("bash")
            .arg("npm/pack.sh")
            .env("BATCHGUARD_PACK_BINARY", env!("CARGO_BIN_EXE_batchguard"))
            .current_dir(root())
            .output()
            .expect("npm/pack.sh runs");
        assert!(
            o.status.success(),
            "npm/pack.sh: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("action-npm");
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.ends_with(".tgz"))
            .map(|l| {
                let from = Path::new(l.trim());
                let to = keep.join(from.file_name().unwrap());
                std::fs::copy(from, &to).unwrap();
                to
            })
            .collect()
    })
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// An npm registry on loopback holding `tarballs`: a packument per package (its
/// package.json with `dist.tarball` and `dist.integrity`, as registry.npmjs.org serves
/// it) and the tarballs. It answers until the test process ends.
fn registry(tarballs: &[PathBuf]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut routes: BTreeMap<String, (&'static str, Vec<u8>)> = BTreeMap::new();
    for t in tarballs {
        let bytes = std::fs::read(t).unwrap();
        let o = Command::new("tar")
            .arg("xzOf")
            .arg(t)
            .arg("package/package.json")
            .output()
            .unwrap();
        let mut manifest: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let name = manifest["name"].as_str().unwrap().to_owned();
        let version = manifest["version"].as_str().unwrap().to_owned();
        let file = format!("/tarballs/{}", t.file_name().unwrap().to_string_lossy());
        manifest["_id"] = format!("{name}@{version}").into();
        manifest["dist"] = serde_json::json!({
            "tarball": format!("{base}{file}"),
            "integrity": format!("sha512-{}", base64(&Sha512::digest(&bytes))),
        });
        let packument = serde_json::json!({
            "name": name,
            "dist-tags": { "latest": version },
            "versions": { version: manifest },
        });
        let body = serde_json::to_vec(&packument).unwrap();
        routes.insert(
            format!("/{}", name.replace('/', "%2f")),
            ("application/json", body),
        );
        routes.insert(file, ("application/octet-stream", bytes));
    }
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let key = path.split('?').next().unwrap().to_ascii_lowercase();
            let (status, kind, body) = match routes.get(&key) {
                Some((kind, body)) => ("200 OK", *kind, body.as_slice()),
                None => ("404 Not Found", "application/json", &b"{}"[..]),
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(body);
        }
    });
    base
}

/// What one run of the action gave.
struct Ran {
    /// Per step (by name): exit code (None: skipped) and stdout + stderr.
    steps: Vec<(String, Option<i32>, String)>,
    outputs: BTreeMap<String, String>,
    /// The lint step's `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY` as written.
    lint_output_file: String,
    summary: String,
    /// The runner's temp dir (the SARIF file is in it), removed with the result.
    _runner: tempfile::TempDir,
}

impl Ran {
    fn step(&self, name: &str) -> (Option<i32>, &str) {
        let s = self
            .steps
            .iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("no step {name}"));
        (s.1, &s.2)
    }

    fn failed(&self) -> bool {
        self.steps.iter().any(|s| matches!(s.1, Some(c) if c != 0))
    }
}

/// The value of `${{ expr }}` in the contexts a composite action's steps see.
fn value(
    expr: &str,
    inputs: &BTreeMap<String, String>,
    ctx: &BTreeMap<&str, String>,
    steps: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let expr = expr.trim();
    if let Some(name) = expr.strip_prefix("inputs.") {
        return inputs
            .get(name)
            .unwrap_or_else(|| panic!("action.yml uses inputs.{name}, which it does not declare"))
            .clone();
    }
    if let Some(rest) = expr.strip_prefix("steps.") {
        let (id, out) = rest
            .split_once(".outputs.")
            .unwrap_or_else(|| panic!("unsupported expression {expr}"));
        return steps
            .get(id)
            .and_then(|o| o.get(out))
            .cloned()
            .unwrap_or_default();
    }
    ctx.get(expr)
        .unwrap_or_else(|| panic!("unsupported expression in action.yml: {expr}"))
        .clone()
}

/// `text` with every `${{ expr }}` replaced.
fn substitute(
    text: &str,
    inputs: &BTreeMap<String, String>,
    ctx: &BTreeMap<&str, String>,
    steps: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("}}").expect("an expression ends with }}") + i;
        out.push_str(&value(&rest[i + 3..end], inputs, ctx, steps));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A step's `if:` (the forms action.yml uses: `inputs.x == 'v'`, `!=`), with no
/// earlier failure (a step without `if` runs on success only, as on GitHub).
fn condition(
    cond: Option<&str>,
    failed: bool,
    inputs: &BTreeMap<String, String>,
    ctx: &BTreeMap<&str, String>,
    steps: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    if failed {
        return false;
    }
    let Some(cond) = cond else { return true };
    let cond = cond.trim();
    let cond = cond
        .strip_prefix("${{")
        .and_then(|c| c.strip_suffix("}}"))
        .unwrap_or(cond);
    for (op, eq) in [("!=", false), ("==", true)] {
        if let Some((l, r)) = cond.split_once(op) {
            let r = r.trim();
            let lit = r
                .strip_prefix('\'')
                .and_then(|r| r.strip_suffix('\''))
                .unwrap_or_else(|| panic!("unsupported condition {cond}"));
            return (value(l, inputs, ctx, steps) == lit) == eq;
        }
    }
    panic!("unsupported condition in action.yml: {cond}");
}

/// `name=value` lines and `name<<DELIM` blocks of a runner's command file.
fn command_file(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some((name, delim)) = l.split_once("<<") {
            let mut v = Vec::new();
            for l in lines.by_ref() {
                if l == delim {
                    break;
                }
                v.push(l);
            }
            out.insert(name.to_owned(), v.join("\n"));
        } else if let Some((name, v)) = l.split_once('=') {
            out.insert(name.to_owned(), v.to_owned());
        }
    }
    out
}

/// Runs `action.yml` with `with` (inputs) in `workspace`, npm reading `registry`.
fn run_action(workspace: &Path, with: &[(&str, &str)], registry: &str) -> Ran {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap())
            .expect("action.yml is YAML");
    assert_eq!(action["runs"]["using"], "composite");
    let mut inputs: BTreeMap<String, String> = action["inputs"]
        .as_object()
        .expect("inputs")
        .iter()
        .map(|(k, v)| {
            let d = match &v["default"] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            (k.clone(), d)
        })
        .collect();
    for (k, v) in with {
        assert!(inputs.contains_key(*k), "action.yml has no input {k}");
        inputs.insert((*k).to_owned(), (*v).to_owned());
    }
    let runner = tempfile::tempdir().unwrap();
    let runner_path = runner.path().to_owned();
    let temp = runner.path().join("temp");
    let files = runner.path().join("files");
    std::fs::create_dir_all(&temp).unwrap();
    std::fs::create_dir_all(&files).unwrap();
    let ctx: BTreeMap<&str, String> = [
        ("github.action_path", root().display().to_string()),
        ("github.workspace", workspace.display().to_string()),
        ("runner.temp", temp.display().to_string()),
        ("runner.os", "Linux".to_owned()),
    ]
    .into();
    let mut path = std::env::var("PATH").unwrap_or_default();
    let mut env_file_vars: BTreeMap<String, String> = BTreeMap::new();
    let mut outputs_by_step: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut ran = Ran {
        steps: Vec::new(),
        outputs: BTreeMap::new(),
        lint_output_file: String::new(),
        summary: String::new(),
        _runner: runner,
    };
    let github_path = files.join("path");
    let github_env = files.join("env");
    let summary = files.join("summary");
    for (i, step) in action["runs"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .enumerate()
    {
        let name = step["name"].as_str().expect("a step name").to_owned();
        if !condition(
            step["if"].as_str(),
            ran.failed(),
            &inputs,
            &ctx,
            &outputs_by_step,
        ) {
            ran.steps.push((name, None, String::new()));
            continue;
        }
        assert_eq!(
            step["shell"], "bash",
            "step {name}: a composite run step names its shell"
        );
        let script = substitute(
            step["run"].as_str().expect("a run step"),
            &inputs,
            &ctx,
            &outputs_by_step,
        );
        let script_file = files.join(format!("step{i}.sh"));
        std::fs::write(&script_file, script).unwrap();
        let output = files.join(format!("output{i}"));
        std::fs::write(&output, "").unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script_file)
            .current_dir(workspace)
            .env_remove("BATCHGUARD_BINARY")
            .env("PATH", &path)
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", workspace)
            .env("GITHUB_ACTION_PATH", root())
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_PATH", &github_path)
            .env("GITHUB_ENV", &github_env)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("RUNNER_TEMP", &temp)
            .env("RUNNER_OS", "Linux")
            // The npm configuration a runner with a private registry has.
            .env("npm_config_registry", registry)
            .env("npm_config_cache", runner_path.join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .envs(&env_file_vars);
        if let Some(env) = step["env"].as_object() {
            for (k, v) in env {
                let v = v.as_str().expect("an env value");
                cmd.env(k, substitute(v, &inputs, &ctx, &outputs_by_step));
            }
        }
        let o = cmd.output().expect("bash runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if let Some(id) = step["id"].as_str() {
            outputs_by_step.insert(id.to_owned(), command_file(&output));
            if id == "lint" {
                ran.lint_output_file = std::fs::read_to_string(&output).unwrap();
            }
        }
        // GITHUB_PATH lines go before PATH for the steps after; GITHUB_ENV sets variables.
        for dir in std::fs::read_to_string(&github_path)
            .unwrap_or_default()
            .lines()
        {
            if !path.split(':').any(|p| p == dir) {
                path = format!("{dir}:{path}");
            }
        }
        env_file_vars.extend(command_file(&github_env));
        ran.steps.push((name, o.status.code(), text));
    }
    for (k, v) in action["outputs"].as_object().expect("outputs") {
        let expr = v["value"].as_str().expect("an output value");
        ran.outputs
            .insert(k.clone(), substitute(expr, &inputs, &ctx, &outputs_by_step));
    }
    ran.summary = std::fs::read_to_string(&summary).unwrap_or_default();
    ran
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("fixtures/rules").join(name)).unwrap()
}

/// A workspace with `files` (path, text).
fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (p, text) in files {
        let p = d.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

fn sarif(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("the SARIF file is JSON");
    assert_eq!(v["version"], "2.1.0", "{text}");
    assert!(
        v["$schema"].as_str().unwrap_or("").contains("sarif"),
        "{text}"
    );
    v
}

fn rule_ids(v: &serde_json::Value) -> Vec<String> {
    v["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_action_installs_from_npm_annotates_and_writes_sarif() {
    if !node_and_npm() {
        return;
    }
    let registry = registry(tarballs());
    // Another job and command than the bad one's: not one job registered twice (BG601).
    let good = fixture("BG202/good.batchguard.yaml").replace("settle", "reconcile");
    let bad = fixture("BG202/bad.batchguard.yaml");
    let ws = workspace(&[
        ("deploy/billing.batchguard.yaml", &good),
        ("deploy/settle.batchguard.yaml", &bad),
        ("README.md", "# billing\n"),
    ]);
    let ran = run_action(ws.path(), &[("paths", "deploy")], &registry);

    let (code, log) = ran.step("Install batchguard (npm)");
    assert_eq!(code, Some(0), "the npm install:\n{log}");
    assert_eq!(ran.step("Install batchguard (from source)").0, None);
    let (code, log) = ran.step("batchguard lint");
    assert_eq!(code, Some(1), "an error fails the step:\n{log}");
    assert!(
        log.contains("batchguard 0.1.0"),
        "the npm package's binary ran:\n{log}"
    );
    let annotation = log
        .lines()
        .find(|l| l.starts_with("::error file=deploy/settle.batchguard.yaml,line=15,"))
        .unwrap_or_else(|| panic!("an annotation on the ttl line:\n{log}"));
    assert!(
        annotation.contains("title=BG202 lock-ttl-too-short::"),
        "{annotation}"
    );
    assert!(
        !log.contains("file=deploy/billing.batchguard.yaml"),
        "the good manifest has no finding:\n{log}"
    );

    let path = ran.outputs["sarif-file"].clone();
    assert!(
        path.ends_with("/temp/batchguard.sarif"),
        "the default is $RUNNER_TEMP/batchguard.sarif: {path}"
    );
    assert_eq!(ran.outputs["exit-code"], "1");
    assert!(
        ran.lint_output_file
            .lines()
            .any(|l| l == format!("sarif-file={path}")),
        "$GITHUB_OUTPUT: {}",
        ran.lint_output_file
    );
    assert!(
        ran.lint_output_file.lines().any(|l| l == "exit-code=1"),
        "{}",
        ran.lint_output_file
    );
    let v = sarif(&path);
    assert_eq!(rule_ids(&v), ["BG202"], "{v}");
    let loc = &v["runs"][0]["results"][0]["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"], "deploy/settle.batchguard.yaml",
        "{v}"
    );
    assert_eq!(loc["region"]["startLine"], 15, "{v}");
    assert!(
        ran.summary.contains("1 errors, 0 warnings"),
        "{}",
        ran.summary
    );

    // A clean tree: the step passes, the SARIF log has no result.
    let clean = workspace(&[("deploy/billing.batchguard.yaml", &good)]);
    let ran = run_action(clean.path(), &[("paths", "deploy")], &registry);
    let (code, log) = ran.step("batchguard lint");
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("::error"), "{log}");
    assert_eq!(ran.outputs["exit-code"], "0");
    assert!(rule_ids(&sarif(&ran.outputs["sarif-file"])).is_empty());
}

/// `config` and `fail-on` reach lint: BG202 made a warning passes by default and fails
/// with `fail-on: warning`; `sarif-file` puts the log where it is asked; a bad config is
/// exit 2, said as an error annotation.
#[test]
fn the_actions_config_fail_on_and_sarif_file_inputs() {
    if !node_and_npm() {
        return;
    }
    let registry = registry(tarballs());
    let bad = fixture("BG202/bad.batchguard.yaml");
    let ws = workspace(&[
        ("jobs/settle.batchguard.yaml", &bad),
        ("ci/batchguard.toml", "[rules]\nBG202 = \"warning\"\n"),
        ("ci/broken.toml", "[rules\n"),
    ]);
    let with = |fail_on: &'static str| {
        vec![
            ("paths", "jobs/settle.batchguard.yaml"),
            ("config", "ci/batchguard.toml"),
            ("fail-on", fail_on),
            ("sarif-file", "reports/lint.sarif"),
        ]
    };
    let ran = run_action(ws.path(), &with("error"), &registry);
    let (code, log) = ran.step("batchguard lint");
    assert_eq!(code, Some(0), "a warning passes with fail-on error:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("::warning file=jobs/settle.batchguard.yaml,line=15,")),
        "{log}"
    );
    assert_eq!(ran.outputs["sarif-file"], "reports/lint.sarif");
    let v = sarif(&ws.path().join("reports/lint.sarif").display().to_string());
    assert_eq!(rule_ids(&v), ["BG202"]);
    assert_eq!(v["runs"][0]["results"][0]["level"], "warning", "{v}");

    let ran = run_action(ws.path(), &with("warning"), &registry);
    assert_eq!(ran.step("batchguard lint").0, Some(1));
    assert_eq!(ran.outputs["exit-code"], "1");

    let ran = run_action(
        ws.path(),
        &[("paths", "jobs"), ("config", "ci/broken.toml")],
        &registry,
    );
    let (code, log) = ran.step("batchguard lint");
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("::error title=batchguard lint::lint could not run (exit 2)"),
        "{log}"
    );
    assert!(
        log.contains("ci/broken.toml"),
        "the config's location:\n{log}"
    );
}
