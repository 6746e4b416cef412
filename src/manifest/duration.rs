//! Durations as manifests write them: `45s`, `10m`, `1h30m`, `2d`.

use std::fmt;

/// A non-negative length of time in whole seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

#[derive(Debug, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    Negative,
    /// A number with no unit, e.g. `600`.
    NoUnit,
    /// A unit outside s, m, h, d, as written (`min`), with the number before it.
    BadUnit {
        unit: String,
        number: u64,
    },
    Malformed,
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => f.write_str("an empty duration"),
            DurationError::Negative => f.write_str("a negative duration"),
            DurationError::NoUnit => f.write_str("a number without a unit (s, m, h or d)"),
            DurationError::BadUnit { unit, number } => {
                write!(f, "not a duration: unknown unit `{unit}`")?;
                match replacement(unit) {
                    Some(("s", 0)) => f.write_str(", durations count whole seconds (use s)"),
                    Some((to, factor)) => {
                        let n = number.saturating_mul(factor);
                        write!(f, ", use `{to}` ({n}{to})")
                    }
                    None => f.write_str(" (use s, m, h or d)"),
                }
            }
            DurationError::Malformed => {
                f.write_str("not a duration (numbers with units s, m, h, d, such as 1h30m)")
            }
            DurationError::Overflow => f.write_str("a duration too large to represent"),
        }
    }
}

/// The unit to write instead of one people often use, and how many of it make one of
/// theirs (`2w` is `14d`); a factor of 0 marks a unit finer than the second.
fn replacement(unit: &str) -> Option<(&'static str, u64)> {
    let u = unit.to_ascii_lowercase();
    Some(match u.as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => ("s", 1),
        "m" | "min" | "mins" | "minute" | "minutes" => ("m", 1),
        "h" | "hr" | "hrs" | "hour" | "hours" => ("h", 1),
        "d" | "day" | "days" => ("d", 1),
        "w" | "wk" | "wks" | "week" | "weeks" => ("d", 7),
        "ms" | "msec" | "millisecond" | "milliseconds" | "us" | "µs" | "ns" => ("s", 0),
        _ => return None,
    })
}

impl Duration {
    pub fn parse(s: &str) -> Result<Duration, DurationError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(DurationError::Empty);
        }
        if s.starts_with('-') {
            return Err(DurationError::Negative);
        }
        let mut total: u64 = 0;
        let mut num: Option<u64> = None;
        let mut chars = s.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if let Some(d) = c.to_digit(10) {
                let n = num.unwrap_or(0);
                num = Some(
                    n.checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(d)))
                        .ok_or(DurationError::Overflow)?,
                );
                continue;
            }
            if !c.is_alphabetic() {
                return Err(DurationError::Malformed);
            }
            // The whole word as written: `10min` names `min`, not its `i`.
            let mut end = i + c.len_utf8();
            while let Some((j, n)) = chars.next_if(|(_, n)| n.is_alphabetic()) {
                end = j + n.len_utf8();
            }
            let unit = match &s[i..end] {
                "s" => 1,
                "m" => 60,
                "h" => 3600,
                "d" => 86_400,
                word => {
                    return Err(DurationError::BadUnit {
                        unit: word.to_owned(),
                        number: num.unwrap_or(0),
                    });
                }
            };
            let n = num.take().ok_or(DurationError::Malformed)?;
            total = n
                .checked_mul(unit)
                .and_then(|v| total.checked_add(v))
                .ok_or(DurationError::Overflow)?;
        }
        if num.is_some() {
            return Err(DurationError::NoUnit);
        }
        Ok(Duration(total))
    }

    pub fn secs(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Duration {
    /// Shortest exact form: 1h30m, 25m, 2d, 0s (the one style of every message).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::duration::secs(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (text, secs, shown) in [
            ("45s", 45, "45s"),
            ("10m", 600, "10m"),
            ("1h30m", 5400, "1h30m"),
            ("2d", 172_800, "2d"),
            ("90m", 5400, "1h30m"),
            ("0s", 0, "0s"),
        ] {
            let d = Duration::parse(text).unwrap();
            assert_eq!(d.secs(), secs, "{text}");
            assert_eq!(d.to_string(), shown);
        }
    }

    #[test]
    fn refuses_bad_forms() {
        assert_eq!(Duration::parse("600"), Err(DurationError::NoUnit));
        assert_eq!(Duration::parse("-5m"), Err(DurationError::Negative));
        let unit = |text: &str| Duration::parse(text).unwrap_err().to_string();
        assert_eq!(
            unit("5x"),
            "not a duration: unknown unit `x` (use s, m, h or d)"
        );
        assert_eq!(
            unit("10min"),
            "not a duration: unknown unit `min`, use `m` (10m)"
        );
        assert_eq!(
            unit("30sec"),
            "not a duration: unknown unit `sec`, use `s` (30s)"
        );
        assert_eq!(
            unit("2hr"),
            "not a duration: unknown unit `hr`, use `h` (2h)"
        );
        assert_eq!(
            unit("1h30mins"),
            "not a duration: unknown unit `mins`, use `m` (30m)"
        );
        assert_eq!(
            unit("3hours"),
            "not a duration: unknown unit `hours`, use `h` (3h)"
        );
        assert_eq!(
            unit("2days"),
            "not a duration: unknown unit `days`, use `d` (2d)"
        );
        assert_eq!(
            unit("2w"),
            "not a duration: unknown unit `w`, use `d` (14d)"
        );
        assert_eq!(
            unit("500ms"),
            "not a duration: unknown unit `ms`, durations count whole seconds (use s)"
        );
        assert_eq!(
            unit("10M"),
            "not a duration: unknown unit `M`, use `m` (10m)"
        );
        assert_eq!(Duration::parse("m"), Err(DurationError::Malformed));
        assert_eq!(Duration::parse(""), Err(DurationError::Empty));
        assert_eq!(
            Duration::parse("99999999999999999999d"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            Duration::parse("999999999999999d"),
            Err(DurationError::Overflow)
        );
    }
}
