//! The shortest gap between slots over a long window, without enumerating every slot.
//!
//! Lint asks for the shortest gap over 12 months for every job (BG104, BG408). A minutely
//! job has half a million slots a year; enumerating them all for 10,000 jobs would make
//! lint slow. The answer can be found exactly with far less work:
//!
//! - On a *calm* day (no UTC-offset change within a few hours) a job fires at every time of
//!   its time fields, each at `local time - offset`. So away from offset changes, two
//!   consecutive slots are either on the same day, at least `d_in` apart (the smallest
//!   difference between two times of day the fields allow), or on different days, at least
//!   `c = 24h - last + first` apart. `min(d_in, c)` bounds every such gap from below.
//! - Near an offset change (4 days either side, which covers every dialect's DST rule, the
//!   npm `cron` hour-early runs included) gaps can be shorter: those windows are enumerated.
//! - Every other pair of consecutive slots is either calm or more than 2 days apart.
//!
//! With `bound = min(d_in, c, the windows' minimum)` a lower bound of every gap, the window
//! is then scanned in growing chunks and the scan stops as soon as a gap equals the bound.
//! Dense schedules stop after the first day; sparse ones (weekly, monthly) enumerate the
//! whole window, which is cheap for them. The result always equals [`Schedule::min_gap`]
//! (a test checks it).

use super::Schedule;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

const DAY: i64 = 86_400;
/// Half-width of the window enumerated around each offset change.
const HOT: i64 = 4 * DAY;

impl Schedule {
    /// The shortest real-time gap between consecutive slots in `[from, to)`: the same
    /// answer as [`Schedule::min_gap`], found without enumerating a dense schedule's
    /// every slot (see the module docs).
    pub fn shortest_gap(
        &self,
        tz: &TimeZone,
        from: Timestamp,
        to: Timestamp,
    ) -> Option<SignedDuration> {
        if from >= to {
            return None;
        }
        let tz = self.zone(tz);
        let d_in = self
            .sods
            .windows(2)
            .filter_map(|w| match w {
                [a, b] => Some(i64::from(b - a)),
                _ => None,
            })
            .min()
            .unwrap_or(i64::MAX);
        let (first, last) = (self.sods.first()?, self.sods.last()?);
        let c = DAY - i64::from(last - first);
        let mut bound = d_in.min(c);
        let mut best: Option<i64> = None;
        // One second is the least any gap can be (slots are whole, distinct seconds).
        if bound > 1 {
            for (a, b) in hot_windows(tz, from, to) {
                let (Ok(a), Ok(b)) = (Timestamp::from_second(a), Timestamp::from_second(b)) else {
                    continue;
                };
                if let Some(g) = self.min_gap(tz, a.max(from), b.min(to)) {
                    let g = g.as_secs();
                    best = Some(best.map_or(g, |x| x.min(g)));
                }
            }
            if let Some(b) = best {
                bound = bound.min(b);
            }
        } else {
            bound = 1;
        }
        let mut cursor = from;
        let mut chunk = DAY;
        let mut prev: Option<i64> = None;
        while cursor < to && best.is_none_or(|b| b > bound) {
            let end = cursor
                .checked_add(SignedDuration::from_secs(chunk))
                .map_or(to, |e| e.min(to));
            for s in self.slot_secs(tz, cursor, end) {
                if let Some(p) = prev {
                    let g = s - p;
                    best = Some(best.map_or(g, |x| x.min(g)));
                }
                prev = Some(s);
            }
            cursor = end;
            chunk = (chunk * 2).min(32 * DAY);
        }
        best.map(SignedDuration::from_secs)
    }
}

/// `[T - HOT, T + HOT)` around every offset change T near `[from, to)`, merged where they
/// overlap, in Unix seconds.
fn hot_windows(tz: &TimeZone, from: Timestamp, to: Timestamp) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    let Ok(start) = from.checked_sub(SignedDuration::from_secs(HOT + 1)) else {
        return out;
    };
    let end = to.as_second().saturating_add(HOT);
    for tr in tz.following(start) {
        let t = tr.timestamp().as_second();
        if t >= end {
            break;
        }
        let (a, b) = (t - HOT, t + HOT);
        match out.last_mut() {
            Some(w) if a <= w.1 => w.1 = w.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Dialect;
    use super::*;

    fn check(expr: &str, d: Dialect, zone: &str, from: &str, to: &str) {
        let s = Schedule::parse(expr, d).expect("valid expression");
        let tz = TimeZone::get(zone).expect("known zone");
        let (f, t): (Timestamp, Timestamp) =
            (from.parse().expect("instant"), to.parse().expect("instant"));
        assert_eq!(
            s.shortest_gap(&tz, f, t),
            s.min_gap(&tz, f, t),
            "{expr} ({d}) in {zone}, {from} .. {to}"
        );
    }

    #[test]
    fn equals_full_enumeration() {
        let zones = [
            "UTC",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Lord_Howe",
            "Asia/Kolkata",
        ];
        let exprs = [
            "* * * * *",
            "*/15 * * * *",
            "0 * * * *",
            "30 2 * * *",
            "30 1 * * *",
            "10,30 2,3 * * *",
            "0,59 * * * *",
            "0 0 * * 1",
            "0 9 * * 1-5",
            "0 0 1 * *",
            "59 23 * * *",
            "0 0,23 * * *",
            "5 1,2,3 * * 0",
        ];
        let windows = [
            ("2026-03-01T00:00:00Z", "2027-03-01T00:00:00Z"),
            ("2026-03-08T06:59:30Z", "2026-03-08T07:01:00Z"),
            ("2026-10-20T00:00:00Z", "2026-11-05T00:00:00Z"),
        ];
        for d in Dialect::ALL {
            for e in exprs {
                for z in zones {
                    for (f, t) in windows {
                        check(e, d, z, f, t);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn equals_full_enumeration_for_random_schedules(
            m in proptest::sample::select(vec!["*", "*/7", "0", "0,59", "15-20", "*/15", "30"]),
            h in proptest::sample::select(vec!["*", "1", "1,2", "2", "0-3", "*/5", "23"]),
            dom in proptest::sample::select(vec!["*", "1", "15", "31", "*/10"]),
            dow in proptest::sample::select(vec!["*", "0", "1-5"]),
            d in proptest::sample::select(Dialect::ALL.to_vec()),
            zone in proptest::sample::select(vec!["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]),
            start in 0i64..400,
            days in 1i64..400,
        ) {
            let expr = format!("{m} {h} {dom} * {dow}");
            if let Ok(s) = Schedule::parse(&expr, d) {
                let tz = TimeZone::get(zone).expect("known zone");
                let f = Timestamp::from_second(1_767_225_600 + start * 86_400 + 1_234).expect("instant");
                let t = Timestamp::from_second(f.as_second() + days * 86_400).expect("instant");
                proptest::prop_assert_eq!(s.shortest_gap(&tz, f, t), s.min_gap(&tz, f, t), "{} ({}) in {}", expr, d, zone);
            }
        }
    }

    #[test]
    fn seconds_and_empty_windows() {
        check(
            "*/20 * * * * *",
            Dialect::Croner,
            "Europe/Berlin",
            "2026-03-01T00:00:00Z",
            "2027-03-01T00:00:00Z",
        );
        check(
            "0 0 1 1 *",
            Dialect::Crontab,
            "UTC",
            "2026-03-01T00:00:00Z",
            "2027-03-01T00:00:00Z",
        );
        check(
            "0 0 * * *",
            Dialect::Crontab,
            "UTC",
            "2026-03-01T00:00:00Z",
            "2026-03-01T00:00:00Z",
        );
    }
}
