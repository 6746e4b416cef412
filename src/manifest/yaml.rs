//! A YAML document as a tree of nodes that each know where they came from.
//!
//! serde-saphyr does the parsing (YAML 1.2, panic-free, with budgets against alias bombs
//! and deep nesting); this module only records every node with its byte span so that the
//! manifest model can point at exact values, collect *all* problems in one pass, and see
//! duplicate keys (forwarded by `DuplicateKeyPolicy::PassThrough`) instead of stopping at the first.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

use crate::text::Span;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub span: Span,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Each nesting level costs serde frames; growing the stack on demand keeps the
        // depth limit (BG006), not the thread's stack size, the thing that stops deep input.
        let s = stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, || {
            Spanned::<Value>::deserialize(d)
        })?;
        let sp = s.referenced.span();
        let start = sp.byte_offset().unwrap_or(0) as usize;
        let len = sp.byte_len().unwrap_or(0) as usize;
        Ok(Node {
            value: s.value,
            span: Span::new(start, len),
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(i128::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            out.push(n);
        }
        Ok(Value::Seq(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<Node>()? {
            let v = map.next_value::<Node>()?;
            out.push((k, v));
        }
        Ok(Value::Map(out))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }
}

/// Parses one YAML document with the limits of SPEC 9.
pub fn parse(text: &str) -> Result<Node, serde_saphyr::Error> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = super::load::MAX_DEPTH;
    // An 8 MiB manifest may hold a few million nodes; the alias limits below are what stop bombs.
    budget.max_nodes = 8_000_000;
    budget.max_events = 16_000_000;
    budget.max_reader_input_bytes = Some(super::load::MAX_FILE_BYTES);
    let mut opts = serde_saphyr::options::Options::default();
    opts.budget = Some(budget);
    opts.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::PassThrough;
    // `n`, `yes`, `off` stay strings: YAML 1.1 booleans are a classic manifest trap.
    opts.strict_booleans = true;
    opts.with_snippet = false;
    let mut limits = serde_saphyr::options::AliasLimits::default();
    limits.max_total_replayed_events = 100_000;
    opts.alias_limits = limits;
    serde_saphyr::from_str_with_options(text, opts)
}

/// Which rule a parse error belongs to: a limit (BG006) or plain bad syntax (BG001).
pub fn classify_error(err: &serde_saphyr::Error) -> (super::Issue, String, &'static str) {
    use serde_saphyr::Error as E;
    let msg = first_line(&err.to_string());
    let limit = msg.contains("limit exceeded") || msg.contains("budget");
    match err {
        _ if limit => (
            super::Issue::InputLimit,
            if msg.contains("alias") {
                "aliases expand to more than 100,000 nodes: refused as an alias bomb".to_owned()
            } else if msg.contains("Depth") || msg.contains("recursion") {
                format!(
                    "the YAML nests deeper than the limit ({} levels)",
                    super::load::MAX_DEPTH
                )
            } else {
                format!("input limit exceeded: {msg}")
            },
            "manifests are small: remove the deep nesting or the aliases that expand exponentially",
        ),
        E::Budget { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. } => (
            super::Issue::InputLimit,
            format!("input limit exceeded: {msg}"),
            "manifests are small: remove the deep nesting or the aliases that expand exponentially",
        ),
        _ if is_tab_error(&msg) => (
            super::Issue::YamlSyntax,
            "a tab in the indentation: indent with spaces, not tabs (YAML forbids tabs for indentation)".to_owned(),
            "replace the tab with spaces, as many as the lines around it use",
        ),
        E::MultipleDocuments { .. } => (
            super::Issue::YamlSyntax,
            "a manifest holds one YAML document, this file has several".to_owned(),
            "split the documents into files of their own",
        ),
        _ => (
            super::Issue::YamlSyntax,
            format!("invalid YAML: {msg}"),
            "fix the YAML syntax at the marked position",
        ),
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    // serde-saphyr appends "at line X column Y"; our report shows the position itself.
    match line.find(" at line ") {
        Some(i) => line[..i].to_owned(),
        None => line.to_owned(),
    }
}

/// The scanner's complaints about a tab where YAML wants spaces ("tabs disallowed within
/// this context", "found a tab").
fn is_tab_error(msg: &str) -> bool {
    msg.split(|c: char| !c.is_alphabetic())
        .any(|w| w.eq_ignore_ascii_case("tab") || w.eq_ignore_ascii_case("tabs"))
}

/// The byte span a parse error points at (its line and column translated to an offset);
/// for a tab error, the tab itself.
pub fn error_span(err: &serde_saphyr::Error, text: &str) -> Span {
    let span = position_span(err, text);
    if is_tab_error(&first_line(&err.to_string())) {
        return indent_tab_near(text, span.start).unwrap_or(span);
    }
    span
}

/// The first tab in the indentation of the line holding `offset`, else of the line after
/// it (the scanner may stop at the end of the line before), else of the line before.
fn indent_tab_near(text: &str, offset: usize) -> Option<Span> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let tab_in = |start: usize| {
        let line = text.get(start..)?.split('\n').next()?;
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        line[..indent].find('\t').map(|i| Span::new(start + i, 1))
    };
    let next = text[offset..].find('\n').map(|i| offset + i + 1);
    let prev = line_start
        .checked_sub(1)
        .map(|end| text[..end].rfind('\n').map_or(0, |i| i + 1));
    tab_in(line_start)
        .or_else(|| next.and_then(tab_in))
        .or_else(|| prev.and_then(tab_in))
}

fn position_span(err: &serde_saphyr::Error, text: &str) -> Span {
    let Some(loc) = err.location() else {
        return Span::default();
    };
    if let Some(b) = loc.span().byte_offset() {
        let b = (b as usize).min(text.len());
        return Span::new(b, usize::from(b < text.len()));
    }
    let line = loc.line() as usize;
    let col = loc.column() as usize;
    if line == 0 {
        return Span::default();
    }
    let start = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum::<usize>();
    let rest = text.get(start..).unwrap_or("");
    let off = rest
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    Span::new(start + off, usize::from(start + off < text.len()))
}

/// Byte offset in the file of byte `i` of a scalar's value, when the scalar is written
/// plainly or in quotes without escapes (where value and source text line up).
pub fn scalar_offset(text: &str, node: &Node, i: usize) -> Option<usize> {
    let raw = text.get(node.span.start..node.span.end())?;
    let skip = usize::from(raw.starts_with(['"', '\'']));
    let pos = node.span.start + skip + i;
    (!raw.contains('\\') && pos <= node.span.end()).then_some(pos)
}
