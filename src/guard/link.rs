//! `run --link`: the guard driven by a process of its own (the npm package's `guard()`)
//! over JSON lines on stdin and stdout, instead of a command it starts. The protocol is
//! `docs/node-protocol.md`. The attempt is the driver's callback: its `output` lines go to
//! the attempt's outputs file and its `done` becomes an exit status (with the error code in
//! the error file), so classification, retries, the deadline and the ledger are `run`'s own.

use crate::process::{self, Exit, Outcome, Stopped};
use jiff::Timestamp;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the guard waits for a message before it looks at its clock and its signals.
const TICK: Duration = Duration::from_millis(20);

/// The longest error code taken from `done` (as from `BATCHGUARD_ERROR`).
const MAX_CODE: usize = 128;

/// The longest message taken from `done`: the `detail` of `end` keeps 4 KiB.
const MAX_MESSAGE: usize = 4096;

/// The longest claimed key, in bytes (an output line's limit; MySQL's claim keeps 1024
/// characters).
pub const MAX_CLAIM_KEY: usize = 1024;

/// Why a claimed key is refused before any store is asked: `None` when it is one.
pub fn bad_claim_key(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        Some("a claimed key is not empty")
    } else if key.contains(['\n', '\r', '\0']) {
        Some("a claimed key is one line, without NUL")
    } else if key.len() > MAX_CLAIM_KEY {
        Some("a claimed key is at most 1024 bytes (hash a longer one: `sha256:…`)")
    } else {
        None
    }
}

/// A claim's answer (`claimed` event) for the driver, from the store's answer.
fn claim_answer(id: Value, answer: Result<bool, crate::store::StoreError>) -> Value {
    match answer {
        Ok(first) => json!({"event": "claimed", "id": id, "ok": true, "claimed": first}),
        Err(e) => {
            let code = if e.kind() == crate::store::ErrorKind::ClaimRefused {
                "E_CLAIM_REFUSED"
            } else {
                "E_STORE"
            };
            json!({"event": "claimed", "id": id, "ok": false, "code": code, "error": e.to_string()})
        }
    }
}

/// The `detail` of an attempt whose callback was still running at the deadline (SPEC 7.1
/// item 25): the guard can end the attempt and release the lease, but a callback in another
/// process is not its to stop, so the ledger never claims it was.
pub const NOT_STOPPED: &str = "callback still running, not stopped";

enum Line {
    Msg(Value),
    Bad(String),
    Eof,
}

/// The driver's end of the link: its lines, read on a thread of their own.
pub struct Link {
    rx: Receiver<Line>,
    /// The driver closed its end (it exited or died).
    pub gone: bool,
    /// The last attempt reached its deadline with the callback unsettled: it ended
    /// `TTL_EXCEEDED`, but the callback may still be running (nothing here can stop it).
    pub overran: bool,
}

/// What an attempt tells the driver when it is granted.
pub struct Granted<'a> {
    pub slot: Timestamp,
    pub attempt: u32,
    pub fence: i64,
    pub run_id: &'a str,
    pub deadline: Timestamp,
    pub abort_at: Timestamp,
    pub trigger: &'a str,
    /// The attempt's span as a W3C `traceparent`, when spans are exported.
    pub traceparent: Option<String>,
}

impl Link {
    /// Starts reading stdin. Call after the signals are blocked, so the thread inherits the
    /// mask and every stop signal is taken by the guard's own wait.
    pub fn start() -> Link {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut lines = stdin.lock();
            let mut buf = String::new();
            loop {
                buf.clear();
                let line = match lines.read_line(&mut buf) {
                    Ok(0) | Err(_) => Line::Eof,
                    Ok(_) if buf.trim().is_empty() => continue,
                    Ok(_) => match serde_json::from_str::<Value>(buf.trim()) {
                        Ok(v) => Line::Msg(v),
                        Err(e) => Line::Bad(format!("not a JSON line: {e}")),
                    },
                };
                let eof = matches!(line, Line::Eof);
                if tx.send(line).is_err() || eof {
                    return;
                }
            }
        });
        Link {
            rx,
            gone: false,
            overran: false,
        }
    }

    /// One line to the driver. A driver that is gone is not an error: what the guard does
    /// next (record, release) does not depend on being heard.
    pub fn send(&self, v: &Value) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{v}").and_then(|()| out.flush());
    }

    /// `run` could not run: the CLI's message and the case's code.
    pub fn error(&self, code: &str, message: &str) {
        self.send(&json!({"event": "error", "code": code, "message": message}));
    }

    /// The attempt, as the driver's callback: `acquired`, then `output`s until `done`, the
    /// deadline, a stop signal or the driver's end of file.
    pub fn attempt(
        &mut self,
        g: &Granted,
        outputs: &Path,
        error: &Path,
        deadline: Instant,
        grace: Duration,
        claim: &mut dyn FnMut(&str) -> Result<bool, crate::store::StoreError>,
    ) -> Outcome {
        let mut acquired = json!({
            "event": "acquired",
            "slot": crate::store::rfc3339(g.slot),
            "attempt": g.attempt,
            "fence": g.fence.to_string(),
            "runId": g.run_id,
            "deadline": crate::store::rfc3339(g.deadline),
            "abortAt": crate::store::rfc3339(g.abort_at),
            "trigger": g.trigger,
        });
        if let Some(tp) = &g.traceparent {
            acquired["traceparent"] = json!(tp);
        }
        self.send(&acquired);
        self.overran = false;
        let ended = |exit, stopped, tail: Vec<u8>| Outcome {
            exit,
            stopped,
            stderr_tail: tail,
        };
        let abort_at = deadline.checked_sub(grace).unwrap_or(deadline);
        let mut aborted = false;
        let mut file = std::fs::OpenOptions::new().append(true).open(outputs);
        loop {
            let now = Instant::now();
            if now >= deadline {
                if !aborted {
                    self.send(&json!({"event": "abort", "reason": "deadline"}));
                }
                self.overran = true;
                return ended(Exit::Signal(libc::SIGKILL), Stopped::Deadline, vec![]);
            }
            if !aborted && now >= abort_at {
                self.send(&json!({"event": "abort", "reason": "deadline"}));
                aborted = true;
            }
            if let Some(sig) = process::stop_signal_now() {
                self.send(&json!({"event": "abort", "reason": "signal"}));
                // The grace for the callback to settle; what it says then is not recorded
                // as its outcome: the attempt was interrupted.
                let until = Instant::now() + grace.min(deadline.saturating_duration_since(now));
                while Instant::now() < until {
                    match self.rx.recv_timeout(TICK) {
                        Ok(Line::Msg(m)) if m["op"] == "done" => break,
                        Ok(Line::Eof) => {
                            self.gone = true;
                            break;
                        }
                        _ => {}
                    }
                }
                return ended(Exit::Signal(sig), Stopped::Interrupted(sig), vec![]);
            }
            let wait = TICK
                .min(deadline.saturating_duration_since(now))
                .min(if aborted {
                    TICK
                } else {
                    abort_at.saturating_duration_since(now)
                })
                .max(Duration::from_millis(1));
            let msg = match self.rx.recv_timeout(wait) {
                Ok(Line::Msg(m)) => m,
                Ok(Line::Bad(why)) => {
                    eprintln!("batchguard run: the link sent a line that is {why}; ignored");
                    continue;
                }
                Ok(Line::Eof) | Err(RecvTimeoutError::Disconnected) => {
                    // The driver is gone (a `kill -9` of the Node.js process): the attempt
                    // ends at once, so its lease is released now, not at its TTL.
                    self.gone = true;
                    return ended(
                        Exit::Signal(libc::SIGHUP),
                        Stopped::Interrupted(libc::SIGHUP),
                        b"the process that drove this run (--link) went away".to_vec(),
                    );
                }
                Err(RecvTimeoutError::Timeout) => continue,
            };
            match msg["op"].as_str() {
                Some("output") => {
                    let id = msg.get("id").cloned().unwrap_or(Value::Null);
                    let refused = match msg["key"].as_str() {
                        None => Some("`key` must be a string".to_owned()),
                        Some("") => Some("an output key is not empty".to_owned()),
                        Some(k) if k.contains(['\n', '\r', '\0']) => {
                            Some("an output key is one line, without NUL".to_owned())
                        }
                        Some(k) => match file.as_mut() {
                            Ok(f) => writeln!(f, "{k}").err().map(|e| {
                                format!("cannot write the outputs file {}: {e}", outputs.display())
                            }),
                            Err(e) => Some(format!(
                                "cannot open the outputs file {}: {e}",
                                outputs.display()
                            )),
                        },
                    };
                    match refused {
                        None => self.send(&json!({"event": "ack", "id": id, "ok": true})),
                        Some(e) => {
                            self.send(&json!({"event": "ack", "id": id, "ok": false, "error": e}))
                        }
                    }
                }
                Some("claim") => {
                    // SPEC 7.5: the store's claim with this attempt's run id and fence.
                    let id = msg.get("id").cloned().unwrap_or(Value::Null);
                    let answer = match msg["key"].as_str() {
                        None => json!({"event": "claimed", "id": id, "ok": false,
                            "code": "E_CLAIM_KEY", "error": "`key` must be a string"}),
                        Some(k) => match bad_claim_key(k) {
                            Some(why) => json!({"event": "claimed", "id": id, "ok": false,
                                "code": "E_CLAIM_KEY", "error": why}),
                            None => claim_answer(id, claim(k)),
                        },
                    };
                    self.send(&answer);
                }
                Some("done") if msg["status"] == "success" => {
                    return ended(Exit::Code(0), Stopped::No, vec![]);
                }
                Some("done") => {
                    let code = msg["code"]
                        .as_str()
                        .map(str::trim)
                        .filter(|c| {
                            !c.is_empty() && c.len() <= MAX_CODE && !c.chars().any(char::is_control)
                        })
                        .unwrap_or("EXCEPTION");
                    let _ = std::fs::write(error, format!("{code}\n"));
                    let mut message = msg["message"].as_str().unwrap_or_default().as_bytes();
                    if message.len() > MAX_MESSAGE {
                        message = &message[message.len() - MAX_MESSAGE..];
                    }
                    return ended(Exit::Code(1), Stopped::No, message.to_vec());
                }
                _ => {
                    eprintln!("batchguard run: the link sent an unknown message {msg}; ignored");
                }
            }
        }
    }

    /// An attempt was recorded: its status, its code, and the delay before the next one.
    pub fn ended(
        &self,
        slot: Timestamp,
        attempt: u32,
        code: Option<&str>,
        retry_in: Option<Duration>,
    ) {
        let mut v = json!({
            "event": "ended",
            "slot": crate::store::rfc3339(slot),
            "attempt": attempt,
            "status": if code.is_none() { "success" } else { "failure" },
        });
        if let Some(c) = code {
            v["code"] = json!(c);
        }
        if let Some(d) = retry_in {
            v["retryInMs"] = json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        }
        self.send(&v);
    }

    /// Outputs refused after the attempt: the driver's `output`s that arrive once the
    /// attempt is over are answered, never written.
    pub fn refuse_late(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            match line {
                Line::Msg(m) if m["op"] == "output" => {
                    let id = m.get("id").cloned().unwrap_or(Value::Null);
                    self.send(&json!({"event": "ack", "id": id, "ok": false,
                        "error": "the attempt is over (its deadline passed or it was recorded): the lease may be another holder's"}));
                }
                Line::Msg(m) if m["op"] == "claim" => {
                    let id = m.get("id").cloned().unwrap_or(Value::Null);
                    self.send(&json!({"event": "claimed", "id": id, "ok": false, "code": "E_CLAIM_REFUSED",
                        "error": "the attempt is over (its deadline passed or it was recorded): the lease may be another holder's; nothing was claimed"}));
                }
                Line::Eof => self.gone = true,
                _ => {}
            }
        }
    }
}
