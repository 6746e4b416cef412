//! Ledger timestamps: RFC 3339 with a UTC offset (`Z` or `±HH:MM`), fractional seconds
//! allowed.
//!
//! The common shape `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)` is parsed by hand (a ledger of
//! 15M rows has 30M timestamps; jiff's general parser is several times slower); anything
//! else falls back to jiff, which also accepts a space for `T`, lowercase `t`/`z`, and a
//! trailing `[Zone]` annotation. A timestamp without an offset names no instant: it is
//! refused unless an assumed zone is given (`--assume-tz`), then read as a civil time in
//! that zone (an ambiguous or skipped local time resolves like RFC 9557 "compatible": the
//! earlier instant of a fold, the later of a gap).

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

/// Parses one ledger timestamp. The error is a message for a [`super::RowError`].
pub fn parse_timestamp(s: &str, assume_tz: Option<&TimeZone>) -> Result<Timestamp, String> {
    if let Some(ts) = fast(s.as_bytes()) {
        return Ok(ts);
    }
    slow(s, assume_tz)
}

/// The hand-parsed common shape only (independent of `--assume-tz`); `None` otherwise.
pub(crate) fn parse_fast(s: &str) -> Option<Timestamp> {
    fast(s.as_bytes())
}

fn slow(s: &str, assume_tz: Option<&TimeZone>) -> Result<Timestamp, String> {
    let s = s.trim();
    let err = match s.parse::<Timestamp>() {
        Ok(ts) => return Ok(ts),
        Err(e) => e,
    };
    if has_offset_shape(s) {
        return Err(out_of_range(s, &err));
    }
    // No offset (or not a timestamp at all): a civil datetime, or a bare date.
    let civil = s.parse::<DateTime>().or_else(|_| {
        s.parse::<jiff::civil::Date>()
            .map(|d| d.to_datetime(jiff::civil::Time::midnight()))
    });
    match civil {
        Ok(dt) => match assume_tz {
            Some(tz) => tz
                .to_ambiguous_timestamp(dt)
                .compatible()
                .map_err(|e| format!("`{s}` in the assumed zone: {e}")),
            None => Err(format!(
                "timestamp `{s}` has no UTC offset; write it as RFC 3339 with `Z` or `±HH:MM`, \
                 or give --assume-tz ZONE"
            )),
        },
        Err(_) => Err(format!(
            "`{}` is not an RFC 3339 timestamp (like 2026-03-01T02:00:00Z)",
            truncate(s)
        )),
    }
}

/// `` `2026-02-29T00:00:00Z` is out of range: … `` for an instant written in the RFC 3339
/// shape whose date or time does not exist (or lies past jiff's year-9999 limit): saying
/// "not RFC 3339" there would send the reader looking for a typo in the format.
pub fn out_of_range(s: &str, _err: &jiff::Error) -> String {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> u32 {
        b.get(r)
            .and_then(|x| std::str::from_utf8(x).ok())
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    };
    let (y, m, d, hh, mm) = (num(0..4), num(5..7), num(8..10), num(11..13), num(14..16));
    let ss = if b.get(16) == Some(&b':') {
        num(17..19)
    } else {
        0
    };
    let why = if !(1..=12).contains(&m) {
        format!("there is no month {m:02}")
    } else if d == 0 || d > days_in_month(y, m) {
        format!("{y:04}-{m:02} has {} days", days_in_month(y, m))
    } else if hh > 23 || mm > 59 || ss > 60 {
        format!("{hh:02}:{mm:02}:{ss:02} is not a time of day")
    } else {
        format!(
            "it lies beyond the instants batchguard can represent ({} to {})",
            Timestamp::MIN.strftime("%Y-%m-%d"),
            Timestamp::MAX.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    };
    format!("`{}` is out of range: {why}", truncate(s))
}

/// `YYYY-MM-DD(T| )HH:MM[:SS[.f]](Z|±HH[:MM])`: the shape of an instant, whether or not the
/// values exist.
pub fn has_offset_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    if b.len() < 17
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't' | b' ')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
    {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        if !digits(i + 1..i + 3) {
            return false;
        }
        i += 3;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return false;
            }
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', rest @ ..] => {
            matches!(rest.len(), 2 | 4 | 5)
                && rest.iter().filter(|c| **c != b':').all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(64) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[inline]
fn d2(b: &[u8], i: usize) -> Option<u32> {
    let (x, y) = (
        b.get(i)?.wrapping_sub(b'0'),
        b.get(i + 1)?.wrapping_sub(b'0'),
    );
    if x < 10 && y < 10 {
        Some(u32::from(x) * 10 + u32::from(y))
    } else {
        None
    }
}

/// Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)`; `None` means "let jiff decide" (which then
/// either accepts another shape or produces the error message).
fn fast(b: &[u8]) -> Option<Timestamp> {
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = d2(b, 0)? * 100 + d2(b, 2)?;
    let (month, day) = (d2(b, 5)?, d2(b, 8)?);
    let (hour, minute, second) = (d2(b, 11)?, d2(b, 14)?, d2(b, 17)?);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start >= 9 {
                return None;
            }
            nanos = nanos * 10 + u32::from(b[i] - b'0');
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        nanos *= 10u32.pow(9 - digits as u32);
    }
    let offset_secs: i64 = match b.get(i)? {
        b'Z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (d2(b, i + 1)?, d2(b, i + 4)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = i64::from(oh * 3600 + om * 60);
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_secs;
    Timestamp::new(secs, nanos as i32).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Timestamp {
        parse_timestamp(s, None).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn fast_path_agrees_with_jiff() {
        for s in [
            "2026-03-01T02:00:00Z",
            "2026-03-01T02:00:00.5Z",
            "2026-03-01T02:00:00.123456789Z",
            "2026-03-01T02:00:00.000001+09:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T01:30:00-05:00",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999999Z",
            "2000-02-29T12:00:00+14:00",
            "2024-02-29T23:59:59-12:00",
            "0001-01-01T00:00:00Z",
            "9000-12-31T23:59:59Z",
            "2026-12-31T23:59:59+05:45",
        ] {
            let want: Timestamp = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(fast(s.as_bytes()), Some(want), "{s}");
        }
    }

    #[test]
    fn other_shapes_fall_back_to_jiff() {
        let z = ok("2026-03-01T02:00:00Z");
        assert_eq!(ok("2026-03-01 02:00:00Z"), z);
        assert_eq!(ok("2026-03-01t02:00:00z"), z);
        assert_eq!(ok("2026-03-01T11:00:00+09:00[Asia/Seoul]"), z);
        assert_eq!(ok("2026-03-01T02:00Z"), z);
        assert_eq!(ok(" 2026-03-01T02:00:00Z "), z);
        assert_eq!(ok("2026-03-01T02:00:00+00"), z);
    }

    #[test]
    fn no_offset_is_refused_without_a_zone() {
        let e = parse_timestamp("2026-03-01T02:00:00", None).unwrap_err();
        assert!(e.contains("no UTC offset"), "{e}");
        assert!(e.contains("--assume-tz"), "{e}");
        let e = parse_timestamp("2026-03-01 02:00:00.25", None).unwrap_err();
        assert!(e.contains("no UTC offset"), "{e}");
    }

    #[test]
    fn no_offset_is_read_in_the_assumed_zone() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let t = parse_timestamp("2026-03-01T02:00:00", Some(&ny)).unwrap();
        assert_eq!(t, ok("2026-03-01T07:00:00Z"));
        // Fold: the earlier instant.
        let t = parse_timestamp("2026-11-01T01:30:00", Some(&ny)).unwrap();
        assert_eq!(t, ok("2026-11-01T01:30:00-04:00"));
        // Gap: pushed forward.
        let t = parse_timestamp("2026-03-08T02:30:00", Some(&ny)).unwrap();
        assert_eq!(t, ok("2026-03-08T03:30:00-04:00"));
        // An explicit offset wins over the assumed zone.
        let t = parse_timestamp("2026-03-01T02:00:00Z", Some(&ny)).unwrap();
        assert_eq!(t, ok("2026-03-01T02:00:00Z"));
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for s in [
            "",
            "Z",
            "2026",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T23:60:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00.1234567891Z",
            "2026-01-01T00:00:00+0a:00",
            "2026-01-01T00:00:00Zjunk",
            "2026-01-01T00:00:00+01:00x",
            "２０２６-01-01T00:00:00Z",
            "2026-01-01T00:00:00\u{e9}",
            "yesterday",
            "1700000000",
        ] {
            assert!(parse_timestamp(s, None).is_err(), "{s:?} accepted");
        }
        let long = "x".repeat(10_000);
        let e = parse_timestamp(&long, None).unwrap_err();
        assert!(e.len() < 200);
    }

    #[test]
    fn leap_second_is_clamped_like_jiff() {
        // RFC 3339 allows :60; jiff reads it as :59.
        assert_eq!(
            parse_timestamp("2016-12-31T23:59:60Z", None).ok(),
            "2016-12-31T23:59:60Z".parse::<Timestamp>().ok()
        );
    }
}
