//! `batchguard store migrate|repair|status|flush` (SPEC 7.2): the lock store's tables (a
//! Redis store's epoch), the store brought back in line with the ledger, its leases (live
//! and stale) and last slots, and the spool written out. A string that is no store URL, a
//! store that cannot be opened or read: exit 2, the password masked.

use super::{Error, Outcome, print};
use crate::cli::{StoreAction, StoreArgs};
use crate::store::{self, HeldLease, LeaseRow, SlotRow, StoreUrl};
use jiff::Timestamp;

pub(super) fn run(args: StoreArgs) -> Result<Outcome, Error> {
    let failed = |action: &'static str, e: store::StoreError| Error::Store {
        action,
        message: e.0,
    };
    let url = StoreUrl::parse(&args.store).map_err(|e| Error::Store {
        action: "store",
        message: format!("--store {e}"),
    })?;
    match args.action {
        StoreAction::Migrate => {
            let said = store::migrate(&url).map_err(|e| failed("store migrate", e))?;
            print(&format!("{said}\n"));
        }
        StoreAction::Repair => {
            let ledger = match (&args.ledger, url.kind().keeps_ledger()) {
                (Some(l), _) => l.clone(),
                (None, true) => url.raw().to_owned(),
                (None, false) => {
                    return Err(Error::Store {
                        action: "store repair",
                        message: format!(
                            "{url} is Redis, which keeps no ledger: give --ledger SOURCE, the ledger the jobs write (sqlite:PATH, postgres://…, mysql://… or a path.jsonl file)"
                        ),
                    });
                }
            };
            let said =
                store::repair::repair(&url, &ledger).map_err(|e| failed("store repair", e))?;
            print(&said);
        }
        StoreAction::Flush => {
            let mut st = store::open(&url).map_err(|e| failed("store flush", e))?;
            let done = crate::guard::catch_up(st.as_mut(), url.raw())
                .map_err(|e| failed("store flush", e))?;
            let n = done.written;
            print(&format!(
                "wrote {n} spooled or left-over record{}\n",
                if n == 1 { "" } else { "s" }
            ));
            // What could not be written stays in the spool, named above: not clean.
            if done.left > 0 {
                eprintln!(
                    "batchguard store flush: {} entr{} left in place (see above)",
                    done.left,
                    if done.left == 1 { "y" } else { "ies" }
                );
                return Ok(Outcome::Found);
            }
        }
        StoreAction::Status => {
            if url.kind() == store::StoreKind::Redis {
                let epoch = store::redis::RedisStore::open(&url)
                    .and_then(|mut r| r.epoch())
                    .map_err(|e| failed("store status", e))?;
                print(&match epoch {
                    Some(e) => format!("epoch: {e}\n"),
                    None => format!(
                        "epoch: none: every acquire is refused until `batchguard store repair --store '{url}' --ledger SOURCE` (or, for a new Redis, `batchguard store migrate`)\n"
                    ),
                });
            }
            let mut st = store::open(&url).map_err(|e| failed("store status", e))?;
            let job = args.job.as_deref();
            // The leases not released, live or stale, as `watch` lists them; a store that
            // cannot list those shows its live ones.
            let leases = match st.held_leases() {
                Ok((held, now)) => Leases::Held(
                    held.into_iter()
                        .filter(|l| job.is_none_or(|j| j == l.job))
                        .collect(),
                    now,
                ),
                Err(_) => Leases::Live(st.leases(job).map_err(|e| failed("store status", e))?),
            };
            let slots = st.slots(job, 5).map_err(|e| failed("store status", e))?;
            print(&status(&leases, &slots));
        }
    }
    Ok(Outcome::Clean)
}

enum Leases {
    /// Every lease not released, with the store's clock.
    Held(Vec<HeldLease>, Timestamp),
    Live(Vec<LeaseRow>),
}

fn status(leases: &Leases, slots: &[SlotRow]) -> String {
    let mut out = String::new();
    let live_line = |key: &str,
                     job: &str,
                     slot: &str,
                     holder: &str,
                     run: &str,
                     fence: i64,
                     left: i64| {
        format!(
            "  {key}  job {job} slot {slot}  held by {holder} (run {run}, fence {fence}, {left} s left)\n"
        )
    };
    let mut live = Vec::new();
    let mut stale = Vec::new();
    match leases {
        Leases::Live(rows) => {
            for l in rows {
                live.push(live_line(
                    &l.key,
                    &l.job,
                    &l.scheduled_at,
                    &l.holder,
                    &l.run_id,
                    l.fence,
                    l.secs_left,
                ));
            }
        }
        Leases::Held(rows, now) => {
            for l in rows {
                let slot = store::rfc3339(l.scheduled_at);
                let left_us = l.lease_until.as_microsecond() - now.as_microsecond();
                if left_us > 0 {
                    let left = (left_us + 999_999) / 1_000_000;
                    live.push(live_line(
                        &l.key, &l.job, &slot, &l.holder, &l.run_id, l.fence, left,
                    ));
                } else {
                    let ago = crate::text::duration::secs((-left_us / 1_000_000).unsigned_abs());
                    stale.push(format!(
                        "  {}  job {} slot {slot}  STALE LEASE of {} (run {}, fence {}, expired {ago} ago, never released: the holder died or hangs)\n",
                        l.key, l.job, l.holder, l.run_id, l.fence
                    ));
                }
            }
        }
    }
    if live.is_empty() {
        out.push_str("live leases: none\n");
    } else {
        out.push_str("live leases:\n");
        out.extend(live);
    }
    if !stale.is_empty() {
        out.push_str("stale leases (expired, never released):\n");
        out.extend(stale);
    }
    out.push_str("last slots:\n");
    if slots.is_empty() {
        out.push_str("  none\n");
    }
    for s in slots {
        out.push_str(&format!(
            "  {}  {}  {}  attempts {}  last run {}\n",
            s.job, s.scheduled_at, s.state, s.attempts, s.run_id
        ));
    }
    out
}
