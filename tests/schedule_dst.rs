//! What `dst_effects` tells BG103, and how slots are printed (SPEC 4).

use batchguard::{Dialect, DstAction, DstKind, Schedule, format_slot};
use jiff::Timestamp;
use jiff::tz::TimeZone;

fn effects(expr: &str, d: Dialect, from: &str, to: &str) -> Vec<(DstKind, String, DstAction)> {
    let tz = TimeZone::get("America/New_York").unwrap();
    let s = Schedule::parse(expr, d).unwrap();
    let (f, t): (Timestamp, Timestamp) = (from.parse().unwrap(), to.parse().unwrap());
    s.dst_effects(&tz, f, t)
        .into_iter()
        .map(|e| (e.kind, e.local.to_string(), e.action))
        .collect()
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn spring_gap() {
    let (f, t) = ("2026-03-01T00:00:00Z", "2026-03-15T00:00:00Z");
    let late = effects("30 2 * * *", Dialect::Crontab, f, t);
    assert_eq!(
        late,
        vec![(
            DstKind::Gap,
            "2026-03-08T02:30:00".into(),
            DstAction::RunsLate {
                at: at("2026-03-08T03:00:00-04:00")
            }
        )]
    );
    let skipped = effects("30 2 * * *", Dialect::Kubernetes, f, t);
    assert_eq!(skipped.first().map(|e| e.2), Some(DstAction::Skipped));
}

#[test]
fn fall_repeat() {
    let (f, t) = ("2026-10-20T00:00:00Z", "2026-11-10T00:00:00Z");
    let once = effects("30 1 * * *", Dialect::Crontab, f, t);
    assert_eq!(
        once.first().map(|e| e.2),
        Some(DstAction::RunsOnce {
            at: at("2026-11-01T01:30:00-04:00")
        })
    );
    let twice = effects("30 1 * * *", Dialect::Kubernetes, f, t);
    assert_eq!(
        twice.first().map(|e| e.2),
        Some(DstAction::RunsTwice {
            first: at("2026-11-01T01:30:00-04:00"),
            second: at("2026-11-01T01:30:00-05:00")
        })
    );
    let early = effects("30 2 * * *", Dialect::CronNpm, f, t);
    assert_eq!(
        early.first().map(|e| e.2),
        Some(DstAction::AlsoRunsEarly {
            at: at("2026-11-01T01:30:00-05:00")
        })
    );
}

#[test]
fn slots_print_with_the_offset_of_their_instant() {
    let tz = TimeZone::get("America/New_York").unwrap();
    let s = Schedule::parse("30 1 * * *", Dialect::Kubernetes).unwrap();
    let got: Vec<String> = s
        .slots(
            &tz,
            at("2026-11-01T00:00:00-04:00"),
            at("2026-11-01T03:00:00-05:00"),
        )
        .into_iter()
        .map(|t| format_slot(t, &tz))
        .collect();
    assert_eq!(
        got,
        ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"]
    );
}

#[test]
fn errors_point_at_the_field() {
    let e = Schedule::parse("0 12 * * MON#2", Dialect::Crontab).unwrap_err();
    assert_eq!(e.span, 9..14);
    assert!(matches!(
        e.kind,
        batchguard::CronErrorKind::Unsupported { .. }
    ));
    let e = Schedule::parse("0 0 * * * *", Dialect::Kubernetes).unwrap_err();
    assert!(matches!(
        e.kind,
        batchguard::CronErrorKind::Unsupported { .. }
    ));
    let e = Schedule::parse("0 25 * * *", Dialect::CronNpm).unwrap_err();
    assert_eq!(e.span, 2..4);
    assert_eq!(e.kind, batchguard::CronErrorKind::Invalid);
}
