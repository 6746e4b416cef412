//! The lock store of `batchguard run` (SPEC 7.2): leases, the fencing counter, the per-slot
//! attempt count and, in the same database, the ledger tables `audit` reads.
//!
//! A store is opened from its URL (`sqlite:PATH`, `postgres://…`, `mysql://…`,
//! `redis://…`). Every operation that
//! must be atomic is one transaction: the acquire (conditional upsert of the lease, a new
//! fence, the attempt, the `start` event) and the finish (`end`, outputs, dead letter,
//! release). Times that decide a lease come from the store's clock.

pub mod drills;
pub mod jsonl;
pub mod ledger;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod repair;
pub mod spool;
pub mod sqlite;
pub mod url;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
pub use url::{StoreKind, StoreUrl};

/// The default store: beside the working directory, so every process of a host shares it.
pub const DEFAULT_URL: &str = "sqlite:.batchguard/store.db";

/// Why the store could not do what was asked: the message (password masked, the
/// server's own source locations left out) and what kind of problem it is, so `run` can
/// choose its words and exit code and `store` its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String, pub ErrorKind);

/// What went wrong with a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The string is not a store URL (or a ledger `run` can write): a usage error.
    BadUrl,
    /// No connection, or no answer in time.
    Unreachable,
    /// The database answers but has no batchguard tables (or not all of them): the
    /// message names the missing table and `batchguard store migrate`.
    NotMigrated,
    /// The store answered, but its state cannot be trusted to lease (a fencing counter
    /// that went back, a Redis that lost its data, a slot older than its markers).
    Refused,
    /// The store answered with an error of its own (a permission, a constraint).
    Failed,
    /// A claim (SPEC 7.5) by a run that is no longer its slot's latest holder (or with
    /// another fence): nothing was recorded.
    ClaimRefused,
}

impl ErrorKind {
    /// How `run` says it: "the store {says}, so job … did not run".
    pub fn says(self) -> &'static str {
        match self {
            ErrorKind::BadUrl => "is not a store URL",
            ErrorKind::Unreachable => "is unreachable",
            ErrorKind::NotMigrated => "has no batchguard tables",
            ErrorKind::Refused => "refused the lease",
            ErrorKind::Failed => "answered with an error",
            ErrorKind::ClaimRefused => "refused the claim",
        }
    }
}

impl StoreError {
    /// An error of the store's own (see [`ErrorKind::Failed`]).
    pub fn failed(message: String) -> StoreError {
        StoreError(message, ErrorKind::Failed)
    }

    pub fn unreachable(message: String) -> StoreError {
        StoreError(message, ErrorKind::Unreachable)
    }

    pub fn not_migrated(message: String) -> StoreError {
        StoreError(message, ErrorKind::NotMigrated)
    }

    pub fn bad_url(message: String) -> StoreError {
        StoreError(message, ErrorKind::BadUrl)
    }

    /// See [`ErrorKind::Refused`].
    pub fn refused(message: String) -> StoreError {
        StoreError(message, ErrorKind::Refused)
    }

    /// A claim refused (see [`ErrorKind::ClaimRefused`]), with the one message every store
    /// gives.
    pub fn claim_refused(run_id: &str, fence: i64, key: &str) -> StoreError {
        StoreError(claim_refusal(run_id, fence, key), ErrorKind::ClaimRefused)
    }

    pub fn kind(&self) -> ErrorKind {
        self.1
    }

    /// The message of a [`StoreError::refused`], or `None` for any other error.
    pub fn refusal(&self) -> Option<&str> {
        (self.1 == ErrorKind::Refused).then_some(self.0.as_str())
    }
}

/// What a refused claim says (SPEC 7.5), on every store and in the SQL functions.
pub fn claim_refusal(run_id: &str, fence: i64, key: &str) -> String {
    format!(
        "batchguard: run {run_id} (fence {fence}) is no longer its slot's latest holder: claim of {key} refused"
    )
}

/// Keys claimed by a run merged with the outputs it listed (a ledger apart, SPEC 7.5): each
/// claimed key once (the claim's row), then the listed keys this run did not claim.
/// A finish's outputs for a ledger apart, once the store took the finish: the run's
/// claims (SPEC 7.5; they wrote no row there) merged with its listed outputs, each key once.
pub fn with_claims(st: &mut dyn Store, fin: &mut Finish) -> Result<(), StoreError> {
    let claimed = match st.finished_claims() {
        Some(c) => c,
        None => st.claimed(&fin.run_id)?,
    };
    fin.outputs = merge_claimed(claimed, std::mem::take(&mut fin.outputs));
    Ok(())
}

pub fn merge_claimed(claimed: Vec<OutputRow>, listed: Vec<OutputRow>) -> Vec<OutputRow> {
    let keys: std::collections::HashSet<String> = claimed.iter().map(|o| o.key.clone()).collect();
    let mut out = claimed;
    out.extend(listed.into_iter().filter(|o| !keys.contains(&o.key)));
    out
}

impl From<url::UrlError> for StoreError {
    fn from(e: url::UrlError) -> StoreError {
        StoreError::bad_url(e.to_string())
    }
}

/// One ledger event as `run` writes it (SPEC 5.1, with `fence` and `detail`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub run_id: String,
    pub job: String,
    pub scheduled_at: Timestamp,
    pub event: String,
    pub at: Timestamp,
    pub instance: Option<String>,
    pub attempt: Option<u32>,
    pub status: Option<String>,
    pub error_code: Option<String>,
    pub snapshot_digest: Option<String>,
    pub trigger: String,
    pub fence: Option<i64>,
    pub detail: Option<String>,
}

/// What an acquire asks for.
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    /// The rendered `lock.key`.
    pub key: String,
    pub job: String,
    pub scheduled_at: Timestamp,
    pub holder: String,
    pub run_id: String,
    pub ttl_secs: u64,
    /// `retry.max_attempts`, when bounded.
    pub max_attempts: Option<u64>,
    /// An operator's recovery: a dead-lettered or exhausted slot may be taken again.
    pub manual: bool,
    /// The `start` event to write when the lease is taken (its `at`, `attempt` and
    /// `fence` are filled in by the store).
    pub start: EventRow,
    /// Whether the store writes the ledger events (`start`, an exhausted slot's
    /// `dead_letter`) itself; false when `--ledger` names another ledger, which `run`
    /// then writes.
    pub ledger: bool,
    /// Item 22: the store's clock must lie within these bounds, or nothing is written and
    /// the answer is [`AcquireResult::OutOfClock`]. `None` (a manual run, a drill) checks
    /// nothing.
    pub clock: Option<ClockBound>,
    /// Items 20 and 27: the job's unfinished slots in `[catch_up_from, scheduled_at)` are
    /// answered ([`AcquireResult::Behind`]) instead of the lease, so the catch-up read rides
    /// on the acquire instead of costing a round trip of its own.
    pub catch_up_from: Option<Timestamp>,
}

/// Where the store's clock must be for a named slot to be worked (SPEC 7.1 item 22): a
/// host whose clock runs ahead names slots that are not due yet, one that runs behind
/// names slots the catch-up reach no longer covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockBound {
    /// The slot minus the tick tolerance: a clock earlier than this is a host ahead.
    pub earliest: Timestamp,
    /// The first slot after the slot plus the catch-up reach plus the tolerance: a clock at
    /// or past it has a newer slot that makes this one too old to name.
    pub before: Option<Timestamp>,
}

impl ClockBound {
    /// Whether the store's clock `now` admits the slot.
    pub fn admits(&self, now: Timestamp) -> bool {
        now >= self.earliest && self.before.is_none_or(|b| now < b)
    }
}

impl AcquireRequest {
    /// The checks a store that cannot fold them into its acquire makes before it: the clock
    /// bound, then the unfinished slots in the catch-up window (`unfinished` as
    /// [`Store::unfinished`] answers them). `None`: acquire.
    pub fn precheck(&self, now: Timestamp, unfinished: Vec<Unfinished>) -> Option<AcquireResult> {
        if self.clock.is_some_and(|c| !c.admits(now)) {
            return Some(AcquireResult::OutOfClock { now });
        }
        let from = self.catch_up_from?;
        let behind: Vec<Unfinished> = unfinished
            .into_iter()
            .filter(|u| u.scheduled_at >= from && u.scheduled_at < self.scheduled_at)
            .collect();
        (!behind.is_empty()).then_some(AcquireResult::Behind {
            unfinished: behind,
            now,
        })
    }
}

/// A lease taken.
#[derive(Clone, Debug, PartialEq)]
pub struct Acquired {
    pub fence: i64,
    pub attempt: u32,
    /// The store's clock at the acquire; also the `start` event's `at`.
    pub at: Timestamp,
}

/// Why a lease was not taken.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    Held {
        holder: String,
        run_id: String,
        fence: i64,
        ends_in_secs: i64,
    },
    Succeeded {
        run_id: String,
    },
    DeadLettered,
    /// Every attempt was used (the last one died without an `end`): the store has just
    /// dead-lettered the slot.
    Exhausted {
        attempts: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Held {
                holder,
                run_id,
                fence,
                ends_in_secs,
            } => write!(
                f,
                "held by {holder} (run {run_id}, fence {fence}, lease ends in {ends_in_secs} s)"
            ),
            Refusal::Succeeded { run_id } => write!(f, "already succeeded (run {run_id})"),
            Refusal::DeadLettered => f.write_str("dead-lettered"),
            Refusal::Exhausted { attempts } => {
                write!(f, "dead-lettered (all {attempts} attempts were used)")
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum AcquireResult {
    Acquired(Acquired),
    Refused(Refusal),
    /// The store's clock is outside the request's [`ClockBound`]: nothing was written.
    OutOfClock {
        now: Timestamp,
    },
    /// Slots to catch up (or dead-letter) before this one: nothing was written.
    Behind {
        unfinished: Vec<Unfinished>,
        now: Timestamp,
    },
}

/// What a finish came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Finished {
    /// `end`, outputs and any dead letter written; the slot settled, the lease released.
    Written,
    /// This run's `end` was already in the ledger (a spooled finish flushed twice, or by
    /// two processes at once): nothing written.
    AlreadyWritten,
    /// Item 24: the slot has a newer holder; only `end` with status `superseded` was
    /// written: no outputs, no dead letter, the slot and the lease left to the newer one.
    Superseded { run_id: String, fence: Option<i64> },
}

impl Finished {
    /// A finish statement's answer: whether this run's `end` was there already, whether
    /// the slot named another run (which, with its fence when known), as the SQL stores
    /// return them.
    pub fn from_answer(
        already: bool,
        superseded: bool,
        newer: Option<String>,
        fence: Option<String>,
    ) -> Finished {
        if already {
            Finished::AlreadyWritten
        } else if superseded {
            Finished::Superseded {
                run_id: newer.unwrap_or_default(),
                fence: fence.and_then(|f| f.parse().ok()),
            }
        } else {
            Finished::Written
        }
    }

    /// The `detail` of a superseded `end`, and what `run` says of it.
    pub fn superseded_by(run_id: &str, fence: Option<i64>) -> String {
        if run_id.is_empty() {
            return "superseded: the slot has a newer holder".to_owned();
        }
        match fence {
            Some(f) => format!("superseded by run {run_id} (fence {f})"),
            None => format!("superseded by run {run_id}"),
        }
    }
}

/// The state a finished attempt leaves its slot in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlotState {
    Succeeded,
    Failed,
    Interrupted,
    DeadLettered,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Succeeded => "succeeded",
            SlotState::Failed => "failed",
            SlotState::Interrupted => "interrupted",
            SlotState::DeadLettered => "dead_lettered",
        }
    }
}

/// One applied output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputRow {
    pub key: String,
    pub at: Timestamp,
}

/// Everything that closes one attempt, written in one transaction (or spooled whole).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finish {
    pub key: String,
    pub job: String,
    pub scheduled_at: Timestamp,
    pub run_id: String,
    pub fence: i64,
    pub end: EventRow,
    pub outputs: Vec<OutputRow>,
    pub dead_letter: Option<EventRow>,
    pub state: SlotState,
    /// Whether the store writes `end`, outputs and dead letter too; false when they go to
    /// a ledger apart (the store then only settles the slot and releases the lease).
    #[serde(default = "yes")]
    pub ledger: bool,
}

fn yes() -> bool {
    true
}

impl Finish {
    /// What a ledger apart from the store gets of this finish once the store has answered
    /// (`done`): the superseded `end` alone, or `end` and any dead letter; the outputs in
    /// both cases (they were applied).
    pub fn ledger_batch(&self, done: Option<&Finished>) -> ledger::Batch {
        let events = match done {
            Some(Finished::Superseded { run_id, fence }) => {
                vec![self.superseded_end(run_id, *fence)]
            }
            _ => std::iter::once(self.end.clone())
                .chain(self.dead_letter.clone())
                .collect(),
        };
        ledger::Batch {
            job: self.job.clone(),
            scheduled_at: self.scheduled_at,
            run_id: self.run_id.clone(),
            events,
            outputs: self.outputs.clone(),
        }
    }

    /// The one event a superseded attempt writes (SPEC 7.1 item 24): its `end`, status
    /// `superseded`, naming the newer holder; no error code, no fence.
    pub fn superseded_end(&self, newer: &str, fence: Option<i64>) -> EventRow {
        let mut end = self.end.clone();
        end.status = Some("superseded".into());
        end.error_code = None;
        end.fence = None;
        end.detail = Some(Finished::superseded_by(newer, fence));
        end
    }
}

/// A live lease, for `store status`.
#[derive(Clone, Debug)]
pub struct LeaseRow {
    pub key: String,
    pub job: String,
    pub scheduled_at: String,
    pub holder: String,
    pub run_id: String,
    pub fence: i64,
    pub secs_left: i64,
}

/// A lease its holder has not released, live or past its `lease_until` (the holder died
/// or hangs): what `watch` and `metrics` show.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldLease {
    pub key: String,
    pub job: String,
    pub scheduled_at: Timestamp,
    pub holder: String,
    pub run_id: String,
    pub fence: i64,
    pub acquired_at: Timestamp,
    pub lease_until: Timestamp,
}

/// A slot's last known state, for `store status`.
#[derive(Clone, Debug)]
pub struct SlotRow {
    pub job: String,
    pub scheduled_at: String,
    pub attempts: i64,
    pub state: String,
    pub run_id: String,
}

/// A run that acquired, never finished, and whose lease has expired: its outputs file may
/// still hold what it applied.
#[derive(Clone, Debug)]
pub struct Abandoned {
    pub run_id: String,
    pub job: String,
    pub scheduled_at: Timestamp,
}

/// A slot that did not finish and may be worked again (SPEC 7.1 item 20): it ended
/// interrupted, failed without being dead-lettered (a spawn failure, a retry cut short), or
/// its holder died (lost: `running` with no live lease).
#[derive(Clone, Debug, PartialEq)]
pub struct Unfinished {
    pub scheduled_at: Timestamp,
    pub attempts: u32,
    /// `interrupted`, `failed` or `lost`.
    pub state: String,
    pub run_id: String,
}

impl Unfinished {
    /// Rows of `(scheduled_at, attempts, state, run_id)`, oldest slot first. A row whose
    /// time or count does not read (a table edited by hand) is left out: its slot is not
    /// caught up, and no other slot is caught up in its place.
    pub(crate) fn oldest_first(
        rows: impl IntoIterator<Item = (Option<Timestamp>, Option<i64>, String, String)>,
    ) -> Vec<Unfinished> {
        let mut out: Vec<Unfinished> = rows
            .into_iter()
            .filter_map(|(at, attempts, state, run_id)| {
                Some(Unfinished {
                    scheduled_at: at?,
                    attempts: u32::try_from(attempts?).ok()?,
                    state,
                    run_id,
                })
            })
            .collect();
        out.sort_by_key(|u| u.scheduled_at);
        out
    }
}

pub trait Store {
    /// The store's clock.
    fn now(&mut self) -> Result<Timestamp, StoreError>;
    /// Takes the lease and writes `start`, or says why not; one transaction.
    fn acquire(&mut self, req: &AcquireRequest) -> Result<AcquireResult, StoreError>;
    /// Writes `end`, outputs and any dead letter, sets the slot's state and releases the
    /// lease if this fence still holds it; one transaction. Exactly once per run id, also
    /// when several processes flush the same spooled finish at once (item 23: a lock or a
    /// constraint in the store, never a check-then-insert). A run that is no longer its
    /// slot's latest writes only a `superseded` end (item 24).
    fn finish(&mut self, fin: &Finish) -> Result<Finished, StoreError>;
    /// Appends one event (`skip`, `manual`).
    fn append(&mut self, ev: &EventRow) -> Result<(), StoreError>;
    /// Outputs of a run that died: added once (the run's `end` was never written).
    fn ingest_abandoned(&mut self, run: &Abandoned, keys: &[OutputRow]) -> Result<u64, StoreError>;
    /// Runs whose lease expired with no `end` written.
    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError>;
    /// Whether this run still holds a live lease (a run directory whose run is not live
    /// was left by a run that died).
    fn live(&mut self, run_id: &str) -> Result<bool, StoreError>;
    /// The store's own ledger tables, as a ledger.
    fn as_ledger(&mut self) -> &mut dyn ledger::Ledger;
    fn leases(&mut self, job: Option<&str>) -> Result<Vec<LeaseRow>, StoreError>;
    fn slots(&mut self, job: Option<&str>, per_job: u32) -> Result<Vec<SlotRow>, StoreError>;
    /// The job's unfinished slots at or after `from` (oldest first), with the store's clock
    /// at the read, so the current slot and its catch-up cost one round trip together.
    fn unfinished(
        &mut self,
        job: &str,
        from: Timestamp,
    ) -> Result<(Vec<Unfinished>, Timestamp), StoreError>;
    /// Claims output `key` of `job` for run `run_id` holding `fence` (SPEC 7.5): `Ok(true)`
    /// for the first claim of (job, key) ever (the claim and, where the store keeps the
    /// ledger, its output row written in one transaction), `Ok(false)` when it was claimed
    /// before (nothing written), an error of kind [`ErrorKind::ClaimRefused`] when the run
    /// is no longer its slot's latest holder with that fence (nothing written).
    fn claim(&mut self, job: &str, key: &str, run_id: &str, fence: i64)
    -> Result<bool, StoreError>;
    /// The outputs run `run_id` claimed (key and time), for a ledger apart from the store:
    /// the claim wrote no row there, so the run's finish (or the catch-up of a run that died)
    /// writes them, once.
    fn claimed(&mut self, run_id: &str) -> Result<Vec<OutputRow>, StoreError>;
    /// The claims the last [`Store::finish`] read with it (a store that reads them in the
    /// finish's own round trip: Redis); `None`: ask [`Store::claimed`].
    fn finished_claims(&mut self) -> Option<Vec<OutputRow>> {
        None
    }
    /// Every lease not released (live, or expired with its holder gone), with the store's
    /// clock at the read. A store that cannot list them says so; `watch` and `metrics`
    /// then show the ledger's view only.
    /// Whether [`Store::acquire`] makes the checks of [`AcquireRequest::clock`] and
    /// [`AcquireRequest::catch_up_from`] itself; when not, `run` reads the unfinished slots
    /// first and clears them (a round trip more).
    fn folds_checks(&self) -> bool {
        false
    }
    fn held_leases(&mut self) -> Result<(Vec<HeldLease>, Timestamp), StoreError> {
        Err(StoreError::failed(
            "this store does not list its leases, so live leases are not shown".into(),
        ))
    }
}

/// Opens the store a URL names, creating a SQLite file and its tables on first use (a
/// PostgreSQL or MySQL store's tables come from `store migrate` only).
pub fn open(url: &StoreUrl) -> Result<Box<dyn Store>, StoreError> {
    open_with(url, false)
}

/// `migrate`: create or upgrade the tables whatever the store says its version is.
pub fn open_with(url: &StoreUrl, migrate: bool) -> Result<Box<dyn Store>, StoreError> {
    Ok(match url.conn() {
        url::Conn::Sqlite(path) => Box::new(sqlite::SqliteStore::open_with(path, migrate)?),
        url::Conn::Postgres(_) => Box::new(postgres::PgStore::open_with(url, migrate)?),
        url::Conn::Mysql(_) => Box::new(mysql::MysqlStore::open_with(url, migrate)?),
        // Redis has no tables: its `migrate` is [`migrate`]'s epoch.
        url::Conn::Redis(_) => Box::new(redis::RedisStore::open(url)?),
    })
}

/// `store migrate`: a database's tables created (or upgraded), a Redis's epoch written;
/// the answer says what was done, so a first migrate never reads "current".
pub fn migrate(url: &StoreUrl) -> Result<String, StoreError> {
    let shown = url.shown();
    let (before, after) = match url.conn() {
        url::Conn::Redis(_) => return redis::RedisStore::open(url)?.migrate(),
        url::Conn::Sqlite(path) => {
            let before = sqlite::SqliteStore::tables_of(path)?;
            sqlite::SqliteStore::open_with(path, true)?;
            drills::migrate(url.raw()).map_err(StoreError::failed)?;
            (before, sqlite::SqliteStore::tables_of(path)?)
        }
        url::Conn::Postgres(_) => {
            let mut st = postgres::PgStore::open(url)?;
            let before = st.tables()?;
            st.migrate()?;
            drills::migrate(url.raw()).map_err(StoreError::failed)?;
            (before, st.tables()?)
        }
        url::Conn::Mysql(_) => {
            let mut st = mysql::MysqlStore::open(url)?;
            let before = st.tables()?;
            st.migrate()?;
            drills::migrate(url.raw()).map_err(StoreError::failed)?;
            (before, st.tables()?)
        }
    };
    let created: Vec<&String> = after.iter().filter(|t| !before.contains(t)).collect();
    Ok(if created.is_empty() {
        format!(
            "{shown}: tables are current ({}); nothing to create",
            after.join(", ")
        )
    } else {
        let names: Vec<&str> = created.iter().map(|t| t.as_str()).collect();
        format!("{shown}: created {}", names.join(", "))
    })
}

/// An unmigrated database: which table is missing, and the command that creates them.
pub(crate) fn not_migrated(url: &StoreUrl, table: Option<String>) -> StoreError {
    let missing = table.map_or_else(
        || "a batchguard table is missing".to_owned(),
        |t| format!("table `{t}` is missing"),
    );
    StoreError::not_migrated(format!(
        "{}: {missing}: this database has no batchguard tables yet (or not all of them); create them with `batchguard store migrate --store '{}'`",
        url.shown(),
        url.shown()
    ))
}

/// Microseconds since the epoch (the lease columns' unit).
pub fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

/// An event's time as the ledger stores it: RFC 3339 UTC, microseconds.
pub fn rfc3339(t: Timestamp) -> String {
    let t = Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t);
    t.to_string()
}

/// At most 4 KiB of a `detail`, cut at a character boundary.
pub fn clip_detail(s: &str) -> String {
    const MAX: usize = 4096;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut cut = MAX;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s[..cut].to_owned()
}
