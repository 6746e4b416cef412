//! `clean`: replay once. Passes when every snapshot record has exactly one output and no
//! output names a record that is not in the snapshot.

use crate::drill::ScenarioResult;
use crate::drill::count;
use crate::drill::sandbox::{Cx, Sandbox};
use crate::drill::shim::Mode;
use std::time::Instant;

pub fn run(cx: &Cx, sb: &Sandbox) -> Result<ScenarioResult, String> {
    let t0 = Instant::now();
    let mut a = cx.spawn(sb, "clean", Mode::Pass, None, &[])?;
    let ended = cx.wait_exit(&mut a, cx.deadline());
    let (mut r, events) = super::judge(cx, sb, "clean", t0, true, 0, 0);
    if ended.is_none() {
        count::fail(&mut r, cx.limit_reason());
    } else if !count::succeeded(&events) {
        count::fail(&mut r, count::failure(&events));
    }
    Ok(r)
}
