//! PM2 ecosystem files, read as PM2 itself reads them (SPEC 3.6 "PM2 apps").
//!
//! ## Files
//! `ecosystem.config.{js,cjs,mjs,json,yaml,yml}` (also per-environment names such as
//! `ecosystem.production.config.js`), `ecosystem.json`, `process.{json,yml,yaml,config.js}`
//! and `*.pm2.json`. JSON and YAML files are parsed; JavaScript files are evaluated (below).
//!
//! ## Apps
//! PM2 takes its apps from `apps`, else from `pm2`, else from the whole file; a list is a
//! list of apps, a single mapping is one app. Every field is looked up under PM2's own
//! aliases ([`SCRIPT`] and the other field tables below): `cron` is `cron_restart`,
//! `exec` (and `cmd`, `command`) is `script`, `interpreter` is `exec_interpreter`,
//! `cronRestart`/`execMode` are the camelCase spellings PM2 accepts for every key. As in
//! PM2, a falsy value under the first name gives way to the next alias.
//!
//! ## Which apps register a job
//! - `cron_restart: 0` (or `"0"`) disables the schedule.
//! - An app with a `cron_restart` and `autorestart` not `false` is a *restart schedule* of
//!   a long-running process (a nightly restart of a web cluster), not batch work: it
//!   registers nothing, and the file's notes say so (`lint --list-files`), with what its
//!   script showed. Unless its script is a one-shot ([`one_shot`]): then it is cron work, a
//!   registration; and unless `stop_exit_codes` holds 0, PM2 restarts it as soon as it
//!   exits, so it carries the evidence of its loop ([`RestartLoop`], BG613).
//! - An app with `autorestart: false` and a `cron_restart` is cron batch work: a
//!   registration.
//! - An app whose script is `batchguard run … --job NAME` is that manifest job's
//!   registration (a tie), whatever its `autorestart`: each start runs one guarded slot.
//!
//! ## Instances and cluster mode
//! PM2 reads `instances: "max"` (or `0`) as "one per CPU core" and `-N` as "cores minus N".
//! Lint must give the same verdict on a laptop and in CI, so batchguard assumes a fixed
//! **4 cores**: `max`/`0` = 4, `-1` = 3, never below 1; messages say so
//! ([`describe_instances`]). Without `exec_mode`, PM2 runs an app in cluster mode when
//! `instances` is set to at least 1, `0` or `-1` and the interpreter is node (or bun): a
//! `.js`/`.cjs`/`.mjs` script, or `exec_interpreter: node`. Scripts whose interpreter
//! depends on the file's content (no extension PM2 knows) are taken as fork mode.
//!
//! ## Commands
//! The command is the interpreter PM2 picks (by the script's extension, as PM2's
//! `interpreter.json` maps it, or `exec_interpreter`; `none` adds nothing), the script and
//! its `args`. A script with a space is run by PM2 as `bash -c SCRIPT` (its `args` are
//! then dropped): batchguard takes the script's own words. `cwd` becomes the
//! registration's working directory; `env` and every `env_<name>` block (applied with
//! `--env name`, all written in the file) become its environment entries.
//!
//! ## Evaluating `.js` / `.cjs` / `.mjs`
//! A JavaScript ecosystem file is a program. batchguard runs it with `node` only when node
//! is on PATH, through a small wrapper (`require(file)`, or `import()` for an ES module,
//! then `JSON.stringify` of the exports after a sentinel line, `console.*` sent to stderr), with:
//! - cwd = the file's folder, stdin closed;
//! - a 5 s limit: the process is killed after that (BG609 "timed out");
//! - stdout capped at 4 MiB (BG609 "printed more than …"), stderr at 16 KiB;
//! - Node's permission model (`--experimental-permission` on Node 20/21, `--permission` on
//!   22+): no file writes, file reads only under the file's folder, no child processes, no
//!   worker threads, no native addons. **Not restricted**: network access (Node's
//!   permission model has no network switch before Node 25) and environment variables,
//!   which ecosystem files commonly read. Older Node versions run without the model.
//!
//! Values read by evaluation are located by finding their text in the file; a value that
//! is not written in the file (read from the environment at evaluation time) is never
//! reported as an environment entry, so a CI secret cannot leak into a report.
//!
//! When node is absent, times out, fails, or prints too much, the file is a BG609 finding
//! with the reason; it is never silently skipped, since a duplicate may hide in it.

use super::{Problem, Read, Registration, SourceKind, Span, get, str_at};
use crate::manifest::Issue;
use crate::manifest::yaml::{self, Node, Value};
use crate::process::{self, CaptureError};
use crate::text::Spanned;
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

/// A field of a PM2 app and the other names PM2 reads it under, in the order PM2 tries
/// them. Hand-kept from PM2 7.0.3: the `alias` entries of `lib/API/schema.json`, the
/// camelCase spelling `lib/tools/Config.js` adds for every key, and `cmd`/`command`, which
/// `lib/Common.js` (`verifyConfs`) turns into `script`.
pub struct Field {
    pub key: &'static str,
    pub aliases: &'static [&'static str],
}

pub const NAME: Field = Field {
    key: "name",
    aliases: &[],
};
pub const SCRIPT: Field = Field {
    key: "script",
    aliases: &["cmd", "command", "exec", "script"],
};
pub const ARGS: Field = Field {
    key: "args",
    aliases: &[],
};
pub const INTERPRETER: Field = Field {
    key: "exec_interpreter",
    aliases: &["interpreter", "execInterpreter"],
};
pub const INSTANCES: Field = Field {
    key: "instances",
    aliases: &[],
};
pub const EXEC_MODE: Field = Field {
    key: "exec_mode",
    aliases: &["execMode"],
};
pub const CRON_RESTART: Field = Field {
    key: "cron_restart",
    aliases: &["cron", "cronRestart"],
};
pub const CWD: Field = Field {
    key: "cwd",
    aliases: &[],
};
pub const AUTORESTART: Field = Field {
    key: "autorestart",
    aliases: &[],
};
pub const STOP_EXIT_CODES: Field = Field {
    key: "stop_exit_codes",
    aliases: &["stopExitCodes"],
};
pub const ENV: Field = Field {
    key: "env",
    aliases: &[],
};

/// The interpreter PM2 picks by a script's extension (PM2 7.0.3 `lib/API/interpreter.json`;
/// `.cjs`/`.mjs`, which it does not list, are text files PM2 runs with its own node).
fn interpreter_for(script: &str) -> Option<&'static str> {
    let ext = Path::new(script).extension().and_then(|e| e.to_str())?;
    Some(match ext {
        "js" | "cjs" | "mjs" => "node",
        "ts" | "tsx" => "bun",
        "sh" => "bash",
        "py" => "python",
        "rb" => "ruby",
        "php" => "php",
        "pl" => "perl",
        "coffee" => "coffee",
        "ls" => "lsc",
        _ => return None,
    })
}

/// A file PM2 reads as an ecosystem file, by its name (SPEC 3.6 "Files").
pub fn is_pm2_name(name: &str) -> bool {
    const CONFIG_EXTS: [&str; 6] = [
        ".config.js",
        ".config.cjs",
        ".config.mjs",
        ".config.json",
        ".config.yaml",
        ".config.yml",
    ];
    (name.starts_with("ecosystem") && CONFIG_EXTS.iter().any(|ext| name.ends_with(ext)))
        || matches!(
            name,
            "ecosystem.json"
                | "process.json"
                | "process.yml"
                | "process.yaml"
                | "process.config.js"
        )
        || (name.len() > ".pm2.json".len() && name.ends_with(".pm2.json"))
}

fn is_js(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("js" | "cjs" | "mjs")
    )
}

fn not_read(message: String, help: &str) -> Read {
    Read {
        problems: vec![Problem {
            issue: Issue::SourceNotRead,
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
            Ok(root) => {
                let mut read = apps(&root, Some(text), path);
                read.runners = super::code::runners::pm2_apps(path, &root);
                read.roots.push(located(&root, text));
                read
            }
            Err(e) => not_read(
                format!("PM2 ecosystem file not read: its exports are not JSON ({e})"),
                "export a plain object: module.exports = { apps: [...] }",
            ),
        };
    }
    match yaml::parse(text) {
        Ok(root) => {
            let mut read = apps(&root, None, path);
            read.runners = super::code::runners::pm2_apps(path, &root);
            read.roots.push(root);
            read
        }
        Err(err) => {
            let (issue, message, help) = yaml::classify_error(&err);
            Read {
                problems: vec![Problem {
                    issue,
                    span: yaml::error_span(&err, text),
                    message,
                    help: help.to_owned(),
                }],
                ..Read::default()
            }
        }
    }
}

/// JavaScript truthiness, which decides when PM2 falls through to the next alias.
fn truthy(node: &Node) -> bool {
    match &node.value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::Float(f) => *f != 0.0 && !f.is_nan(),
        Value::Str(s) => !s.is_empty(),
        Value::Seq(_) | Value::Map(_) => true,
    }
}

/// The value PM2 uses for `field`: the first truthy one of its names, else the value under
/// the last name tried (as `conf[key] || (conf[key] = app[alias])` leaves it).
pub fn pick<'n>(app: &'n Node, field: &Field) -> Option<&'n Node> {
    let mut cur = get(app, field.key);
    for alias in field.aliases {
        if !cur.is_some_and(truthy) {
            cur = get(app, alias);
        }
    }
    cur.filter(|n| !matches!(n.value, Value::Null))
}

/// The evaluated exports of a `.js` file with each scalar located in the source text, so
/// whole-file rules (BG801) see every app's `env`, registering or not. A value whose text
/// is not in the file (computed, read from the environment while evaluating) becomes null:
/// what the file does not hold, it cannot leak.
fn located(root: &Node, text: &str) -> Node {
    fn walk(node: &Node, text: &str, cursor: &mut usize) -> Node {
        let value = match &node.value {
            Value::Seq(items) => Value::Seq(items.iter().map(|n| walk(n, text, cursor)).collect()),
            Value::Map(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, v)| (walk(k, text, cursor), walk(v, text, cursor)))
                    .collect(),
            ),
            scalar => {
                let needle = match scalar {
                    Value::Str(s) => s.clone(),
                    Value::Int(i) => i.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => {
                        return Node {
                            value: Value::Null,
                            span: Span::new(0, 0),
                        };
                    }
                };
                let found = super::find_token(text, &needle, *cursor)
                    .or_else(|| super::find_token(text, &needle, 0));
                return match found {
                    Some(span) => {
                        *cursor = (*cursor).max(span.end());
                        Node {
                            value: scalar.clone(),
                            span,
                        }
                    }
                    None => Node {
                        value: Value::Null,
                        span: Span::new(0, 0),
                    },
                };
            }
        };
        Node {
            value,
            span: Span::new(0, 0),
        }
    }
    walk(root, text, &mut 0)
}

/// Locates values: in the file itself, or (for an evaluated `.js` file, whose values come
/// from JSON) by finding the value's text in the source after the app's name.
struct Locate<'a> {
    js: Option<&'a str>,
    anchor: Span,
    /// The ecosystem file, against whose folder scripts are found (BG613).
    file: &'a Path,
}

fn scalar_text(node: &Node) -> Option<String> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Locate<'_> {
    fn span(&self, node: &Node) -> Span {
        self.find(node, self.anchor.start).unwrap_or(self.anchor)
    }

    /// Where the node's value is written, searching from `from` (then from the start of
    /// the file, for values shared through a variable); None when it is not in the file.
    fn find(&self, node: &Node, from: usize) -> Option<Span> {
        let Some(text) = self.js else {
            return Some(node.span);
        };
        let needle = scalar_text(node)?;
        super::find_token(text, &needle, from).or_else(|| super::find_token(text, &needle, 0))
    }
}

/// The apps of a parsed ecosystem file, as PM2's `_startJson` finds them.
pub(crate) fn app_list(root: &Node) -> Result<Vec<&Node>, &'static str> {
    let from = |n: &'static str| get(root, n).filter(|v| truthy(v));
    match &root.value {
        Value::Seq(items) => Ok(items.iter().collect()),
        Value::Map(_) => match from("apps").or_else(|| from("pm2")) {
            Some(list) => match &list.value {
                Value::Seq(items) => Ok(items.iter().collect()),
                Value::Map(_) => Ok(vec![list]),
                _ => Err("its `apps` is neither a list nor a mapping"),
            },
            None if pick(root, &SCRIPT).is_some() => Ok(vec![root]),
            None => Err("it has no `apps` (a list, or a mapping for one app)"),
        },
        _ => Err("it is not a mapping or a list of apps"),
    }
}

fn apps(root: &Node, js: Option<&str>, file: &Path) -> Read {
    let mut out = Read::default();
    let list = match app_list(root) {
        Ok(list) => list,
        Err(why) => {
            out.problems.push(Problem {
                issue: Issue::SourceNotRead,
                span: js.map_or(root.span, |_| Span::new(0, 0)),
                message: format!("PM2 ecosystem file not read: {why}"),
                help: "export { apps: [...] } as PM2 expects".into(),
            });
            return out;
        }
    };
    let mut search_from = 0;
    for (i, app) in list.into_iter().enumerate() {
        if !matches!(app.value, Value::Map(_)) {
            out.problems.push(Problem {
                issue: Issue::SourceNotRead,
                span: js.map_or(app.span, |_| Span::new(0, 0)),
                message: format!("PM2 app {i} is not a mapping, so it was not read"),
                help: "write each app as { name: ..., script: ... }".into(),
            });
            continue;
        }
        let name = pick(app, &NAME).and_then(str_at);
        let anchor_node = pick(app, &NAME).or_else(|| pick(app, &SCRIPT));
        let anchor = match (js, anchor_node.and_then(scalar_text)) {
            (Some(text), Some(n)) => super::find_token(text, &n, search_from)
                .or_else(|| super::find_token(text, &n, 0))
                .unwrap_or(Span::new(0, 0)),
            (Some(_), None) => Span::new(0, 0),
            (None, _) => name.as_ref().map_or(app.span, |n| n.span),
        };
        if js.is_some() && anchor.end() > search_from {
            search_from = anchor.end();
        }
        let loc = Locate { js, anchor, file };
        match app_registration(app, i, name.as_ref(), &loc) {
            Outcome::Registers(r) => out.registrations.push(*r),
            Outcome::RestartSchedule(label, cron, why) => out.notes.push(format!(
                "{label}: `cron_restart: {cron}` restarts a long-running app (autorestart is \
                 on), not batch work: no job registered{}",
                if why.is_empty() {
                    String::new()
                } else {
                    format!("; {why}")
                }
            )),
            Outcome::Nothing => {}
        }
    }
    out
}

enum Outcome {
    Registers(Box<Registration>),
    /// A `cron_restart` on an app that keeps running: its label, expression, and what
    /// its script showed (empty when it was not read).
    RestartSchedule(String, String, String),
    Nothing,
}

/// `instances` as PM2's `verifyConfs` leaves it: `max` is 0, a string is `parseInt(s) || 0`.
fn pm2_instances(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Float(f) if f.is_finite() => Some(f.trunc() as i128),
        Value::Str(s) if s == "max" => Some(0),
        Value::Str(s) => {
            let t = s.trim_start();
            let (sign, digits) = match t.strip_prefix('-') {
                Some(rest) => (-1, rest),
                None => (1, t.strip_prefix('+').unwrap_or(t)),
            };
            let end = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            Some(digits[..end].parse::<i128>().map_or(0, |n| sign * n))
        }
        _ => None,
    }
}

/// The app's command words, where they are written, and the interpreter PM2 runs it with.
fn command_of(app: &Node, loc: &Locate) -> (Vec<String>, Span, Option<String>) {
    let script_node = pick(app, &SCRIPT);
    let Some(script) = script_node.and_then(str_at) else {
        return (Vec::new(), loc.anchor, None);
    };
    let span = script_node.map_or(loc.anchor, |n| loc.span(n));
    if script.value.contains(' ') {
        // PM2 starts it as `bash -c SCRIPT` and drops `args`.
        return (super::split_words(&script.value), span, None);
    }
    let interpreter = match pick(app, &INTERPRETER).and_then(str_at) {
        Some(i) if i.value == "none" => None,
        Some(i) if i.value.contains("node@") => Some("node".to_owned()),
        Some(i) => Some(i.value),
        None => interpreter_for(&script.value).map(str::to_owned),
    };
    let mut command: Vec<String> = interpreter.iter().cloned().collect();
    command.push(script.value);
    if let Some(args) = pick(app, &ARGS) {
        command.extend(super::words(args));
    }
    (command, span, interpreter)
}

fn runs_on_node(interpreter: Option<&str>) -> bool {
    let base = interpreter.map_or("", |i| i.rsplit(['/', '\\']).next().unwrap_or(i));
    base.ends_with("node") || base.ends_with("bun")
}

/// The app's `env` and `env_<name>` entries whose values are written in the file.
fn env_entries(app: &Node, loc: &Locate) -> Vec<(Spanned<String>, Spanned<String>)> {
    let Value::Map(fields) = &app.value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, block) in fields {
        let Value::Str(key) = &k.value else { continue };
        let is_env = key == ENV.key
            || key
                .strip_prefix("env_")
                .is_some_and(|rest| !rest.chars().any(char::is_whitespace));
        let Value::Map(entries) = &block.value else {
            continue;
        };
        if !is_env {
            continue;
        }
        let block_from = loc.js.map_or(0, |text| {
            super::find_token(text, key, loc.anchor.start).map_or(loc.anchor.start, |s| s.end())
        });
        for (name, value) in entries {
            let (Some(name_at), Some(value_at)) = (str_at(name), str_at(value)) else {
                continue;
            };
            let name_span = loc
                .find(name, block_from)
                .unwrap_or(Span::new(block_from, 0));
            // Not written in the file (read from the environment while evaluating it).
            let Some(value_span) = loc.find(value, name_span.end()) else {
                continue;
            };
            out.push((
                Spanned {
                    value: name_at.value,
                    span: name_span,
                },
                Spanned {
                    value: value_at.value,
                    span: value_span,
                },
            ));
        }
    }
    out
}

fn app_registration(app: &Node, i: usize, name: Option<&Spanned<String>>, loc: &Locate) -> Outcome {
    let (command, command_span, interpreter) = command_of(app, loc);
    let tie = super::batchguard_tie(&command, command_span);
    let cron_node = pick(app, &CRON_RESTART);
    let cron = cron_node.and_then(str_at).map(|s| Spanned {
        value: s.value,
        span: cron_node.map_or(loc.anchor, |n| loc.span(n)),
    });
    // PM2 compares with `== '0'`, which JavaScript makes numeric: " 0", "00" disable too.
    let cron = cron.filter(|c| c.value.trim().parse::<f64>() != Ok(0.0));
    let autorestart = pick(app, &AUTORESTART);
    let autorestart_off = autorestart.is_some_and(|a| {
        matches!(&a.value, Value::Bool(false)) || matches!(&a.value, Value::Str(s) if s == "false")
    });
    let label = format!(
        "PM2 app `{}`",
        name.map(|n| n.value.clone())
            .or_else(|| rendered_name(app))
            .unwrap_or_else(|| format!("apps[{i}]"))
    );
    let mut restart_loop = None;
    // With autorestart on, a `cron_restart` is cron work only when the script is a
    // one-shot. A tied app runs `batchguard run`, which exits after its slot: PM2 starts
    // it again, and each start skips the slot that already succeeded (not BG613's).
    if let Some(c) = cron.as_ref().filter(|_| !autorestart_off && tie.is_none()) {
        match one_shot(app, &command, name.map(|n| n.value.as_str()), loc) {
            // PM2's `handleExit` restarts a process that ends unless `autorestart` is
            // false or its exit code is in `stop_exit_codes`: with 0 there, a clean run
            // ends for good, and the one-shot runs once a tick.
            Ok(_) if stops_on_success(app) => {}
            Ok(evidence) => {
                restart_loop = Some(RestartLoop {
                    evidence,
                    autorestart: autorestart.map(|n| loc.span(n)),
                });
            }
            Err(why) => return Outcome::RestartSchedule(label, c.value.clone(), why),
        }
    }
    if tie.is_none() && cron.is_none() {
        return Outcome::Nothing;
    }
    let instances_node = pick(app, &INSTANCES);
    let pm2_n = instances_node.and_then(|n| pm2_instances(&n.value));
    let (instances, instances_span) = match instances_node {
        Some(n) => (instances_of(&n.value), Some(loc.span(n))),
        None => (1, None),
    };
    let forced_fork = get(app, "execute_command").is_some_and(|n| n.value == Value::Bool(true));
    let cluster = match pick(app, &EXEC_MODE).and_then(str_at) {
        _ if forced_fork => false,
        Some(m) => m.value.starts_with("cluster"),
        None => pm2_n.is_some_and(|n| n >= 0 || n == -1) && runs_on_node(interpreter.as_deref()),
    };
    let env = env_entries(app, loc);
    let workdir = pick(app, &CWD).and_then(|n| {
        str_at(n).map(|s| Spanned {
            value: s.value,
            span: loc.span(n),
        })
    });
    Outcome::Registers(Box::new(Registration {
        kind: SourceKind::Pm2,
        file: 0,
        span: match (loc.js, name) {
            (None, Some(n)) => n.span,
            _ => loc.anchor,
        },
        label,
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
        workdir,
        store_env: store_env(app, &env, loc),
        env,
        restart_loop,
        ..Registration::default()
    }))
}

/// Why an app with a `cron_restart` that PM2 restarts on exit is a one-shot (BG613).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestartLoop {
    /// What showed it, in words: the script's exit call, no call that keeps it running,
    /// a job's name.
    pub evidence: Vec<String>,
    /// Where `autorestart` is written (absent: on, PM2's default).
    pub autorestart: Option<Span>,
}

/// `stop_exit_codes` holds 0 (a number or a string, alone or in a list): PM2 leaves a
/// process that exits cleanly stopped.
fn stops_on_success(app: &Node) -> bool {
    fn zero(n: &Node) -> bool {
        match &n.value {
            Value::Int(i) => *i == 0,
            Value::Str(s) => s.trim().parse::<i64>() == Ok(0),
            _ => false,
        }
    }
    pick(app, &STOP_EXIT_CODES).is_some_and(|n| match &n.value {
        Value::Seq(items) => items.iter().any(zero),
        _ => zero(n),
    })
}

/// Largest script read to judge its lifetime (as for application code).
const MAX_SCRIPT_BYTES: u64 = super::code::MAX_CODE_BYTES as u64;

/// Whether the app's script is a one-shot, with the evidence (BG613); else why it is
/// taken as long-running, for the file's note (empty when nothing was learned).
///
/// The script is the first word of the command that names a file batchguard can read
/// ([`lifetime::readable`]), found relative to the app's `cwd` (itself relative to the
/// ecosystem file's folder) or to that folder. A one-shot is a script read whole that has
/// no call that keeps a process running and either ends the process on purpose or is
/// named like a job; a script that cannot be read is never judged one, whatever its name.
fn one_shot(
    app: &Node,
    command: &[String],
    name: Option<&str>,
    loc: &Locate,
) -> Result<Vec<String>, String> {
    use super::code::lifetime;
    let script = command
        .iter()
        .find(|w| !w.starts_with('-') && lifetime::readable(Path::new(w.as_str())));
    let stem = script
        .and_then(|s| Path::new(s.as_str()).file_stem())
        .and_then(|s| s.to_str());
    let named = name
        .and_then(lifetime::job_word)
        .or_else(|| stem.and_then(lifetime::job_word));
    let Some(script) = script else {
        return Err(match named {
            Some(w) => format!(
                "named like a job (`{w}`), but its script is none batchguard reads: if it \
                 exits, PM2 restarts it at once, in a loop (BG613 needs the script)"
            ),
            None => String::new(),
        });
    };
    let read = read_script(app, script, loc);
    let Some((text, path)) = read else {
        return Err(match named {
            Some(w) => format!(
                "named like a job (`{w}`), but `{script}` was not found beside the file: if \
                 it exits, PM2 restarts it at once, in a loop (BG613 needs the script)"
            ),
            None => String::new(),
        });
    };
    let Some(life) = lifetime::of_script(&path, &text) else {
        return Err(String::new());
    };
    if let Some((what, line)) = life.keeps_alive {
        return Err(format!("`{script}` keeps running: `{what}` at line {line}"));
    }
    let quiet = "no listen, timer, schedule, consumer or endless-loop call".to_owned();
    match (life.exit, named) {
        (Some((what, line)), named) => {
            let mut evidence = vec![
                format!("`{script}` ends the process: `{what}` at line {line}"),
                quiet,
            ];
            evidence.extend(named.map(|w| format!("named like a job (`{w}`)")));
            Ok(evidence)
        }
        (None, Some(w)) => Ok(vec![
            format!("`{script}` has {quiet}: it ends when its work is done"),
            format!("named like a job (`{w}`)"),
        ]),
        (None, None) => Err(format!(
            "`{script}` has {quiet}, but no exit call and no job's name: not judged a \
             one-shot"
        )),
    }
}

/// The script's text and path, when it is a relative path to a file of at most
/// [`MAX_SCRIPT_BYTES`] under the app's `cwd` or the ecosystem file's folder.
fn read_script(app: &Node, script: &str, loc: &Locate) -> Option<(String, std::path::PathBuf)> {
    let rel = Path::new(script);
    if rel.is_absolute() {
        return None;
    }
    let base = loc.file.parent().unwrap_or(Path::new(""));
    let cwd = pick(app, &CWD)
        .and_then(str_at)
        .map(|c| c.value)
        .filter(|c| !Path::new(c).is_absolute());
    let tries = cwd
        .map(|c| base.join(c).join(rel))
        .into_iter()
        .chain(std::iter::once(base.join(rel)));
    for path in tries {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > MAX_SCRIPT_BYTES {
            continue;
        }
        if let Ok(bytes) = std::fs::read(&path) {
            return Some((String::from_utf8_lossy(&bytes).into_owned(), path));
        }
    }
    None
}

/// `BATCHGUARD_STORE` in the app's `env` (or an `env_<name>` block): as written, or
/// `$(computed)` when the file computes it (read from the environment while evaluating).
fn store_env(
    app: &Node,
    written: &[(Spanned<String>, Spanned<String>)],
    loc: &Locate,
) -> Option<Spanned<String>> {
    if let Some((_, v)) = written.iter().find(|(n, _)| n.value == super::STORE_ENV) {
        return Some(v.clone());
    }
    let Value::Map(fields) = &app.value else {
        return None;
    };
    let named = fields.iter().any(|(k, block)| {
        let is_env = matches!(&k.value, Value::Str(key) if key == ENV.key || key.starts_with("env_"));
        is_env
            && matches!(&block.value, Value::Map(entries)
                if entries.iter().any(|(n, _)| matches!(&n.value, Value::Str(n) if n == super::STORE_ENV)))
    });
    named.then(|| Spanned {
        value: "$(computed)".to_owned(),
        span: loc.anchor,
    })
}

/// The name PM2 gives an app without one: its script's file name without the extension.
fn rendered_name(app: &Node) -> Option<String> {
    let script = pick(app, &SCRIPT).and_then(str_at)?.value;
    let base = script.rsplit('/').next().unwrap_or(&script);
    Some(match base.rfind('.') {
        Some(dot) if dot > 0 => base[..dot].to_owned(),
        _ => base.to_owned(),
    })
}

/// PM2's process count for `instances` (`God.prepare`), with [`ASSUMED_CORES`] standing
/// for the machine's cores.
pub fn instances_of(v: &Value) -> u64 {
    let Some(n) = pm2_instances(v) else {
        return 1;
    };
    let cores = i128::from(ASSUMED_CORES);
    let count = match n {
        0 => cores,
        n if n < 0 => cores + n,
        n => n,
    };
    u64::try_from(count.max(1)).unwrap_or(u64::MAX)
}

/// How a message shows an app's instances: a core-relative `instances` value as written,
/// with the count batchguard assumed (`instances: max (counted as 4 cores)`).
pub fn describe_instances(written: &str, count: u64) -> String {
    let raw = written.trim().trim_matches(['"', '\'', '`']);
    // Only a value as PM2 writes it (not, say, the app's name a span fell back to).
    match raw.parse::<i128>() {
        _ if raw == "max" => format!("`instances: max` (counted as {ASSUMED_CORES} cores)"),
        Ok(0) => format!("`instances: 0` (one per core, counted as {ASSUMED_CORES} cores)"),
        Ok(n) if n < 0 => format!(
            "`instances: {raw}` (cores minus {}, counted as {count} of {ASSUMED_CORES} cores)",
            -n
        ),
        _ => format!("{count} instances"),
    }
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
    let mut argv: Vec<std::ffi::OsString> = vec!["node".into(), "--no-warnings".into()];
    argv.extend(permission_flags(&dir_s)?.into_iter().map(Into::into));
    argv.extend(["-e".into(), wrapper().into(), abs.clone().into_os_string()]);
    let done = process::capture(&process::Capture {
        argv: &argv,
        env: &[],
        cwd: Some(dir),
        timeout: NODE_TIMEOUT,
        grace: Duration::ZERO,
        stdout_cap: MAX_OUTPUT + SENTINEL.len() + 1,
        stderr_cap: MAX_STDERR,
    })
    .map_err(|e| match e {
        CaptureError::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "node is not on PATH".to_owned()
        }
        CaptureError::Spawn(e) => format!("node could not be started: {e}"),
        CaptureError::Wait(e) => format!("waiting for node failed: {e}"),
    })?;
    if done.timed_out {
        return Err(format!(
            "evaluating it with node timed out after {} s (killed)",
            NODE_TIMEOUT.as_secs()
        ));
    }
    let (status, stdout, stderr) = (done.status, done.stdout, done.stderr);
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

    fn one(text: &str) -> Registration {
        let r = read(Path::new("ecosystem.config.json"), text);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 1, "{:?}", r.registrations);
        r.registrations
            .into_iter()
            .next()
            .expect("one registration")
    }

    #[test]
    fn instances_are_reproducible() {
        assert_eq!(instances_of(&Value::Str("max".into())), 4);
        assert_eq!(instances_of(&Value::Int(-1)), 3);
        assert_eq!(instances_of(&Value::Int(-9)), 1);
        assert_eq!(instances_of(&Value::Int(0)), 4);
        assert_eq!(instances_of(&Value::Int(2)), 2);
        assert_eq!(instances_of(&Value::Str("3".into())), 3);
        // PM2: parseInt(s) || 0, and 0 is one per core.
        assert_eq!(instances_of(&Value::Str("lots".into())), 4);
        assert_eq!(instances_of(&Value::Bool(true)), 1);
    }

    #[test]
    fn instances_are_described_as_written() {
        assert_eq!(
            describe_instances("\"max\"", 4),
            "`instances: max` (counted as 4 cores)"
        );
        assert_eq!(
            describe_instances("-1", 3),
            "`instances: -1` (cores minus 1, counted as 3 of 4 cores)"
        );
        assert_eq!(describe_instances("2", 2), "2 instances");
        assert_eq!(describe_instances("settle", 4), "4 instances");
    }

    #[test]
    fn names_pm2_reads() {
        for yes in [
            "ecosystem.config.js",
            "ecosystem.config.mjs",
            "ecosystem.config.yml",
            "ecosystem.production.config.cjs",
            "ecosystem.json",
            "process.json",
            "process.yml",
            "process.yaml",
            "process.config.js",
            "billing.pm2.json",
        ] {
            assert!(is_pm2_name(yes), "{yes}");
        }
        for no in ["package.json", "process.js", ".pm2.json", "ecosystem.js"] {
            assert!(!is_pm2_name(no), "{no}");
        }
    }

    #[test]
    fn json_apps_with_cron() {
        let text = r#"{"apps": [{"name": "settle", "script": "jobs/settle.js", "args": "--all",
          "cron_restart": "0 * * * *", "autorestart": false, "instances": "max", "exec_mode": "cluster"},
          {"name": "web", "script": "server.js"}]}"#;
        let a = one(text);
        assert_eq!(a.command, ["node", "jobs/settle.js", "--all"]);
        assert_eq!((a.instances, a.cluster), (4, true));
        let s = a
            .schedule
            .as_ref()
            .map(|s| &text[s.span.start..s.span.end()]);
        assert_eq!(s, Some("\"0 * * * *\""));
    }

    #[test]
    fn a_falsy_value_gives_way_to_the_alias() {
        // PM2: `conf.cron_restart || (conf.cron_restart = app.cron)`.
        let a = one(
            r#"{"apps": [{"name": "a", "script": "a.js", "cron_restart": 0, "cron": "5 * * * *",
              "autorestart": false}]}"#,
        );
        assert_eq!(a.schedule.map(|s| s.value).as_deref(), Some("5 * * * *"));
        let a = one(
            r#"{"apps": [{"name": "a", "command": "a.py", "cronRestart": "5 * * * *",
              "autorestart": "false", "interpreter": "/usr/bin/python3"}]}"#,
        );
        assert_eq!(a.command, ["/usr/bin/python3", "a.py"]);
    }

    #[test]
    fn interpreters_follow_pm2s_extension_map() {
        let cmd = |script: &str| {
            one(&format!(
                r#"{{"apps": [{{"script": "{script}", "cron": "0 * * * *", "autorestart": false}}]}}"#
            ))
            .command
        };
        assert_eq!(cmd("jobs/report.py"), ["python", "jobs/report.py"]);
        assert_eq!(cmd("jobs/sync.sh"), ["bash", "jobs/sync.sh"]);
        assert_eq!(cmd("bin/settle"), ["bin/settle"]);
        // A script with a space is `bash -c SCRIPT` under PM2: its own words.
        assert_eq!(
            cmd("php artisan schedule:run"),
            ["php", "artisan", "schedule:run"]
        );
    }

    #[test]
    fn implicit_cluster_needs_instances_and_node() {
        let cluster = |extra: &str| {
            one(&format!(
                r#"{{"apps": [{{"name": "a", "cron": "0 * * * *", "autorestart": false, {extra}}}]}}"#
            ))
            .cluster
        };
        assert!(cluster(r#""script": "a.js", "instances": 2"#));
        assert!(cluster(r#""script": "a.js", "instances": "max""#));
        assert!(!cluster(r#""script": "a.js""#));
        assert!(!cluster(r#""script": "a.py", "instances": 2"#));
        assert!(!cluster(r#""script": "a.js", "instances": -2"#));
        assert!(cluster(
            r#""script": "bin/www", "exec_interpreter": "node", "instances": 2"#
        ));
        assert!(!cluster(
            r#""script": "a.js", "instances": 2, "exec_mode": "fork_mode""#
        ));
        assert!(!cluster(
            r#""script": "a.js", "instances": 2, "execute_command": true"#
        ));
    }

    #[test]
    fn apps_from_pm2_key_top_level_list_and_single_app() {
        for text in [
            r#"{"pm2": [{"name": "a", "script": "a.js", "cron": "0 * * * *", "autorestart": false}]}"#,
            r#"[{"name": "a", "script": "a.js", "cron": "0 * * * *", "autorestart": false}]"#,
            r#"{"name": "a", "script": "a.js", "cron": "0 * * * *", "autorestart": false}"#,
        ] {
            assert_eq!(one(text).label, "PM2 app `a`", "{text}");
        }
        let r = read(Path::new("process.json"), r#"{"deploy": {}}"#);
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].issue, Issue::SourceNotRead);
    }

    #[test]
    fn restart_schedules_are_noted_not_registered() {
        let r = read(
            Path::new("ecosystem.config.json"),
            r#"{"apps": [{"name": "web", "script": "server.js", "cron_restart": "0 3 * * *"}]}"#,
        );
        assert!(r.registrations.is_empty());
        assert_eq!(r.notes.len(), 1);
        assert!(r.notes[0].contains("PM2 app `web`"), "{:?}", r.notes);
    }

    #[test]
    fn unnamed_apps_take_pm2s_rendered_name() {
        let a = one(
            r#"{"apps": [{"script": "jobs/settle.js", "cron": "0 * * * *", "autorestart": false}]}"#,
        );
        assert_eq!(a.label, "PM2 app `settle`");
    }
}
