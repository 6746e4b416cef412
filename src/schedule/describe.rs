//! DST effects in words: what a dialect does on the day a clock change touches a slot.
//! BG103 reports them and `slots --annotate` prints them, in the same words.

use super::{Dialect, DstAction, DstEffect, DstKind, format_slot};
use jiff::tz::TimeZone;

/// Effects told in one clause: same date, same kind, same action.
pub fn same_clause(a: &DstEffect, b: &DstEffect) -> bool {
    a.local.date() == b.local.date()
        && a.kind == b.kind
        && std::mem::discriminant(&a.action) == std::mem::discriminant(&b.action)
}

/// One group of effects (same date, same kind, same action) as a clause; `slots
/// --annotate` prints the same words.
pub fn describe(group: &[DstEffect], tz: &TimeZone, dialect: Dialect) -> String {
    let Some(first) = group.first() else {
        return String::new();
    };
    let many = group.len() > 1;
    let hm = |e: &DstEffect| {
        let fmt = if e.local.second() == 0 {
            "%H:%M"
        } else {
            "%H:%M:%S"
        };
        e.local.strftime(fmt).to_string()
    };
    let times = match group {
        [one] => hm(one),
        [a, b] => format!("{} and {}", hm(a), hm(b)),
        [a, b, c] => format!("{}, {} and {}", hm(a), hm(b), hm(c)),
        [a, .., z] => format!("the {} slots from {} to {}", group.len(), hm(a), hm(z)),
        [] => String::new(),
    };
    let date = first.local.strftime("%Y-%m-%d");
    let it = if many { "them" } else { "it" };
    let does = if many { "do" } else { "does" };
    let setting = match (first.kind, first.action) {
        (_, DstAction::AlsoRunsEarly { .. }) => {
            format!("{times} on {date} (the hour after the repeated one)")
        }
        (DstKind::Gap, _) => format!("{times} {does} not exist on {date} (clocks spring forward)"),
        (DstKind::Repeat, _) => {
            let happen = if many { "happen" } else { "happens" };
            format!("{times} {happen} twice on {date} (clocks fall back)")
        }
    };
    let when = |at| format_slot(at, tz);
    let action = match first.action {
        DstAction::Skipped => format!("{dialect} skips {it}"),
        DstAction::RunsLate { at } => {
            if group.iter().all(|e| e.action == DstAction::RunsLate { at }) {
                if many {
                    format!("{dialect} runs them once, late, at {}", when(at))
                } else {
                    format!("{dialect} runs it late, at {}", when(at))
                }
            } else {
                format!("{dialect} runs {it} late, just after the change")
            }
        }
        DstAction::RunsEarly { at } => {
            let when_text = if group
                .iter()
                .all(|e| e.action == DstAction::RunsEarly { at })
            {
                format!(", at {}", when(at))
            } else {
                ", each shifted back by the gap".to_owned()
            };
            format!(
                "{dialect} runs {it} early, before the change{when_text}, then waits out the gap \
                 (a slot at the very end of the gap does not run)"
            )
        }
        DstAction::RunsTwice { first, second } if !many => format!(
            "{dialect} runs it twice, at {} and {}",
            when(first),
            when(second)
        ),
        DstAction::RunsTwice { .. } => format!("{dialect} runs each twice, once per offset"),
        DstAction::RunsOnce { at } => {
            let pass = if at < first.transition {
                "first"
            } else {
                "second"
            };
            // Reported only when the job's cadence needed both passes.
            let other = if pass == "first" { "second" } else { "first" };
            if many {
                format!("{dialect} runs each once, in the {pass} pass, and nothing in the {other}")
            } else {
                format!(
                    "{dialect} runs it once, at {} (the {pass} pass), and not in the {other}",
                    when(at)
                )
            }
        }
        DstAction::AlsoRunsEarly { at } if !many => {
            format!("{dialect} also runs it an hour early, at {}", when(at))
        }
        DstAction::AlsoRunsEarly { .. } => {
            format!("{dialect} also runs each an hour early")
        }
    };
    format!("{setting}: {action}")
}
