//! The `pm2` dialect: croner 4.1.97, the version PM2 7 pins, as `cron_restart` reaches it.
//!
//! PM2 calls `Cron(pattern, fn)` with no options, so the pattern is read by croner 4's own
//! `CronPattern`, which is much older than croner 11 and differs from every other dialect.
//! Its grammar, ported rule by rule (`docs/schedules.md` lists the consequences):
//! - 5 or 6 fields (seconds first); no macros, so `@daily` is refused and PM2 never
//!   schedules the restart;
//! - day names (`sun`..`sat`) and month names (`jan`..`dec`) are replaced as substrings,
//!   case-insensitively, then only digits and `* , / -` may remain;
//! - `L` only as the whole day-of-month field; no `W`, no `#`;
//! - a list may hold numbers and `*` only: `1-5,7` and `*/5,10` are errors;
//! - `N/step` starts at array index N without the 1-based shift of days and months
//!   (`5/10` in days is 6, 16, 26; `2/3` in months is March, June, September, December);
//! - numbers are read with JavaScript's `parseInt` (`5*` is 5; a list item without a
//!   leading digit, like the empty one in `1,,2`, is ignored);
//! - day-of-month and day-of-week always combine with AND.
//!
//! Refused here although croner 4 accepts them, because their runs cannot be known from
//! the text: `?` (croner puts the current second, minute, ... in its place when PM2 reads
//! the pattern) and a date with `:` (a single run at that time, not a schedule). A field
//! left with no value is refused too: croner would never fire it, or loop forever on an
//! empty day-of-week.

use super::parse::{LWH_DIALECTS, Spec, invalid, macro_expansion, split_fields, unsupported};
use super::{CronError, Dialect};
use std::ops::Range;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Sec,
    Min,
    Hour,
    Dom,
    Month,
    Dow,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Sec => "seconds",
            Field::Min => "minutes",
            Field::Hour => "hours",
            Field::Dom => "day-of-month",
            Field::Month => "month",
            Field::Dow => "day-of-week",
        }
    }
    /// Length of croner 4's array for the field.
    fn len(self) -> i64 {
        match self {
            Field::Sec | Field::Min => 60,
            Field::Hour => 24,
            Field::Dom => 31,
            Field::Month => 12,
            Field::Dow => 8,
        }
    }
    /// croner 4's `valueIndexOffset`: days and months are 1-based in the pattern.
    fn offset(self) -> i64 {
        match self {
            Field::Dom | Field::Month => -1,
            _ => 0,
        }
    }
}

const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

pub(crate) fn parse(expr: &str) -> Result<Spec, CronError> {
    let whole = 0..expr.len();
    if expr.find(':').is_some_and(|i| i > 0) {
        return Err(invalid(
            "croner 4 reads a pattern with `:` as a date to run once, not as a schedule",
            whole,
        ));
    }
    let fields = split_fields(expr);
    if let Some((first, span)) = fields.first()
        && first.starts_with('@')
    {
        let word = first.to_ascii_lowercase();
        let instead = match macro_expansion(Dialect::Crontab, &word) {
            Some(exp) => format!("write `{exp}` instead"),
            None if word == "@every" => "write a cron expression instead".to_owned(),
            None => "write a 5-field cron expression instead".to_owned(),
        };
        return Err(invalid(
            format!(
                "PM2's croner (4.1.97) has no macros: PM2 refuses `{first}` and never schedules \
                 it; {instead}"
            ),
            span.clone(),
        ));
    }
    let n = fields.len();
    if n == 7 {
        let span = fields.first().map_or(whole.clone(), |f| f.1.clone());
        return Err(unsupported(
            "dialect pm2 takes 5 or 6 fields, this has 7 (seconds and year)",
            span,
            &[Dialect::Croner],
        ));
    }
    if n != 5 && n != 6 {
        return Err(invalid(
            format!("dialect pm2 takes 5 or 6 fields (seconds first), this has {n}"),
            whole,
        ));
    }
    let off = usize::from(n == 6);
    let get = |i: usize| fields.get(i).cloned().unwrap_or(("", whole.clone()));
    let sec = if n == 6 {
        let (t, s) = get(0);
        values(t, s, Field::Sec)?
    } else {
        1
    };
    let (min_t, min_s) = get(off);
    let (hour_t, hour_s) = get(off + 1);
    let (dom_t, dom_s) = get(off + 2);
    let (mon_t, mon_s) = get(off + 3);
    let (dow_t, dow_s) = get(off + 4);
    let min = values(min_t, min_s, Field::Min)?;
    let hour = values(hour_t, hour_s, Field::Hour)?;
    let dom_last = dom_t.eq_ignore_ascii_case("L");
    let dom = if dom_last {
        0
    } else {
        values(dom_t, dom_s, Field::Dom)?
    };
    let month = values(mon_t, mon_s, Field::Month)?;
    let dow = values(dow_t, dow_s, Field::Dow)?;
    let dow_all = (dow & 0x7f) | ((dow >> 7) & 1) == 0x7f;
    let pm2_overflow = !dom_last && !dow_all && dom >> 28 != 0;
    Ok(Spec {
        sec,
        min,
        hour: hour as u32,
        // Array index i is day i + 1.
        dom: (dom << 1) as u32,
        month: (month << 1) as u16,
        dow: ((dow & 0x7f) | ((dow >> 7) & 1)) as u8,
        dom_last,
        dom_last_minus: 0,
        dom_nearest: 0,
        dom_last_weekday: false,
        dow_nth: [0; 7],
        dow_last: 0,
        years: None,
        day_and: true,
        fixed: false,
        pm2_overflow,
    })
}

/// The field's values as a bitset over croner 4's array indices.
fn values(text: &str, span: Range<usize>, field: Field) -> Result<u64, CronError> {
    let what = field.name();
    let upper = text.to_ascii_uppercase();
    if matches!(field, Field::Dom | Field::Dow)
        && (upper.contains('#')
            || (field == Field::Dom && (upper.contains('W') || upper.contains('L')))
            || (field == Field::Dow && upper.ends_with('L')))
    {
        return Err(unsupported(
            format!(
                "`{text}` (L, W or #) in the {what} field is not accepted by dialect pm2 \
                 (croner 4 takes `L` only as the whole day-of-month)"
            ),
            span,
            &LWH_DIALECTS,
        ));
    }
    if text.contains('?') {
        return Err(invalid(
            format!(
                "`?` in the {what} field: croner 4 puts the current {what} there when PM2 reads \
                 the pattern, so the runs depend on when PM2 started; write `*` or a value"
            ),
            span,
        ));
    }
    let mut conf = text.to_ascii_lowercase();
    let names: &[&str] = match field {
        Field::Dow => &DAYS,
        Field::Month => &MONTHS,
        _ => &[],
    };
    let base = usize::from(field == Field::Month);
    for (i, name) in names.iter().enumerate() {
        conf = conf.replace(name, &(i + base).to_string());
    }
    if conf
        .chars()
        .any(|c| !(c.is_ascii_digit() || matches!(c, '/' | '*' | ',' | '-')))
    {
        return Err(invalid(
            format!("`{text}` has characters croner 4 does not accept in the {what} field"),
            span,
        ));
    }
    let bad = |m: String| invalid(m, span.clone());
    let len = field.len();
    let offset = field.offset();
    let mut bits: u64 = 0;
    let mut set = |i: i64| {
        if (0..64).contains(&i) {
            bits |= 1 << i;
        }
    };
    let items: Vec<&str> = conf.split(',').collect();
    let listed = items.len() > 1;
    for item in items {
        if item == "*" {
            (0..len).for_each(&mut set);
            continue;
        }
        let (has_dash, has_slash) = (item.contains('-'), item.contains('/'));
        if listed && (has_dash || has_slash) {
            return Err(bad(format!(
                "`{text}`: croner 4 takes no range or step inside a list"
            )));
        }
        if has_dash && has_slash {
            let parsed = item.split_once('-').and_then(|(a, rest)| {
                let (b, s) = rest.split_once('/')?;
                let all_digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
                (all_digits(a) && all_digits(b) && all_digits(s))
                    .then(|| (number(a), number(b), number(s)))
            });
            let Some((Some(lo), Some(hi), Some(step))) = parsed else {
                return Err(bad(format!(
                    "`{item}` is not a range with a step (`a-b/n`)"
                )));
            };
            check_step(step, len, what).map_err(&bad)?;
            let (lo, hi) = (lo + offset, hi + offset);
            check_range(lo, hi, len, item, what).map_err(&bad)?;
            let mut i = lo;
            while i <= hi {
                set(i);
                i += step;
            }
        } else if has_dash {
            let parts: Vec<&str> = item.split('-').collect();
            let [a, b] = parts.as_slice() else {
                return Err(bad(format!("`{item}` is not a range (`a-b`)")));
            };
            let (Some(lo), Some(hi)) = (number(a), number(b)) else {
                return Err(bad(format!("`{item}` is not a range (`a-b`)")));
            };
            let (lo, hi) = (lo + offset, hi + offset);
            check_range(lo, hi, len, item, what).map_err(&bad)?;
            (lo..=hi).for_each(&mut set);
        } else if has_slash {
            let parts: Vec<&str> = item.split('/').collect();
            let [start, step] = parts.as_slice() else {
                return Err(bad(format!("`{item}` is not a step (`*/n` or `a/n`)")));
            };
            let Some(step) = number(step) else {
                return Err(bad(format!("`{item}`: the step is not a number")));
            };
            check_step(step, len, what).map_err(&bad)?;
            // croner 4 starts at the array index as written: no 1-based shift here.
            let start = if *start == "*" {
                Some(0)
            } else {
                number(start)
            };
            if let Some(mut i) = start {
                while i < len {
                    set(i);
                    i += step;
                }
            }
        } else if let Some(v) = number(item) {
            let i = v + offset;
            if i < 0 || i >= len {
                return Err(bad(format!("{what} value `{item}` is out of range")));
            }
            set(i);
        }
    }
    if bits == 0 {
        return Err(bad(format!(
            "`{text}` leaves the {what} field with no value: croner 4 would never run it"
        )));
    }
    Ok(bits)
}

fn check_step(step: i64, len: i64, what: &str) -> Result<(), String> {
    if step == 0 {
        return Err(format!("step 0 in the {what} field"));
    }
    if step > len {
        return Err(format!(
            "step {step} is larger than the {what} field ({len} values)"
        ));
    }
    Ok(())
}

fn check_range(lo: i64, hi: i64, len: i64, item: &str, what: &str) -> Result<(), String> {
    if lo < 0 || hi >= len {
        return Err(format!("`{item}` is out of range for the {what} field"));
    }
    if lo > hi {
        return Err(format!("range `{item}` runs backwards in the {what} field"));
    }
    Ok(())
}

/// JavaScript's `parseInt(s, 10)` on what croner 4 lets through: the leading digits, or
/// `None` (NaN) when there are none.
fn number(s: &str) -> Option<i64> {
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    Some(s[..digits].parse::<i64>().unwrap_or(i64::MAX / 4))
}

#[cfg(test)]
mod tests {
    use super::super::{CronErrorKind, Dialect, Schedule};

    fn err(expr: &str) -> super::CronError {
        match Schedule::parse(expr, Dialect::Pm2) {
            Err(e) => e,
            Ok(_) => panic!("`{expr}` parses under pm2"),
        }
    }

    #[test]
    fn refuses_macros_and_says_what_to_write() {
        let e = err("@daily");
        assert_eq!(e.kind, CronErrorKind::Invalid);
        assert!(e.message.contains("refuses `@daily`"), "{}", e.message);
        assert!(e.message.contains("`0 0 * * *`"), "{}", e.message);
        assert_eq!(e.span, 0..6);
    }

    #[test]
    fn only_whole_field_l_is_accepted() {
        assert!(Schedule::parse("0 0 L * *", Dialect::Pm2).is_ok());
        for (expr, bad) in [
            ("0 0 15W * *", "15W"),
            ("0 0 * * 5#2", "5#2"),
            ("0 0 LW * *", "LW"),
        ] {
            let e = err(expr);
            assert!(
                matches!(e.kind, CronErrorKind::Unsupported { .. }),
                "{expr}: {e:?}"
            );
            assert_eq!(&expr[e.span.clone()], bad);
        }
    }

    #[test]
    fn start_dependent_question_mark_is_refused() {
        let e = err("0 12 ? * MON");
        assert!(e.message.contains("when PM2 started"), "{}", e.message);
        assert_eq!(e.span, 5..6);
    }

    #[test]
    fn lists_take_no_ranges() {
        assert!(err("1-5,7 * * * *").message.contains("inside a list"));
        assert!(Schedule::parse("1,,2 * * * *", Dialect::Pm2).is_ok());
        assert!(err("0 0 * * ,").message.contains("no value"));
    }
}
