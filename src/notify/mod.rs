//! What `run` tells the outside world besides its ledger: check-ins to the monitors a team
//! watches ([`checkin`], docs/checkins.md) and OpenTelemetry spans ([`otel`],
//! docs/opentelemetry.md). The guard calls a [`Notifier`] at a few points (an attempt
//! starts, ends, a slot is skipped, `run` exits); with no monitor in the manifest and no
//! OTLP endpoint in the environment it is empty and each call is one branch.
//!
//! Nothing here can block or fail a job: requests go out on background threads, each
//! bounded by a timeout; at exit `run` waits for them at most that long, and every request
//! that did not go through is counted and said on stderr and in `--report`.

pub mod checkin;
pub mod http;
pub mod otel;

use crate::manifest::model::Monitor;
use crate::store::{self, Refusal};
use http::{Outbox, Summary};
use jiff::Timestamp;
use std::time::Duration;

/// The default bound of one check-in, and of the wait for them at exit.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Fills `buf` from the OS's random source (the clock and pid when it cannot be read).
pub fn random(buf: &mut [u8]) {
    use std::io::Read;
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok();
    if !ok {
        let mut x = (Timestamp::now().as_nanosecond() as u64) ^ u64::from(std::process::id());
        for b in buf.iter_mut() {
            // xorshift: distinct ids within the process, unpredictable enough for ids.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One attempt as the monitors and the tracer see it.
pub struct Attempt<'a> {
    pub slot: Timestamp,
    pub attempt: u32,
    pub fence: i64,
    pub run_id: &'a str,
    pub trigger: &'a str,
}

/// How an attempt ended.
pub struct Outcome<'a> {
    /// succeeded | failed | dead_lettered
    pub outcome: &'a str,
    pub success: bool,
    pub retrying: bool,
    pub exit_code: u8,
    pub error_code: Option<&'a str>,
    /// The last stderr line of a failure, or the reason it could not start.
    pub message: String,
}

/// The span of the attempt under way.
struct Open {
    span_id: [u8; 8],
    start_ns: u64,
    attributes: Vec<(&'static str, otel::Val)>,
}

struct Trace {
    cfg: otel::Config,
    trace_id: [u8; 16],
    parent: Option<otel::Parent>,
    spans: Vec<otel::Span>,
    open: Option<Open>,
}

struct Active {
    outbox: Outbox,
    wait: Duration,
    checkins: Option<checkin::Checkins>,
    trace: Option<Trace>,
    job: String,
    service: String,
    instance: String,
}

/// Check-ins and spans of one `run`; empty (and free) when neither is configured.
pub struct Notifier {
    active: Option<Box<Active>>,
}

fn now_ns() -> u64 {
    u64::try_from(Timestamp::now().as_nanosecond()).unwrap_or(0)
}

impl Notifier {
    pub fn off() -> Notifier {
        Notifier { active: None }
    }

    /// The job's monitors (`monitor:` in the manifest) and the OTLP exporter (the
    /// environment). A configuration that cannot be used is said on stderr; the job runs.
    pub fn new(monitor: Option<&Monitor>, job: &str, service: &str, instance: &str) -> Notifier {
        let trace = match otel::from_env(service) {
            Ok(None) => None,
            Ok(Some(cfg)) => {
                let parent = otel::parent_from_env();
                let trace_id = parent.map_or_else(
                    || {
                        let mut t = [0u8; 16];
                        random(&mut t);
                        t
                    },
                    |p| p.trace_id,
                );
                Some(Trace {
                    cfg,
                    trace_id,
                    parent,
                    spans: vec![],
                    open: None,
                })
            }
            Err(why) => {
                eprintln!("batchguard run: note: no spans are exported: {why}");
                None
            }
        };
        let checkins = monitor.and_then(|m| checkin::Checkins::new(m, job, service, instance));
        if trace.is_none() && checkins.is_none() {
            return Notifier::off();
        }
        let timeout = monitor
            .and_then(|m| m.timeout.value())
            .map_or(DEFAULT_TIMEOUT, |d| Duration::from_secs(d.secs().max(1)));
        let wait = trace
            .as_ref()
            .map_or(timeout, |t| timeout.max(t.cfg.timeout));
        Notifier {
            active: Some(Box::new(Active {
                outbox: Outbox::new(timeout),
                wait,
                checkins,
                trace,
                job: job.to_owned(),
                service: service.to_owned(),
                instance: instance.to_owned(),
            })),
        }
    }

    /// A slot is about to be worked (the catch-up, then the current one).
    pub fn begin_slot(&mut self) {
        if let Some(c) = self.active.as_mut().and_then(|a| a.checkins.as_mut()) {
            c.begin_slot();
        }
    }

    fn trace_id(a: &Active) -> Option<String> {
        a.trace.as_ref().map(|t| hex(&t.trace_id))
    }

    /// An attempt holds the lease and its command is about to start.
    pub fn started(&mut self, at: &Attempt) {
        let Some(a) = self.active.as_deref_mut() else {
            return;
        };
        let slot = store::rfc3339(at.slot);
        let trace_id = Self::trace_id(a);
        if let Some(c) = a.checkins.as_mut() {
            c.started(&mut a.outbox, &slot, at.attempt, trace_id.as_deref());
        }
        if let Some(t) = a.trace.as_mut() {
            let mut span_id = [0u8; 8];
            random(&mut span_id);
            t.open = Some(Open {
                span_id,
                start_ns: now_ns(),
                attributes: common(&a.job, &a.service, &a.instance, &slot, at),
            });
        }
    }

    /// The `TRACEPARENT` the command gets: the attempt's span as its parent.
    pub fn traceparent(&self) -> Option<String> {
        let t = self.active.as_ref()?.trace.as_ref()?;
        let open = t.open.as_ref()?;
        let flags = t.parent.map_or(1, |p| p.flags);
        Some(format!(
            "00-{}-{}-{flags:02x}",
            hex(&t.trace_id),
            hex(&open.span_id)
        ))
    }

    /// The attempt ended (its `end` is in the ledger).
    pub fn ended(&mut self, slot: Timestamp, attempt: u32, o: &Outcome) {
        let Some(a) = self.active.as_deref_mut() else {
            return;
        };
        let slot = store::rfc3339(slot);
        let trace_id = Self::trace_id(a);
        if let Some(c) = a.checkins.as_mut() {
            let e = checkin::Ended {
                slot: &slot,
                attempt,
                success: o.success,
                retrying: o.retrying,
                exit_code: o.exit_code,
                error_code: o.error_code,
                message: o.message.clone(),
            };
            c.ended(&mut a.outbox, &e, trace_id.as_deref());
        }
        if let Some(t) = a.trace.as_mut()
            && let Some(mut open) = t.open.take()
        {
            open.attributes
                .push(("batchguard.outcome", otel::Val::Str(o.outcome.into())));
            open.attributes
                .push(("process.exit.code", otel::Val::Int(i64::from(o.exit_code))));
            if let Some(code) = o.error_code {
                open.attributes
                    .push(("batchguard.error_code", otel::Val::Str(code.into())));
            }
            t.spans.push(otel::Span {
                span_id: open.span_id,
                name: format!("run {}", a.job),
                start_ns: open.start_ns,
                end_ns: now_ns(),
                attributes: open.attributes,
                error: (!o.success).then(|| {
                    let code = o.error_code.unwrap_or("failed");
                    if o.message.is_empty() {
                        code.to_owned()
                    } else {
                        format!("{code}: {}", o.message)
                    }
                }),
            });
        }
    }

    /// The lease was refused: a span with the skip reason; a check-in when the slot had
    /// already succeeded (per `monitor.already_succeeded`) or was just dead-lettered.
    pub fn skipped(&mut self, at: &Attempt, why: &Refusal, reason: &str) {
        let Some(a) = self.active.as_deref_mut() else {
            return;
        };
        let slot = store::rfc3339(at.slot);
        let outcome = match why {
            Refusal::Exhausted { .. } | Refusal::DeadLettered => "dead_lettered",
            _ => "skipped",
        };
        if let Some(c) = a.checkins.as_mut() {
            match why {
                Refusal::Succeeded { .. } => c.already_succeeded(&mut a.outbox, &slot, reason),
                Refusal::Exhausted { .. } => {
                    // The last attempt died without an end: the slot's failure, said now.
                    let e = checkin::Ended {
                        slot: &slot,
                        attempt: 0,
                        success: false,
                        retrying: false,
                        exit_code: 0,
                        error_code: Some("ATTEMPTS_EXHAUSTED"),
                        message: reason.to_owned(),
                    };
                    c.ended(&mut a.outbox, &e, None);
                }
                Refusal::Held { .. } | Refusal::DeadLettered => {}
            }
        }
        if let Some(t) = a.trace.as_mut() {
            let mut span_id = [0u8; 8];
            random(&mut span_id);
            let mut attributes = common(&a.job, &a.service, &a.instance, &slot, at);
            attributes.retain(|(k, _)| *k != "batchguard.attempt" && *k != "batchguard.fence");
            attributes.push(("batchguard.outcome", otel::Val::Str(outcome.into())));
            attributes.push(("batchguard.skip_reason", otel::Val::Str(reason.into())));
            let now = now_ns();
            t.spans.push(otel::Span {
                span_id,
                name: format!("run {}", a.job),
                start_ns: now,
                end_ns: now,
                attributes,
                error: None,
            });
        }
    }

    /// `run` could not work the slot (exit 125: the store unreachable, the slot not of the
    /// schedule): a failure for the monitors, since nothing ran; its reason is on stderr.
    pub fn not_run(&mut self, slot: Option<Timestamp>) {
        let Some(a) = self.active.as_deref_mut() else {
            return;
        };
        let Some(c) = a.checkins.as_mut() else {
            return;
        };
        let slot = slot.map_or_else(|| "the current slot".to_owned(), store::rfc3339);
        let e = checkin::Ended {
            slot: &slot,
            attempt: 0,
            success: false,
            retrying: false,
            exit_code: 125,
            error_code: Some("NOT_RUN"),
            message: format!(
                "batchguard could not run it on {} (exit 125); its stderr says why",
                a.instance
            ),
        };
        c.ended(&mut a.outbox, &e, None);
    }

    /// At exit: the spans exported, every request waited for (at most the timeout), and
    /// those that did not go through said on stderr. `None` when nothing is configured.
    pub fn finish(self) -> Option<Summary> {
        let mut a = self.active?;
        if let Some(t) = a.trace.take()
            && !t.spans.is_empty()
        {
            let req = otel::export(&t.cfg, &t.trace_id, t.parent.as_ref(), &t.spans);
            a.outbox.send("otlp", req);
        }
        let summary = a.outbox.finish(a.wait);
        for f in &summary.failed {
            eprintln!(
                "batchguard run: job `{}`: not delivered (the job is not affected): {f}",
                a.job
            );
        }
        Some(summary)
    }
}

/// The attributes every attempt span has.
fn common(
    job: &str,
    service: &str,
    instance: &str,
    slot: &str,
    at: &Attempt,
) -> Vec<(&'static str, otel::Val)> {
    use otel::Val;
    vec![
        ("batchguard.job", Val::Str(job.into())),
        ("batchguard.service", Val::Str(service.into())),
        ("batchguard.slot", Val::Str(slot.into())),
        ("batchguard.attempt", Val::Int(i64::from(at.attempt))),
        ("batchguard.fence", Val::Int(at.fence)),
        ("batchguard.run_id", Val::Str(at.run_id.into())),
        ("batchguard.trigger", Val::Str(at.trigger.into())),
        ("batchguard.instance", Val::Str(instance.into())),
    ]
}
