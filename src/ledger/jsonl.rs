//! JSONL / NDJSON ledgers: one JSON object per line, keys named like the CSV columns,
//! unknown keys ignored, blank lines skipped. Values may be strings or numbers (a number is
//! read as its text, so `"attempt": 2` and `"attempt": "2"` are the same); `null` and `""`
//! are absent. A line that is not a JSON object is a row error with its line number.

use super::read::{LedgerRow, MAX_COLUMNS, ReadOptions, row_error};
use super::{RowError, SourceError};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::Path;

pub(crate) fn read<R: LedgerRow>(
    path: &Path,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    let name = super::input::display(path);
    let io_err = |e: std::io::Error| SourceError(format!("cannot read ledger file {name}: {e}"));
    let file = super::input::open(path).map_err(io_err)?;
    let mut rdr = BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(512);
    let mut line = 0u64;
    let mut rows = 0u64;
    loop {
        buf.clear();
        if rdr.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        line += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        rows += 1;
        let text = match buf.strip_prefix(b"\xef\xbb\xbf") {
            Some(rest) if line == 1 => rest,
            _ => &buf[..],
        };
        match parse_line::<R>(text, opts, &name, line) {
            Ok(r) => on_row(r),
            Err(e) => on_error(e),
        }
    }
    Ok(rows)
}

fn parse_line<R: LedgerRow>(
    buf: &[u8],
    opts: &ReadOptions,
    name: &str,
    line: u64,
) -> Result<R, RowError> {
    with_fields(buf, R::COLUMNS, name, line, &mut |fields| {
        R::from_fields(fields, opts, name, line)
    })
}

/// What is done with a row's text fields.
pub(crate) type OnFields<'f, T> = dyn FnMut(&[Option<&str>]) -> Result<T, RowError> + 'f;

/// One JSON line as the text fields of `columns` (`fields[i]` is the value of
/// `columns[i]`, `None` when absent, `null` or empty), handed to `f`: the one parse every
/// JSONL reader shares (the audit's, and the tail that `watch` follows a file with).
pub(crate) fn with_fields<T>(
    buf: &[u8],
    columns: &'static [&'static str],
    name: &str,
    line: u64,
    f: &mut OnFields<'_, T>,
) -> Result<T, RowError> {
    let mut de = serde_json::Deserializer::from_slice(buf);
    let values = RowSeed { columns }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let msg = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
            row_error(
                name,
                line,
                None,
                format!("invalid JSON at column {}: {msg}", e.column()),
            )
        })?;
    let ncols = columns.len();
    let mut fields: [Option<&str>; MAX_COLUMNS] = [None; MAX_COLUMNS];
    for (i, v) in values.iter().enumerate().take(ncols) {
        match v {
            Scalar::Absent => {}
            Scalar::Text(s) => {
                if !s.is_empty() {
                    fields[i] = Some(s);
                }
            }
            Scalar::Other(kind) => {
                return Err(row_error(
                    name,
                    line,
                    Some(columns[i]),
                    format!("expected a string or number, found {kind}"),
                ));
            }
        }
    }
    f(&fields[..ncols])
}

#[derive(Default)]
enum Scalar<'de> {
    #[default]
    Absent,
    Text(Cow<'de, str>),
    Other(&'static str),
}

struct RowSeed {
    columns: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for RowSeed {
    type Value = [Scalar<'de>; MAX_COLUMNS];
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed {
    type Value = [Scalar<'de>; MAX_COLUMNS];
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: [Scalar<'de>; MAX_COLUMNS] = Default::default();
        let mut seen = [false; MAX_COLUMNS];
        while let Some(key) = map.next_key_seed(KeySeed {
            columns: self.columns,
        })? {
            match key {
                Some(i) => {
                    if seen[i] {
                        return Err(de::Error::custom(format_args!(
                            "duplicate key `{}`",
                            self.columns[i]
                        )));
                    }
                    seen[i] = true;
                    out[i] = map.next_value_seed(ScalarSeed)?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

struct KeySeed {
    columns: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.columns.iter().position(|c| *c == v))
    }
}

struct ScalarSeed;

impl<'de> DeserializeSeed<'de> for ScalarSeed {
    type Value = Scalar<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScalarSeed {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(v.to_string())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(v.to_string())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(v.to_string())))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Other("a boolean"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Absent)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Absent)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("an object"))
    }
}
