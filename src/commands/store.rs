//! `batchguard store migrate|status|flush` (SPEC 7.2): the lock store's tables, its live
//! leases and last slots, and the spool written out. A store that cannot be opened or
//! read is exit 2, its DSN's password scrubbed from the driver's message.

use super::{Error, Outcome, print};
use crate::cli::{StoreAction, StoreArgs};
use crate::db;
use crate::store::{self, LeaseRow, SlotRow};

pub(super) fn run(args: StoreArgs) -> Result<Outcome, Error> {
    let url = args.store.as_str();
    let failed = |action: &'static str, e: store::StoreError| Error::Store {
        action,
        message: db::scrub(url, e.0),
    };
    let mut st = store::open_with(url, matches!(args.action, StoreAction::Migrate))
        .map_err(|e| failed("store", e))?;
    match args.action {
        StoreAction::Migrate if store::is_redis(url) => print(&format!(
            "{}: answers; a Redis store has no tables (its keys are written as it runs)\n",
            db::mask(url)
        )),
        StoreAction::Migrate => {
            // The drill records' table lives beside the ledger tables (SPEC 5.3).
            store::drills::migrate(url)
                .map_err(|m| failed("store migrate", store::StoreError(m)))?;
            print(&format!("{}: tables are current\n", db::mask(url)))
        }
        StoreAction::Flush => {
            let done =
                crate::guard::catch_up(st.as_mut(), url).map_err(|e| failed("store flush", e))?;
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
            let leases = st.leases(args.job.as_deref());
            let slots = st.slots(args.job.as_deref(), 5);
            let (leases, slots) = match (leases, slots) {
                (Ok(l), Ok(s)) => (l, s),
                (Err(e), _) | (_, Err(e)) => return Err(failed("store status", e)),
            };
            print(&status(&leases, &slots));
        }
    }
    Ok(Outcome::Clean)
}

fn status(leases: &[LeaseRow], slots: &[SlotRow]) -> String {
    let mut out = String::new();
    if leases.is_empty() {
        out.push_str("live leases: none\n");
    } else {
        out.push_str("live leases:\n");
        for l in leases {
            out.push_str(&format!(
                "  {}  job {} slot {}  held by {} (run {}, fence {}, {} s left)\n",
                l.key, l.job, l.scheduled_at, l.holder, l.run_id, l.fence, l.secs_left
            ));
        }
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
