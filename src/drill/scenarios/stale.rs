//! `stale`: the holder (its guard, its tap and its job) is paused right after the job's
//! first output line, past its lease (the drill ends the lease instead of waiting out the
//! TTL); a second instance takes the slot with a newer fencing token and finishes; then
//! the first resumes and runs to its end. Passes when every record was applied exactly
//! once: the job refused the stale holder's writes (fencing token) or made them no-ops.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Sandbox, signal_group, signal_pid};
use crate::drill::shim::{self, Mode};
use std::time::Instant;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let deadline = cx.deadline();
    let mut a = cx.spawn(sb, "stale-1", Mode::Pause, None, &[])?;
    let paused = cx.wait_for(deadline, || {
        !sb.markers(shim::PAUSED).is_empty() || a.poll().is_some()
    });
    let marker = sb.markers(shim::PAUSED).into_iter().next();
    let mut timed_out = !paused;
    let mut recovery = None;
    if let Some((tap, body)) = &marker {
        let job_group: i32 = body.trim().parse().unwrap_or(0);
        a.signal(libc::SIGSTOP);
        signal_pid(*tap, libc::SIGSTOP);
        let fault = Instant::now();
        let taken = sb
            .open_store()
            .and_then(|mut s| s.expire_leases().map_err(|e| e.0));
        let second = match taken {
            Ok(_) => cx.spawn(sb, "stale-2", Mode::Pass, None, &[]),
            Err(e) => Err(e),
        };
        if let Ok(mut b) = second {
            timed_out |= cx.wait_exit(&mut b, deadline).is_none();
            recovery = Some(fault.elapsed().as_secs_f64());
        }
        // Whatever happened to the second, the first is resumed and runs to its end.
        if job_group > 0 {
            signal_group(job_group, libc::SIGCONT);
        }
        signal_pid(*tap, libc::SIGCONT);
        a.signal(libc::SIGCONT);
        timed_out |= cx.wait_exit(&mut a, deadline).is_none();
    }
    a.kill();
    let (mut r, events) = super::judge(cx, sb, "stale", t0, true, 0, 0);
    r.recovery_seconds = recovery;
    if timed_out {
        count::fail(&mut r, cx.limit_reason());
    } else if marker.is_none() {
        let why = count::no_first_output(cx, &r, "pause it");
        count::fail(&mut r, why);
    } else if r.attempts < 2 {
        count::fail(
            &mut r,
            "the second instance never ran: the paused holder's lease was not taken over".into(),
        );
    } else if !count::succeeded(&events) {
        count::fail(&mut r, count::failure(&events));
    }
    Ok(r)
}
