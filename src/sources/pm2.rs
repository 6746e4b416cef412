//! PM2 ecosystem files (`ecosystem.config.{js,cjs,json,yaml,yml}`): every app with a
//! `cron_restart` (or whose script is `batchguard run … --job`), its `instances`,
//! `exec_mode`, `script`, `args` and `interpreter`.
//!
//! ## Instances
//! PM2 reads `instances: "max"` (or `0`) as "one per CPU core" and `-N` as "cores minus N".
//! Lint must give the same verdict on a laptop and in CI, so batchguard assumes a fixed
//! **4 cores**: `max`/`0` = 4, `-1` = 3, never below 1. Any of these is more than one
//! process, which is what the concurrency rules (BG602, BG606) care about.
//!
//! ## Evaluating `.js` / `.cjs`
//! A JavaScript ecosystem file is a program. batchguard runs it with `node` only when node
//! is on PATH, through a small wrapper (`require(file)`, then `JSON.stringify(module.exports)`
//! after a sentinel line, `console.*` sent to stderr), with:
//! - cwd = the file's folder, stdin closed;
//! - a 5 s limit: the process is killed after that (BG609 "timed out");
//! - stdout capped at 4 MiB (BG609 "printed more than …"), stderr at 16 KiB;
//! - Node's permission model (`--experimental-permission` on Node 20/21, `--permission` on
//!   22+): no file writes, file reads only under the file's folder, no child processes, no
//!   worker threads, no native addons. **Not restricted**: network access (Node's
//!   permission model has no network switch before Node 25) and environment variables,
//!   which ecosystem files commonly read. Older Node versions run without the model.
//!
//! When node is absent, times out, fails, or prints too much, the file is a BG609 finding
//! with the reason; it is never silently skipped, since a duplicate may hide in it.

use super::{At, Problem, Read, Registration, SourceKind, Span, Tie, get, str_at};
use crate::manifest::yaml::{self, Node, Value};
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Cores assumed for `instances: max` (see the module docs).
pub const ASSUMED_CORES: u64 = 4;
pub const NODE_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_OUTPUT: usize = 4 * 1024 * 1024;
const MAX_STDERR: usize = 16 * 1024;
const SENTINEL: &str = "\u{1}batchguard-ecosystem\u{1}";

pub fn is_ecosystem_name(name: &str) -> bool {
    name.starts_with("ecosystem")
        && [
            ".config.js",
            ".config.cjs",
            ".config.json",
            ".config.yaml",
            ".config.yml",
        ]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn is_js(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("js" | "cjs")
    )
}

fn not_read(message: String, help: &str) -> Read {
    Read {
        problems: vec![Problem {
            code: "BG609",
            span: Span::new(0, 0),
            message,
            help: help.to_owned(),
        }],
        ..Read::default()
    }
}

pub fn read(path: &Path, text: &str) -> Read {
    if is_js(path) {
        let json = match evaluate(path) {
            Ok(json) => json,
            Err(why) => {
                return not_read(
                    format!("PM2 ecosystem file not read: {why}"),
                    "install node (20+) so batchguard can evaluate the file, fix the error, or \
                     write the apps as ecosystem.config.json; a duplicate may hide in it",
                );
            }
        };
        return match yaml::parse(&json) {
            Ok(root) => apps(&root, Some(text)),
            Err(e) => not_read(
                format!("PM2 ecosystem file not read: its exports are not JSON ({e})"),
                "export a plain object: module.exports = { apps: [...] }",
            ),
        };
    }
    match yaml::parse(text) {
        Ok(root) => {
            let mut read = apps(&root, None);
            read.roots.push(root);
            read
        }
        Err(err) => {
            let (code, message, help) = yaml::classify_error(&err);
            Read {
                problems: vec![Problem {
                    code,
                    span: yaml::error_span(&err, text),
                    message,
                    help: help.to_owned(),
                }],
                ..Read::default()
            }
        }
    }
}

/// Locates values: in the file itself, or (for an evaluated `.js` file, whose values come
/// from JSON) by finding the value's text in the source after the app's name.
struct Locate<'a> {
    js: Option<&'a str>,
    anchor: Span,
}

impl Locate<'_> {
    fn span(&self, node: &Node) -> Span {
        let Some(text) = self.js else {
            return node.span;
        };
        let needle = match &node.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return self.anchor,
        };
        super::find_token(text, &needle, self.anchor.start).unwrap_or(self.anchor)
    }
}

fn apps(root: &Node, js: Option<&str>) -> Read {
    let mut out = Read::default();
    let list = match &root.value {
        Value::Seq(items) => Some(items),
        _ => get(root, "apps").and_then(|a| match &a.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }),
    };
    let Some(list) = list else {
        out.problems.push(Problem {
            code: "BG609",
            span: js.map_or(root.span, |_| Span::new(0, 0)),
            message: "PM2 ecosystem file has no `apps` list".into(),
            help: "export { apps: [...] } as PM2 expects".into(),
        });
        return out;
    };
    let mut search_from = 0;
    for (i, app) in list.iter().enumerate() {
        let name = get(app, "name").and_then(str_at);
        let anchor = match (js, &name) {
            (Some(text), Some(n)) => super::find_token(text, &n.value, search_from)
                .or_else(|| super::find_token(text, &n.value, 0))
                .unwrap_or(Span::new(0, 0)),
            (Some(_), None) => Span::new(0, 0),
            (None, Some(n)) => n.span,
            (None, None) => app.span,
        };
        if js.is_some() && anchor.end() > search_from {
            search_from = anchor.end();
        }
        let loc = Locate { js, anchor };
        if let Some(r) = app_registration(app, i, name.as_ref(), &loc) {
            out.registrations.push(r);
        }
    }
    out
}

fn app_registration(
    app: &Node,
    i: usize,
    name: Option<&At<String>>,
    loc: &Locate,
) -> Option<Registration> {
    let script = get(app, "script").and_then(str_at);
    let mut command = Vec::new();
    let interpreter = get(app, "interpreter").and_then(str_at);
    if let Some(s) = &script {
        let js_script = [".js", ".cjs", ".mjs", ".ts"]
            .iter()
            .any(|e| s.value.ends_with(e));
        match &interpreter {
            Some(int) if int.value != "none" => command.push(int.value.clone()),
            None if js_script => command.push("node".into()),
            _ => {}
        }
        command.push(s.value.clone());
    }
    if let Some(args) = get(app, "args") {
        command.extend(super::words(args));
    }
    let command_span = get(app, "script").map_or(loc.anchor, |n| loc.span(n));
    let tie: Option<Tie> = super::batchguard_tie(&command, command_span);
    let cron = get(app, "cron_restart").and_then(|n| {
        str_at(n).map(|s| At {
            value: s.value,
            span: loc.span(n),
        })
    });
    if cron.is_none() && tie.is_none() {
        return None;
    }
    let (instances, instances_span) = match get(app, "instances") {
        Some(n) => (instances_of(&n.value), Some(loc.span(n))),
        None => (1, None),
    };
    let cluster = get(app, "exec_mode")
        .and_then(str_at)
        .is_some_and(|m| m.value.starts_with("cluster"));
    Some(Registration {
        kind: SourceKind::Pm2,
        file: 0,
        span: name.map_or(loc.anchor, |n| {
            if loc.js.is_some() { loc.anchor } else { n.span }
        }),
        label: format!(
            "PM2 app `{}`",
            name.map_or_else(|| format!("apps[{i}]"), |n| n.value.clone())
        ),
        schedule: cron,
        timezone: None,
        dialect: SourceKind::Pm2.dialect(),
        wrapped: super::is_wrapped(&command),
        command,
        command_span,
        instances,
        instances_span,
        cluster,
        kube: None,
        tie,
        ..Registration::default()
    })
}

/// PM2's `instances`, with [`ASSUMED_CORES`] standing for the machine's cores.
pub fn instances_of(v: &Value) -> u64 {
    let n: i128 = match v {
        Value::Int(i) => *i,
        Value::Str(s) if s == "max" => 0,
        Value::Str(s) => s.trim().parse().unwrap_or(1),
        Value::Float(f) if f.is_finite() => *f as i128,
        _ => 1,
    };
    let cores = i128::from(ASSUMED_CORES);
    let count = match n {
        0 => cores,
        n if n < 0 => cores + n,
        n => n,
    };
    u64::try_from(count.max(1)).unwrap_or(u64::MAX)
}

/// The permission flags of the node on PATH, by its major version; Err when node is absent.
fn permission_flags(dir: &str) -> Result<Vec<String>, String> {
    static MAJOR: OnceLock<Result<u32, String>> = OnceLock::new();
    let major = MAJOR.get_or_init(|| {
        let out = Command::new("node")
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => "node is not on PATH".to_owned(),
                _ => format!("node could not be started: {e}"),
            })?;
        let v = String::from_utf8_lossy(&out.stdout);
        Ok(v.trim()
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0))
    });
    let major = major.clone()?;
    Ok(match major {
        20 | 21 => vec![
            "--experimental-permission".into(),
            format!("--allow-fs-read={dir}/*"),
        ],
        m if m >= 22 => vec!["--permission".into(), format!("--allow-fs-read={dir}")],
        _ => Vec::new(),
    })
}

/// Runs the ecosystem file under node (see the module docs) and returns its exports as JSON.
fn evaluate(path: &Path) -> Result<String, String> {
    let abs = std::path::absolute(path).map_err(|e| format!("cannot resolve the path: {e}"))?;
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let dir_s = dir.to_string_lossy().into_owned();
    let mut cmd = Command::new("node");
    cmd.arg("--no-warnings")
        .args(permission_flags(&dir_s)?)
        .arg("-e")
        .arg(wrapper())
        .arg(&abs)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "node is not on PATH".to_owned(),
        _ => format!("node could not be started: {e}"),
    })?;
    let capped = |pipe: Option<Box<dyn std::io::Read + Send>>, cap: usize| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(cap as u64 + 1).read_to_end(&mut buf);
            }
            buf // dropping the pipe here makes further writes fail (EPIPE)
        })
    };
    let out = capped(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        MAX_OUTPUT + SENTINEL.len() + 1,
    );
    let err = capped(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        MAX_STDERR,
    );
    use wait_timeout::ChildExt;
    let status = match child.wait_timeout(NODE_TIMEOUT) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "evaluating it with node timed out after {} s (killed)",
                NODE_TIMEOUT.as_secs()
            ));
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("waiting for node failed: {e}"));
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if stdout.len() > MAX_OUTPUT {
        return Err(format!(
            "evaluating it with node printed more than {} MiB",
            MAX_OUTPUT / 1024 / 1024
        ));
    }
    let stdout = String::from_utf8_lossy(&stdout);
    if !status.success() {
        let why = String::from_utf8_lossy(&stderr);
        let line = why
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .find(|l| l.contains("Error") || l.starts_with("batchguard:"))
            .or_else(|| why.lines().map(str::trim).find(|l| !l.is_empty()))
            .unwrap_or("no message");
        return Err(format!(
            "node exited with {}: {}",
            status
                .code()
                .map_or_else(|| "a signal".to_owned(), |c| format!("status {c}")),
            line.chars().take(300).collect::<String>()
        ));
    }
    match stdout.rfind(SENTINEL) {
        Some(i) => Ok(stdout[i + SENTINEL.len()..].to_owned()),
        None => Err("node printed no exports".into()),
    }
}

/// The script node runs: CommonJS `require`, or `import()` for an ES module file
/// (`"type": "module"` packages), then the exports as JSON after the sentinel.
fn wrapper() -> String {
    format!(
        r#"const toErr = (...a) => process.stderr.write(a.join(" ") + "\n");
for (const k of ["log", "info", "debug", "warn", "dir", "table"]) console[k] = toErr;
const fail = (what, e) => {{ process.stderr.write("batchguard: " + what + (e && e.stack || e) + "\n"); process.exit(3); }};
const file = process.argv[1];
(async () => {{
  let m;
  try {{ m = require(file); }} catch (e) {{
    if (!e || e.code !== "ERR_REQUIRE_ESM") throw e;
    m = (await import(require("url").pathToFileURL(file).href)).default;
  }}
  // An ES module loaded by require (Node 20.19+) arrives as its namespace.
  if (m && typeof m === "object" && m.apps === undefined && m.default !== undefined) m = m.default;
  let s;
  try {{ s = JSON.stringify(m === undefined ? null : m); }} catch (e) {{ fail("exports cannot be written as JSON: ", e); }}
  process.stdout.write({sentinel:?} + (s === undefined ? "null" : s));
}})().catch((e) => fail("", e));"#,
        sentinel = SENTINEL
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_reproducible() {
        assert_eq!(instances_of(&Value::Str("max".into())), 4);
        assert_eq!(instances_of(&Value::Int(-1)), 3);
        assert_eq!(instances_of(&Value::Int(-9)), 1);
        assert_eq!(instances_of(&Value::Int(0)), 4);
        assert_eq!(instances_of(&Value::Int(2)), 2);
        assert_eq!(instances_of(&Value::Str("3".into())), 3);
    }

    #[test]
    fn json_apps_with_cron() {
        let text = r#"{"apps": [{"name": "settle", "script": "jobs/settle.js", "args": "--all",
          "cron_restart": "0 * * * *", "instances": "max", "exec_mode": "cluster"},
          {"name": "web", "script": "server.js"}]}"#;
        let r = read(Path::new("ecosystem.config.json"), text);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 1);
        let a = &r.registrations[0];
        assert_eq!(a.command, ["node", "jobs/settle.js", "--all"]);
        assert_eq!((a.instances, a.cluster), (4, true));
        let s = a
            .schedule
            .as_ref()
            .map(|s| &text[s.span.start..s.span.end()]);
        assert_eq!(s, Some("\"0 * * * *\""));
    }
}
