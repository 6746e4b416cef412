//! Check-ins to the monitors teams already watch (docs/checkins.md), each in its service's
//! documented API:
//!
//! - Healthchecks.io pinging API: `/start`, success (the bare URL), `/<exit-status>` for a
//!   failure, `/log` for an event that changes no state, `/fail`; `?rid=<uuid>` ties a
//!   start to its end; a POST body is kept as the ping's log.
//! - Cronitor telemetry API: `?state=run|complete|fail`, `series` ties a run's events,
//!   `status_code`, `message` (at most 2000 characters), `host`, `metric=duration:S`.
//! - Sentry Crons check-ins, sent as `check_in` envelope items to the DSN's project:
//!   `in_progress`, then `ok` or `error` with the same client-made `check_in_id` and the
//!   `duration`.
//!
//! One slot is one monitored run: the first attempt's start opens it, its last attempt
//! closes it; a failed attempt that is retried is a log line (Healthchecks), not a failure
//! that pages anyone.

use super::http::{Outbox, Request};
use crate::manifest::model::{AlreadySucceeded, DsnParts, Field, Monitor};
use crate::manifest::template;
use std::time::Instant;

const HC: &str = "healthchecks";
const CRONITOR: &str = "cronitor";
const SENTRY: &str = "sentry";

/// How one attempt ended, as the monitors are told.
pub struct Ended<'a> {
    pub slot: &'a str,
    /// 0 when no attempt of this process ended it.
    pub attempt: u32,
    pub success: bool,
    /// Another attempt follows in this process (the retry policy said so).
    pub retrying: bool,
    /// `run`'s exit code for the attempt (the command's own, 124, 128+N …; 0 when there
    /// is none, as for a slot dead-lettered by the store).
    pub exit_code: u8,
    /// The error code of a failure (`EXIT_3`, `TTL_EXCEEDED` …).
    pub error_code: Option<&'a str>,
    /// One line about the attempt (the command's last stderr line on a failure).
    pub message: String,
}

struct SentryTarget {
    parts: DsnParts,
    slug: String,
    environment: Option<String>,
}

/// The monitors of one job, and the run this process is reporting to them.
pub struct Checkins {
    healthchecks: Option<String>,
    cronitor: Option<String>,
    sentry: Option<SentryTarget>,
    already: AlreadySucceeded,
    instance: String,
    /// Healthchecks' `rid`, Cronitor's `series` and Sentry's `check_in_id` of the slot
    /// being worked (one UUID: the three services' ways of pairing a start and its end).
    run: uuid::Uuid,
    /// When the slot's first attempt started, once it has.
    opened: Option<Instant>,
}

/// A UUID v4 from the OS's random source, without a dependency for 16 bytes.
pub mod uuid {
    #[derive(Clone, Copy)]
    pub struct Uuid(pub [u8; 16]);

    impl Uuid {
        pub fn new() -> Uuid {
            let mut b = [0u8; 16];
            super::super::random(&mut b);
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            Uuid(b)
        }
        /// `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`
        pub fn hyphenated(&self) -> String {
            let h = self.simple();
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        }
        /// 32 hex digits (Sentry's `check_in_id`).
        pub fn simple(&self) -> String {
            super::super::hex(&self.0)
        }
    }
}

impl Checkins {
    /// The job's monitors, with `{job}` and `{service}` filled; a monitor whose value is
    /// invalid or cannot be filled is said on stderr and left out (the job still runs).
    pub fn new(m: &Monitor, job: &str, service: &str, instance: &str) -> Option<Checkins> {
        let values = [("job", job), ("service", service)];
        let note = |what: &str, why: &str| {
            eprintln!(
                "batchguard run: note: job `{job}` `monitor.{what}` {why}: no check-in is sent to it (`batchguard lint` shows why)"
            );
        };
        let url = |f: &Field<crate::manifest::model::PingUrl>, what: &str| match f {
            Field::Absent => None,
            Field::Invalid => {
                note(what, "is not valid");
                None
            }
            Field::Ok(u) => match template::render(&u.value.0, &values) {
                Ok(s) => Some(s),
                Err(e) => {
                    note(what, &format!("cannot be filled ({e})"));
                    None
                }
            },
        };
        let healthchecks = url(&m.healthchecks, "healthchecks");
        let cronitor = url(&m.cronitor, "cronitor");
        let sentry = match &m.sentry {
            Field::Absent => None,
            Field::Invalid => {
                note("sentry", "is not valid");
                None
            }
            Field::Ok(s) => {
                let s = &s.value;
                let parts = s.dsn.value().map(|d| d.parts());
                let slug = s
                    .monitor_slug
                    .value()
                    .map(|t| template::render(&t.0, &values));
                match (parts, slug) {
                    (Some(Ok(parts)), Some(Ok(slug))) => Some(SentryTarget {
                        parts,
                        slug,
                        environment: s.environment.value().cloned(),
                    }),
                    (Some(Ok(_)), None) => {
                        note("sentry", "has no `monitor_slug`");
                        None
                    }
                    (Some(Ok(_)), Some(Err(e))) => {
                        note("sentry.monitor_slug", &format!("cannot be filled ({e})"));
                        None
                    }
                    _ => {
                        note("sentry.dsn", "is absent or not valid");
                        None
                    }
                }
            }
        };
        if healthchecks.is_none() && cronitor.is_none() && sentry.is_none() {
            return None;
        }
        Some(Checkins {
            healthchecks,
            cronitor,
            sentry,
            already: m
                .already_succeeded
                .value()
                .copied()
                .unwrap_or(AlreadySucceeded::Log),
            instance: instance.to_owned(),
            run: uuid::Uuid::new(),
            opened: None,
        })
    }

    /// A new slot is worked (the current one after a catch-up): a new run for the monitors.
    pub fn begin_slot(&mut self) {
        self.run = uuid::Uuid::new();
        self.opened = None;
    }

    /// An attempt holds the lease; the slot's first one opens the monitored run.
    /// `trace_id` links the Sentry check-in to the run's trace when there is one.
    pub fn started(&mut self, out: &mut Outbox, slot: &str, attempt: u32, trace_id: Option<&str>) {
        if self.opened.is_some() {
            return;
        }
        self.opened = Some(Instant::now());
        let rid = self.run.hyphenated();
        if let Some(u) = &self.healthchecks {
            let body = format!("slot {slot} attempt {attempt} started on {}", self.instance);
            out.send(HC, hc(u, "/start", &rid, "healthchecks start", body));
        }
        if let Some(u) = &self.cronitor {
            let q = [
                ("state", "run".to_owned()),
                ("series", rid.clone()),
                ("host", self.instance.clone()),
            ];
            out.send(CRONITOR, cronitor(u, &q, "cronitor run"));
        }
        if let Some(s) = &self.sentry {
            let req = sentry(s, &self.run.simple(), "in_progress", None, trace_id);
            out.send(SENTRY, req);
        }
    }

    /// An attempt ended. The slot's run closes on success or on a failure that is not
    /// retried here; a failure that is retried is only logged (Healthchecks).
    pub fn ended(&mut self, out: &mut Outbox, e: &Ended, trace_id: Option<&str>) {
        let rid = self.run.hyphenated();
        let secs = self.opened.map(|t| t.elapsed().as_secs_f64());
        let line = format!(
            "slot {}{} {}{}",
            e.slot,
            if e.attempt > 0 {
                format!(" attempt {}", e.attempt)
            } else {
                String::new()
            },
            match (e.success, e.retrying) {
                (true, _) => "succeeded".to_owned(),
                (false, true) => format!("failed ({}), retrying", e.error_code.unwrap_or("?")),
                (false, false) => format!("failed ({})", e.error_code.unwrap_or("?")),
            },
            if e.message.is_empty() {
                String::new()
            } else {
                format!(": {}", e.message)
            }
        );
        if e.retrying {
            if let Some(u) = &self.healthchecks {
                out.send(HC, hc(u, "/log", &rid, "healthchecks log", line));
            }
            return;
        }
        if let Some(u) = &self.healthchecks {
            let (suffix, what) = if e.success {
                (String::new(), "healthchecks success")
            } else if e.exit_code == 0 {
                ("/fail".to_owned(), "healthchecks fail")
            } else {
                (format!("/{}", e.exit_code), "healthchecks failure")
            };
            out.send(HC, hc(u, &suffix, &rid, what, line.clone()));
        }
        if let Some(u) = &self.cronitor {
            let mut q = vec![
                (
                    "state",
                    if e.success { "complete" } else { "fail" }.to_owned(),
                ),
                ("series", rid.clone()),
                ("host", self.instance.clone()),
                ("status_code", e.exit_code.to_string()),
            ];
            if let Some(s) = secs {
                q.push(("metric", format!("duration:{s:.3}")));
            }
            if !e.success {
                q.push(("message", clip(&line, 2000)));
            }
            let what = if e.success {
                "cronitor complete"
            } else {
                "cronitor fail"
            };
            out.send(CRONITOR, cronitor(u, &q, what));
        }
        if let Some(s) = &self.sentry {
            let status = if e.success { "ok" } else { "error" };
            out.send(
                SENTRY,
                sentry(s, &self.run.simple(), status, secs, trace_id),
            );
        }
        self.opened = None;
    }

    /// A tick found its slot already succeeded: a second attempt at a slot that is done
    /// (healthchecks#17's "ran twice", prevented). `log` records it where the service has
    /// a log (Healthchecks `/log`); `fail` makes it a failure on every monitor.
    pub fn already_succeeded(&mut self, out: &mut Outbox, slot: &str, reason: &str) {
        let line = format!(
            "slot {slot} was attempted again on {} and skipped: {reason}",
            self.instance
        );
        let rid = uuid::Uuid::new().hyphenated();
        match self.already {
            AlreadySucceeded::Ignore => {}
            AlreadySucceeded::Log => {
                if let Some(u) = &self.healthchecks {
                    out.send(HC, hc(u, "/log", &rid, "healthchecks log", line));
                }
            }
            AlreadySucceeded::Fail => {
                if let Some(u) = &self.healthchecks {
                    out.send(HC, hc(u, "/fail", &rid, "healthchecks fail", line.clone()));
                }
                if let Some(u) = &self.cronitor {
                    let q = [
                        ("state", "fail".to_owned()),
                        ("host", self.instance.clone()),
                        ("message", clip(&line, 2000)),
                    ];
                    out.send(CRONITOR, cronitor(u, &q, "cronitor fail"));
                }
                if let Some(s) = &self.sentry {
                    let id = uuid::Uuid::new().simple();
                    out.send(SENTRY, sentry(s, &id, "error", None, None));
                }
            }
        }
    }
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Splits a URL at its query: a Healthchecks slug URL may carry `?create=1`.
fn split_query(url: &str) -> (&str, Option<&str>) {
    match url.split_once('?') {
        Some((base, q)) => (base, Some(q)),
        None => (url, None),
    }
}

fn with_query(base: &str, kept: Option<&str>, pairs: &[(&str, String)]) -> String {
    let mut q: Vec<String> = kept
        .filter(|k| !k.is_empty())
        .map(|k| vec![k.to_owned()])
        .unwrap_or_default();
    for (k, v) in pairs {
        q.push(format!("{k}={}", encode(v)));
    }
    if q.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", q.join("&"))
    }
}

/// Percent-encoding of a query value (RFC 3986 unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hc(url: &str, suffix: &str, rid: &str, what: &str, body: String) -> Request {
    let (base, q) = split_query(url);
    let base = format!("{}{suffix}", base.trim_end_matches('/'));
    Request {
        what: what.to_owned(),
        post: true,
        url: with_query(&base, q, &[("rid", rid.to_owned())]),
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: body.into_bytes(),
    }
}

fn cronitor(url: &str, pairs: &[(&str, String)], what: &str) -> Request {
    let (base, q) = split_query(url);
    Request {
        what: what.to_owned(),
        post: false,
        url: with_query(base, q, pairs),
        headers: vec![],
        body: vec![],
    }
}

/// A `check_in` envelope (Sentry's envelope format: a header line, an item header line,
/// the item's JSON), authenticated with the DSN's public key.
fn sentry(
    s: &SentryTarget,
    check_in_id: &str,
    status: &str,
    duration: Option<f64>,
    trace_id: Option<&str>,
) -> Request {
    let p = &s.parts;
    let prefix = if p.prefix.is_empty() {
        String::new()
    } else {
        format!("/{}", p.prefix.trim_matches('/'))
    };
    let url = format!(
        "{}://{}{prefix}/api/{}/envelope/",
        p.scheme, p.host, p.project
    );
    let mut item = serde_json::json!({
        "check_in_id": check_in_id,
        "monitor_slug": s.slug,
        "status": status,
    });
    if let Some(d) = duration {
        item["duration"] = serde_json::json!(d);
    }
    if let Some(env) = &s.environment {
        item["environment"] = serde_json::json!(env);
    }
    if let Some(t) = trace_id {
        item["contexts"] = serde_json::json!({ "trace": { "trace_id": t } });
    }
    let head = serde_json::json!({ "sent_at": jiff::Timestamp::now().to_string() });
    let body = format!("{head}\n{{\"type\":\"check_in\"}}\n{item}\n");
    Request {
        what: format!("sentry {status}"),
        post: true,
        url,
        headers: vec![
            (
                "Content-Type".into(),
                "application/x-sentry-envelope".into(),
            ),
            (
                "X-Sentry-Auth".into(),
                format!(
                    "Sentry sentry_version=7, sentry_client=batchguard/{}, sentry_key={}",
                    env!("CARGO_PKG_VERSION"),
                    p.public_key
                ),
            ),
        ],
        body: body.into_bytes(),
    }
}
