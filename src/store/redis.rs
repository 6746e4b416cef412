//! The Redis store (`redis://[user:pass@]host:port/db`, TLS `rediss://`): several hosts
//! share one Redis, for teams whose only shared store it is (SPEC 7.2).
//!
//! Every decision is one Lua script, so it is atomic and in Redis time (`TIME`):
//! - the acquire reads the slot's marker, takes the lease with `SET NX PX` (a lease that
//!   expired is gone, so "no holder or an expired one" is what `NX` tests), `INCR`s the
//!   job's fencing counter, counts the attempt, and answers with the holder when it is
//!   refused;
//! - the finish settles the slot's marker and deletes the lease only when the lease still
//!   carries this run's fence (owner-checked).
//!
//! Keys, under a prefix (`?prefix=`, default `batchguard`):
//! `P:lease:<lock key>` (the holder as JSON, with the lease's time to live),
//! `P:fence:<job>` (the counter), `P:slot:<job>:<scheduled_at>` (a hash: attempts, state,
//! last run id; kept `?retention=` after its last write, default 35 days), `P:run:<run id>`
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
    Abandoned, AcquireRequest, AcquireResult, Acquired, EventRow, Finish, HeldLease, LeaseRow,
    OutputRow, Refusal, SlotRow, SlotState, Store, StoreError, StoreUrl, Unfinished, rfc3339,
};
use jiff::Timestamp;
use redis::{IntoConnectionInfo, Value};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The key prefix unless `?prefix=` says otherwise.
pub const DEFAULT_PREFIX: &str = "batchguard";
/// How long a slot's marker (succeeded, dead-lettered, attempts) is kept after its last
/// write unless `?retention=` says otherwise: longer than a month, so the monthly audit's
/// window and a late `--scheduled-at` replay of last month's slot are still guarded.
pub const DEFAULT_RETENTION_SECS: u64 = 35 * 86_400;
/// The shortest retention accepted: a marker must outlive any retry of its slot.
const MIN_RETENTION_SECS: u64 = 86_400;
/// Where the highest fence seen per store and job is kept.
pub const FENCES_FILE: &str = ".batchguard/fences.json";

/// How long one command may take before the store counts as unreachable.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The acquire. KEYS: lease, fence, slot, run, job's slots, jobs, epoch. ARGV: holder, run
/// id, job, scheduled_at, ttl ms, retention ms, max attempts (or ""), manual (1/0), the
/// fence floor (the highest this working directory has seen), the slot's epoch seconds.
/// Only a granted lease `INCR`s the counter.
const ACQUIRE: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[7]) == 0 then return {'no_epoch', t[1], t[2]} end
local ret = tonumber(ARGV[6])
if tonumber(t[1]) - tonumber(ARGV[10]) > math.floor(ret / 1000) then return {'too_old', t[1], t[2]} end
local st = redis.call('HMGET', KEYS[3], 'attempts', 'state', 'run_id')
local used = tonumber(st[1]) or 0
if st[2] == 'succeeded' then return {'succeeded', t[1], t[2], st[3] or ''} end
if st[2] == 'dead_lettered' and ARGV[8] ~= '1' then return {'dead_lettered', t[1], t[2]} end
local held = redis.call('GET', KEYS[1])
if held then
  return {'held', t[1], t[2], held, redis.call('PTTL', KEYS[1])}
end
if ARGV[7] ~= '' and ARGV[8] ~= '1' and used >= tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[3], 'state', 'dead_lettered')
  redis.call('PEXPIRE', KEYS[3], ret)
  return {'exhausted', t[1], t[2], used}
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < tonumber(ARGV[9]) then
  redis.call('DEL', KEYS[7])
  return {'backwards', t[1], t[2], cur + 1}
end
local fence = redis.call('INCR', KEYS[2])
-- The fence as digits: cjson writes numbers with 14 significant digits only.
local lease = cjson.encode({holder = ARGV[1], run_id = ARGV[2], fence = string.format('%d', fence), job = ARGV[3], scheduled_at = ARGV[4], acquired_us = t[1] .. string.format('%06d', tonumber(t[2]))})
redis.call('SET', KEYS[1], lease, 'NX', 'PX', ARGV[5])
redis.call('SET', KEYS[4], KEYS[1], 'PX', ARGV[5])
local attempt = redis.call('HINCRBY', KEYS[3], 'attempts', 1)
redis.call('HSET', KEYS[3], 'state', 'running', 'run_id', ARGV[2])
redis.call('PEXPIRE', KEYS[3], ret)
local now = tonumber(t[1])
redis.call('SADD', KEYS[6], ARGV[3])
redis.call('ZADD', KEYS[5], tonumber(ARGV[10]), ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. tostring(now - math.floor(ret / 1000)))
return {'acquired', t[1], t[2], fence, attempt}
"#;

/// The finish. KEYS: lease, slot, run. ARGV: run id, fence, state, retention ms.
const FINISH: &str = r#"
local t = redis.call('TIME')
local srun = redis.call('HGET', KEYS[2], 'run_id')
if srun == ARGV[1] or ARGV[3] == 'succeeded' then
  redis.call('HSET', KEYS[2], 'state', ARGV[3])
  if ARGV[3] == 'succeeded' then redis.call('HSET', KEYS[2], 'run_id', ARGV[1]) end
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]))
end
local held = redis.call('GET', KEYS[1])
if held then
  local ok, l = pcall(cjson.decode, held)
  local lf = ok and type(l) == 'table' and l.fence
  if type(lf) == 'number' then lf = string.format('%d', lf) end
  if lf == ARGV[2] and l.run_id == ARGV[1] then
    redis.call('DEL', KEYS[1])
  end
end
redis.call('DEL', KEYS[3])
return {t[1], t[2]}
"#;

/// `store migrate`: KEYS: epoch. ARGV: what writes it. Writes the epoch when there is none.
const MIGRATE: &str = r#"
local t = redis.call('TIME')
local e = redis.call('GET', KEYS[1])
if e then return {'present', e} end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. t[1])
return {'written', ARGV[1] .. ' ' .. t[1]}
"#;

/// `store repair`, one job's counter: KEYS: fence. ARGV: the highest fence known. Raises
/// the counter to it (never lowers it); answers the counter.
const RAISE: &str = r#"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if want > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return cur
"#;

/// `store repair`, one slot: KEYS: slot, job's slots, jobs. ARGV: attempts, state, run id,
/// retention ms, job, scheduled_at, the slot's epoch seconds. A marker already settled
/// (`succeeded`) is kept; otherwise the ledger's state and the larger attempt count win.
const RESTORE: &str = r#"
local st = redis.call('HMGET', KEYS[1], 'attempts', 'state')
if st[2] ~= 'succeeded' then
  local used = math.max(tonumber(st[1]) or 0, tonumber(ARGV[1]))
  redis.call('HSET', KEYS[1], 'attempts', used, 'state', ARGV[2], 'run_id', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[2], tonumber(ARGV[7]), ARGV[6])
return 1
"#;

/// `live`: KEYS: run. Whether the run's lease key still names it.
const LIVE: &str = r#"
local t = redis.call('TIME')
local key = redis.call('GET', KEYS[1])
local live = 0
if key then
  local held = redis.call('GET', key)
  if held then
    local ok, l = pcall(cjson.decode, held)
    if ok and type(l) == 'table' and l.run_id == ARGV[1] then live = 1 end
  end
end
return {t[1], t[2], live}
"#;

/// `held_leases`: KEYS: lease keys (found by `SCAN`). Each one's value and time to live,
/// read with the clock in one atomic step; a key gone since the scan answers nothing.
const HELD: &str = r#"
local t = redis.call('TIME')
local out = {t[1], t[2]}
for i, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v then
    table.insert(out, k)
    table.insert(out, v)
    table.insert(out, redis.call('PTTL', k))
  end
end
return out
"#;

/// `unfinished`: KEYS: the job's slots. ARGV: the first slot's epoch seconds, the prefix of
/// the job's slot keys, the prefix of run keys. The slots at or after it that ended
/// interrupted or failed, or whose run holds no live lease while marked running (lost).
const UNFINISHED: &str = r#"
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, s in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local st = redis.call('HMGET', ARGV[2] .. s, 'attempts', 'state', 'run_id')
  local state = st[2]
  if state == 'running' then
    local live = false
    local key = st[3] and redis.call('GET', ARGV[3] .. st[3])
    local held = key and redis.call('GET', key)
    if held then
      local ok, l = pcall(cjson.decode, held)
      live = ok and type(l) == 'table' and l.run_id == st[3]
    end
    if not live then state = 'lost' end
  end
  if state == 'failed' or state == 'interrupted' or state == 'lost' then
    table.insert(out, s)
    table.insert(out, st[1] or '0')
    table.insert(out, state)
    table.insert(out, st[3] or '')
  end
end
return out
"#;

/// Lease keys read by one `held_leases` script: a bound on how long Redis is kept busy.
const HELD_CHUNK: usize = 1000;

/// A store URL taken apart: what goes to the client, and batchguard's own parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The URL without batchguard's parameters, for the Redis client.
    pub client_url: String,
    pub prefix: String,
    pub retention_secs: u64,
    /// Scheme, host, port, database and prefix: what the fence file is keyed by (no
    /// credentials, so a rotated password does not forget the fences).
    pub identity: String,
}

/// `45s`, `10m`, `1h30m`, `35d`: the manifest's duration style.
fn parse_duration(s: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(d))?,
            );
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        total = total.checked_add(num.take()?.checked_mul(unit)?)?;
    }
    (num.is_none() && !s.is_empty()).then_some(total)
}

fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
}

/// Takes `?prefix=` and `?retention=` out of a `redis://` / `rediss://` URL, and checks
/// the rest is a URL the Redis client takes; the error is the reason only (no URL).
pub fn parse_url(url: &str) -> Result<Config, String> {
    let bad = |why: String| why;
    let (rest, fragment) = match url.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (url, None),
    };
    let (base, query) = match rest.split_once('?') {
        Some((b, q)) => (b, q),
        None => (rest, ""),
    };
    let mut prefix = DEFAULT_PREFIX.to_owned();
    let mut retention_secs = DEFAULT_RETENTION_SECS;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "prefix" => {
                if !valid_prefix(v) {
                    return Err(bad(format!(
                        "`prefix={v}` is not a key prefix: use 1 to 64 letters, digits, `_`, `-`, `.` or `:`"
                    )));
                }
                prefix = v.to_owned();
            }
            "retention" => {
                retention_secs = parse_duration(v)
                    .filter(|s| *s >= MIN_RETENTION_SECS)
                    .ok_or_else(|| {
                        bad(format!(
                            "`retention={v}` is not a retention of at least 1d (a duration such as 35d or 90d)"
                        ))
                    })?;
            }
            _ => kept.push(pair),
        }
    }
    let mut client_url = base.to_owned();
    if !kept.is_empty() {
        client_url.push('?');
        client_url.push_str(&kept.join("&"));
    }
    if let Some(f) = fragment {
        client_url.push('#');
        client_url.push_str(f);
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_and_path = &base[scheme_end..];
    let (authority, path) = match authority_and_path.find('/') {
        Some(i) => (&authority_and_path[..i], &authority_and_path[i + 1..]),
        None => (authority_and_path, ""),
    };
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    let db = if path.is_empty() { "0" } else { path };
    let identity = format!("{}{hostport}/{db}#{prefix}", &base[..scheme_end]);
    client_url
        .as_str()
        .into_connection_info()
        .map_err(|e| format!("not a Redis URL: {}", crate::db::scrub(url, e.to_string())))?;
    Ok(Config {
        client_url,
        prefix,
        retention_secs,
        identity,
    })
}

pub struct RedisStore {
    conn: redis::Connection,
    url: StoreUrl,
    shown: String,
    cfg: Config,
    /// Redis's clock at the last answer, and when (monotonic) it arrived.
    clock: Option<(Timestamp, Instant)>,
    fences: PathBuf,
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
        })
    }

    fn epoch_key(&self) -> String {
        format!("{}:epoch", self.cfg.prefix)
    }

    /// The epoch's value (what wrote it, when), or `None`: every acquire is then refused.
    pub fn epoch(&mut self) -> Result<Option<String>, StoreError> {
        let key = self.epoch_key();
        redis::cmd("GET")
            .arg(&key)
            .query(&mut self.conn)
            .map_err(|e| self.fail("cannot read the epoch", e))
    }

    /// `store migrate`: writes the epoch a new Redis (or one that ran batchguard before
    /// epochs existed) needs before any acquire. A Redis with no key of batchguard's is new
    /// or lost its data; when this working directory was given fences by it, it lost them,
    /// and only `store repair` (which knows the ledger) may write the epoch.
    pub fn migrate(&mut self) -> Result<String, StoreError> {
        const WHAT: &str = "cannot write the epoch";
        let epoch = self.epoch_key();
        let found: Option<String> = redis::cmd("GET")
            .arg(&epoch)
            .query(&mut self.conn)
            .map_err(|e| self.fail(WHAT, e))?;
        if let Some(e) = found {
            return Ok(format!(
                "{}: the epoch is in place (`{epoch}`: {e}); nothing to do",
                self.shown
            ));
        }
        let known = read_fences(&self.fences)
            .map_err(|e| self.fences_error(&e))?
            .get(&self.cfg.identity)
            .and_then(|m| m.values().max().copied());
        let has_keys = !self
            .scan(&format!("{}:*", glob_escape(&self.cfg.prefix)), 1, WHAT)?
            .is_empty();
        if let (Some(f), false) = (known, has_keys) {
            return Err(StoreError::refused(format!(
                "{}: this Redis has none of batchguard's keys, but this working directory was given fences up to {f} by it ({}): it lost its data. Restore it from the ledger with `batchguard store repair --store '{}' --ledger SOURCE`",
                self.shown,
                self.fences.display(),
                self.shown
            )));
        }
        let reply = self.eval(
            MIGRATE,
            std::slice::from_ref(&epoch),
            &["migrate".to_owned()],
            WHAT,
        )?;
        let value = text(reply.get(1)).unwrap_or_default();
        Ok(if has_keys {
            format!(
                "{}: epoch written (`{epoch}`: {value}); the counters and slot markers already here are kept",
                self.shown
            )
        } else {
            format!(
                "{}: epoch written (`{epoch}`: {value}); a new store: its keys are written as jobs run",
                self.shown
            )
        })
    }

    /// `store repair`: every job's counter raised to the highest fence known (the
    /// ledger's, this working directory's), the ledger's slots within the markers'
    /// retention restored, then a new epoch, last, so no host acquires before the rest is
    /// in place.
    pub fn repair(
        &mut self,
        facts: &super::repair::Facts,
    ) -> Result<super::repair::Repaired, StoreError> {
        let mut fences = facts.fences.clone();
        if let Some(mine) = read_fences(&self.fences)
            .map_err(|e| self.fences_error(&e))?
            .get(&self.cfg.identity)
        {
            for (job, f) in mine {
                let e = fences.entry(job.clone()).or_insert(0);
                *e = (*e).max(*f);
            }
        }
        let mut counters = Vec::new();
        for (job, f) in &fences {
            let reply: i64 = redis::cmd("EVAL")
                .arg(RAISE)
                .arg(1)
                .arg(self.key("fence", job))
                .arg(f)
                .query(&mut self.conn)
                .map_err(|e| self.fail("cannot move a fencing counter", e))?;
            counters.push((job.clone(), reply));
        }
        let now = self.now()?;
        let oldest = now
            .as_second()
            .saturating_sub(i64::try_from(self.cfg.retention_secs).unwrap_or(i64::MAX));
        let retention_ms = self.cfg.retention_secs.saturating_mul(1000).to_string();
        let jobs = format!("{}:jobs", self.cfg.prefix);
        let mut restored = 0u64;
        let mut too_old = 0u64;
        let kept: Vec<&super::repair::SlotFact> = facts
            .slots
            .iter()
            .filter(|f| {
                let keep = f.scheduled_at.as_second() >= oldest;
                too_old += u64::from(!keep);
                keep
            })
            .collect();
        for chunk in kept.chunks(500) {
            let mut pipe = redis::pipe();
            for f in chunk {
                let slot = rfc3339(f.scheduled_at);
                pipe.cmd("EVAL")
                    .arg(RESTORE)
                    .arg(3)
                    .arg(self.slot_key(&f.job, &slot))
                    .arg(self.key("slots", &f.job))
                    .arg(&jobs)
                    .arg(f.attempts)
                    .arg(f.state.as_str())
                    .arg(&f.run_id)
                    .arg(&retention_ms)
                    .arg(&f.job)
                    .arg(&slot)
                    .arg(f.scheduled_at.as_second())
                    .ignore();
            }
            pipe.query::<()>(&mut self.conn)
                .map_err(|e| self.fail("cannot restore the slots", e))?;
            restored += chunk.len() as u64;
        }
        let epoch = self.epoch_key();
        let _: () = redis::cmd("DEL")
            .arg(&epoch)
            .query(&mut self.conn)
            .map_err(|e| self.fail("cannot write the epoch", e))?;
        let reply = self.eval(
            MIGRATE,
            std::slice::from_ref(&epoch),
            &["repair".to_owned()],
            "cannot write the epoch",
        )?;
        Ok(super::repair::Repaired {
            counters,
            restored,
            too_old,
            epoch: Some(text(reply.get(1)).unwrap_or_default()),
        })
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

/// `{identity: {job: fence}}`; an absent file is empty.
fn read_fences(path: &Path) -> Result<BTreeMap<String, BTreeMap<String, i64>>, String> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("not a fences file: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Raises the job's recorded fence to `fence` (never lowers it): read, merge and replace
/// (write a temporary file, rename) under an exclusive lock of a lock file beside it.
fn record_fence(path: &Path, identity: &str, job: &str, fence: i64) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let lock_path = path.with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // SAFETY: a valid descriptor, kept open for the lock's life.
    while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.to_string());
        }
    }
    let mut all = read_fences(path)?;
    let slot = all
        .entry(identity.to_owned())
        .or_default()
        .entry(job.to_owned())
        .or_insert(0);
    if *slot >= fence {
        return Ok(());
    }
    *slot = fence;
    let text = serde_json::to_vec_pretty(&all).map_err(|e| e.to_string())?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(&text)
        .and_then(|()| f.sync_all())
        .map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
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

    fn finish(&mut self, fin: &Finish) -> Result<(), StoreError> {
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
        ];
        let args = vec![
            fin.run_id.clone(),
            fin.fence.to_string(),
            state.as_str().to_owned(),
            self.cfg.retention_secs.saturating_mul(1000).to_string(),
        ];
        let reply = self.eval(FINISH, &keys, &args, "cannot write the end of the run")?;
        self.tick(&reply, 0);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batchguards_parameters_are_taken_out_of_the_url() {
        let c =
            parse_url("redis://u:pw@h:6380/2?prefix=team.a&retention=90d&protocol=resp2").unwrap();
        assert_eq!(c.client_url, "redis://u:pw@h:6380/2?protocol=resp2");
        assert_eq!(c.prefix, "team.a");
        assert_eq!(c.retention_secs, 90 * 86_400);
        assert_eq!(c.identity, "redis://h:6380/2#team.a");
        let c = parse_url("rediss://h?retention=36h#insecure").unwrap();
        assert_eq!(c.client_url, "rediss://h#insecure");
        assert_eq!(
            (c.prefix.as_str(), c.retention_secs),
            ("batchguard", 36 * 3600)
        );
        assert_eq!(c.identity, "rediss://h/0#batchguard");
    }

    #[test]
    fn a_bad_prefix_or_retention_is_named_without_the_password() {
        let e = parse_url("redis://u:hunter2@h/0?retention=2h").unwrap_err();
        assert!(
            e.contains("`retention=2h` is not a retention of at least 1d"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = parse_url("redis://h/0?prefix=a*b").unwrap_err();
        assert!(e.contains("`prefix=a*b` is not a key prefix"), "{e}");
        assert!(parse_url("redis://h/0?retention=10x").is_err());
    }

    #[test]
    fn the_recorded_fence_only_rises() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f/fences.json");
        record_fence(&p, "s", "j", 5).unwrap();
        record_fence(&p, "s", "j", 3).unwrap();
        record_fence(&p, "s", "k", 9).unwrap();
        let all = read_fences(&p).unwrap();
        assert_eq!(all["s"]["j"], 5);
        assert_eq!(all["s"]["k"], 9);
    }
}
