//! An attempt's outcome as an error code (SPEC 7.1 item 6) and its class for the retry
//! policy (item 7); the outputs file read line by line, malformed lines counted.

use crate::manifest::model::{OnUnknown, Retry};
use crate::process::{self, Outcome, Stopped};
use crate::store::OutputRow;
use jiff::Timestamp;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Success,
    /// Retried while attempts are left.
    Retryable,
    Fatal,
    /// Neither list names it, and `on_unknown` is not `retry`.
    Unknown,
    /// batchguard was told to stop (by this signal): retryable, but by the next `run`.
    Interrupted(i32),
    SpawnFailed,
}

pub struct Classified {
    pub class: Class,
    pub code: String,
    /// Why the command did not run, when it did not.
    pub message: String,
    /// The last 4 KiB of stderr, lossily decoded, secrets masked.
    pub stderr_tail: String,
}

/// The longest error code read from `BATCHGUARD_ERROR`.
const MAX_CODE: usize = 128;

fn error_file_code(path: &Path) -> Option<String> {
    use std::io::Read;
    // Only the first line counts: read no more than a line can be, whatever the file's size.
    let mut bytes = Vec::with_capacity(512);
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let first = text.lines().next()?.trim();
    if first.is_empty() || first.len() > MAX_CODE || first.chars().any(char::is_control) {
        return None;
    }
    Some(first.to_owned())
}

/// Masks what looks like a secret: DSN passwords and `password=`/`token=` values.
pub fn mask_secrets(s: &str) -> String {
    // Most commands print nothing on stderr: building the two regexes would cost every
    // such run about half a millisecond for nothing.
    if s.is_empty() {
        return String::new();
    }
    static RE: std::sync::OnceLock<(regex::Regex, regex::Regex)> = std::sync::OnceLock::new();
    let (dsn, kv) = RE.get_or_init(|| {
        (
            regex::Regex::new(r"(://[^:/\s@]*:)[^@\s]+@").unwrap_or_else(|_| unreachable!()),
            regex::Regex::new(
                r"(?i)\b((?:password|passwd|pwd|secret|token|api_key|apikey)\s*[=:]\s*)[^\s&]+",
            )
            .unwrap_or_else(|_| unreachable!()),
        )
    });
    let s = dsn.replace_all(s, "${1}***@");
    kv.replace_all(&s, "${1}***").into_owned()
}

pub fn classify(
    result: &Result<Outcome, (u8, String)>,
    error_file: &Path,
    retry: &Retry,
) -> Classified {
    let (o, code) = match result {
        Err((_, m)) => {
            return Classified {
                class: Class::SpawnFailed,
                code: "SPAWN_FAILED".into(),
                message: m.clone(),
                stderr_tail: String::new(),
            };
        }
        Ok(o) => (o, error_file_code(error_file)),
    };
    let tail = mask_secrets(&String::from_utf8_lossy(&o.stderr_tail));
    let done = |class, code: String| Classified {
        class,
        code,
        message: String::new(),
        stderr_tail: tail.clone(),
    };
    if let Stopped::Interrupted(sig) = o.stopped {
        return done(Class::Interrupted(sig), "INTERRUPTED".into());
    }
    let code = match (o.stopped, o.exit) {
        (Stopped::No, process::Exit::Code(0)) => return done(Class::Success, String::new()),
        _ if code.is_some() => code.unwrap_or_default(),
        (Stopped::Deadline, _) => "TTL_EXCEEDED".into(),
        (_, process::Exit::Code(75)) => "EX_TEMPFAIL".into(),
        (_, process::Exit::Code(n)) => format!("EXIT_{n}"),
        (_, process::Exit::Signal(s)) => format!("SIGNAL_{}", process::signal_name(s)),
    };
    let listed = |l: &Option<&Vec<crate::text::Spanned<String>>>| {
        l.is_some_and(|v| v.iter().any(|c| c.value == code))
    };
    let class = if listed(&retry.fatal.value()) {
        Class::Fatal
    } else if code == "EX_TEMPFAIL"
        || listed(&retry.retryable.value())
        || retry.on_unknown.value() == Some(&OnUnknown::Retry)
    {
        Class::Retryable
    } else {
        Class::Unknown
    };
    done(class, code)
}

/// Why an outputs line was refused, with its 1-based line number.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub line: usize,
    pub why: &'static str,
}

/// The refused lines of an outputs file: how many, and the first few by line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rejections {
    pub count: usize,
    pub first: Vec<Rejected>,
    /// Lines over 1 KiB kept as `sha256:<hex>` (SPEC 7.1 item 18).
    pub hashed: usize,
}

impl Rejections {
    fn push(&mut self, line: usize, why: &'static str) {
        self.count += 1;
        if self.first.len() < SHOWN {
            self.first.push(Rejected { line, why });
        }
    }
}

/// The longest output key accepted.
pub const MAX_KEY: usize = 1024;

/// The most output keys one run reports; lines beyond are refused and counted, so a runaway
/// file cannot exhaust memory or the ledger.
pub const MAX_OUTPUTS: usize = 1_000_000;

/// How many refused lines `detail` names.
const SHOWN: usize = 10;

/// Reads the outputs file: one key per line. A line over 1 KiB is kept as
/// `sha256:<hex of the line>` (so the same long key reported twice is still seen twice);
/// an empty line, one with a NUL or one that is not UTF-8 is refused and counted. The file
/// is streamed and no line is held beyond 1 KiB (a long one is hashed as it is read), so its
/// size bounds nothing but the time. A missing file is no outputs.
pub fn read_outputs(path: &Path, at: Timestamp) -> (Vec<OutputRow>, Rejections) {
    use sha2::Digest;
    use std::io::{BufRead, BufReader};
    let mut ok = Vec::new();
    let mut bad = Rejections::default();
    let Ok(file) = std::fs::File::open(path) else {
        return (ok, bad);
    };
    let mut rdr = BufReader::with_capacity(1 << 16, file);
    let mut line = 0usize;
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_KEY + 2);
    loop {
        buf.clear();
        // Up to the newline: the first MAX_KEY + 1 bytes in `buf` (a key and its `\r`),
        // the rest through the hasher, a `\r` held back until it is known not to end it.
        let mut hasher: Option<sha2::Sha256> = None;
        let mut held_cr = false;
        let mut ended = false;
        let mut any = false;
        loop {
            let chunk = match rdr.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, nl) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let piece = &chunk[..take];
            if hasher.is_none() && buf.len() + piece.len() > MAX_KEY + 1 {
                let mut h = sha2::Sha256::new();
                h.update(&buf);
                buf.clear();
                hasher = Some(h);
            }
            match hasher.as_mut() {
                Some(h) => {
                    if held_cr && !piece.is_empty() {
                        h.update(b"\r");
                        held_cr = false;
                    }
                    let body = match piece.strip_suffix(b"\r") {
                        Some(b) => {
                            held_cr = true;
                            b
                        }
                        None => piece,
                    };
                    h.update(body);
                }
                None => buf.extend_from_slice(piece),
            }
            rdr.consume(take + usize::from(nl));
            if nl {
                ended = true;
                break;
            }
        }
        if !any {
            break;
        }
        line += 1;
        let raw = buf.strip_suffix(b"\r").unwrap_or(&buf);
        let key = match hasher {
            Some(h) => Some(hex_key(&h.finalize())),
            None if raw.len() > MAX_KEY => Some(hex_key(&sha2::Sha256::digest(raw))),
            None => None,
        };
        let why = if ok.len() >= MAX_OUTPUTS {
            Some("beyond the limit of 1000000 outputs")
        } else if key.is_some() {
            None
        } else if raw.is_empty() {
            Some("empty")
        } else if raw.contains(&0) {
            Some("contains NUL")
        } else {
            None
        };
        match (why, key) {
            (Some(w), _) => bad.push(line, w),
            (None, Some(k)) => {
                bad.hashed += 1;
                ok.push(OutputRow { key: k, at });
            }
            (None, None) => match std::str::from_utf8(raw) {
                Err(_) => bad.push(line, "not UTF-8"),
                Ok(s) => ok.push(OutputRow {
                    key: s.to_owned(),
                    at,
                }),
            },
        }
        if !ended {
            break;
        }
    }
    (ok, bad)
}

/// `sha256:` and the digest in lower-case hex, as [`crate::snapshot::digest`] writes it.
fn hex_key(d: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in d {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `detail` text for output lines kept as their digest.
pub fn hashed_detail(n: usize) -> String {
    format!(
        "{n} output line{} over 1 KiB kept as sha256:<hex of the line>",
        if n == 1 { "" } else { "s" }
    )
}

/// `detail` text for refused output lines: the count and the first ten.
pub fn rejected_detail(r: &Rejections) -> String {
    let shown: Vec<String> = r
        .first
        .iter()
        .map(|x| format!("line {} ({})", x.line, x.why))
        .collect();
    let more = if r.count > shown.len() {
        format!(", and {} more", r.count - shown.len())
    } else {
        String::new()
    };
    format!(
        "{} malformed output line{} skipped: {}{more}",
        r.count,
        if r.count == 1 { "" } else { "s" },
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_lines_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o");
        let long = "x".repeat(1025);
        std::fs::write(&p, format!("a\n\nb\0c\n{long}\nd\r\n")).unwrap();
        let (ok, bad) = read_outputs(&p, Timestamp::UNIX_EPOCH);
        let keys: Vec<&str> = ok.iter().map(|o| o.key.as_str()).collect();
        let digest = crate::snapshot::digest(long.as_bytes());
        assert_eq!(keys, ["a", digest.as_str(), "d"]);
        assert_eq!(bad.first.iter().map(|b| b.line).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(bad.hashed, 1);
        assert!(
            rejected_detail(&bad).starts_with("2 malformed output lines skipped: line 2 (empty)")
        );
    }

    #[test]
    fn a_long_key_is_its_digest_however_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o");
        // Longer than the reader's buffer, with CRLF: the digest is of the line alone.
        let long = "k".repeat(200_000);
        std::fs::write(&p, format!("{long}\r\n{long}\n{long}")).unwrap();
        let (ok, bad) = read_outputs(&p, Timestamp::UNIX_EPOCH);
        let want = crate::snapshot::digest(long.as_bytes());
        assert_eq!(ok.len(), 3);
        assert!(ok.iter().all(|o| o.key == want), "{ok:?}");
        assert_eq!((bad.count, bad.hashed), (0, 3));
    }

    #[test]
    fn secrets_are_masked() {
        let s = mask_secrets("connect postgres://u:hunter2@db/x failed; token=abc def");
        assert!(!s.contains("hunter2") && !s.contains("abc"), "{s}");
    }
}
