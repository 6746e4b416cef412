//! `concurrent`: three instances released at once by a barrier (a pipe whose write end
//! the drill closes: each `run` waits for its end of file just before the acquire). The
//! instance that gets the lock holds its job until the others have been refused, so a
//! refusal is always "held by", never "already succeeded". Passes when exactly one ran,
//! the others recorded a `skip` because the lock was held, and no output repeats.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Instance, Sandbox};
use crate::drill::shim::{self, Mode};
use std::process::Stdio;
use std::time::Instant;

const INSTANCES: usize = 3;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let deadline = cx.deadline();
    let (rd, wr) = std::io::pipe().map_err(|e| format!("cannot make the barrier: {e}"))?;
    let mut all: Vec<Instance> = Vec::new();
    for i in 1..=INSTANCES {
        let end = rd
            .try_clone()
            .map_err(|e| format!("cannot make the barrier: {e}"))?;
        match cx.spawn(
            sb,
            &format!("concurrent-{i}"),
            Mode::Hold,
            Some(Stdio::from(end)),
            &[],
        ) {
            Ok(inst) => all.push(inst),
            Err(e) => {
                all.iter_mut().for_each(Instance::kill);
                return Err(e);
            }
        }
    }
    // Every instance is waiting on the pipe: closing it releases them together.
    drop(rd);
    drop(wr);
    let settled = cx.wait_for(deadline, || {
        let ended = all.iter_mut().filter_map(|i| i.poll()).count();
        ended + sb.markers(shim::READY).len() >= INSTANCES
    });
    let mut timed_out = !settled;
    if settled {
        sb.mark(shim::GO)?;
        for inst in &mut all {
            timed_out |= cx.wait_exit(inst, deadline).is_none();
        }
    }
    all.iter_mut().for_each(Instance::kill);
    let (mut r, events) = super::judge(cx, sb, "concurrent", t0, false, 0, 0);
    let held = r
        .skip_reasons
        .iter()
        .filter(|s| s.starts_with("held by"))
        .count();
    if timed_out {
        count::fail(&mut r, cx.limit_reason());
    } else if r.attempts != 1 {
        let why = format!(
            "{} of {INSTANCES} instances released at once ran the slot; the lock must let exactly one run",
            r.attempts
        );
        count::fail(&mut r, why);
    } else if held != INSTANCES - 1 {
        let why = format!(
            "{held} of the {} other instances were refused because the lock was held (their skips: {})",
            INSTANCES - 1,
            if r.skip_reasons.is_empty() {
                "none".to_owned()
            } else {
                r.skip_reasons.join("; ")
            }
        );
        count::fail(&mut r, why);
    } else if !count::succeeded(&events) {
        count::fail(&mut r, count::failure(&events));
    }
    Ok(r)
}
