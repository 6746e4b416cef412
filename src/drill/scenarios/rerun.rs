//! `rerun`: the same slot again in `clean`'s sandbox, the lock bypassed as after a lock
//! expiry (the slot's success is forgotten; the fencing counter is not). Passes when the
//! second replay applies nothing new.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Sandbox};
use crate::drill::shim::Mode;
use std::time::Instant;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let (events_from, before) = match count::facts(cx, sb) {
        Ok(f) => (f.events.len(), f.applied.len()),
        Err(why) => return Err(format!("cannot read the clean sandbox: {why}")),
    };
    sb.open_store()?
        .forget_slot(&cx.job.plan.ledger_job, cx.slot)
        .map_err(|e| e.0)?;
    let mut a = cx.spawn(sb, "rerun", Mode::Pass, None, &[])?;
    let ended = cx.wait_exit(&mut a, cx.deadline());
    // Over clean and rerun together, a second application is a duplicate; records the
    // clean run missed are clean's failure, not this one's.
    let (mut r, _) = super::judge(cx, sb, "rerun", t0, false, events_from, before);
    if ended.is_none() {
        count::fail(&mut r, cx.limit_reason());
    } else if r.attempts == 0 {
        let why = "the rerun never ran: the guard refused the slot again".into();
        count::fail(&mut r, why);
    } else if r.outputs > 0 {
        let why = format!(
            "the second replay of the same slot applied {} again",
            if r.outputs == 1 {
                "1 output".to_owned()
            } else {
                format!("{} outputs", r.outputs)
            }
        );
        count::fail(&mut r, why);
    }
    Ok(r)
}
