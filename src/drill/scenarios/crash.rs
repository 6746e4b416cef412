//! `crash`: the job, its tap and its guard are killed right after the job's first output
//! line (the host died), then the slot is recovered as the runbook says: run again once
//! the lease has run out (the drill ends the lease instead of waiting out the TTL; a slot
//! whose attempts are used up is recovered with `run --manual`). Passes when every record
//! was applied exactly once.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Sandbox, signal_group};
use crate::drill::shim::{self, Mode};
use std::time::Instant;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let deadline = cx.deadline();
    let mut a = cx.spawn(sb, "crash-1", Mode::Crash, None, &[])?;
    let crashed = cx.wait_for(deadline, || {
        !sb.markers(shim::CRASHED).is_empty() || a.poll().is_some()
    });
    let marker = sb.markers(shim::CRASHED).into_iter().next();
    let mut fault_at = None;
    if let Some((tap, _)) = &marker {
        fault_at = Some(Instant::now());
        a.kill();
        signal_group(*tap, libc::SIGKILL);
    }
    let mut timed_out = !crashed;
    a.kill();
    let mut recovered_at = None;
    if marker.is_some() {
        sb.open_store()?.expire_leases().map_err(|e| e.0)?;
        let mut b = cx.spawn(sb, "crash-2", Mode::Pass, None, &[])?;
        timed_out |= cx.wait_exit(&mut b, deadline).is_none();
        let events = sb
            .open_store()?
            .events_of(&cx.job.plan.ledger_job)
            .map_err(|e| e.0)?;
        let dead = events.last().is_some_and(|e| {
            e.event == "skip"
                && e.detail
                    .as_deref()
                    .is_some_and(|d| d.starts_with("dead-lettered"))
        });
        if dead && !timed_out {
            let mut m = cx.spawn(
                sb,
                "crash-manual",
                Mode::Pass,
                None,
                &["--manual", "--reason", "drill: recovery after a crash"],
            )?;
            timed_out |= cx.wait_exit(&mut m, deadline).is_none();
        }
        recovered_at = Some(Instant::now());
    }
    let (mut r, events) = super::judge(cx, sb, "crash", t0, true, 0, 0);
    if let (Some(f), Some(e)) = (fault_at, recovered_at) {
        r.recovery_seconds = Some(e.duration_since(f).as_secs_f64());
    }
    if timed_out {
        count::fail(&mut r, cx.limit_reason());
    } else if marker.is_none() {
        let why = count::no_first_output(cx, &r, "crash");
        count::fail(&mut r, why);
    } else if !count::succeeded(&events) {
        count::fail(
            &mut r,
            format!("recovery did not succeed: {}", count::failure(&events)),
        );
    }
    Ok(r)
}
