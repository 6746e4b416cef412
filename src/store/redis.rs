//! The Redis store (`redis://[user:pass@]host:port/db`, TLS `rediss://`): several hosts
//! share one Redis, for teams whose only shared store it is (SPEC 7.2).
//!
//! Every decision is one Lua script, so it is atomic and in Redis time (`TIME`):
//! - the acquire reads the slot's marker, takes the lease with `SET NX PX` (a lease that
//!   expired is gone, so "no holder or an expired one" is what `NX` tests), `INCR`s the
//!   job's fencing counter, counts the attempt, and answers with the holder when it is
//!   refused; it first checks a named slot against Redis's clock and answers the job's
//!   unfinished slots in the catch-up window instead (SPEC 7.1 items 22, 27: no round trip
//!   of their own);
//! - the finish settles the slot's marker and deletes the lease only when the lease still
//!   carries this run's fence (owner-checked), once per run id (item 23), and leaves both
//!   alone when the slot has a newer run (item 24: superseded).
//!
//! Keys, under a prefix (`?prefix=`, default `batchguard`):
//! `P:lease:<lock key>` (the holder as JSON, with the lease's time to live),
//! `P:fence:<job>` (the counter), `P:slot:<job>:<scheduled_at>` (a hash: attempts, state,
//! last run id and its fence, what each run's finish came to; kept `?retention=` after its
//! last write, default 35 days), `P:run:<run id>`
//! (the lease key a live run holds), `P:slots:<job>` (the job's slots by time, for
//! `store status`) and `P:jobs`.
//!
//! Redis keeps no ledger: `run` writes the ledger to `--ledger`, which is required.
//!
//! A Redis that loses its data (a restart without persistence, a failover to a replica that
//! lagged) forgets its counters, leases and markers. Two defences, both in the acquire
//! script, neither of which moves a counter:
//! - the **epoch** `P:epoch`, written by `store migrate` (a new Redis) and `store repair`
//!   (after a loss): an acquire that finds none is refused on every host, so a Redis that
//!   came back empty hands out no fence until `store repair` has moved every job's counter
//!   past the ledger's fences and restored the ledger's succeeded and dead-lettered slots;
//! - each working directory keeps the highest fence it was given per store and job
//!   (`.batchguard/fences.json`): a counter found below it (a failover to a replica that
//!   kept the epoch but lagged) is refused, and the epoch is deleted, so every other host
//!   stops too until `store repair`.

use super::ledger::{Batch, Ledger};
use super::url::Conn;
use super::{
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, Finished, HeldLease,
    LeaseRow, OutputRow, Refusal, SlotRow, SlotState, Store, StoreError, StoreUrl, Unfinished,
    rfc3339,
};
use jiff::Timestamp;
use redis::{IntoConnectionInfo, Value};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod admin;
mod config;
mod fences;
mod scripts;
pub use config::{Config, FENCES_FILE, parse_url};
use fences::{read_fences, record_fence};
use scripts::{ACQUIRE, CLAIM, CLAIMED, FINISH, HELD, LIVE, UNFINISHED};

/// How long one command may take before the store counts as unreachable.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Lease keys read by one `held_leases` script: a bound on how long Redis is kept busy.
const HELD_CHUNK: usize = 1000;

pub struct RedisStore {
    conn: redis::Connection,
    url: StoreUrl,
    shown: String,
    cfg: Config,
    /// Redis's clock at the last answer, and when (monotonic) it arrived.
    clock: Option<(Timestamp, Instant)>,
    fences: PathBuf,
    /// The run's claims the last finish read (see [`Store::finished_claims`]).
    finished_claims: Option<Vec<OutputRow>>,
}

/// Epoch microseconds as a script argument; "" for none.
fn opt_us(t: Option<Timestamp>) -> String {
    t.map(|t| t.as_microsecond().to_string())
        .unwrap_or_default()
}

/// A reply's element as text (bulk and simple strings, integers).
fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    text(v)?.parse().ok()
}

/// The holder a lease key's JSON value names.
#[derive(serde::Deserialize)]
struct LeaseValue {
    holder: String,
    run_id: String,
    #[serde(deserialize_with = "digits")]
    fence: i64,
    job: String,
    scheduled_at: String,
    /// Epoch microseconds in Redis's clock; absent in leases taken before it was kept.
    #[serde(default)]
    acquired_us: Option<String>,
}

/// A fence written as digits (what the script writes) or as a JSON number.
fn digits<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n.as_i64().ok_or_else(|| D::Error::custom("not a fence")),
        serde_json::Value::String(s) => s.parse().map_err(D::Error::custom),
        _ => Err(D::Error::custom("not a fence")),
    }
}

impl RedisStore {
    pub fn open(url: &StoreUrl) -> Result<RedisStore, StoreError> {
        let shown = url.shown().to_owned();
        let Conn::Redis(cfg) = url.conn() else {
            return Err(StoreError::bad_url(format!("{shown}: not a Redis URL")));
        };
        let cfg = cfg.clone();
        let bad = |e: redis::RedisError| {
            StoreError::bad_url(format!(
                "{shown}: not a Redis URL: {}",
                url.scrub(e.to_string())
            ))
        };
        let unreachable = |e: redis::RedisError| {
            StoreError::unreachable(format!(
                "{shown}: cannot connect: {}",
                url.scrub(e.to_string())
            ))
        };
        let info = cfg
            .client_url
            .as_str()
            .into_connection_info()
            .map_err(bad)?;
        // No `CLIENT SETINFO`: the connection's set-up is AUTH and SELECT only (one
        // pipelined round trip, none for database 0 without a password).
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let client = redis::Client::open(info).map_err(bad)?;
        let conn = client
            .get_connection_with_timeout(crate::db::CONNECT_TIMEOUT)
            .map_err(unreachable)?;
        conn.set_read_timeout(Some(QUERY_TIMEOUT))
            .and_then(|()| conn.set_write_timeout(Some(QUERY_TIMEOUT)))
            .map_err(unreachable)?;
        Ok(RedisStore {
            conn,
            url: url.clone(),
            shown,
            cfg,
            clock: None,
            fences: PathBuf::from(FENCES_FILE),
            finished_claims: None,
        })
    }

    /// Key and time pairs (a `HGETALL` of a run's claims) as outputs, oldest first.
    fn claims_of(v: Option<&Value>) -> Vec<OutputRow> {
        let Some(Value::Array(items)) = v else {
            return Vec::new();
        };
        let mut out: Vec<OutputRow> = items
            .chunks(2)
            .filter_map(|p| {
                let key = text(p.first())?;
                let us: i64 = text(p.get(1))?.parse().ok()?;
                Some(OutputRow {
                    key,
                    at: Timestamp::from_microsecond(us).ok()?,
                })
            })
            .collect();
        out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.key.cmp(&b.key)));
        out
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.cfg.prefix)
    }

    fn slot_key(&self, job: &str, slot: &str) -> String {
        self.key("slot", &format!("{job}:{slot}"))
    }

    fn eval(
        &mut self,
        script: &str,
        keys: &[String],
        args: &[String],
        what: &str,
    ) -> Result<Vec<Value>, StoreError> {
        let mut c = redis::cmd("EVAL");
        c.arg(script).arg(keys.len());
        for k in keys {
            c.arg(k);
        }
        for a in args {
            c.arg(a);
        }
        match c.query::<Value>(&mut self.conn) {
            Ok(Value::Array(v)) => Ok(v),
            Ok(_) => Err(self.unexpected(what)),
            Err(e) => Err(self.fail(what, e)),
        }
    }

    /// Every lease key under the prefix, sorted: `SCAN` (never `KEYS`, which blocks Redis
    /// for the whole keyspace), so a key present from the first call to the last is seen.
    fn lease_keys(&mut self, what: &str) -> Result<Vec<String>, StoreError> {
        let pattern = format!("{}:lease:*", glob_escape(&self.cfg.prefix));
        self.scan(&pattern, 0, what)
    }

    /// Keys matching `pattern`, sorted; with `enough` above 0, the scan stops once it has
    /// found that many.
    fn scan(
        &mut self,
        pattern: &str,
        enough: usize,
        what: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut keys: Vec<String> = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.conn)
                .map_err(|e| self.fail(what, e))?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 || (enough > 0 && keys.len() >= enough) {
                break;
            }
        }
        // SCAN may return a key twice.
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// A client error: a lost connection or no answer is an unreachable store, anything
    /// else Redis's own answer.
    fn fail(&self, what: &str, e: redis::RedisError) -> StoreError {
        let message = format!("{}: {what}: {}", self.shown, self.url.scrub(e.to_string()));
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
        {
            StoreError::unreachable(message)
        } else {
            StoreError::failed(message)
        }
    }

    fn unexpected(&self, what: &str) -> StoreError {
        StoreError::failed(format!("{}: {what}: unexpected answer", self.shown))
    }

    /// Records Redis's clock from a `TIME` pair (seconds, microseconds) at `at`.
    fn tick(&mut self, reply: &[Value], at: usize) -> Option<Timestamp> {
        let s = int(reply.get(at))?;
        let us = int(reply.get(at + 1))?;
        let t = Timestamp::from_microsecond(s.checked_mul(1_000_000)?.checked_add(us)?).ok()?;
        self.clock = Some((t, Instant::now()));
        Some(t)
    }

    /// The highest fence this working directory was given for the job by this store.
    fn floor(&self, job: &str) -> Result<i64, StoreError> {
        let all = read_fences(&self.fences).map_err(|e| self.fences_error(&e))?;
        Ok(all
            .get(&self.cfg.identity)
            .and_then(|m| m.get(job))
            .copied()
            .unwrap_or(0))
    }

    fn fences_error(&self, e: &str) -> StoreError {
        StoreError::failed(format!(
            "{}: {}: {e} (it keeps the highest fencing token seen per job, so a Redis that lost its counter is noticed; fix or remove it knowingly)",
            self.shown,
            self.fences.display()
        ))
    }
}

impl Store for RedisStore {
    fn now(&mut self) -> Result<Timestamp, StoreError> {
        if let Some((t, at)) = self.clock {
            let d = jiff::SignedDuration::try_from(at.elapsed()).unwrap_or_default();
            return Ok(t.checked_add(d).unwrap_or(t));
        }
        let reply = redis::cmd("TIME")
            .query::<Value>(&mut self.conn)
            .map_err(|e| self.fail("cannot read the clock", e))?;
        let Value::Array(v) = reply else {
            return Err(self.unexpected("cannot read the clock"));
        };
        self.tick(&v, 0)
            .ok_or_else(|| self.unexpected("cannot read the clock"))
    }

    fn acquire(&mut self, req: &AcquireRequest) -> Result<AcquireResult, StoreError> {
        const WHAT: &str = "cannot acquire the lease";
        let slot = rfc3339(req.scheduled_at);
        let floor = self.floor(&req.job)?;
        let ttl_ms = req
            .ttl_secs
            .min(100 * 365 * 86_400)
            .saturating_mul(1000)
            .max(1);
        let retention_ms = self.cfg.retention_secs.saturating_mul(1000);
        let keys = vec![
            self.key("lease", &req.key),
            self.key("fence", &req.job),
            self.slot_key(&req.job, &slot),
            self.key("run", &req.run_id),
            self.key("slots", &req.job),
            format!("{}:jobs", self.cfg.prefix),
            self.epoch_key(),
        ];
        let args = vec![
            req.holder.clone(),
            req.run_id.clone(),
            req.job.clone(),
            slot.clone(),
            ttl_ms.to_string(),
            retention_ms.to_string(),
            req.max_attempts.map(|m| m.to_string()).unwrap_or_default(),
            if req.manual { "1" } else { "0" }.to_owned(),
            floor.to_string(),
            req.scheduled_at.as_second().to_string(),
            opt_us(req.clock.map(|c| c.earliest)),
            opt_us(req.clock.and_then(|c| c.before)),
            // Slots are scored by their epoch second: the first whole second at or after
            // the window's start.
            req.catch_up_from
                .map(|f| {
                    f.as_microsecond().div_euclid(1_000_000) + i64::from(f.subsec_nanosecond() != 0)
                })
                .map(|s| s.to_string())
                .unwrap_or_default(),
            self.slot_key(&req.job, ""),
            self.key("run", ""),
        ];
        let reply = self.eval(ACQUIRE, &keys, &args, WHAT)?;
        let now = self.tick(&reply, 1).ok_or_else(|| self.unexpected(WHAT))?;
        let kind = text(reply.first()).unwrap_or_default();
        // A slot older than the markers are kept cannot be told apart from one that never
        // ran: refused rather than run a second time.
        if kind == "too_old" {
            return Err(StoreError::refused(format!(
                "{}: slot {slot} is older than this store keeps its markers (retention {}): whether it already ran cannot be told; raise `retention=` in the store URL to guard older slots",
                self.shown,
                crate::text::duration::secs(self.cfg.retention_secs)
            )));
        }
        let result = match kind.as_str() {
            "out_of_clock" => AcquireResult::OutOfClock { now },
            "behind" => {
                let rows = reply[3..].chunks_exact(4).filter_map(|c| {
                    let at = text(c.first()).and_then(|t| t.parse().ok());
                    Some((at, int(c.get(1)), text(c.get(2))?, text(c.get(3))?))
                });
                let unfinished = Unfinished::oldest_first(rows);
                if unfinished.is_empty() {
                    // Slots behind that do not read back (a key edited by hand): nothing
                    // was written; asked again without the catch-up.
                    let mut again = req.clone();
                    again.catch_up_from = None;
                    return self.acquire(&again);
                }
                AcquireResult::Behind { unfinished, now }
            }
            "acquired" => {
                let (Some(fence), Some(attempt)) = (int(reply.get(3)), int(reply.get(4))) else {
                    return Err(self.unexpected(WHAT));
                };
                if let Err(e) = record_fence(&self.fences, &self.cfg.identity, &req.job, fence) {
                    eprintln!(
                        "batchguard run: note: cannot record fence {fence} in {}: {e}",
                        self.fences.display()
                    );
                }
                AcquireResult::Acquired(Acquired {
                    fence,
                    attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    at: now,
                })
            }
            "succeeded" => AcquireResult::Refused(Refusal::Succeeded {
                run_id: text(reply.get(3)).unwrap_or_default(),
            }),
            "dead_lettered" => AcquireResult::Refused(Refusal::DeadLettered),
            "exhausted" => AcquireResult::Refused(Refusal::Exhausted {
                attempts: int(reply.get(3))
                    .and_then(|a| u32::try_from(a).ok())
                    .unwrap_or(0),
            }),
            "held" => {
                let held: Option<LeaseValue> =
                    text(reply.get(3)).and_then(|s| serde_json::from_str(&s).ok());
                let pttl = int(reply.get(4)).unwrap_or(0).max(0);
                AcquireResult::Refused(Refusal::Held {
                    holder: held.as_ref().map(|h| h.holder.clone()).unwrap_or_default(),
                    run_id: held.as_ref().map(|h| h.run_id.clone()).unwrap_or_default(),
                    fence: held.as_ref().map_or(0, |h| h.fence),
                    ends_in_secs: (pttl + 999) / 1000,
                })
            }
            "no_epoch" => {
                return Err(StoreError::refused(format!(
                    "{}: Redis has no batchguard epoch (`{}`): it lost its data (a restart without persistence, a failover to a replica that had not caught up) or was never set up, so its fencing counters and succeeded markers cannot be trusted and no host takes a lease until it is restored. Restore it from the ledger with `batchguard store repair --store '{}' --ledger SOURCE` (SOURCE: the --ledger the jobs write); a new Redis is set up with `batchguard store migrate --store '{}'`",
                    self.shown,
                    self.epoch_key(),
                    self.shown,
                    self.shown,
                )));
            }
            "backwards" => {
                let fence = int(reply.get(3)).unwrap_or(0);
                return Err(StoreError::refused(format!(
                    "{}: the fencing counter of job `{}` went back: Redis would hand out fence {fence}, but this working directory was already given fence {floor} (see {}). Redis lost data (a failover to a replica that had not caught up), so leases and succeeded markers may be lost too; the epoch is deleted, so no host takes a lease until `batchguard store repair --store '{}' --ledger SOURCE` restores it (run `batchguard store flush` here first, so the ledger has every fence this host was given)",
                    self.shown,
                    req.job,
                    self.fences.display(),
                    self.shown,
                )));
            }
            _ => return Err(self.unexpected(WHAT)),
        };
        Ok(result)
    }

    fn finish(&mut self, fin: &Finish) -> Result<Finished, StoreError> {
        let state = if fin.dead_letter.is_some() {
            SlotState::DeadLettered
        } else {
            fin.state
        };
        let slot = rfc3339(fin.scheduled_at);
        let keys = vec![
            self.key("lease", &fin.key),
            self.slot_key(&fin.job, &slot),
            self.key("run", &fin.run_id),
            self.key("claims", &fin.run_id),
        ];
        let args = vec![
            fin.run_id.clone(),
            fin.fence.to_string(),
            state.as_str().to_owned(),
            self.cfg.retention_secs.saturating_mul(1000).to_string(),
        ];
        const WHAT: &str = "cannot write the end of the run";
        self.finished_claims = None;
        let reply = self.eval(FINISH, &keys, &args, WHAT)?;
        self.tick(&reply, 0);
        self.finished_claims = Some(Self::claims_of(reply.get(5)));
        let superseded = |run: Option<String>, fence: Option<String>| Finished::Superseded {
            run_id: run.unwrap_or_default(),
            fence: fence.and_then(|f| f.parse().ok()),
        };
        match text(reply.get(2)).as_deref() {
            Some("written") => Ok(Finished::Written),
            Some("superseded") => Ok(superseded(text(reply.get(3)), text(reply.get(4)))),
            // What this run's first finish came to: a superseded one stays superseded, so
            // whoever writes the ledger apart writes that `end`.
            Some("already") => Ok(
                match text(reply.get(3))
                    .as_deref()
                    .and_then(|p| p.strip_prefix("superseded "))
                    .and_then(|p| p.split_once(' '))
                {
                    Some((fence, run)) => superseded(Some(run.to_owned()), Some(fence.to_owned())),
                    None => Finished::AlreadyWritten,
                },
            ),
            _ => Err(self.unexpected(WHAT)),
        }
    }

    fn claim(
        &mut self,
        job: &str,
        key: &str,
        run_id: &str,
        fence: i64,
    ) -> Result<bool, StoreError> {
        const WHAT: &str = "cannot claim the output";
        let keys = vec![
            self.key("run", run_id),
            self.key("claim", &format!("{job}:{key}")),
            self.key("claims", run_id),
        ];
        let args = vec![
            run_id.to_owned(),
            fence.to_string(),
            key.to_owned(),
            self.key("slot", ""),
            self.cfg
                .retention_secs
                .saturating_mul(1000)
                .max(1)
                .to_string(),
        ];
        let reply = self.eval(CLAIM, &keys, &args, WHAT)?;
        self.tick(&reply, 0);
        match text(reply.get(2)).as_deref() {
            Some("claimed") => Ok(true),
            Some("already") => Ok(false),
            Some("refused") => Err(StoreError::claim_refused(run_id, fence, key)),
            _ => Err(self.unexpected(WHAT)),
        }
    }

    fn claimed(&mut self, run_id: &str) -> Result<Vec<OutputRow>, StoreError> {
        let keys = vec![self.key("claims", run_id)];
        let reply = self.eval(CLAIMED, &keys, &[], "cannot read the claims")?;
        self.tick(&reply, 0);
        Ok(Self::claims_of(reply.get(2)))
    }

    fn finished_claims(&mut self) -> Option<Vec<OutputRow>> {
        self.finished_claims.take()
    }

    fn append(&mut self, ev: &EventRow) -> Result<(), StoreError> {
        Err(no_ledger(&self.shown, &ev.event))
    }

    fn ingest_abandoned(&mut self, _: &Abandoned, keys: &[OutputRow]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        Err(no_ledger(&self.shown, "outputs"))
    }

    /// No run writes its ledger here, so none is abandoned here: runs with a ledger apart
    /// are found by their run directory and [`Store::live`].
    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        Ok(Vec::new())
    }

    fn folds_checks(&self) -> bool {
        true
    }

    fn live(&mut self, run_id: &str) -> Result<bool, StoreError> {
        let keys = vec![self.key("run", run_id)];
        let reply = self.eval(LIVE, &keys, &[run_id.to_owned()], "cannot read the leases")?;
        self.tick(&reply, 0);
        Ok(int(reply.get(2)) == Some(1))
    }

    fn as_ledger(&mut self) -> &mut dyn Ledger {
        self
    }

    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        const WHAT: &str = "cannot read the leases";
        let keys = self.lease_keys(WHAT)?;
        let strip = format!("{}:lease:", self.cfg.prefix);
        let mut out = Vec::new();
        for k in keys {
            let (value, pttl): (Option<String>, i64) = redis::pipe()
                .cmd("GET")
                .arg(&k)
                .cmd("PTTL")
                .arg(&k)
                .query(&mut self.conn)
                .map_err(|e| self.fail(WHAT, e))?;
            let Some(l) = value.and_then(|v| serde_json::from_str::<LeaseValue>(&v).ok()) else {
                continue;
            };
            if job.is_some_and(|j| j != l.job) || pttl <= 0 {
                continue;
            }
            out.push(LeaseRow {
                key: k.strip_prefix(&strip).unwrap_or(&k).to_owned(),
                job: l.job,
                scheduled_at: l.scheduled_at,
                holder: l.holder,
                run_id: l.run_id,
                fence: l.fence,
                secs_left: (pttl + 999) / 1000,
            });
        }
        Ok(out)
    }

    /// A Redis lease that expired is gone (Redis deletes the key), so every lease listed
    /// here is live: a holder that died shows as no lease, never as a stale one.
    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        const WHAT: &str = "cannot read the leases";
        let keys = self.lease_keys(WHAT)?;
        let strip = format!("{}:lease:", self.cfg.prefix);
        let mut out = Vec::new();
        let mut now = None;
        // One script per chunk (one with no keys when there are none: the clock).
        let chunks: Vec<&[String]> = if keys.is_empty() {
            vec![&[]]
        } else {
            keys.chunks(HELD_CHUNK).collect()
        };
        for chunk in chunks {
            let reply = self.eval(HELD, chunk, &[], WHAT)?;
            let t = self.tick(&reply, 0).ok_or_else(|| self.unexpected(WHAT))?;
            now = Some(t);
            for item in reply[2..].chunks(3) {
                let (Some(k), Some(v), Some(pttl)) =
                    (text(item.first()), text(item.get(1)), int(item.get(2)))
                else {
                    continue;
                };
                // -1: no time to live (not a lease this store wrote); -2: gone.
                let Some(l) = serde_json::from_str::<LeaseValue>(&v)
                    .ok()
                    .filter(|_| pttl > 0)
                else {
                    continue;
                };
                let (Some(scheduled_at), Some(lease_until)) = (
                    l.scheduled_at.parse::<Timestamp>().ok(),
                    t.checked_add(jiff::SignedDuration::from_millis(pttl)).ok(),
                ) else {
                    continue;
                };
                let acquired_at = l
                    .acquired_us
                    .as_deref()
                    .and_then(|u| u.parse::<i64>().ok())
                    .and_then(|u| Timestamp::from_microsecond(u).ok())
                    .unwrap_or(t);
                out.push(HeldLease {
                    key: k.strip_prefix(&strip).unwrap_or(&k).to_owned(),
                    job: l.job,
                    scheduled_at,
                    holder: l.holder,
                    run_id: l.run_id,
                    fence: l.fence,
                    acquired_at,
                    lease_until,
                });
            }
        }
        let now = now.ok_or_else(|| self.unexpected(WHAT))?;
        Ok((out, now))
    }

    fn unfinished(
        &mut self,
        job: &str,
        from: Timestamp,
    ) -> Result<(Vec<Unfinished>, Timestamp), StoreError> {
        const WHAT: &str = "cannot read the unfinished slots";
        let keys = vec![self.key("slots", job)];
        let args = vec![
            from.as_second().to_string(),
            self.slot_key(job, ""),
            self.key("run", ""),
        ];
        let reply = self.eval(UNFINISHED, &keys, &args, WHAT)?;
        let now = self.tick(&reply, 0).ok_or_else(|| self.unexpected(WHAT))?;
        let rows = reply[2..].chunks_exact(4).filter_map(|c| {
            let at = text(c.first()).and_then(|t| t.parse().ok());
            Some((at, int(c.get(1)), text(c.get(2))?, text(c.get(3))?))
        });
        Ok((Unfinished::oldest_first(rows), now))
    }

    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError> {
        const WHAT: &str = "cannot read the slots";
        let mut jobs: Vec<String> = match job {
            Some(j) => vec![j.to_owned()],
            None => redis::cmd("SMEMBERS")
                .arg(format!("{}:jobs", self.cfg.prefix))
                .query(&mut self.conn)
                .map_err(|e| self.fail(WHAT, e))?,
        };
        jobs.sort();
        let mut out = Vec::new();
        for j in jobs {
            let slots: Vec<String> = redis::cmd("ZREVRANGE")
                .arg(self.key("slots", &j))
                .arg(0)
                .arg(i64::from(per_job.max(1)) - 1)
                .query(&mut self.conn)
                .map_err(|e| self.fail(WHAT, e))?;
            for s in slots {
                let (attempts, state, run_id): (Option<i64>, Option<String>, Option<String>) =
                    redis::cmd("HMGET")
                        .arg(self.slot_key(&j, &s))
                        .arg("attempts")
                        .arg("state")
                        .arg("run_id")
                        .query(&mut self.conn)
                        .map_err(|e| self.fail(WHAT, e))?;
                let (Some(attempts), Some(state)) = (attempts, state) else {
                    continue;
                };
                out.push(SlotRow {
                    job: j.clone(),
                    scheduled_at: s,
                    attempts,
                    state,
                    run_id: run_id.unwrap_or_default(),
                });
            }
        }
        Ok(out)
    }
}

/// A SCAN pattern that matches `s` literally.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "*?[]\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn no_ledger(shown: &str, what: &str) -> StoreError {
    StoreError::failed(format!(
        "{shown}: a Redis store keeps no ledger, so it cannot take `{what}`: `run` writes the ledger to --ledger"
    ))
}

impl Ledger for RedisStore {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        Err(no_ledger(&self.shown, &batch.run_id))
    }
}
