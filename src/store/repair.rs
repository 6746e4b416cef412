//! `batchguard store repair --store URL --ledger SOURCE`: a store brought back in line
//! with the ledger after it lost (or may have lost) state.
//!
//! - **Redis** (a restart without persistence, a failover): every job's fencing counter is
//!   raised past the highest fence in the ledger (and the highest this working directory
//!   was given), the ledger's slots within the markers' retention get their markers back
//!   (succeeded and dead-lettered included, so no slot that succeeded runs again), and a new
//!   epoch is written last: until then every acquire is refused.
//! - **SQL stores** keep the ledger in the same database as the counter, so they lose
//!   nothing apart; after a restore from an older backup (or with a ledger apart) the
//!   counter may be behind the ledger: it is raised past the ledger's highest fence, never
//!   lowered. Their slot rows are left alone: the same restore brought them back with the
//!   ledger.

use super::{StoreError, StoreKind, StoreUrl};
use crate::ledger::read::{ReadOptions, Source, read_events};
use crate::ledger::{EventKind, Status};
use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};

/// What the ledger knows that a store needs back.
#[derive(Debug, Default)]
pub struct Facts {
    /// The highest fence per job.
    pub fences: BTreeMap<String, i64>,
    /// Each slot's state as its events leave it.
    pub slots: Vec<SlotFact>,
    pub events: u64,
    /// Rows that could not be read (a fence may hide there).
    pub rejected: u64,
}

/// One slot as the ledger leaves it.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotFact {
    pub job: String,
    pub scheduled_at: Timestamp,
    pub attempts: u32,
    /// `running` (a start without an end), `failed`, `interrupted`, `succeeded`,
    /// `dead_lettered`: the words of a store's slot state.
    pub state: String,
    pub run_id: String,
}

/// What a repair did.
#[derive(Debug, Default)]
pub struct Repaired {
    /// Each job's counter after the repair (SQL stores: one, named `*`).
    pub counters: Vec<(String, i64)>,
    pub restored: u64,
    /// Slots older than the markers' retention, left out.
    pub too_old: u64,
    /// The new epoch (Redis).
    pub epoch: Option<String>,
}

/// Reads the ledger once: fences per job, and every slot's state.
pub fn facts(ledger: &str) -> Result<Facts, StoreError> {
    let shown = crate::db::mask(ledger);
    let src =
        Source::parse(ledger).map_err(|e| StoreError::bad_url(format!("--ledger {}", e.0)))?;
    let mut out = Facts {
        fences: fences(ledger, &src)?,
        ..Facts::default()
    };
    type Seen = (
        Timestamp,
        EventKind,
        Option<Status>,
        Option<String>,
        String,
        u32,
    );
    let mut by_slot: HashMap<(String, Timestamp), Vec<Seen>> = HashMap::new();
    let mut rejected = 0u64;
    let read = read_events(
        &src,
        &ReadOptions::default(),
        &mut |e| {
            by_slot.entry((e.job, e.scheduled_at)).or_default().push((
                e.at,
                e.event,
                e.status,
                e.error_code,
                e.run_id,
                e.attempt.unwrap_or(0),
            ));
        },
        &mut |_| rejected += 1,
    )
    .map_err(|e| {
        StoreError::failed(format!(
            "--ledger {shown}: {}",
            crate::db::scrub(ledger, e.0)
        ))
    })?;
    out.events = read;
    out.rejected = rejected;
    for ((job, scheduled_at), mut evs) in by_slot {
        evs.sort_by_key(|e| e.0);
        let mut fact = SlotFact {
            job,
            scheduled_at,
            attempts: 0,
            state: String::new(),
            run_id: String::new(),
        };
        let mut starts = 0u32;
        for (_, kind, status, code, run_id, attempt) in evs {
            if fact.state == "succeeded" {
                break;
            }
            match kind {
                EventKind::Start => {
                    starts += 1;
                    fact.attempts = fact.attempts.max(attempt).max(starts);
                    fact.state = "running".into();
                    fact.run_id = run_id;
                }
                EventKind::End if status == Some(Status::Success) => {
                    fact.state = "succeeded".into();
                    fact.run_id = run_id;
                }
                EventKind::End => {
                    let interrupted = code.as_deref() == Some("INTERRUPTED");
                    fact.state = if interrupted { "interrupted" } else { "failed" }.into();
                    fact.run_id = run_id;
                }
                EventKind::DeadLetter => fact.state = "dead_lettered".into(),
                EventKind::Skip | EventKind::Manual => {}
            }
        }
        if !fact.state.is_empty() {
            out.slots.push(fact);
        }
    }
    out.slots
        .sort_by(|a, b| (&a.job, a.scheduled_at).cmp(&(&b.job, b.scheduled_at)));
    Ok(out)
}

/// The highest fence per job of a ledger `run` writes (the readers of `audit` do not
/// keep fences: it judges slots, not tokens).
fn fences(ledger: &str, src: &Source) -> Result<BTreeMap<String, i64>, StoreError> {
    match src {
        Source::Jsonl(p) => jsonl_fences(p),
        Source::Sqlite(p) => super::sqlite::SqliteStore::max_fences_of(p),
        _ => match StoreUrl::parse(ledger) {
            Ok(u) if u.kind() == StoreKind::Postgres => {
                super::postgres::PgStore::open(&u)?.max_fences()
            }
            Ok(u) if u.kind() == StoreKind::Mysql => {
                super::mysql::MysqlStore::open(&u)?.max_fences()
            }
            _ => Err(StoreError::bad_url(format!(
                "--ledger {}: `store repair` reads fences from the ledgers `run` writes: sqlite:PATH, postgres://…, mysql://… or a path.jsonl file",
                crate::db::mask(ledger)
            ))),
        },
    }
}

fn jsonl_fences(path: &std::path::Path) -> Result<BTreeMap<String, i64>, StoreError> {
    use std::io::BufRead;
    let f = std::fs::File::open(path)
        .map_err(|e| StoreError::failed(format!("--ledger {}: {e}", path.display())))?;
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for line in std::io::BufReader::new(f).lines() {
        let line =
            line.map_err(|e| StoreError::failed(format!("--ledger {}: {e}", path.display())))?;
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let (Some(job), Some(fence)) = (v["job"].as_str(), v["fence"].as_i64()) {
            let e = out.entry(job.to_owned()).or_insert(fence);
            *e = (*e).max(fence);
        }
    }
    Ok(out)
}

/// `store repair`: the store brought in line with the ledger; the report's lines.
pub fn repair(url: &StoreUrl, ledger: &str) -> Result<String, StoreError> {
    let facts = facts(ledger)?;
    let highest = facts.fences.values().copied().max().unwrap_or(0);
    let shown = url.shown();
    let mut out = format!(
        "read {} event{} from the ledger {}; the highest fence there is {highest}\n",
        facts.events,
        if facts.events == 1 { "" } else { "s" },
        crate::db::mask(ledger)
    );
    if facts.rejected > 0 {
        out.push_str(&format!(
            "warning: {} row{} of the ledger could not be read: a fence or slot there is not known (`batchguard audit` names them)\n",
            facts.rejected,
            if facts.rejected == 1 { "" } else { "s" }
        ));
    }
    let done = match url.kind() {
        StoreKind::Redis => super::redis::RedisStore::open(url)?.repair(&facts)?,
        StoreKind::Postgres => {
            sql_repair(super::postgres::PgStore::open(url)?.raise_fence(highest)?)
        }
        StoreKind::Mysql => sql_repair(super::mysql::MysqlStore::open(url)?.raise_fence(highest)?),
        StoreKind::Sqlite => {
            let path = url.sqlite_path().unwrap_or(std::path::Path::new(""));
            sql_repair(super::sqlite::SqliteStore::open(path)?.raise_fence(highest)?)
        }
    };
    for (job, next) in &done.counters {
        if url.kind() == StoreKind::Redis {
            out.push_str(&format!(
                "job {job}: fencing counter at {next}: the next fence is {}\n",
                next + 1
            ));
        } else {
            out.push_str(&format!(
                "{shown}: the next fence is {next} (one counter for every job)\n"
            ));
        }
    }
    if url.kind() == StoreKind::Redis {
        let settled = |w: &str| facts.slots.iter().filter(|s| s.state == w).count();
        out.push_str(&format!(
            "{} slot marker{} restored ({} succeeded, {} dead-lettered)",
            done.restored,
            if done.restored == 1 { "" } else { "s" },
            settled("succeeded"),
            settled("dead_lettered"),
        ));
        if done.too_old > 0 {
            out.push_str(&format!(
                "; {} older than the markers' retention left out (a `run` of one is refused)",
                done.too_old
            ));
        }
        out.push('\n');
        let running: Vec<&SlotFact> = facts
            .slots
            .iter()
            .filter(|s| s.state == "running")
            .collect();
        if !running.is_empty() {
            out.push_str(&format!(
                "note: {} slot{} started with no end in the ledger (still running, or died): their leases were lost, so another attempt may start; the fence keeps a stale holder's writes out\n",
                running.len(),
                if running.len() == 1 { "" } else { "s" }
            ));
        }
        if let Some(e) = &done.epoch {
            out.push_str(&format!(
                "{shown}: epoch written ({e}); runs may take leases again\n"
            ));
        }
    }
    Ok(out)
}

/// The first column of a text answer (PostgreSQL, MySQL), its NULLs left out.
pub(super) fn first_column(rows: Vec<Vec<Option<String>>>) -> Vec<String> {
    rows.into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect()
}

/// `job, max(fence)` rows of a text answer as the highest fence per job.
pub(super) fn fences_of_rows(rows: Vec<Vec<Option<String>>>) -> BTreeMap<String, i64> {
    rows.into_iter()
        .filter_map(|r| Some((r.first()?.clone()?, r.get(1)?.as_deref()?.parse().ok()?)))
        .collect()
}

fn sql_repair(next: i64) -> Repaired {
    Repaired {
        counters: vec![("*".into(), next)],
        ..Repaired::default()
    }
}

/// Slots of a ledger, for the tests below.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rfc3339;

    #[test]
    fn the_ledger_says_which_slots_settled_and_the_highest_fence_per_job() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.jsonl");
        let line = |run: &str, slot: &str, ev: &str, extra: &str| {
            format!(
                r#"{{"run_id":"{run}","job":"j","scheduled_at":"{slot}","event":"{ev}","at":"{slot}"{extra}}}"#
            )
        };
        let s0 = "2026-03-01T02:00:00Z";
        let s1 = "2026-03-01T02:01:00Z";
        let text = [
            line(
                "a",
                s0,
                "start",
                r#","attempt":1,"fence":1,"trigger":"schedule""#,
            ),
            line(
                "a",
                s0,
                "end",
                r#","attempt":1,"status":"success","trigger":"schedule""#,
            ),
            line(
                "b",
                s1,
                "start",
                r#","attempt":1,"fence":2,"trigger":"schedule""#,
            ),
            line(
                "b",
                s1,
                "end",
                r#","attempt":1,"status":"failure","error_code":"X","trigger":"schedule""#,
            ),
            line(
                "b",
                s1,
                "dead_letter",
                r#","error_code":"X","trigger":"schedule""#,
            ),
        ]
        .join("\n");
        std::fs::write(&p, text + "\n").unwrap();
        let f = facts(p.to_str().unwrap()).unwrap();
        assert_eq!(f.fences.get("j"), Some(&2));
        let states: Vec<(&str, u32)> = f
            .slots
            .iter()
            .map(|s| (s.state.as_str(), s.attempts))
            .collect();
        assert_eq!(states, [("succeeded", 1), ("dead_lettered", 1)]);
        assert_eq!(rfc3339(f.slots[0].scheduled_at), s0);
    }
}
