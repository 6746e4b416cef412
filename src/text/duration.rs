//! The one way a length of time is written in messages, lint's and audit's alike: the
//! shortest exact form in the units a manifest accepts (`15m`, `1h30m`, `2d`, `0s`), so a
//! finding reads back as a value the user could write. Audit lengths measured in
//! milliseconds keep tenths under ten seconds (`4.2s`), where the fraction still matters.

/// `15m`, `1h30m`, `2d`, `0s`: whole seconds in their shortest exact form.
pub fn secs(mut s: u64) -> String {
    if s == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    out
}

/// A millisecond length: tenths under 10 s when there is a fraction (`4.2s`), else
/// rounded to the whole second (never truncated: 299 999 ms is `5m`) and written as
/// [`secs`] does.
pub fn millis(ms: i64) -> String {
    if ms % 1000 != 0 && ms.abs() < 9_950 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let s = (ms as f64 / 1000.0).round() as i64;
    if s < 0 {
        format!("-{}", secs(s.unsigned_abs()))
    } else {
        secs(s as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_style() {
        assert_eq!(secs(0), "0s");
        assert_eq!(secs(900), "15m");
        assert_eq!(secs(5400), "1h30m");
        assert_eq!(secs(172_800), "2d");
        assert_eq!(secs(3723), "1h2m3s");
        assert_eq!(millis(900_000), "15m");
        assert_eq!(millis(4_200), "4.2s");
        assert_eq!(millis(299_999), "5m");
        assert_eq!(millis(-2_000), "-2s");
    }
}
