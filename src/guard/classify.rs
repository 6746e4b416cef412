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

/// Reads the outputs file: one key per line; an empty line, one over 1 KiB, one with a NUL
/// or one that is not UTF-8 is refused and counted. The file is streamed and no line is
/// held beyond 1 KiB, so its size bounds nothing but the time. A missing file is no
/// outputs.
pub fn read_outputs(path: &Path, at: Timestamp) -> (Vec<OutputRow>, Rejections) {
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
        // Up to the newline, keeping at most MAX_KEY + 2 bytes (a key, `\r`, one more).
        let mut long = false;
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
            let room = (MAX_KEY + 2).saturating_sub(buf.len());
            buf.extend_from_slice(&chunk[..take.min(room)]);
            long |= take > room;
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
        let why = if long || raw.len() > MAX_KEY {
            Some("over 1 KiB")
        } else if raw.is_empty() {
            Some("empty")
        } else if raw.contains(&0) {
            Some("contains NUL")
        } else if ok.len() >= MAX_OUTPUTS {
            Some("beyond the limit of 1000000 outputs")
        } else {
            None
        };
        match (why, std::str::from_utf8(raw)) {
            (Some(w), _) => bad.push(line, w),
            (None, Err(_)) => bad.push(line, "not UTF-8"),
            (None, Ok(s)) => ok.push(OutputRow {
                key: s.to_owned(),
                at,
            }),
        }
        if !ended {
            break;
        }
    }
    (ok, bad)
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
        assert_eq!(keys, ["a", "d"]);
        assert_eq!(
            bad.first.iter().map(|b| b.line).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert!(
            rejected_detail(&bad).starts_with("3 malformed output lines skipped: line 2 (empty)")
        );
    }

    #[test]
    fn secrets_are_masked() {
        let s = mask_secrets("connect postgres://u:hunter2@db/x failed; token=abc def");
        assert!(!s.contains("hunter2") && !s.contains("abc"), "{s}");
    }
}
