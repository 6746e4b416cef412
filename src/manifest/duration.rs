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
    BadUnit(char),
    Malformed,
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => f.write_str("an empty duration"),
            DurationError::Negative => f.write_str("a negative duration"),
            DurationError::NoUnit => f.write_str("a number without a unit (s, m, h or d)"),
            DurationError::BadUnit(c) => write!(f, "unknown unit `{c}` (use s, m, h or d)"),
            DurationError::Malformed => {
                f.write_str("not a duration (numbers with units s, m, h, d, such as 1h30m)")
            }
            DurationError::Overflow => f.write_str("a duration too large to represent"),
        }
    }
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
        for c in s.chars() {
            if let Some(d) = c.to_digit(10) {
                let n = num.unwrap_or(0);
                num = Some(
                    n.checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(d)))
                        .ok_or(DurationError::Overflow)?,
                );
                continue;
            }
            let unit = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                c if c.is_alphabetic() => return Err(DurationError::BadUnit(c)),
                _ => return Err(DurationError::Malformed),
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
    /// Shortest exact form: 1h30m, 25m, 2d, 0s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = self.0;
        if s == 0 {
            return f.write_str("0s");
        }
        for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
            if s >= len {
                write!(f, "{}{unit}", s / len)?;
                s %= len;
            }
        }
        Ok(())
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
        assert_eq!(Duration::parse("5x"), Err(DurationError::BadUnit('x')));
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
