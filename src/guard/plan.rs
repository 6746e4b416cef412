//! What `run` knows before it touches the store: the job from the manifest, its schedule,
//! lease timings, the command, and how templates are filled (SPEC 7.1 items 1, 2, 8).

use super::Options;
use crate::manifest::model::{Command, Field, Retry};
use crate::manifest::template;
use crate::schedule::Schedule;
use crate::store::{self, EventRow};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Plan {
    pub job_name: String,
    /// The store this run uses, resolved (SPEC 7.1 item 13), and where it came from.
    pub store: store::StoreUrl,
    pub store_from: String,
    /// The job as the ledger names it.
    pub ledger_job: String,
    pub service: String,
    pub instance: String,
    pub schedule: Schedule,
    pub tz: TimeZone,
    pub ttl: Duration,
    pub grace: Duration,
    pub safety: Duration,
    pub max_attempts: Option<u64>,
    pub retry: Retry,
    pub lock_key: String,
    pub command: Vec<String>,
    pub snapshot: Option<String>,
    /// `[run] tick_tolerance`, when the config sets it (item 15).
    pub tick_tolerance: Option<Duration>,
    /// `retry.catch_up`, when the manifest sets it (item 20).
    pub catch_up: Option<Duration>,
    /// `monitor`: where check-ins go (docs/checkins.md).
    pub monitor: Option<crate::manifest::model::Monitor>,
    /// Whether a named slot is held against the store's clock (item 22); off only by
    /// `BATCHGUARD_CLOCK_CHECK=off`, for rigs that replay a schedule faster than time
    /// (docs/decisions.md).
    pub clock_check: bool,
}

/// `BATCHGUARD_CLOCK_CHECK`: `off`, `0`, `false` or `no` turns item 22's bound off.
fn clock_check() -> bool {
    !std::env::var("BATCHGUARD_CLOCK_CHECK").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// The `batchguard.toml` `run` reads: `--config`, else the nearest one above the manifest,
/// else above the working directory (a crontab line's working directory is often `/`).
fn run_settings(opts: &Options) -> Result<Option<crate::config::Settings>, String> {
    let found = match &opts.config {
        Some(p) => Some(p.clone()),
        None => opts
            .manifest
            .parent()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .and_then(crate::config::discover)
            .or_else(|| crate::config::discover(Path::new("."))),
    };
    let Some(path) = found else {
        return Ok(None);
    };
    crate::config::load(&path, |k| crate::REGISTRY.find(k).is_some())
        .map(Some)
        .map_err(|e| format!("{}: {}", path.display(), e.message))
}

/// Which store (SPEC 7.1 item 13): `--store`, else `BATCHGUARD_STORE`, else `[run] store`,
/// else the local SQLite file, but that only for a job whose `lock.store` is `sqlite` or
/// absent: a job that declares a shared store never falls back to a per-host lock, which is
/// how a missing flag recreates the incident. A URL of another kind than `lock.store` is
/// refused. `lock` is `None` for commands that serve every job (`store`, `watch`).
pub fn choose_store(
    flag: Option<&str>,
    env: Option<String>,
    config: Option<(String, PathBuf)>,
    lock: Option<&str>,
    job: &str,
) -> Result<(store::StoreUrl, String), String> {
    let given = flag
        .map(|f| (f.to_owned(), "--store".to_owned()))
        .or_else(|| {
            env.filter(|e| !e.trim().is_empty())
                .map(|e| (e.trim().to_owned(), "BATCHGUARD_STORE".to_owned()))
        })
        .or_else(|| config.map(|(u, p)| (u, format!("[run] store in {}", p.display()))));
    let Some((url, from)) = given else {
        return match lock {
            None | Some("sqlite") => store::StoreUrl::parse(store::DEFAULT_URL)
                .map(|u| (u, "the default".to_owned()))
                .map_err(|e| e.to_string()),
            Some(kind) => Err(format!(
                "job `{job}` keeps its lock in {kind} (`lock.store: {kind}`), and no store URL was given: `run` never falls back to a local file for it, since every host would take its own lock and run the slot. Give the URL with --store URL, the BATCHGUARD_STORE environment variable, or `store = \"…\"` under [run] in batchguard.toml"
            )),
        };
    };
    let url = store::StoreUrl::parse(&url).map_err(|e| format!("{e} (from {from})"))?;
    let kind = url.kind().as_str();
    if let Some(l) = lock
        && l != "other"
        && l != kind
    {
        return Err(format!(
            "job `{job}` declares `lock.store: {l}`, but the store {url} ({from}) is {kind}: every instance of a job must lock in the one store the manifest names; give a {l} URL"
        ));
    }
    Ok((url, from))
}

/// `grace = min(30 s, ttl/10)`, `safety = max(1 s, ttl/50)` (SPEC 7.1 item 8).
pub fn timings(ttl: Duration) -> Result<(Duration, Duration), String> {
    let grace = Duration::from_secs(30).min(ttl / 10);
    let safety = Duration::from_secs(1).max(ttl / 50);
    if ttl <= grace + safety {
        return Err(format!(
            "lock.ttl {}s is too short: the command must be stopped {}s (grace) + {}s (safety) before the lease ends",
            ttl.as_secs(),
            grace.as_secs_f64(),
            safety.as_secs_f64()
        ));
    }
    Ok((grace, safety))
}

/// `delay(i)` of SPEC 3.1 before attempt i+1 (the model's one definition).
pub fn delay(retry: &Retry, i: u64) -> Duration {
    Duration::from_secs(crate::manifest::retry::delay_secs(retry, i))
}

/// Who runs it when `--instance` does not say (item 17): `BATCHGUARD_INSTANCE`, else the
/// host name, PM2's `NODE_APP_INSTANCE` (`host/pm2:2`) and the pid, so four workers of a PM2
/// cluster and two crontabs of one host are told apart in `held by …`. Driven over `--link`,
/// the pid is the driver's (the Node.js process that holds the callback), not this
/// short-lived guard's.
pub fn default_instance(link: bool) -> String {
    if let Ok(v) = std::env::var("BATCHGUARD_INSTANCE")
        && !v.trim().is_empty()
    {
        return v.trim().to_owned();
    }
    let mut id = hostname();
    if let Ok(n) = std::env::var("NODE_APP_INSTANCE")
        && !n.trim().is_empty()
    {
        id.push_str("/pm2:");
        id.push_str(n.trim());
    }
    let pid = if link {
        std::os::unix::process::parent_id()
    } else {
        std::process::id()
    };
    id.push_str(&format!("/{pid}"));
    id
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The manifest's bytes, reading no more than the loader accepts (a huge file, or a device
/// that never ends, is refused without being read).
pub(crate) fn read_manifest(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let max = crate::manifest::load::MAX_FILE_BYTES;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > max {
        return Err(format!(
            "BG006 the file is over the {} MiB limit of a manifest",
            max / 1024 / 1024
        ));
    }
    Ok(bytes)
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut cut = offset.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// Why there is no plan: the message `run` prints, and the case as the link names it
/// (`docs/node-protocol.md`: `E_MANIFEST`, `E_JOB`, `E_STORE_URL`, `E_RUN`).
#[derive(Debug)]
pub struct PlanError {
    pub code: &'static str,
    pub message: String,
}

pub fn plan(opts: &Options) -> Result<Plan, PlanError> {
    let mut code = "E_MANIFEST";
    steps(opts, &mut code).map_err(|message| PlanError { code, message })
}

/// [`plan`]'s steps; `code` names the case of the step under way when one fails.
fn steps(opts: &Options, code: &mut &'static str) -> Result<Plan, String> {
    let shown = opts.manifest.display().to_string();
    let bytes = read_manifest(&opts.manifest).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let (text, loaded) = crate::manifest::load::load(&bytes);
    if loaded.root.is_none() {
        let why = loaded.diags.first().map_or_else(
            || "not a manifest".to_owned(),
            |d| {
                let at = text.as_deref().map_or_else(String::new, |t| {
                    let (l, c) = line_col(t, d.span.start);
                    format!(":{l}:{c}")
                });
                format!("{shown}{at}: {} {}", (opts.rule_code)(d.issue), d.message)
            },
        );
        return Err(format!("not a readable manifest: {why}"));
    }
    *code = "E_JOB";
    let job = loaded.job(&opts.job).map_err(|none| {
        let hint = none
            .closest
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        format!("{shown}: no job named `{}`{hint}", opts.job)
    })?;
    *code = "E_MANIFEST";
    let bad = |what: &str| {
        format!(
            "{shown}: job `{}` {what} (`batchguard lint {shown}` shows why)",
            opts.job
        )
    };
    let expr = job
        .schedule
        .value()
        .ok_or_else(|| bad("has no valid `schedule`"))?;
    let tz = match &job.timezone {
        Field::Absent => TimeZone::UTC,
        Field::Ok(z) => TimeZone::get(&z.value)
            .map_err(|_| bad(&format!("has an unknown timezone `{}`", z.value)))?,
        Field::Invalid => return Err(bad("has an invalid `timezone`")),
    };
    let dialect = loaded.manifest.deployment_of(job).scheduler;
    let schedule = Schedule::parse(expr, dialect).map_err(|e| {
        bad(&format!(
            "has a schedule that is not valid {dialect}: {}",
            e.message
        ))
    })?;
    let lock = job.active_lock().ok_or_else(|| {
        bad("has no lock (or `lock.disabled: true`); `run` only runs under a lock")
    })?;
    let ttl = lock
        .ttl
        .value()
        .ok_or_else(|| bad("has no valid `lock.ttl`"))?;
    let ttl = Duration::from_secs(ttl.secs());
    let (grace, safety) = timings(ttl).map_err(|m| bad(&format!("cannot be guarded: {m}")))?;
    let lock_key = lock
        .key
        .value()
        .map_or_else(|| "{job}:{scheduled_at}".to_owned(), |t| t.0.clone());
    let command = if opts.link {
        // Driven over the link: the driver's callback is the attempt, no command runs.
        vec![]
    } else if !opts.command.is_empty() {
        opts.command.clone()
    } else {
        match job.command.value() {
            Some(Command::Argv(v)) => v.iter().map(|s| s.value.clone()).collect(),
            Some(Command::Shell(s)) => {
                return Err(bad(&format!(
                    "has a one-string command (`{s}`): write it as an argv list; `run` never hands a command to a shell"
                )));
            }
            None => return Err(bad("has no `command` and none was given after `--`")),
        }
    };
    *code = "E_RUN";
    if opts.manual
        && (opts.scheduled_at.is_none()
            || opts.reason.as_deref().is_none_or(|r| r.trim().is_empty()))
    {
        return Err("--manual needs --scheduled-at (the slot to recover) and --reason TEXT".into());
    }
    let settings = run_settings(opts)?;
    let lock_store = lock.store.value().map(|k| k.as_str());
    let (store_url, store_from) = if opts.drill.snapshot.is_some() {
        // A drill's sandbox store is SQLite whatever the job's production store is.
        let url = opts.store.as_deref().unwrap_or(store::DEFAULT_URL);
        (
            store::StoreUrl::parse(url).map_err(|e| format!("--store {e}"))?,
            "--store".to_owned(),
        )
    } else {
        let config = settings
            .as_ref()
            .and_then(|s| Some((s.config.run.store.clone()?, s.path.clone()?)));
        *code = "E_STORE_URL";
        choose_store(
            opts.store.as_deref(),
            std::env::var("BATCHGUARD_STORE").ok(),
            config,
            lock_store,
            &opts.job,
        )?
    };
    *code = "E_RUN";
    if let Some(l) = &opts.ledger
        && l != store_url.raw()
        && !store::ledger::is_writable_source(l)
    {
        return Err(format!(
            "--ledger {} is not a ledger `run` can write: give sqlite:PATH, postgres://…, mysql://… or a path.jsonl / path.ndjson file (outputs go beside it, to path.outputs.jsonl)",
            crate::db::mask(l)
        ));
    }
    if !store_url.kind().keeps_ledger() && opts.ledger.as_ref().is_none_or(|l| l == store_url.raw())
    {
        return Err(format!(
            "the store {store_url} ({store_from}) is Redis, which keeps no ledger: give --ledger SOURCE (sqlite:PATH, postgres://…, mysql://… or a path.jsonl file) so `audit` can read what ran"
        ));
    }
    let retry = job.retry.value().cloned().unwrap_or_default();
    let catch_up = retry
        .catch_up
        .value()
        .map(|d| Duration::from_secs(d.secs()));
    if matches!(job.monitor, Field::Invalid) {
        eprintln!(
            "batchguard run: note: job `{}` has an invalid `monitor`: no check-in is sent (`batchguard lint {shown}` shows why)",
            opts.job
        );
    }
    let plan = Plan {
        monitor: job.monitor.value().cloned(),
        store: store_url,
        store_from,
        tick_tolerance: settings
            .as_ref()
            .and_then(|s| s.tick_tolerance)
            .map(|d| Duration::from_secs(d.0)),
        catch_up,
        clock_check: clock_check(),
        job_name: opts.job.clone(),
        ledger_job: opts.job.clone(),
        service: loaded.manifest.service_name(&opts.manifest),
        instance: opts
            .instance
            .clone()
            .unwrap_or_else(|| default_instance(opts.link)),
        schedule,
        tz,
        ttl,
        grace,
        safety,
        max_attempts: retry.bounded_attempts(),
        retry,
        lock_key,
        command,
        snapshot: job
            .snapshot
            .value()
            .and_then(|s| s.path.value())
            .map(|t| t.0.clone()),
    };
    // A template that cannot be filled is refused before the store is touched, not found
    // after a lease was taken for nothing.
    *code = "E_MANIFEST";
    let snap = (plan.snapshot.is_some() || opts.drill.snapshot.is_some()).then_some("SNAPSHOT");
    plan.argv(Timestamp::UNIX_EPOCH, "RUN_ID", 1, snap)
        .and_then(|_| plan.lock_key(Timestamp::UNIX_EPOCH, "RUN_ID"))
        .map_err(|e| bad(&format!("cannot be run: {e}")))?;
    Ok(plan)
}

impl Plan {
    /// The slot: `--scheduled-at` when it is a slot of the schedule, else the latest slot
    /// at or before the store's now.
    /// The slot a tick at `now` (the store's clock) works: the latest at or before it, or the
    /// next one when the tick is early by at most the tick tolerance (item 15): schedulers
    /// fire a few ms early, and a host clock may run ahead of the store's.
    pub fn slot_at(&self, now: Timestamp) -> Result<Timestamp, String> {
        let latest = self.latest_slot(now);
        if let Some(next) = self.schedule.next_after(&self.tz, now) {
            let early = next.duration_since(now);
            let interval = latest
                .as_ref()
                .map_or(SignedDuration::from_hours(24), |l| next.duration_since(*l));
            let tolerance = SignedDuration::try_from(self.tolerance(interval)).unwrap_or_default();
            if early <= tolerance {
                return Ok(next);
            }
        }
        latest
    }

    /// The tick tolerance for slots `interval` apart: `[run] tick_tolerance` (never more than
    /// half the interval, so a tick can never be taken for the slot after its own), else the
    /// smaller of 2 s and a tenth of the interval.
    pub fn tolerance(&self, interval: SignedDuration) -> Duration {
        let interval = Duration::try_from(interval).unwrap_or_default();
        match self.tick_tolerance {
            Some(t) => t.min(interval / 2),
            None => Duration::from_secs(2).min(interval / 10),
        }
    }

    /// The interval of the schedule at `slot` (to the next slot), else a day.
    fn interval_at(&self, slot: Timestamp) -> SignedDuration {
        self.schedule
            .next_after(&self.tz, slot)
            .map_or(SignedDuration::from_hours(24), |n| n.duration_since(slot))
    }

    /// The tick tolerance around the store's clock `now`, for the skew a tick reports.
    pub fn tolerance_at(&self, now: Timestamp) -> Duration {
        match self.latest_slot(now) {
            Ok(l) => self.tolerance(self.interval_at(l)),
            Err(_) => self.tolerance(SignedDuration::from_hours(24)),
        }
    }

    /// Where the store's clock must be for a tick to name `slot` (SPEC 7.1 item 22): not
    /// earlier than the slot less the tick tolerance (else this host runs ahead), and not
    /// past the first slot after the catch-up reach (one interval, at most an hour, or
    /// `retry.catch_up`) and the tolerance (else this host runs behind, or its tick is
    /// too old to be a tick).
    pub fn clock_bound(&self, slot: Timestamp) -> store::ClockBound {
        let interval = self.interval_at(slot);
        let tol = SignedDuration::try_from(self.tolerance(interval)).unwrap_or_default();
        let reach = self
            .catch_up
            .and_then(|c| SignedDuration::try_from(c).ok())
            .unwrap_or_else(|| interval.min(SignedDuration::from_hours(1)));
        let far = slot
            .checked_add(reach)
            .and_then(|t| t.checked_add(tol))
            .ok();
        store::ClockBound {
            earliest: slot.checked_sub(tol).unwrap_or(slot),
            before: far.and_then(|f| self.schedule.next_after(&self.tz, f)),
        }
    }

    /// How far before `slot` an unfinished slot is still caught up (item 20):
    /// `retry.catch_up`, else one interval of the job (the gap before `slot`), at most 1 h,
    /// so the next tick always catches up the slot just before it.
    pub fn catch_up_window(&self, slot: Timestamp) -> Duration {
        if let Some(w) = self.catch_up {
            return w;
        }
        let before = slot
            .checked_sub(SignedDuration::from_micros(1))
            .unwrap_or(slot);
        let gap = self
            .latest_slot(before)
            .ok()
            .and_then(|p| Duration::try_from(slot.duration_since(p)).ok())
            .unwrap_or(Duration::from_secs(3600));
        gap.min(Duration::from_secs(3600))
    }

    /// `t` when it is a slot of the schedule; else why not, with the next slot.
    pub fn given_slot(&self, t: Timestamp) -> Result<Timestamp, String> {
        let after = t.checked_add(SignedDuration::from_secs(1)).unwrap_or(t);
        if self.schedule.slots(&self.tz, t, after).contains(&t) {
            return Ok(t);
        }
        let next = self.schedule.next_after(&self.tz, t);
        Err(format!(
            "--scheduled-at {} is not a slot of job `{}` (`{}` in {}, zone {}){}",
            store::rfc3339(t),
            self.job_name,
            self.schedule.expr(),
            self.schedule.dialect(),
            self.tz.iana_name().unwrap_or("UTC"),
            next.map(|n| format!("; the next slot is {}", store::rfc3339(n)))
                .unwrap_or_default()
        ))
    }

    /// The latest slot at or before `now`.
    pub fn latest_slot(&self, now: Timestamp) -> Result<Timestamp, String> {
        let until = now
            .checked_add(SignedDuration::from_micros(1))
            .unwrap_or(now);
        // An hour first: a frequent job's day is thousands of slots, and every `run` asks.
        for hours in [1i64, 24, 24 * 32, 24 * 367, 24 * 3000] {
            let from = now
                .checked_sub(SignedDuration::from_hours(hours))
                .unwrap_or(Timestamp::MIN);
            if let Some(t) = self.schedule.slots(&self.tz, from, until).last() {
                return Ok(*t);
            }
        }
        Err(format!(
            "job `{}` has no slot at or before {}",
            self.job_name,
            store::rfc3339(now)
        ))
    }

    fn values<'a>(
        &'a self,
        slot: &'a str,
        compact: &'a str,
        run_id: &'a str,
        attempt: &'a str,
        snapshot: Option<&'a str>,
    ) -> Vec<(&'a str, &'a str)> {
        let mut v = vec![
            ("job", self.job_name.as_str()),
            ("service", self.service.as_str()),
            ("scheduled_at", slot),
            ("scheduled_at_compact", compact),
            ("run_id", run_id),
            ("attempt", attempt),
        ];
        if let Some(s) = snapshot {
            v.push(("snapshot", s));
        }
        v
    }

    pub fn lock_key(&self, slot: Timestamp, run_id: &str) -> Result<String, String> {
        let s = store::rfc3339(slot);
        let c = crate::snapshot::compact(slot);
        template::render(&self.lock_key, &self.values(&s, &c, run_id, "1", None))
            .map_err(|e| format!("lock.key: {e}"))
    }

    /// The rendered snapshot path (when the job has one) and its digest (when it exists
    /// and lies under the working directory).
    pub fn snapshot(&self, slot: Timestamp) -> (Option<String>, Option<String>) {
        let Some(t) = &self.snapshot else {
            return (None, None);
        };
        let s = store::rfc3339(slot);
        let c = crate::snapshot::compact(slot);
        let Ok(path) = template::render(t, &self.values(&s, &c, "", "", None)) else {
            return (None, None);
        };
        let check = crate::snapshot::SnapshotCheck::new(PathBuf::from("."));
        let digest = check
            .confine(&path)
            .ok()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| crate::snapshot::digest(&b));
        (Some(path), digest)
    }

    pub fn argv(
        &self,
        slot: Timestamp,
        run_id: &str,
        attempt: u32,
        snapshot: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let s = store::rfc3339(slot);
        let c = crate::snapshot::compact(slot);
        let a = attempt.to_string();
        let values = self.values(&s, &c, run_id, &a, snapshot);
        self.command
            .iter()
            .map(|arg| template::render(arg, &values).map_err(|e| format!("command: {e}")))
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    pub fn env(
        &self,
        slot: Timestamp,
        run_id: &str,
        attempt: u32,
        fence: i64,
        deadline: Timestamp,
        snapshot: Option<&str>,
        outputs: &Path,
        error: &Path,
    ) -> Vec<(String, String)> {
        let abs = |p: &Path| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        };
        let mut env = vec![
            ("BATCHGUARD_JOB".into(), self.job_name.clone()),
            ("BATCHGUARD_SERVICE".into(), self.service.clone()),
            ("BATCHGUARD_SCHEDULED_AT".into(), store::rfc3339(slot)),
            ("BATCHGUARD_RUN_ID".into(), run_id.to_owned()),
            ("BATCHGUARD_ATTEMPT".into(), attempt.to_string()),
            ("BATCHGUARD_FENCE".into(), fence.to_string()),
            ("BATCHGUARD_DEADLINE".into(), store::rfc3339(deadline)),
            ("BATCHGUARD_OUTPUTS".into(), abs(outputs)),
            ("BATCHGUARD_ERROR".into(), abs(error)),
        ];
        if let Some(s) = snapshot {
            env.push(("BATCHGUARD_SNAPSHOT".into(), s.to_owned()));
        }
        // SPEC 7.5: `batchguard claim` in the command finds the run's store here, unless the
        // environment names one already. A relative SQLite path is made absolute, so a
        // command that changes directory still claims in this store.
        if std::env::var_os("BATCHGUARD_STORE").is_none() {
            let url = match self.store.sqlite_path() {
                Some(p) if p.is_relative() => format!("sqlite:{}", abs(p)),
                _ => self.store.raw().to_owned(),
            };
            env.push(("BATCHGUARD_STORE".into(), url));
        }
        env
    }

    /// An event of this job and slot with the common fields filled.
    pub fn event(
        &self,
        run_id: &str,
        slot: Timestamp,
        kind: &str,
        trigger: &str,
        detail: Option<String>,
    ) -> EventRow {
        EventRow {
            run_id: run_id.to_owned(),
            job: self.ledger_job.clone(),
            scheduled_at: slot,
            event: kind.to_owned(),
            at: Timestamp::now(),
            instance: Some(self.instance.clone()),
            attempt: None,
            status: None,
            error_code: None,
            snapshot_digest: None,
            trigger: trigger.to_owned(),
            fence: None,
            detail: detail.map(|d| store::clip_detail(&d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of one job of a manifest written to a temporary folder.
    fn plan_of(schedule: &str, scheduler: &str, config: Option<&str>) -> (Plan, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = dir.path().join("m.batchguard.yaml");
        std::fs::write(
            &m,
            format!(
                "version: 1\nservice: s\ndeployment:\n  scheduler: {scheduler}\njobs:\n  - name: j\n    schedule: \"{schedule}\"\n    expected_duration: 1s\n    command: [\"true\"]\n    lock:\n      ttl: 60s\n    retry:\n      max_attempts: 1\n"
            ),
        )
        .expect("manifest");
        if let Some(c) = config {
            std::fs::write(dir.path().join("batchguard.toml"), c).expect("config");
        }
        let opts = Options {
            manifest: m,
            job: "j".into(),
            store: Some("sqlite:x.db".into()),
            ledger: None,
            scheduled_at: None,
            instance: Some("t".into()),
            manual: false,
            reason: None,
            report: None,
            config: None,
            link: false,
            command: vec![],
            rule_code: |_| "BG000",
            drill: super::super::Drill::default(),
        };
        (plan(&opts).expect("plan"), dir)
    }

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn an_early_tick_works_the_slot_it_anticipates() {
        // node-cron fired at 01:00:09.986 for the 01:00:10 slot of a 10-second job.
        let (p, _d) = plan_of("*/10 * * * * *", "node-cron", None);
        assert_eq!(
            p.slot_at(t("2026-03-01T01:00:09.986Z")).unwrap(),
            t("2026-03-01T01:00:10Z")
        );
        // A tenth of 10 s is the default tolerance: 1.5 s early is the slot before.
        assert_eq!(
            p.slot_at(t("2026-03-01T01:00:08.5Z")).unwrap(),
            t("2026-03-01T01:00:00Z")
        );
        // A host clock 20 ms ahead of the store's: the hourly slot is not missed.
        let (p, _d) = plan_of("0 * * * *", "crontab", None);
        assert_eq!(
            p.slot_at(t("2026-03-01T00:59:59.980Z")).unwrap(),
            t("2026-03-01T01:00:00Z")
        );
        // 2 s is the most it waits for by default, whatever the interval.
        assert_eq!(
            p.slot_at(t("2026-03-01T00:59:57Z")).unwrap(),
            t("2026-03-01T00:00:00Z")
        );
        // On time and late ticks work their own slot.
        assert_eq!(
            p.slot_at(t("2026-03-01T01:00:00Z")).unwrap(),
            t("2026-03-01T01:00:00Z")
        );
        assert_eq!(
            p.slot_at(t("2026-03-01T01:00:30Z")).unwrap(),
            t("2026-03-01T01:00:00Z")
        );
    }

    #[test]
    fn the_tick_tolerance_comes_from_the_config_and_never_reaches_half_an_interval() {
        let (p, _d) = plan_of(
            "* * * * *",
            "crontab",
            Some("[run]\ntick_tolerance = \"10s\"\n"),
        );
        assert_eq!(p.tick_tolerance, Some(Duration::from_secs(10)));
        assert_eq!(
            p.slot_at(t("2026-03-01T00:59:51Z")).unwrap(),
            t("2026-03-01T01:00:00Z")
        );
        let (p, _d) = plan_of(
            "* * * * *",
            "crontab",
            Some("[run]\ntick_tolerance = \"5m\"\n"),
        );
        assert_eq!(
            p.slot_at(t("2026-03-01T00:59:29Z")).unwrap(),
            t("2026-03-01T00:59:00Z")
        );
        let (p, _d) = plan_of(
            "* * * * *",
            "crontab",
            Some("[run]\ntick_tolerance = \"0s\"\n"),
        );
        assert_eq!(
            p.slot_at(t("2026-03-01T00:59:59.999Z")).unwrap(),
            t("2026-03-01T00:59:00Z")
        );
    }

    #[test]
    fn the_catch_up_window_is_one_interval_at_most_an_hour() {
        let (p, _d) = plan_of("*/5 * * * *", "crontab", None);
        assert_eq!(
            p.catch_up_window(t("2026-03-01T01:00:00Z")),
            Duration::from_secs(300)
        );
        let (p, _d) = plan_of("0 2 * * *", "crontab", None);
        assert_eq!(
            p.catch_up_window(t("2026-03-01T02:00:00Z")),
            Duration::from_secs(3600)
        );
    }
}
