//! Properties every dialect's enumeration must keep, on random expressions and windows.

use batchguard::{Dialect, Schedule};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

fn field(max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        (0..=max).prop_map(|v| v.to_string()),
        (1..=max.min(20)).prop_map(|s| format!("*/{s}")),
        (0..=max, 0..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (0..=max, 0..=max).prop_map(|(a, b)| format!("{a},{b}")),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    let dom = prop::sample::select(vec!["*", "1", "13", "1-15", "*/3", "5,20", "28"]);
    let mon = prop::sample::select(vec!["*", "3", "3-11", "*/2", "1,10"]);
    (field(59), field(23), dom, mon, field(6))
        .prop_map(|(m, h, dom, mon, dow)| format!("{m} {h} {dom} {mon} {dow}"))
}

fn zone() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "UTC",
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Slots are inside [from, to), strictly increasing (equal instants never appear), and
    /// walking `next_after` from just before `from` visits exactly the same instants.
    #[test]
    fn enumeration_equals_repeated_next(
        e in expr(),
        d in prop::sample::select(Dialect::ALL.to_vec()),
        tz in zone(),
        // Around the 2026 transitions: day offsets from 2026-03-01 and window length in hours.
        start_day in prop_oneof![0i64..40, 230i64..250],
        hours in 1i64..96,
    ) {
        let s = Schedule::parse(&e, d).map_err(|err| TestCaseError::fail(format!("{e}: {err}")))?;
        let tz = TimeZone::get(tz).unwrap();
        let from = Timestamp::from_second(1_772_323_200 + start_day * 86_400 + 1_234).unwrap();
        let to = from + SignedDuration::from_hours(hours);
        let slots = s.slots(&tz, from, to);
        for w in slots.windows(2) {
            prop_assert!(w[0] < w[1], "not increasing: {:?}", w);
        }
        for t in &slots {
            prop_assert!(*t >= from && *t < to);
        }
        let mut walked = Vec::new();
        let mut t = from - SignedDuration::from_nanos(1);
        while let Some(n) = s.next_after(&tz, t) {
            prop_assert!(n > t, "next_after({t}) = {n} is not after it");
            if n >= to { break; }
            walked.push(n);
            t = n;
        }
        prop_assert_eq!(walked, slots);
    }
}
