//! A synthetic ledger with known defects: it feeds the audit's tests and the benchmark
//! (`cargo run --release -p batchguard-ledger-gen -- --out DIR --seed N --events 10000000`).
//!
//! A workspace crate of its own, not part of the `batchguard` library: it uses only the
//! library's public schedule engine, so the library carries neither its code nor its
//! dependencies. Same options, same bytes: `tests/golden.rs` pins the SHA-256 of every file.
//!
//! It writes one manifest (`manifest.batchguard.yaml`, one service whose dialect is
//! `--dialect` or else picked by the seed, jobs in UTC, Asia/Seoul, Europe/Berlin and
//! America/New_York), the events and outputs (CSV or JSONL), and `expected.json` with the
//! exact number of findings per audit code for the window `[from, to)`.
//!
//! How counts stay exact (SPEC 6 definitions and granularity):
//! - Expected slots come from the schedule engine in the job's dialect and zone; a slot is
//!   due when `scheduled_at + max_latency <= to` (every generated job has `max_latency`).
//! - Every job has `expected_duration = E`, `lock.ttl = 3E`, `alerts.max_latency = 9E`, so a
//!   clean run (start within 20 s, duration at most E) breaches nothing, a run of `3.5E` breaches
//!   only the ttl, and a start after `9E` breaches only the latency.
//! - A due slot gets at most one injected defect, chosen so it causes exactly the findings
//!   listed in [`Defect`]; every other slot (and every slot that is not due) is clean. Clean
//!   slots include the traps the audit must not report: retries after a retryable failure,
//!   lock-contention skips from other instances, repeated-hour DST slots the dialect runs
//!   twice, and jobs written `service/name`.
//! - AU107: two job names no manifest declares, with clean runs.

use batchguard::{Dialect, Schedule};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Output format of the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Jsonl,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenOptions {
    pub out: PathBuf,
    pub seed: u64,
    /// Target number of event rows (the window is sized to come close).
    pub events: u64,
    pub jobs: usize,
    pub format: Format,
    /// `None`: picked by the seed.
    pub dialect: Option<Dialect>,
    /// Start of the window; default 2026-03-01T00:00:00Z (NY's DST change on 2026-03-08
    /// and 2026-11-01 fall inside long windows).
    pub from: Option<Timestamp>,
    /// Window length in days; default sized from `events`.
    pub days: Option<u32>,
    /// Share of due slots that get a defect.
    pub defect_rate: f64,
}

impl GenOptions {
    pub fn new(out: impl Into<PathBuf>, seed: u64, events: u64) -> Self {
        GenOptions {
            out: out.into(),
            seed,
            events,
            jobs: 200,
            format: Format::Csv,
            dialect: None,
            from: None,
            days: None,
            defect_rate: 0.03,
        }
    }
}

/// Audit codes the generator injects, in report order.
pub const CODES: [&str; 12] = [
    "AU101", "AU102", "AU103", "AU104", "AU105", "AU106", "AU107", "AU108", "AU109", "AU110",
    "AU111", "AU201",
];

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    pub from: Timestamp,
    pub to: Timestamp,
    pub dialect: Dialect,
    pub events: u64,
    pub outputs: u64,
    pub due_slots: u64,
    /// Findings per code, in [`CODES`] order.
    pub findings: [u64; 12],
    pub manifest: PathBuf,
    pub events_path: PathBuf,
    pub outputs_path: PathBuf,
}

/// One kind of injected slot defect and the findings it causes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Defect {
    /// No event at all: AU101.
    Missed,
    /// A second execution, attempt 1, while the first is active or after it succeeded:
    /// AU102.
    Duplicate,
    /// A start with no end and nothing else: AU103 (per run) and AU111 (the slot never
    /// succeeded).
    Lost,
    /// A clean run plus an `end` whose run_id has no `start`: AU104.
    OrphanEnd,
    /// A successful run longer than `lock.ttl`: AU105.
    TtlExceeded,
    /// A start after `max_latency`, then success: AU106.
    LatencyBreach,
    /// A clean run at a `scheduled_at` halfway between two slots (the slot itself clean):
    /// AU108.
    OffSchedule,
    /// `max_attempts` retryable failures, then a successful attempt `max_attempts + 1`: AU109.
    RetryLimit,
    /// A fatal failure followed by a successful retry: AU110.
    FatalRetried,
    /// `max_attempts` retryable failures and a dead letter: AU111.
    Failed,
    /// One output key applied twice: AU201.
    DuplicateOutput,
}

const DEFECTS: [Defect; 11] = [
    Defect::Missed,
    Defect::Duplicate,
    Defect::Lost,
    Defect::OrphanEnd,
    Defect::TtlExceeded,
    Defect::LatencyBreach,
    Defect::OffSchedule,
    Defect::RetryLimit,
    Defect::FatalRetried,
    Defect::Failed,
    Defect::DuplicateOutput,
];

fn code_index(code: &str) -> usize {
    CODES.iter().position(|c| *c == code).unwrap_or(0)
}

/// SplitMix64: small, fast, and the same sequence on every platform and version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

struct JobKind {
    name: &'static str,
    schedule: &'static str,
    zone: &'static str,
    /// expected_duration in seconds.
    e: i64,
    /// Slots per day, for sizing the window.
    per_day: f64,
}

const KINDS: [JobKind; 8] = [
    JobKind {
        name: "sync-orders",
        schedule: "*/5 * * * *",
        zone: "UTC",
        e: 60,
        per_day: 288.0,
    },
    JobKind {
        name: "settle-payments",
        schedule: "0 * * * *",
        zone: "Asia/Seoul",
        e: 600,
        per_day: 24.0,
    },
    JobKind {
        name: "rebuild-search-index",
        schedule: "15 */2 * * *",
        zone: "Europe/Berlin",
        e: 1200,
        per_day: 12.0,
    },
    JobKind {
        name: "send-invoices",
        schedule: "30 2 * * *",
        zone: "America/New_York",
        e: 1800,
        per_day: 1.0,
    },
    JobKind {
        name: "refresh-fx-rates",
        schedule: "*/15 * * * *",
        zone: "America/New_York",
        e: 180,
        per_day: 96.0,
    },
    JobKind {
        name: "daily-digest",
        schedule: "0 9 * * 1-5",
        zone: "America/New_York",
        e: 2700,
        per_day: 5.0 / 7.0,
    },
    JobKind {
        name: "export-ledger",
        schedule: "0 * * * *",
        zone: "America/New_York",
        e: 300,
        per_day: 24.0,
    },
    JobKind {
        name: "poll-webhooks",
        schedule: "*/10 * * * *",
        zone: "Asia/Seoul",
        e: 120,
        per_day: 144.0,
    },
];

const SERVICE: &str = "shop";
const RETRYABLE: &str = "ETIMEDOUT";
const FATAL: &str = "VALIDATION_ERROR";
const INSTANCES: [&str; 3] = ["pod-a", "pod-b", "pod-c"];

struct Job {
    name: String,
    /// As written in the ledger (`name` or `shop/name`).
    ledger_name: String,
    schedule: Schedule,
    tz: TimeZone,
    kind: &'static JobKind,
    max_attempts: u32,
}

impl Job {
    fn e(&self) -> i64 {
        self.kind.e
    }
    fn ttl(&self) -> i64 {
        3 * self.kind.e
    }
    fn max_latency(&self) -> i64 {
        9 * self.kind.e
    }
}

fn dur(mut s: i64) -> String {
    let mut out = String::new();
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= n {
            out.push_str(&format!("{}{unit}", s / n));
            s %= n;
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

fn platform_of(d: Dialect) -> &'static str {
    match d {
        Dialect::Crontab => "crontab",
        Dialect::Kubernetes => "kubernetes",
        Dialect::NodeCron | Dialect::CronNpm | Dialect::Pm2 => "pm2",
        Dialect::Croner => "other",
        Dialect::Supercronic => "crontab",
    }
}

/// The jobs were deployed at `from` (`since:`): a defect injected into a job's first slot
/// is a missed slot, not one before the job existed.
fn manifest_yaml(dialect: Dialect, jobs: &[Job], from: Timestamp) -> String {
    let mut y = String::new();
    y.push_str(
        "# yaml-language-server: $schema=https://batchguard.dev/schemas/manifest.schema.json\n",
    );
    y.push_str("# Generated by `cargo run --example gen_ledger`: jobs of a synthetic shop.\n");
    y.push_str(&format!(
        "version: 1\nservice: {SERVICE}\ndeployment:\n  platform: {}\n  scheduler: {}\n  instances: 3\n",
        platform_of(dialect),
        dialect.as_str()
    ));
    y.push_str(
        "defaults:\n  runbook:\n    owner: shop-team\n    on_call: \"#shop-oncall\"\n    \
         communication: \"#shop-incidents\"\n    emergency_stop: \"Scale the worker to 0\"\n    \
         resume: \"Scale back up, then `batchguard audit` the gap and replay missed slots\"\n",
    );
    y.push_str("jobs:\n");
    for j in jobs {
        let n = &j.name;
        y.push_str(&format!(
            "  - name: {n}\n    since: \"{from}\"\n    schedule: \"{}\"\n    timezone: {}\n    expected_duration: {}\n    \
             command: [\"node\", \"jobs/{}.js\"]\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      \
             ttl: {}\n      store: postgres\n    idempotency:\n      strategy: unique_key\n      \
             key: record_id\n    retry:\n      max_attempts: {}\n      backoff: exponential\n      \
             initial_delay: 10s\n      max_delay: 2m\n      retryable: [{RETRYABLE}, HTTP_503]\n      \
             fatal: [{FATAL}]\n      on_unknown: dead_letter\n    dead_letter:\n      target: {n}-dlq\n    \
             alerts:\n      max_latency: {}\n      channel: \"#shop-oncall\"\n    outputs:\n      \
             key: record_id\n",
            j.kind.schedule,
            j.kind.zone,
            dur(j.e()),
            j.kind.name,
            dur(j.ttl()),
            j.max_attempts,
            dur(j.max_latency()),
        ));
    }
    y
}

/// Writes `2026-03-01T02:00:00Z` for Unix seconds (proleptic Gregorian, years 0..=9999).
fn push_ts(buf: &mut Vec<u8>, secs: i64) {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let two = |buf: &mut Vec<u8>, v: i64| {
        buf.push(b'0' + (v / 10) as u8);
        buf.push(b'0' + (v % 10) as u8);
    };
    two(buf, y / 100);
    two(buf, y % 100);
    buf.push(b'-');
    two(buf, m);
    buf.push(b'-');
    two(buf, d);
    buf.push(b'T');
    two(buf, sod / 3600);
    buf.push(b':');
    two(buf, sod / 60 % 60);
    buf.push(b':');
    two(buf, sod % 60);
    buf.push(b'Z');
}

/// An event to write; strings are borrowed, numbers formatted on the fly.
struct Ev<'a> {
    run: (usize, usize, u32),
    job: &'a str,
    sched: i64,
    event: &'a str,
    at: i64,
    instance: &'a str,
    attempt: Option<u32>,
    status: Option<&'a str>,
    error_code: Option<&'a str>,
    trigger: &'a str,
}

struct Writer {
    format: Format,
    events: BufWriter<File>,
    outputs: BufWriter<File>,
    line: Vec<u8>,
    n_events: u64,
    n_outputs: u64,
}

fn push_run(buf: &mut Vec<u8>, (j, s, k): (usize, usize, u32)) {
    let mut b = itoa::Buffer::new();
    buf.extend_from_slice(b"run-");
    buf.extend_from_slice(b.format(j).as_bytes());
    buf.push(b'-');
    buf.extend_from_slice(b.format(s).as_bytes());
    buf.push(b'-');
    buf.extend_from_slice(b.format(k).as_bytes());
}

impl Writer {
    fn create(dir: &Path, format: Format) -> io::Result<(Self, PathBuf, PathBuf)> {
        let ext = match format {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        };
        let ep = dir.join(format!("events.{ext}"));
        let op = dir.join(format!("outputs.{ext}"));
        let mut w = Writer {
            format,
            events: BufWriter::with_capacity(1 << 20, File::create(&ep)?),
            outputs: BufWriter::with_capacity(1 << 20, File::create(&op)?),
            line: Vec::with_capacity(256),
            n_events: 0,
            n_outputs: 0,
        };
        if format == Format::Csv {
            w.events.write_all(
                b"run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,snapshot_digest,trigger\n",
            )?;
            w.outputs
                .write_all(b"job,scheduled_at,run_id,output_key,at\n")?;
        }
        Ok((w, ep, op))
    }

    fn event(&mut self, e: &Ev) -> io::Result<()> {
        let b = &mut self.line;
        b.clear();
        let mut ib = itoa::Buffer::new();
        match self.format {
            Format::Csv => {
                push_run(b, e.run);
                b.push(b',');
                b.extend_from_slice(e.job.as_bytes());
                b.push(b',');
                push_ts(b, e.sched);
                b.push(b',');
                b.extend_from_slice(e.event.as_bytes());
                b.push(b',');
                push_ts(b, e.at);
                b.push(b',');
                b.extend_from_slice(e.instance.as_bytes());
                b.push(b',');
                if let Some(a) = e.attempt {
                    b.extend_from_slice(ib.format(a).as_bytes());
                }
                b.push(b',');
                b.extend_from_slice(e.status.unwrap_or("").as_bytes());
                b.push(b',');
                b.extend_from_slice(e.error_code.unwrap_or("").as_bytes());
                b.extend_from_slice(b",,");
                b.extend_from_slice(e.trigger.as_bytes());
            }
            Format::Jsonl => {
                b.extend_from_slice(b"{\"run_id\":\"");
                push_run(b, e.run);
                b.extend_from_slice(b"\",\"job\":\"");
                b.extend_from_slice(e.job.as_bytes());
                b.extend_from_slice(b"\",\"scheduled_at\":\"");
                push_ts(b, e.sched);
                b.extend_from_slice(b"\",\"event\":\"");
                b.extend_from_slice(e.event.as_bytes());
                b.extend_from_slice(b"\",\"at\":\"");
                push_ts(b, e.at);
                b.extend_from_slice(b"\",\"instance\":\"");
                b.extend_from_slice(e.instance.as_bytes());
                b.push(b'"');
                if let Some(a) = e.attempt {
                    b.extend_from_slice(b",\"attempt\":");
                    b.extend_from_slice(ib.format(a).as_bytes());
                }
                if let Some(s) = e.status {
                    b.extend_from_slice(b",\"status\":\"");
                    b.extend_from_slice(s.as_bytes());
                    b.push(b'"');
                }
                if let Some(s) = e.error_code {
                    b.extend_from_slice(b",\"error_code\":\"");
                    b.extend_from_slice(s.as_bytes());
                    b.push(b'"');
                }
                b.extend_from_slice(b",\"trigger\":\"");
                b.extend_from_slice(e.trigger.as_bytes());
                b.extend_from_slice(b"\"}");
            }
        }
        b.push(b'\n');
        self.n_events += 1;
        self.events.write_all(b)
    }

    fn output(
        &mut self,
        job: &str,
        sched: i64,
        run: (usize, usize, u32),
        key: (usize, usize, u32),
        at: i64,
    ) -> io::Result<()> {
        let b = &mut self.line;
        b.clear();
        let mut ib = itoa::Buffer::new();
        let push_key = |b: &mut Vec<u8>, ib: &mut itoa::Buffer| {
            b.extend_from_slice(b"rec-");
            b.extend_from_slice(ib.format(key.0).as_bytes());
            b.push(b'-');
            b.extend_from_slice(ib.format(key.1).as_bytes());
            b.push(b'-');
            b.extend_from_slice(ib.format(key.2).as_bytes());
        };
        match self.format {
            Format::Csv => {
                b.extend_from_slice(job.as_bytes());
                b.push(b',');
                push_ts(b, sched);
                b.push(b',');
                push_run(b, run);
                b.push(b',');
                push_key(b, &mut ib);
                b.push(b',');
                push_ts(b, at);
            }
            Format::Jsonl => {
                b.extend_from_slice(b"{\"job\":\"");
                b.extend_from_slice(job.as_bytes());
                b.extend_from_slice(b"\",\"scheduled_at\":\"");
                push_ts(b, sched);
                b.extend_from_slice(b"\",\"run_id\":\"");
                push_run(b, run);
                b.extend_from_slice(b"\",\"output_key\":\"");
                push_key(b, &mut ib);
                b.extend_from_slice(b"\",\"at\":\"");
                push_ts(b, at);
                b.extend_from_slice(b"\"}");
            }
        }
        b.push(b'\n');
        self.n_outputs += 1;
        self.outputs.write_all(b)
    }
}

/// Generates the ledger; returns what it wrote (also written to `expected.json`).
pub fn generate(opts: &GenOptions) -> io::Result<Generated> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    std::fs::create_dir_all(&opts.out)?;
    let mut rng = Rng(opts.seed ^ 0x6261_7463_6867_7561);
    // The six dialects the generator has always drawn from, so a seed keeps its ledger.
    let drawn = &Dialect::ALL[..6];
    let dialect = opts
        .dialect
        .unwrap_or(drawn[(opts.seed % drawn.len() as u64) as usize]);
    let njobs = opts.jobs.max(1);
    let mut jobs = Vec::with_capacity(njobs);
    for i in 0..njobs {
        let kind = &KINDS[i % KINDS.len()];
        let name = format!("{}-{:03}", kind.name, i);
        let ledger_name = if i % 5 == 2 {
            format!("{SERVICE}/{name}")
        } else {
            name.clone()
        };
        let schedule = Schedule::parse(kind.schedule, dialect)
            .map_err(|e| bad(format!("{}: {e:?}", kind.schedule)))?;
        let tz = TimeZone::get(kind.zone).map_err(|e| bad(e.to_string()))?;
        jobs.push(Job {
            name,
            ledger_name,
            schedule,
            tz,
            kind,
            max_attempts: 2 + (i as u32 % 3),
        });
    }
    let from = opts
        .from
        .unwrap_or_else(|| Timestamp::from_second(1_772_323_200).unwrap_or(Timestamp::UNIX_EPOCH));
    let per_day: f64 = jobs.iter().map(|j| j.kind.per_day).sum::<f64>() * 2.2;
    let days = opts
        .days
        .map(i64::from)
        .unwrap_or_else(|| ((opts.events as f64 / per_day).ceil() as i64).max(1));
    let to =
        Timestamp::from_second(from.as_second() + days * 86_400).map_err(|e| bad(e.to_string()))?;

    std::fs::write(
        opts.out.join("manifest.batchguard.yaml"),
        manifest_yaml(dialect, &jobs, from),
    )?;
    let (mut w, events_path, outputs_path) = Writer::create(&opts.out, opts.format)?;
    let mut findings = [0u64; 12];
    let mut due_slots = 0u64;
    let to_s = to.as_second();

    for (ji, job) in jobs.iter().enumerate() {
        let slots: Vec<i64> = job
            .schedule
            .slots(&job.tz, from, to)
            .into_iter()
            .map(|t| t.as_second())
            .collect();
        let e = job.e();
        let lat = job.max_latency();
        for (si, &sched) in slots.iter().enumerate() {
            let due = sched + lat <= to_s;
            due_slots += u64::from(due);
            let mut defect = None;
            if due && rng.chance(opts.defect_rate) {
                defect = Some(DEFECTS[rng.below(DEFECTS.len() as u64) as usize]);
            }
            // Off-schedule needs room before the next slot and a due off-slot.
            let off = slots.get(si + 1).map(|n| sched + (n - sched) / 2);
            if defect == Some(Defect::OffSchedule)
                && !off.is_some_and(|o| o > sched && o + lat <= to_s)
            {
                defect = None;
            }
            let ii = rng.below(3) as usize;
            let inst = INSTANCES[ii];
            let other = INSTANCES[(ii + 1 + rng.below(2) as usize) % 3];
            let delay = rng.below(21) as i64;
            let dur_ok = e / 2 + rng.below((e / 2) as u64 + 1) as i64;
            let start = sched + delay;
            let ev = |k: u32, event: &'static str, at: i64| Ev {
                run: (ji, si, k),
                job: &job.ledger_name,
                sched,
                event,
                at,
                instance: inst,
                attempt: Some(1),
                status: None,
                error_code: None,
                trigger: "schedule",
            };
            // The first attempt fails with `code`, a retry succeeds; returns the retry's start.
            let fail_then_retry = |w: &mut Writer, code: &'static str| -> io::Result<i64> {
                w.event(&ev(0, "start", start))?;
                w.event(&Ev {
                    status: Some("failure"),
                    error_code: Some(code),
                    ..ev(0, "end", start + e / 8)
                })?;
                let s = start + e / 2;
                let retry = |event, at| Ev {
                    attempt: Some(2),
                    trigger: "retry",
                    ..ev(1, event, at)
                };
                w.event(&retry("start", s))?;
                w.event(&Ev {
                    status: Some("success"),
                    ..retry("end", s + e / 8)
                })?;
                Ok(s)
            };
            let mut outputs: u32 = rng.below(3) as u32;
            let mut out_run = 0u32;
            let mut out_at = start + dur_ok / 2;
            match defect {
                Some(Defect::Missed) => {
                    findings[code_index("AU101")] += 1;
                    continue;
                }
                Some(Defect::Duplicate) => {
                    findings[code_index("AU102")] += 1;
                    w.event(&ev(0, "start", start))?;
                    w.event(&Ev {
                        status: Some("success"),
                        ..ev(0, "end", start + dur_ok)
                    })?;
                    // Second execution: overlapping (while active) or after the success.
                    let s2 = if rng.chance(0.5) {
                        start + 5
                    } else {
                        start + dur_ok + 30
                    };
                    w.event(&Ev {
                        instance: other,
                        ..ev(1, "start", s2)
                    })?;
                    w.event(&Ev {
                        instance: other,
                        status: Some("success"),
                        ..ev(1, "end", s2 + dur_ok)
                    })?;
                }
                Some(Defect::Lost) => {
                    findings[code_index("AU103")] += 1;
                    findings[code_index("AU111")] += 1;
                    w.event(&ev(0, "start", start))?;
                    outputs = 0;
                }
                Some(Defect::OrphanEnd) => {
                    findings[code_index("AU104")] += 1;
                    w.event(&ev(0, "start", start))?;
                    w.event(&Ev {
                        status: Some("success"),
                        ..ev(0, "end", start + dur_ok)
                    })?;
                    w.event(&Ev {
                        instance: other,
                        status: Some("success"),
                        ..ev(1, "end", start + dur_ok + 60)
                    })?;
                }
                Some(Defect::TtlExceeded) => {
                    findings[code_index("AU105")] += 1;
                    w.event(&ev(0, "start", start))?;
                    w.event(&Ev {
                        status: Some("success"),
                        ..ev(0, "end", start + job.ttl() + e / 2)
                    })?;
                }
                Some(Defect::LatencyBreach) => {
                    findings[code_index("AU106")] += 1;
                    let s = sched + lat + 30;
                    w.event(&ev(0, "start", s))?;
                    w.event(&Ev {
                        status: Some("success"),
                        ..ev(0, "end", s + dur_ok)
                    })?;
                    out_at = s + dur_ok / 2;
                }
                Some(Defect::RetryLimit) | Some(Defect::Failed) => {
                    let limit = defect == Some(Defect::RetryLimit);
                    findings[code_index(if limit { "AU109" } else { "AU111" })] += 1;
                    let n = job.max_attempts + u32::from(limit);
                    for k in 0..n {
                        let s = start + i64::from(k) * (e / 2);
                        let last = k + 1 == n;
                        let a = Some(k + 1);
                        let trig = if k == 0 { "schedule" } else { "retry" };
                        w.event(&Ev {
                            attempt: a,
                            trigger: trig,
                            ..ev(k, "start", s)
                        })?;
                        let ok = last && limit;
                        w.event(&Ev {
                            attempt: a,
                            trigger: trig,
                            status: Some(if ok { "success" } else { "failure" }),
                            error_code: (!ok).then_some(RETRYABLE),
                            ..ev(k, "end", s + e / 8)
                        })?;
                        if last && !limit {
                            w.event(&Ev {
                                attempt: a,
                                trigger: trig,
                                error_code: Some(RETRYABLE),
                                ..ev(k, "dead_letter", s + e / 8 + 1)
                            })?;
                        }
                    }
                    out_run = n - 1;
                    out_at = start + i64::from(n - 1) * (e / 2) + 1;
                    if !limit {
                        outputs = 0;
                    }
                }
                Some(Defect::FatalRetried) => {
                    findings[code_index("AU110")] += 1;
                    out_at = fail_then_retry(&mut w, FATAL)? + 1;
                    out_run = 1;
                }
                Some(Defect::OffSchedule) | Some(Defect::DuplicateOutput) | None => {
                    let retry_trap = defect.is_none() && job.max_attempts >= 2 && rng.chance(0.05);
                    if retry_trap {
                        out_at = fail_then_retry(&mut w, RETRYABLE)? + 1;
                        out_run = 1;
                    } else {
                        w.event(&ev(0, "start", start))?;
                        w.event(&Ev {
                            status: Some("success"),
                            ..ev(0, "end", start + dur_ok)
                        })?;
                    }
                    if rng.chance(0.1) {
                        // Another instance lost the lock race: a skip, not a run.
                        w.event(&Ev {
                            instance: other,
                            attempt: None,
                            ..ev(9, "skip", start + 1)
                        })?;
                    }
                    if defect == Some(Defect::DuplicateOutput) {
                        findings[code_index("AU201")] += 1;
                        outputs = outputs.max(1);
                        w.output(
                            &job.ledger_name,
                            sched,
                            (ji, si, out_run),
                            (ji, si, 0),
                            out_at + 1,
                        )?;
                    }
                    if defect == Some(Defect::OffSchedule)
                        && let Some(o) = off
                    {
                        findings[code_index("AU108")] += 1;
                        let oev = |event, at| Ev {
                            sched: o,
                            run: (ji, si, 7),
                            ..ev(7, event, at)
                        };
                        w.event(&oev("start", o + 3))?;
                        w.event(&Ev {
                            status: Some("success"),
                            ..oev("end", o + 3 + dur_ok)
                        })?;
                    }
                }
            }
            for k in 0..outputs {
                w.output(
                    &job.ledger_name,
                    sched,
                    (ji, si, out_run),
                    (ji, si, k),
                    out_at,
                )?;
            }
        }
    }

    // AU107: runs of jobs no manifest declares (one finding per name), clean otherwise.
    for (u, name) in ["legacy-report", "billing-old/nightly-sync"]
        .iter()
        .enumerate()
    {
        findings[code_index("AU107")] += 1;
        let ji = njobs + u;
        let hours = (days * 24).min(24) as usize;
        for si in 0..hours {
            let sched = from.as_second() + si as i64 * 3600;
            let base = Ev {
                run: (ji, si, 0),
                job: name,
                sched,
                event: "start",
                at: sched + 2,
                instance: "legacy-vm",
                attempt: Some(1),
                status: None,
                error_code: None,
                trigger: "schedule",
            };
            w.event(&base)?;
            w.event(&Ev {
                event: "end",
                at: sched + 62,
                status: Some("success"),
                ..base
            })?;
            w.output(name, sched, (ji, si, 0), (ji, si, 0), sched + 30)?;
        }
    }
    w.events.flush()?;
    w.outputs.flush()?;

    let g = Generated {
        from,
        to,
        dialect,
        events: w.n_events,
        outputs: w.n_outputs,
        due_slots,
        findings,
        manifest: opts.out.join("manifest.batchguard.yaml"),
        events_path,
        outputs_path,
    };
    let mut counts = serde_json::Map::new();
    for (c, n) in CODES.iter().zip(findings) {
        counts.insert((*c).to_string(), n.into());
    }
    let expected = serde_json::json!({
        "seed": opts.seed,
        "dialect": dialect.as_str(),
        "from": from.to_string(),
        "to": to.to_string(),
        "jobs": njobs,
        "events": g.events,
        "outputs": g.outputs,
        "rows": g.events + g.outputs,
        "due_slots": due_slots,
        "findings": counts,
    });
    let mut s = serde_json::to_string_pretty(&expected).map_err(io::Error::other)?;
    s.push('\n');
    std::fs::write(opts.out.join("expected.json"), s)?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        for s in [
            0i64,
            1_772_323_200,
            951_782_400,
            4_102_444_799,
            1_709_164_800,
        ] {
            let mut b = Vec::new();
            push_ts(&mut b, s);
            let want = Timestamp::from_second(s)
                .map(|t| t.to_string())
                .unwrap_or_default();
            assert_eq!(String::from_utf8_lossy(&b), want);
        }
    }

    #[test]
    fn durations_are_manifest_durations() {
        assert_eq!(dur(60), "1m");
        assert_eq!(dur(5400), "1h30m");
        assert_eq!(dur(24_300), "6h45m");
        assert_eq!(dur(0), "0s");
    }
}
