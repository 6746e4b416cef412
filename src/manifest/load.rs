//! From YAML text to the typed manifest, collecting every problem on the way
//! (BG001 syntax, BG002 unknown keys, BG004 bad values, BG005 duplicate keys, BG006 limits).

use super::Issue;
use super::model::{Job, Manifest};
use super::template;
use super::yaml::{self, Node, Value};
use crate::manifest::duration::Duration;
use crate::text::Span;
use crate::text::closest;

/// A problem found while reading a manifest, before any rule runs.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadDiag {
    pub issue: Issue,
    pub span: Span,
    pub message: String,
    pub help: String,
    pub related: Vec<(Span, String)>,
}

/// Reading state: the source (to find the text of quoted scalars) and the problems so far.
pub struct LoadCx<'a> {
    pub text: &'a str,
    pub diags: Vec<LoadDiag>,
}

pub trait FromNode: Sized {
    /// `None` when the value is invalid; the reason has been pushed to `cx`.
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self>;
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Seq(_) => "a list",
        Value::Map(_) => "a mapping",
    }
}

impl<'a> LoadCx<'a> {
    pub fn new(text: &'a str) -> Self {
        LoadCx {
            text,
            diags: Vec::new(),
        }
    }

    fn push(&mut self, issue: Issue, span: Span, message: String, help: String) {
        self.diags.push(LoadDiag {
            issue,
            span,
            message,
            help,
            related: Vec::new(),
        });
    }

    pub fn invalid(&mut self, node: &Node, message: &str) {
        self.push(
            Issue::InvalidValue,
            node.span,
            message.to_owned(),
            "fix the value as the manifest format (SPEC 2) describes".into(),
        );
    }

    pub fn wrong_type(&mut self, node: &Node, expected: &str) {
        self.push(
            Issue::InvalidValue,
            node.span,
            format!("expected {expected}, found {}", kind_of(&node.value)),
            format!("write {expected}"),
        );
    }

    pub fn expect_map<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [(Node, Node)]> {
        match &node.value {
            Value::Map(entries) => Some(entries),
            _ => {
                self.wrong_type(node, &format!("a mapping ({})", what.to_lowercase()));
                None
            }
        }
    }

    pub fn expect_str<'n>(&mut self, node: &'n Node, expected: &str) -> Option<&'n str> {
        match &node.value {
            Value::Str(s) => Some(s),
            _ => {
                self.wrong_type(node, expected);
                None
            }
        }
    }

    pub fn key_str<'n>(&mut self, key: &'n Node) -> Option<&'n str> {
        match &key.value {
            Value::Str(s) => Some(s),
            _ => {
                self.push(
                    Issue::UnknownField,
                    key.span,
                    format!("a key must be a field name, found {}", kind_of(&key.value)),
                    "use one of the field names of the manifest format".into(),
                );
                None
            }
        }
    }

    pub fn unknown_field(&mut self, key: &Node, name: &str, known: &[&str]) {
        let help = match closest(name, known) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("known fields here: {}", known.join(", ")),
        };
        self.push(
            Issue::UnknownField,
            key.span,
            format!("unknown field `{name}`"),
            help,
        );
    }

    pub fn bad_word(&mut self, node: &Node, word: &str, words: &[&str]) {
        let help = match closest(word, words) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("use one of: {}", words.join(", ")),
        };
        self.push(
            Issue::InvalidValue,
            node.span,
            format!("`{word}` is not one of: {}", words.join(", ")),
            help,
        );
    }

    fn offset_in_scalar(&self, node: &Node, i: usize) -> usize {
        yaml::scalar_offset(self.text, node, i).unwrap_or(node.span.start)
    }

    /// Reports unknown placeholders; true when the template is clean.
    pub fn check_template(&mut self, node: &Node, text: &str) -> bool {
        let mut ok = true;
        for p in template::placeholders(text) {
            if template::is_known(p.name) {
                continue;
            }
            ok = false;
            let start = self.offset_in_scalar(node, p.start);
            let len = if start == node.span.start {
                node.span.len
            } else {
                p.end - p.start
            };
            let help = match closest(p.name, template::PLACEHOLDERS) {
                Some(s) => format!("did you mean `{{{s}}}`?"),
                None => format!(
                    "placeholders are: {}",
                    template::PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            self.push(
                Issue::InvalidValue,
                Span::new(start, len),
                format!("unknown placeholder `{{{}}}`", p.name),
                help,
            );
        }
        ok
    }
}

impl FromNode for String {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        cx.expect_str(node, "a string").map(str::to_owned)
    }
}

impl FromNode for bool {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                cx.wrong_type(node, "true or false");
                None
            }
        }
    }
}

impl FromNode for u64 {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        match &node.value {
            Value::Int(i) if *i < 0 => {
                cx.invalid(
                    node,
                    &format!("{i} is negative; expected a whole number >= 0"),
                );
                None
            }
            Value::Int(i) => match u64::try_from(*i) {
                Ok(v) => Some(v),
                Err(_) => {
                    cx.invalid(node, &format!("{i} is too large (at most {})", u64::MAX));
                    None
                }
            },
            Value::Float(f) if f.fract() == 0.0 && f.abs() > 1e18 => {
                cx.invalid(node, "the number is too large to be a count");
                None
            }
            _ => {
                cx.wrong_type(node, "a whole number");
                None
            }
        }
    }
}

impl FromNode for super::model::Since {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        let help = "write an RFC 3339 time with its offset, such as 2026-03-01T09:00:00Z";
        let Value::Str(s) = &node.value else {
            cx.wrong_type(node, "an RFC 3339 time such as 2026-03-01T09:00:00Z");
            return None;
        };
        // jiff alone would also take `2026-03-01 09:00Z` and bracketed zones; `since:` is
        // RFC 3339 as the SPEC says, so its shape is checked first.
        let rfc3339 = s.len() >= 20
            && s.as_bytes()
                .get(10)
                .is_some_and(|b| matches!(b, b'T' | b't'))
            && !s.contains('[');
        match s.parse::<jiff::Timestamp>() {
            Ok(t) if rfc3339 => Some(super::model::Since(t)),
            Ok(_) => {
                cx.push(
                    Issue::InvalidValue,
                    node.span,
                    format!("`{s}` is not an RFC 3339 time"),
                    help.into(),
                );
                None
            }
            Err(e) => {
                let why = if s.parse::<jiff::civil::DateTime>().is_ok()
                    || s.parse::<jiff::civil::Date>().is_ok()
                {
                    "has no UTC offset (add `Z` or `+01:00`)".to_owned()
                } else {
                    format!("is not an RFC 3339 time: {e}")
                };
                cx.push(
                    Issue::InvalidValue,
                    node.span,
                    format!("`{s}` {why}"),
                    help.into(),
                );
                None
            }
        }
    }
}

impl FromNode for Duration {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        match &node.value {
            Value::Str(s) => match Duration::parse(s) {
                Ok(d) => Some(d),
                Err(e) => {
                    cx.push(
                        Issue::InvalidValue,
                        node.span,
                        format!("`{s}` is {e}"),
                        "write a duration such as 45s, 10m, 1h30m or 2d".into(),
                    );
                    None
                }
            },
            Value::Int(i) => {
                cx.push(
                    Issue::InvalidValue,
                    node.span,
                    format!("`{i}` is a number without a unit"),
                    format!("add a unit: `{i}s`, `{i}m`, `{i}h` or `{i}d`"),
                );
                None
            }
            _ => {
                cx.wrong_type(node, "a duration such as 10m");
                None
            }
        }
    }
}

impl<T: FromNode> FromNode for Vec<T> {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        let Value::Seq(items) = &node.value else {
            cx.wrong_type(node, "a list");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match T::from_node(item, cx) {
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// Reports every key that a mapping repeats (BG005), anywhere in the tree.
/// serde-saphyr forwards repeated keys to us (`DuplicateKeyPolicy::PassThrough`).
fn report_duplicate_keys(node: &Node, cx: &mut LoadCx) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match &n.value {
            Value::Map(entries) => {
                for (i, (k, v)) in entries.iter().enumerate() {
                    if let Some(first) = entries[..i].iter().find(|(p, _)| p.value == k.value) {
                        let name = match &k.value {
                            Value::Str(s) => s.clone(),
                            other => format!("{other:?}"),
                        };
                        cx.diags.push(LoadDiag {
                            issue: Issue::DuplicateKey,
                            span: k.span,
                            message: format!("key `{name}` appears twice in this mapping"),
                            help: "keep one of the two; YAML readers disagree on which wins".into(),
                            related: vec![(first.0.span, "first defined here".into())],
                        });
                    }
                    stack.push(v);
                }
            }
            Value::Seq(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
}

/// Deep-merges `defaults` into a job: mappings merge recursively, the job's value wins
/// everywhere else. Values taken from defaults keep their own spans, so findings point at
/// the line to fix.
fn merge_defaults(job: &Node, defaults: &Node) -> Node {
    let (Value::Map(j), Value::Map(d)) = (&job.value, &defaults.value) else {
        return job.clone();
    };
    let mut out = j.clone();
    for (dk, dv) in d {
        match out.iter_mut().find(|(k, _)| k.value == dk.value) {
            Some((_, jv)) => *jv = merge_defaults(jv, dv),
            None => out.push((dk.clone(), dv.clone())),
        }
    }
    Node {
        value: Value::Map(out),
        span: job.span,
    }
}

/// A manifest as read: the model (jobs with defaults merged in) and every problem found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub manifest: Manifest,
    /// Jobs after merging defaults, in file order.
    pub jobs: Vec<Job>,
    pub diags: Vec<LoadDiag>,
    /// The YAML tree as written, for rules that look at every value (BG801).
    pub root: Option<Node>,
}

/// A job name that is no job of the manifest: the names it does declare, and the closest.
#[derive(Debug)]
pub struct NoSuchJob {
    pub names: Vec<String>,
    pub closest: Option<String>,
}

impl Loaded {
    /// The job named `name` (after defaults), or what the manifest declares instead: one
    /// lookup with its did-you-mean for every command that takes `--job`.
    pub fn job(&self, name: &str) -> Result<&Job, NoSuchJob> {
        if let Some(j) = self
            .jobs
            .iter()
            .find(|j| j.name.value().is_some_and(|n| n == name))
        {
            return Ok(j);
        }
        let names: Vec<&str> = self
            .jobs
            .iter()
            .filter_map(|j| j.name.value().map(String::as_str))
            .collect();
        Err(NoSuchJob {
            closest: closest(name, &names).map(str::to_owned),
            names: names.into_iter().map(str::to_owned).collect(),
        })
    }
}

pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;
pub const MAX_DEPTH: usize = 128;

/// Reads manifest bytes. Never fails: every problem becomes a diagnostic.
pub fn load(bytes: &[u8]) -> (Option<String>, Loaded) {
    let mut loaded = Loaded::default();
    let fail = |loaded: &mut Loaded, issue, span, message: String, help: &str| {
        loaded.diags.push(LoadDiag {
            issue,
            span,
            message,
            help: help.to_owned(),
            related: vec![],
        });
    };
    if bytes.len() > MAX_FILE_BYTES {
        fail(
            &mut loaded,
            Issue::InputLimit,
            Span::default(),
            format!(
                "the file is {} bytes, over the {} MiB limit",
                bytes.len(),
                MAX_FILE_BYTES / 1024 / 1024
            ),
            "split the manifest into one file per service",
        );
        return (None, loaded);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.to_owned(),
        Err(e) => {
            fail(
                &mut loaded,
                Issue::YamlSyntax,
                Span::new(e.valid_up_to(), 1),
                format!(
                    "the file is not valid UTF-8 (byte {} is not part of a character)",
                    e.valid_up_to()
                ),
                "save the manifest as UTF-8 text",
            );
            return (None, loaded);
        }
    };
    let root = match yaml::parse(&text) {
        Ok(root) => root,
        Err(err) => {
            let (issue, message, help) = yaml::classify_error(&err);
            let span = yaml::error_span(&err, &text);
            fail(&mut loaded, issue, span, message, help);
            return (Some(text), loaded);
        }
    };
    let mut cx = LoadCx::new(&text);
    report_duplicate_keys(&root, &mut cx);
    if matches!(root.value, Value::Null) {
        cx.push(
            Issue::MissingField,
            root.span,
            "the file holds no YAML document (it is empty or only comments)".into(),
            "start the file with `version: 1`, `service:` and `jobs:`".into(),
        );
        loaded.diags = cx.diags;
        return (Some(text), loaded);
    }
    if !matches!(root.value, Value::Map(_)) {
        cx.push(
            Issue::InvalidValue,
            root.span,
            format!(
                "a manifest is a mapping with `version` and `jobs`, found {}",
                kind_of(&root.value)
            ),
            "start the file with `version: 1`, `service:` and `jobs:`".into(),
        );
        loaded.diags = cx.diags;
        return (Some(text), loaded);
    }
    let manifest = <Manifest as FromNode>::from_node(&root, &mut cx).unwrap_or_default();
    match manifest.version.get() {
        None if manifest.version.is_absent() => cx.push(
            Issue::MissingField,
            root.span,
            "the manifest has no `version`".into(),
            "add `version: 1` at the top".into(),
        ),
        Some(v) if v.value != 1 => cx.push(
            Issue::InvalidValue,
            v.span,
            format!(
                "version {} is not supported; this batchguard reads version 1",
                v.value
            ),
            "write `version: 1`".into(),
        ),
        _ => {}
    }
    if manifest.jobs.is_absent() {
        cx.push(
            Issue::MissingField,
            root.span,
            "the manifest has no `jobs`".into(),
            "add `jobs:` with a list of jobs".into(),
        );
    }
    // Jobs again, this time with the defaults merged in (the model's `jobs` are as written).
    // Problems inside them were reported when the manifest was read (those of merged-in
    // values under `defaults`), so this pass reports nothing new.
    match map_get(&root, "defaults") {
        None => loaded.jobs = manifest.jobs.value().cloned().unwrap_or_default(),
        Some(defaults) => {
            if let Some(Value::Seq(items)) = map_get(&root, "jobs").map(|n| &n.value) {
                let mut job_cx = LoadCx::new(&text);
                for item in items {
                    let merged = merge_defaults(item, defaults);
                    if let Some(job) = <Job as FromNode>::from_node(&merged, &mut job_cx) {
                        loaded.jobs.push(job);
                    }
                }
            }
        }
    }
    loaded.manifest = manifest;
    loaded.root = Some(root);
    let mut diags = cx.diags;
    dedup(&mut diags);
    loaded.diags = diags;
    (Some(text), loaded)
}

fn dedup(diags: &mut Vec<LoadDiag>) {
    let mut seen = std::collections::HashSet::new();
    diags.retain(|d| seen.insert((d.issue, d.span, d.message.clone())));
}

pub fn map_get<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .rev()
            .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
            .map(|(_, v)| v),
        _ => None,
    }
}
