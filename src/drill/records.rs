//! The records of an input snapshot, read strictly: a drill proves that every record was
//! applied exactly once, so a record it cannot read is an error with its line, never a
//! record quietly left out of the proof.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// A line longer than this is refused: no snapshot record is a mebibyte of JSON, and an
/// endless line (a binary file, a device) must not be read into memory whole.
const MAX_LINE: usize = 1 << 20;

/// The snapshot's record keys, in file order, each once.
#[derive(Debug, Default)]
pub struct Records {
    pub keys: Vec<String>,
    pub index: HashMap<String, usize>,
}

impl Records {
    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// `snapshot.format`, else the file's extension, else JSON Lines.
    pub fn of(declared: Option<&str>, path: &Path) -> Format {
        match declared {
            Some("csv") => Format::Csv,
            Some(_) => Format::Jsonl,
            None if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("csv")) =>
            {
                Format::Csv
            }
            None => Format::Jsonl,
        }
    }
}

/// Reads every record's `key` field. Errors name the file and the line.
pub fn read(path: &Path, format: Format, key: &str) -> Result<Records, String> {
    let shown = path.display();
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read the snapshot {shown}: {e}"))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!("the snapshot {shown} is a directory"));
    }
    let mut r = BufReader::with_capacity(1 << 16, f);
    let mut out = Records::default();
    let mut lines = Lines::default();
    let mut add = |k: String, line: u64, out: &mut Records| -> Result<(), String> {
        if k.is_empty() {
            return Err(format!("{shown}:{line}: the record's `{key}` is empty"));
        }
        if let Some(&first) = out.index.get(&k) {
            return Err(format!(
                "{shown}:{line}: record `{k}` appears twice (first at line {}): a drill cannot prove each record was applied once when the records are not distinct",
                lines.line_of[first]
            ));
        }
        out.index.insert(k.clone(), out.keys.len());
        out.keys.push(k);
        lines.line_of.push(line);
        Ok(())
    };
    match format {
        Format::Jsonl => {
            let mut buf = Vec::new();
            let mut line = 0u64;
            while next_line(&mut r, &mut buf, &shown, line + 1)? {
                line += 1;
                let text = line_text(&buf, &shown, line)?;
                if text.trim().is_empty() {
                    continue;
                }
                let v: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| format!("{shown}:{line}: not a JSON record: {e}"))?;
                let serde_json::Value::Object(obj) = v else {
                    return Err(format!("{shown}:{line}: a record must be a JSON object"));
                };
                let k = match obj.get(key) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(n @ serde_json::Value::Number(_)) => n.to_string(),
                    Some(_) => {
                        return Err(format!(
                            "{shown}:{line}: the record's `{key}` is not a string or a number"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "{shown}:{line}: the record has no `{key}` field (snapshot.key)"
                        ));
                    }
                };
                add(k, line, &mut out)?;
            }
        }
        Format::Csv => {
            let mut rdr = csv::ReaderBuilder::new()
                .has_headers(true)
                .from_reader(Guarded { inner: r });
            let headers = rdr.headers().map_err(|e| csv_error(&shown, &e))?.clone();
            let col = headers
                .iter()
                .position(|h| h.trim() == key)
                .ok_or_else(|| {
                    format!("{shown}:1: the header has no `{key}` column (snapshot.key)")
                })?;
            for rec in rdr.records() {
                let rec = rec.map_err(|e| csv_error(&shown, &e))?;
                let line = rec.position().map_or(0, |p| p.line());
                let k = rec
                    .get(col)
                    .ok_or_else(|| format!("{shown}:{line}: the record has no `{key}` field"))?;
                add(k.trim().to_owned(), line, &mut out)?;
            }
        }
    }
    Ok(out)
}

#[derive(Default)]
struct Lines {
    line_of: Vec<u64>,
}

fn csv_error(shown: &std::path::Display<'_>, e: &csv::Error) -> String {
    let at = e
        .position()
        .map(|p| format!(":{}", p.line()))
        .unwrap_or_default();
    format!("{shown}{at}: not a CSV record: {e}")
}

/// Refuses NUL bytes in a CSV snapshot (a binary file read as text).
struct Guarded<R> {
    inner: R,
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if buf[..n].contains(&0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a NUL byte: this is not a text file",
            ));
        }
        Ok(n)
    }
}

/// The next line into `buf` (without its newline); false at the end of the file.
fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    shown: &std::path::Display<'_>,
    line: u64,
) -> Result<bool, String> {
    buf.clear();
    loop {
        let chunk = r
            .fill_buf()
            .map_err(|e| format!("cannot read the snapshot {shown}: {e}"))?;
        if chunk.is_empty() {
            return Ok(!buf.is_empty());
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > MAX_LINE + 1 {
            return Err(format!(
                "{shown}:{line}: the line is over {} KiB: not a snapshot record",
                MAX_LINE / 1024
            ));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(true);
        }
    }
}

fn line_text<'a>(
    buf: &'a [u8],
    shown: &std::path::Display<'_>,
    line: u64,
) -> Result<&'a str, String> {
    if let Some(col) = buf.iter().position(|&b| b == 0) {
        return Err(format!(
            "{shown}:{line}:{}: a NUL byte: this is not a text file",
            col + 1
        ));
    }
    std::str::from_utf8(buf)
        .map_err(|e| format!("{shown}:{line}:{}: not UTF-8 text", e.valid_up_to() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &[u8], format: Format) -> Result<Records, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, text).unwrap();
        read(&p, format, "id")
    }

    #[test]
    fn keys_in_order_strings_and_numbers() {
        let r = read_text(
            b"{\"id\":\"a\"}\n\n{\"id\":7,\"x\":1}\r\n{\"id\":\"c\"}",
            Format::Jsonl,
        )
        .unwrap();
        assert_eq!(r.keys, ["a", "7", "c"]);
        let r = read_text(b"x,id\n1,a\n2,\"b,c\"\n", Format::Csv).unwrap();
        assert_eq!(r.keys, ["a", "b,c"]);
    }

    #[test]
    fn every_bad_record_is_an_error_with_its_line() {
        let e = read_text(b"{\"id\":\"a\"}\n{nope\n", Format::Jsonl).unwrap_err();
        assert!(e.contains(":2: not a JSON record"), "{e}");
        let e = read_text(b"{\"id\":\"a\"}\n{\"x\":1}\n", Format::Jsonl).unwrap_err();
        assert!(e.contains(":2: the record has no `id` field"), "{e}");
        let e = read_text(b"{\"id\":\"a\"}\n{\"id\":\"a\"}\n", Format::Jsonl).unwrap_err();
        assert!(e.contains("appears twice (first at line 1)"), "{e}");
        let e = read_text(b"{\"id\":\"a\"}\n{\"id\":\"\0\"}\n", Format::Jsonl).unwrap_err();
        assert!(e.contains(":2:8: a NUL byte"), "{e}");
        let e = read_text(b"x,y\n1,2\n", Format::Csv).unwrap_err();
        assert!(e.contains(":1: the header has no `id` column"), "{e}");
        let e = read_text(b"id\na\n\0\n", Format::Csv).unwrap_err();
        assert!(e.contains("NUL"), "{e}");
        let long = vec![b'x'; MAX_LINE + 10];
        let e = read_text(&long, Format::Jsonl).unwrap_err();
        assert!(e.contains(":1: the line is over"), "{e}");
    }
}
