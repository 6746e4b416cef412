//! `retry`: the first attempt's job is killed right after its first output line and
//! reported as `EX_TEMPFAIL`, so the guard retries it (at once: a drill does not wait out
//! the backoff). Passes when the slot succeeds within `retry.max_attempts` with every
//! record applied exactly once.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Sandbox};
use crate::drill::shim::Mode;
use std::time::Instant;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let mut a = cx.spawn(sb, "retry", Mode::Fail, None, &[])?;
    let ended = cx.wait_exit(&mut a, cx.deadline());
    let (mut r, events) = super::judge(cx, sb, "retry", t0, true, 0, 0);
    let failed_at = events
        .iter()
        .find(|e| e.event == "end" && e.error_code.as_deref() == Some("EX_TEMPFAIL"));
    let success_at = events
        .iter()
        .find(|e| e.event == "end" && e.status.as_deref() == Some("success"));
    if let (Some(f), Some(s)) = (failed_at, success_at) {
        r.recovery_seconds = Some(s.at.duration_since(f.at).as_secs_f64().max(0.0));
    }
    let max = cx.job.plan.max_attempts;
    if ended.is_none() {
        count::fail(&mut r, cx.limit_reason());
    } else if failed_at.is_none() {
        let why = count::no_first_output(cx, &r, "fail it");
        count::fail(&mut r, why);
    } else if !count::succeeded(&events) {
        let why = count::failure(&events);
        let hint = if max == Some(1) {
            " (retry.max_attempts is 1: a temporary failure is dead-lettered, not retried)"
        } else {
            ""
        };
        count::fail(&mut r, format!("the retry did not succeed: {why}{hint}"));
    } else if let Some(m) = max
        && r.attempts > m
    {
        let why = format!("{} attempts ran; retry.max_attempts is {m}", r.attempts);
        count::fail(&mut r, why);
    }
    Ok(r)
}
