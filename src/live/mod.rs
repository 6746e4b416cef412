//! `batchguard watch` and `batchguard metrics`: the ledger followed as it grows, and at
//! every refresh the audit of the window that ends now.
//!
//! ```text
//! ledger rows (crate::ledger::tail: only the rows written since the last poll)
//!   -> window.rs   the rows whose slot is inside the window, kept between refreshes
//!   -> side        per job: runs started and not ended, the last outcome (every row read)
//!   -> counters.rs cumulative counts and histograms since the first row (for metrics)
//! each refresh, at the store's clock `now`:
//!   window rows of [now - since, now) -> crate::audit::Auditor -> AuditResult
//!   + leases (crate::store) + side -> figures.rs (per job) -> alerts.rs
//! ```
//!
//! The figures are the audit's: the window is folded by the same [`Auditor`] that
//! `batchguard audit --since` runs, so `watch --once` and `audit` over one window say the
//! same (a test holds them to it). Only what the audit has no word for is computed here:
//! what runs now, the last outcome, skip reasons, leases and the alerts. The ledger is read
//! once; each refresh reads what was written since the last one and folds the window
//! kept in memory, so its cost grows with the rows of the window, not of the ledger
//! (`docs/benchmarks.md`).

pub mod alerts;
pub mod counters;
pub mod figures;
pub mod window;

use crate::audit::manifests::{self, Diagnose, ManifestError, NotEvaluable};
use crate::audit::{AuditJob, AuditOptions, Auditor};
use crate::ledger::read::{ReadOptions, Source};
use crate::ledger::tail::{Tail, TailEvent, TailSink};
use crate::ledger::{EventKind, OutputRef, RowError, Status};
use crate::store::{HeldLease, Store};
use counters::Counters;
use figures::Snapshot;
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use window::Window;

/// What `watch` and `metrics` were asked.
pub struct LiveOptions {
    /// `--ledger`, else the store's own tables.
    pub ledger: String,
    /// `--outputs` for a file ledger (a database ledger's own table otherwise).
    pub outputs: Option<String>,
    /// `--store`: leases and the clock.
    pub store: Option<String>,
    pub manifests: Vec<PathBuf>,
    /// The window: the last `since` seconds.
    pub since_s: u64,
    pub jobs: Vec<String>,
    pub settings: crate::config::Settings,
    pub diagnose: Option<Diagnose>,
    pub assume_tz: Option<jiff::tz::TimeZone>,
}

/// Why `watch` or `metrics` cannot run (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    CannotRun(String),
    #[error(transparent)]
    Manifest(Box<NotEvaluable>),
}

/// What the manifest says beyond what the audit reads: the alerts' thresholds.
#[derive(Clone, Debug, Default)]
pub struct JobLimits {
    pub expected_duration_s: Option<u64>,
    pub missing_tolerance: Option<u64>,
    pub max_latency_s: Option<u64>,
    pub ttl_s: Option<u64>,
    /// The schedule has slots off the whole minute (`*/10 * * * * *`): its slots are
    /// shown with their seconds.
    pub slot_seconds: bool,
}

/// A run with a `start` and no `end` yet.
#[derive(Clone, Debug)]
pub(crate) struct Open {
    pub(crate) job: Arc<str>,
    pub(crate) scheduled_at: Timestamp,
    pub(crate) started: Timestamp,
    pub(crate) instance: Option<String>,
    pub(crate) fence: Option<i64>,
    pub(crate) attempt: u32,
}

/// A job's last `end` (or `dead_letter`).
#[derive(Clone, Debug)]
pub(crate) struct Ended {
    pub(crate) scheduled_at: Timestamp,
    pub(crate) at: Timestamp,
    pub(crate) outcome: &'static str,
    pub(crate) error_code: Option<String>,
    pub(crate) run_id: String,
}

/// Ledger job names as the audit shows them: a declared job by its manifest name
/// (`service/name` when the manifests hold several services), any other by the name the
/// ledger gives it; `None` for a job `--job` leaves out.
pub(crate) struct Names {
    declared: HashMap<String, usize>,
    display: Vec<Arc<str>>,
    /// Undeclared names kept: `None` all, `Some(list)` those `--job` names.
    keep: Option<Vec<String>>,
    /// Every ledger name met, and the number and name it is shown with (shared, so a
    /// row costs no copy).
    cache: HashMap<String, Option<(u32, Arc<str>)>>,
    /// The names shown, by number.
    by_id: Vec<Arc<str>>,
}

impl Names {
    fn new(jobs: &[AuditJob], with_manifest: bool, only: &[String]) -> Names {
        let mut declared = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            declared
                .entry(format!("{}/{}", j.service, j.name))
                .or_insert(i);
            declared.entry(j.name.clone()).or_insert(i);
        }
        let services: std::collections::HashSet<&str> =
            jobs.iter().map(|j| j.service.as_str()).collect();
        let qualify = services.len() > 1;
        let display = jobs
            .iter()
            .map(|j| {
                Arc::from(if qualify {
                    format!("{}/{}", j.service, j.name)
                } else {
                    j.name.clone()
                })
            })
            .collect();
        // As the audit: with manifests, `--job` keeps declared jobs only; without, the names.
        let keep = match (only.is_empty(), with_manifest) {
            (true, _) => None,
            (false, true) => Some(Vec::new()),
            (false, false) => Some(only.to_vec()),
        };
        Names {
            declared,
            display,
            keep,
            cache: HashMap::new(),
            by_id: Vec::new(),
        }
    }

    pub(crate) fn shown(&mut self, name: &str) -> Option<Arc<str>> {
        self.numbered(name).map(|(_, n)| n)
    }

    /// The name `name` is shown with, and its number (`0..` in the order met).
    pub(crate) fn numbered(&mut self, name: &str) -> Option<(u32, Arc<str>)> {
        if let Some(v) = self.cache.get(name) {
            return v.clone();
        }
        {
            let v = match self.declared.get(name) {
                Some(&i) => Some(self.display[i].clone()),
                None => match &self.keep {
                    Some(k)
                        if !k.iter().any(|w| {
                            w == name || name.rsplit_once('/').is_some_and(|(_, n)| n == w)
                        }) =>
                    {
                        None
                    }
                    _ => Some(Arc::from(name)),
                },
            };
            let v = v.map(|shown| {
                let id = match self.by_id.iter().position(|n| *n == shown) {
                    Some(i) => i as u32,
                    None => {
                        self.by_id.push(shown.clone());
                        self.by_id.len() as u32 - 1
                    }
                };
                (id, shown)
            });
            self.cache.insert(name.to_owned(), v.clone());
            v
        }
    }

    /// The name shown with number `id`.
    pub(crate) fn by_id(&self, id: u32) -> &str {
        &self.by_id[id as usize]
    }

    /// How many names are shown.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// What every poll updates besides the window.
struct Side {
    window: Window,
    /// Runs started and not ended, by run id.
    open: HashMap<String, Open>,
    last_end: HashMap<Arc<str>, Ended>,
    counters: Counters,
    names: Names,
    rejected: u64,
    first_errors: Vec<RowError>,
    rows: u64,
    /// Rows of older slots than this are not kept in the window (they are still counted).
    keep_from: Timestamp,
    /// Per shown job (by number), the earliest `scheduled_at` of its events: where its
    /// slots start to count when it has no `since` (the window alone cannot say).
    first_seen: Vec<Timestamp>,
}

impl TailSink for Side {
    fn event(&mut self, e: &TailEvent<'_>) {
        self.rows += 1;
        let ev = &e.event;
        let Some((id, job)) = self.names.numbered(ev.job) else {
            return;
        };
        if ev.scheduled_at >= self.keep_from {
            self.window.push_event(e, id);
        }
        let i = id as usize;
        if self.first_seen.len() <= i {
            self.first_seen.resize(i + 1, Timestamp::MAX);
        }
        self.first_seen[i] = self.first_seen[i].min(ev.scheduled_at);
        self.counters.event(&job, e, &self.open);
        match ev.event {
            EventKind::Start => {
                self.open.insert(
                    ev.run_id.to_owned(),
                    Open {
                        job,
                        scheduled_at: ev.scheduled_at,
                        started: ev.at,
                        instance: ev.instance.map(str::to_owned),
                        fence: e.fence,
                        attempt: ev.attempt.unwrap_or(1),
                    },
                );
            }
            EventKind::End | EventKind::DeadLetter => {
                if ev.event == EventKind::End {
                    self.open.remove(ev.run_id);
                }
                // A superseded attempt gave no verdict: the job's last outcome is its
                // newer holder's.
                if ev.status == Some(Status::Superseded) {
                    return;
                }
                let outcome = match (ev.event, ev.status) {
                    (EventKind::DeadLetter, _) => "dead_lettered",
                    (_, Some(Status::Failure)) => "failed",
                    _ => "succeeded",
                };
                let newer = self.last_end.get(&job).is_none_or(|l| ev.at >= l.at);
                if newer {
                    self.last_end.insert(
                        job,
                        Ended {
                            scheduled_at: ev.scheduled_at,
                            at: ev.at,
                            outcome,
                            error_code: ev.error_code.map(str::to_owned),
                            run_id: ev.run_id.to_owned(),
                        },
                    );
                }
            }
            EventKind::Skip | EventKind::Manual => {}
        }
    }

    fn output(&mut self, o: &OutputRef<'_>) {
        self.rows += 1;
        if o.scheduled_at >= self.keep_from && self.names.shown(o.job).is_some() {
            self.window.push_output(o);
        }
    }

    fn error(&mut self, e: RowError) {
        self.rows += 1;
        self.rejected += 1;
        if self.first_errors.len() < crate::audit::MAX_ROW_ERRORS {
            self.first_errors.push(e);
        }
    }
}

/// The ledger followed, and what it has said so far.
pub struct Live {
    tail: Tail,
    store: Option<Box<dyn Store>>,
    /// `store` as shown in messages (password masked).
    pub source: String,
    jobs: Vec<AuditJob>,
    limits: HashMap<String, JobLimits>,
    with_manifest: bool,
    only: Vec<String>,
    since: SignedDuration,
    since_s: u64,
    settings: crate::config::Settings,
    side: Side,
    refreshes: u64,
}

impl Live {
    /// Loads the manifests (refusing jobs the audit cannot evaluate, as `audit` does),
    /// opens the ledger and the store. Nothing is read yet.
    pub fn open(o: LiveOptions) -> Result<Live, LiveError> {
        let cannot = LiveError::CannotRun;
        if o.since_s == 0 {
            return Err(cannot(
                "--since must be a positive duration (30m, 2h, 1d)".into(),
            ));
        }
        let mut paths = Vec::new();
        for p in &o.manifests {
            paths.extend(manifests::discover(p).map_err(cannot)?);
        }
        let jobs = match manifests::load_jobs(&paths, &o.settings, &o.jobs, o.diagnose) {
            Ok(j) => j,
            Err(ManifestError::Io(m)) => return Err(cannot(m)),
            Err(ManifestError::NotEvaluable(e)) => return Err(LiveError::Manifest(Box::new(e))),
        };
        let limits = limits(&paths, &jobs);
        // A store that is no store URL is said so, before it is read as a ledger.
        if let Some(url) = &o.store {
            crate::store::StoreUrl::parse(url).map_err(|e| cannot(format!("--store {e}")))?;
        }
        let ledger = Source::parse(&o.ledger).map_err(|e| cannot(e.0))?;
        let unwritten = o
            .outputs
            .as_deref()
            .filter(|out| unwritten_outputs(&o.ledger, out));
        let outputs = match &o.outputs {
            Some(_) if unwritten.is_some() => None,
            Some(s) => Some(Source::parse(s).map_err(|e| cannot(e.0))?),
            None => None,
        };
        let store = match &o.store {
            None => None,
            Some(url) => Some(open_store(url).map_err(cannot)?),
        };
        let tail = Tail::open(
            &ledger,
            outputs.as_ref(),
            ReadOptions {
                assume_tz: o.assume_tz.clone(),
            },
        )
        .map_err(|e| cannot(e.0))?;
        let mut tail = tail;
        if let Some(path) = unwritten {
            tail.outputs_created_later(std::path::Path::new(path));
        }
        let with_manifest = !o.manifests.is_empty();
        let names = Names::new(&jobs, with_manifest, &o.jobs);
        let since_s = o.since_s;
        // Each declared job's histograms on a ladder around its expected_duration.
        let counters = Counters::new(
            limits
                .iter()
                .filter_map(|(job, l)| Some((job.as_str(), l.expected_duration_s?))),
        );
        Ok(Live {
            tail,
            store,
            source: match &o.store {
                Some(s) if o.ledger == *s => crate::db::mask(s),
                Some(s) => format!("{} (ledger {})", crate::db::mask(s), ledger.display()),
                None => ledger.display(),
            },
            jobs,
            limits,
            with_manifest,
            only: o.jobs,
            since: SignedDuration::from_secs(since_s.min(i64::MAX as u64) as i64),
            since_s,
            settings: o.settings,
            side: Side {
                window: Window::new(),
                open: HashMap::new(),
                last_end: HashMap::new(),
                counters,
                names,
                rejected: 0,
                first_errors: Vec::new(),
                rows: 0,
                keep_from: Timestamp::MIN,
                first_seen: Vec::new(),
            },
            refreshes: 0,
        })
    }

    /// Reads what was written since the last refresh and judges the window that ends at
    /// the store's clock now.
    pub fn refresh(&mut self) -> Result<Snapshot, LiveError> {
        let started = Instant::now();
        let cannot = LiveError::CannotRun;
        // The window can only move on: rows of slots older than its start now are of no
        // use to it, whatever the clock says after the poll.
        let before = match &mut self.store {
            Some(s) => s.now().map_err(|e| cannot(e.0))?,
            None => self.tail.now().map_err(|e| cannot(e.0))?,
        };
        self.side.keep_from = before.checked_sub(self.since).unwrap_or(Timestamp::MIN);
        let polled = self.tail.poll(&mut self.side).map_err(|e| cannot(e.0))?;
        let (leases, leases_error, now) = match &mut self.store {
            Some(s) => match s.held_leases() {
                Ok((l, now)) => (l, None, now),
                Err(e) => {
                    let now = s.now().map_err(|e| cannot(e.0))?;
                    (Vec::new(), Some(e.0), now)
                }
            },
            None => (Vec::new(), None, self.tail.now().map_err(|e| cannot(e.0))?),
        };
        let from = now.checked_sub(self.since).unwrap_or(Timestamp::MIN);
        self.side.window.evict(from);
        self.forget_lost(from);

        let audit = self.audit(from, now);
        let drills = self.tail.drills().unwrap_or_default();
        let leases = self.shown_leases(leases);
        self.refreshes += 1;
        let snap = figures::build(figures::Parts {
            now,
            from,
            since_s: self.since_s,
            source: &self.source,
            audit,
            limits: &self.limits,
            window: &self.side.window,
            names: &mut self.side.names,
            open: &self.side.open,
            last_end: &self.side.last_end,
            leases,
            leases_error,
            counters: &self.side.counters,
            drills,
            rejected: self.side.rejected,
            rows_read: self.side.rows,
            polled,
            settings: &self.settings,
            started,
        });
        Ok(snap)
    }

    /// The audit of `[from, to)` over the rows kept.
    fn audit(&self, from: Timestamp, to: Timestamp) -> crate::audit::AuditResult {
        let opts = AuditOptions {
            from,
            to,
            snapshots: None,
            with_manifest: self.with_manifest,
            with_outputs: self.tail.has_outputs(),
        };
        let mut a = Auditor::new(self.jobs.clone(), opts);
        a.report_zone(jiff::tz::TimeZone::UTC);
        if !self.only.is_empty() {
            a.only_jobs((!self.with_manifest).then(|| self.only.clone()));
        }
        self.side
            .window
            .events(from, to, &mut |e| a.event_ref(&e.event));
        for (id, &first) in self.side.first_seen.iter().enumerate() {
            if first == Timestamp::MAX {
                continue;
            }
            a.first_event(self.side.names.by_id(id as u32), first);
        }
        a.events_done();
        let mut tally = a.output_tally();
        self.side
            .window
            .outputs(from, to, &mut |o| tally.output_ref(o));
        a.merge_outputs(tally);
        for e in &self.side.first_errors {
            a.row_error(e.clone());
        }
        a.finish()
    }

    /// Runs that started so long ago that their lease had expired before the window began
    /// are lost, not running: they are no longer followed.
    fn forget_lost(&mut self, from: Timestamp) {
        let limits = &self.limits;
        self.side.open.retain(|_, o| {
            let ttl = limits.get(&*o.job).and_then(|l| l.ttl_s).unwrap_or(0);
            o.started + SignedDuration::from_secs(ttl as i64) >= from
        });
    }

    /// Leases of the jobs shown, named as the audit names their jobs.
    fn shown_leases(&mut self, leases: Vec<HeldLease>) -> Vec<(String, HeldLease)> {
        leases
            .into_iter()
            .filter_map(|l| {
                let job = self.side.names.shown(&l.job)?.to_string();
                Some((job, l))
            })
            .collect()
    }
}

/// Whether `outputs` is the outputs file beside JSONL ledger `ledger` (SPEC 5.2) and
/// does not exist while the ledger does: `run` creates it at the first output reported,
/// so it is followed as empty until then. Any other missing file is still an error.
pub fn unwritten_outputs(ledger: &str, outputs: &str) -> bool {
    let ledger = std::path::Path::new(ledger);
    let outputs = std::path::Path::new(outputs);
    crate::store::jsonl::is_jsonl_path(&ledger.to_string_lossy())
        && ledger.is_file()
        && crate::store::jsonl::outputs_path(ledger) == outputs
        && !outputs.exists()
}

/// The store, which must exist: `watch` never creates one.
fn open_store(url: &str) -> Result<Box<dyn Store>, String> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if !std::path::Path::new(path).is_file() {
            return Err(format!(
                "sqlite:{path}: no such store (`batchguard run` creates it on its first run)"
            ));
        }
    }
    let url = crate::store::StoreUrl::parse(url).map_err(|e| format!("--store {e}"))?;
    crate::store::open(&url).map_err(|e| e.0)
}

/// Whether any of the job's next few slots falls off the whole minute: a schedule with
/// a seconds field that does not pin it to 0.
fn off_the_minute(j: &AuditJob) -> bool {
    let Some(s) = &j.schedule else {
        return false;
    };
    let mut t = Timestamp::now();
    for _ in 0..4 {
        match s.next_after(&j.tz, t) {
            Some(next) if next.as_second().rem_euclid(60) != 0 || next.subsec_nanosecond() != 0 => {
                return true;
            }
            Some(next) => t = next,
            None => return false,
        }
    }
    false
}

/// Each kept manifest job's thresholds, by the name the audit shows it with.
fn limits(paths: &[PathBuf], jobs: &[AuditJob]) -> HashMap<String, JobLimits> {
    let services: std::collections::HashSet<&str> =
        jobs.iter().map(|j| j.service.as_str()).collect();
    let qualify = services.len() > 1;
    let mut by_key: HashMap<(String, String), (Option<u64>, Option<u64>)> = HashMap::new();
    for p in paths {
        let Ok(bytes) = std::fs::read(p) else {
            continue;
        };
        let (_, loaded) = crate::manifest::load::load(&bytes);
        if loaded.root.is_none() {
            continue;
        }
        let service = loaded.manifest.service_name(p);
        for j in &loaded.jobs {
            let Some(name) = j.name.value() else {
                continue;
            };
            let expected = j.expected_duration.value().map(|d| d.secs());
            let tolerance = j
                .alerts
                .value()
                .and_then(|a| a.missing_tolerance.value())
                .copied();
            by_key
                .entry((service.clone(), name.clone()))
                .or_insert((expected, tolerance));
        }
    }
    jobs.iter()
        .map(|j| {
            let shown = if qualify {
                format!("{}/{}", j.service, j.name)
            } else {
                j.name.clone()
            };
            let (expected, tolerance) = by_key
                .get(&(j.service.clone(), j.name.clone()))
                .copied()
                .unwrap_or_default();
            (
                shown,
                JobLimits {
                    expected_duration_s: expected,
                    missing_tolerance: tolerance,
                    max_latency_s: j.max_latency_s,
                    ttl_s: j.ttl_s,
                    slot_seconds: off_the_minute(j),
                },
            )
        })
        .collect()
}
