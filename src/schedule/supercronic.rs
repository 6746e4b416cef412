//! The `supercronic` dialect: the cronexpr that aptible/supercronic vendors in-tree
//! (`cronexpr/cronexpr_parse.go`, `cronexpr/cronexpr.go`, a fork of gorhill/cronexpr),
//! read field by field as its `parse` and field handlers read it.
//!
//! - 5, 6 or 7 fields (`parse`): 5 is minute..day-of-week; 6 is those five and a **year**
//!   (the seconds field is only present with 7, otherwise `secondList = [0]`); 7 is
//!   seconds..year. More than 7 is an error (`ParseStrict`, as supercronic calls it).
//! - Macros (`cronNormalizer`): `@yearly @annually @monthly @weekly @daily @hourly`,
//!   lowercase only; no `@reboot`, no `@every`.
//! - Every field takes `*` and `?` (`layoutWildcard`), values, `a-b`, `*/n`, `a/n` (a to the
//!   field's end), `a-b/n`. Items are read case-insensitively (`strings.ToLower`); empty
//!   list items are skipped (`entryFinder` is `[^,]+`).
//! - Values are matched by each field's `valuePattern` and converted with a token table:
//!   one leading zero is allowed (`05`); years are 1970-2099. Day-of-week has `7` for
//!   Sunday but its table has no `00`..`07`, so those read as 0 (Sunday) although the
//!   pattern accepts them; for the same reason `5-7` is a backwards range (an error) and
//!   `0-7` is Sunday alone. Steps go through the number table too: a step above the
//!   field's maximum, or one the table lacks (`60`, `007`), is an error.
//! - Day-of-month `L`, `LW`, `nW`; day-of-week `nL` (last weekday n) and `n#k` (k 1-5).
//! - Day-of-month and day-of-week (`calculateActualDaysOfMonth`): a field is restricted
//!   unless one of its items is `*` or `?` (so `*/1` is restricted); both restricted is OR,
//!   one restricted is that one alone.
//! - `genericFieldHandler` returns the whole field at the first `*` item, before later
//!   items are looked at; an item it cannot read before that is an error.

use super::CronError;
use super::parse::{Spec, Years, invalid, split_fields};
use std::ops::Range;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Sec,
    Min,
    Hour,
    Dom,
    Month,
    Dow,
    Year,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Sec => "second",
            Field::Min => "minute",
            Field::Hour => "hour",
            Field::Dom => "day-of-month",
            Field::Month => "month",
            Field::Dow => "day-of-week",
            Field::Year => "year",
        }
    }

    /// `min` and `max` of the field's descriptor (day-of-week's max is 6).
    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Sec | Field::Min => (0, 59),
            Field::Hour => (0, 23),
            Field::Dom => (1, 31),
            Field::Month => (1, 12),
            Field::Dow => (0, 6),
            Field::Year => (1970, 2099),
        }
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const FULL_MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const FULL_DAYS: [&str; 7] = [
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];

/// `numberTokens`: `0`-`59`, `00`-`09`, `1970`-`2099`; anything else is 0 (a Go map's
/// zero value).
fn number_token(s: &str) -> u32 {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    let v: u32 = s.parse().unwrap_or(0);
    match s.len() {
        1 => v,
        2 if v <= 59 => v,
        4 if (1970..=2099).contains(&v) => v,
        _ => 0,
    }
}

/// Whether `s` matches the field's `valuePattern` (the whole item).
fn matches_value(s: &str, f: Field) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match f {
        // `0?[0-9]|[1-5][0-9]`
        Field::Sec | Field::Min => {
            digits(s) && s.len() <= 2 && s.parse::<u32>().is_ok_and(|v| v <= 59)
        }
        // `0?[0-9]|1[0-9]|2[0-3]`
        Field::Hour => digits(s) && s.len() <= 2 && s.parse::<u32>().is_ok_and(|v| v <= 23),
        // `0?[1-9]|[12][0-9]|3[01]`
        Field::Dom => {
            digits(s) && s.len() <= 2 && s.parse::<u32>().is_ok_and(|v| (1..=31).contains(&v))
        }
        // `0?[1-9]|1[012]|` names
        Field::Month => {
            (digits(s) && s.len() <= 2 && s.parse::<u32>().is_ok_and(|v| (1..=12).contains(&v)))
                || MONTHS.contains(&s)
                || FULL_MONTHS.contains(&s)
        }
        // `0?[0-7]|` names
        Field::Dow => {
            (digits(s) && s.len() <= 2 && s.parse::<u32>().is_ok_and(|v| v <= 7))
                || DAYS.contains(&s)
                || FULL_DAYS.contains(&s)
        }
        // `19[789][0-9]|20[0-9]{2}`
        Field::Year => {
            digits(s) && s.len() == 4 && s.parse::<u32>().is_ok_and(|v| (1970..=2099).contains(&v))
        }
    }
}

/// The field's `atoi` on a value that matched its pattern.
fn atoi(s: &str, f: Field) -> u32 {
    match f {
        Field::Month => MONTHS
            .iter()
            .position(|m| *m == s)
            .or_else(|| FULL_MONTHS.iter().position(|m| *m == s))
            .map_or_else(|| s.parse::<u32>().unwrap_or(0), |i| i as u32 + 1),
        // `dowTokens`: `0`-`7` (7 is Sunday) and names; `00`-`07` are not in the table.
        Field::Dow => {
            if let Some(i) = DAYS
                .iter()
                .position(|d| *d == s)
                .or_else(|| FULL_DAYS.iter().position(|d| *d == s))
            {
                return i as u32;
            }
            if s.len() == 1 {
                s.parse::<u32>().map_or(0, |v| v % 7)
            } else {
                0
            }
        }
        _ => number_token(s),
    }
}

/// One list item as `genericFieldParse` reads it.
enum Item {
    All,
    One(u32),
    Span(u32, u32, u32),
    /// No generic layout matched: the day fields' specials, else an error.
    Other,
}

fn item(s: &str, f: Field, span: &Range<usize>) -> Result<Item, CronError> {
    let (lo, hi) = f.bounds();
    if s == "*" || s == "?" {
        return Ok(Item::All);
    }
    if matches_value(s, f) {
        return Ok(Item::One(atoi(s, f)));
    }
    let step_of = |t: &str| -> Result<u32, CronError> {
        let n = number_token(t);
        if n < 1 || n > hi {
            return Err(invalid(
                format!("invalid interval `{s}` in the {} field", f.name()),
                span.clone(),
            ));
        }
        Ok(n)
    };
    let is_step = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = s.split_once('-')
        && !b.contains('/')
        && matches_value(a, f)
        && matches_value(b, f)
    {
        let (a, b) = (atoi(a, f), atoi(b, f));
        if b < a {
            return Err(invalid(
                format!(
                    "range `{s}` runs backwards in the {} field (read as {a}-{b})",
                    f.name()
                ),
                span.clone(),
            ));
        }
        return Ok(Item::Span(a, b, 1));
    }
    if let Some(step) = s.strip_prefix("*/")
        && is_step(step)
    {
        return Ok(Item::Span(lo, hi, step_of(step)?));
    }
    if let Some((a, step)) = s.split_once('/')
        && is_step(step)
    {
        if matches_value(a, f) {
            return Ok(Item::Span(atoi(a, f), hi, step_of(step)?));
        }
        if let Some((x, y)) = a.split_once('-')
            && matches_value(x, f)
            && matches_value(y, f)
        {
            return Ok(Item::Span(atoi(x, f), atoi(y, f), step_of(step)?));
        }
    }
    Ok(Item::Other)
}

#[derive(Default)]
struct Parsed {
    bits: u64,
    years: Option<Years>,
    /// No `*`/`?` item (day fields only).
    restricted: bool,
    last: bool,
    last_weekday: bool,
    nearest: u32,
    nth: [u8; 7],
    dow_last: u8,
}

impl Parsed {
    fn set(&mut self, f: Field, v: u32) {
        super::parse::set_value(&mut self.bits, &mut self.years, f == Field::Year, v);
    }

    fn fill(&mut self, f: Field, a: u32, b: u32, step: u32) {
        let mut v = a;
        while v <= b {
            self.set(f, v);
            v += step;
        }
    }
}

fn field(text: &str, span: Range<usize>, f: Field) -> Result<Parsed, CronError> {
    let mut p = Parsed {
        restricted: true,
        ..Parsed::default()
    };
    let lower = text.to_ascii_lowercase();
    let mut pos = span.start;
    let mut any = false;
    let mut items = Vec::new();
    for part in lower.split(',') {
        let pspan = pos..pos + part.len();
        pos += part.len() + 1;
        if part.is_empty() {
            continue;
        }
        any = true;
        items.push((part.to_owned(), pspan));
    }
    if !any {
        return Err(invalid(
            format!("{} field: missing directive", f.name()),
            span,
        ));
    }
    let generic = !matches!(f, Field::Dom | Field::Dow);
    // `genericFieldParse` reads every item first (only backwards ranges and bad steps fail
    // there), then the handler walks them.
    let parsed: Vec<(Item, String, Range<usize>)> = items
        .into_iter()
        .map(|(s, sp)| item(&s, f, &sp).map(|i| (i, s, sp)))
        .collect::<Result<_, _>>()?;
    for (it, s, sp) in parsed {
        match it {
            Item::All if generic => {
                // The descriptor's default list (for years, 1970-2099).
                let (lo, hi) = f.bounds();
                let mut all = Parsed::default();
                all.fill(f, lo, hi, 1);
                return Ok(all);
            }
            Item::All => {
                let (lo, hi) = f.bounds();
                p.fill(f, lo, hi, 1);
                p.restricted = false;
            }
            Item::One(v) => p.set(f, v),
            Item::Span(a, b, step) => p.fill(f, a, b, step),
            Item::Other => special(&s, sp, f, &mut p)?,
        }
    }
    Ok(p)
}

/// Day-of-month `l`, `lw`, `nw`; day-of-week `nl`, `n#k`.
fn special(s: &str, span: Range<usize>, f: Field, p: &mut Parsed) -> Result<(), CronError> {
    let bad = || {
        invalid(
            format!("syntax error in the {} field: `{s}`", f.name()),
            span.clone(),
        )
    };
    match f {
        Field::Dom => {
            if s == "l" {
                p.last = true;
            } else if s == "lw" {
                p.last_weekday = true;
            } else if let Some(n) = s.strip_suffix('w')
                && matches_value(n, Field::Dom)
            {
                p.nearest |= 1 << atoi(n, Field::Dom);
            } else {
                return Err(bad());
            }
        }
        Field::Dow => {
            if let Some(n) = s.strip_suffix('l')
                && matches_value(n, Field::Dow)
            {
                p.dow_last |= 1 << atoi(n, Field::Dow);
            } else if let Some((n, k)) = s.split_once('#')
                && matches_value(n, Field::Dow)
                && matches!(k, "1" | "2" | "3" | "4" | "5")
            {
                let d = atoi(n, Field::Dow) as usize;
                let k: u32 = k.parse().unwrap_or(1);
                if let Some(slot) = p.nth.get_mut(d) {
                    *slot |= 1 << (k - 1);
                }
            } else {
                return Err(bad());
            }
        }
        _ => {
            return Err(invalid(
                format!("syntax error in the {} field: `{s}`", f.name()),
                span,
            ));
        }
    }
    Ok(())
}

/// The macro's expansion (`cronNormalizer`, which replaces the name anywhere in the line).
fn expand(expr: &str) -> Option<String> {
    const MACROS: [(&str, &str); 6] = [
        ("@yearly", "0 0 0 1 1 * *"),
        ("@annually", "0 0 0 1 1 * *"),
        ("@monthly", "0 0 0 1 * * *"),
        ("@weekly", "0 0 0 * * 0 *"),
        ("@daily", "0 0 0 * * * *"),
        ("@hourly", "0 0 * * * * *"),
    ];
    let mut out = expr.to_owned();
    let mut changed = false;
    for (name, exp) in MACROS {
        if out.contains(name) {
            out = out.replace(name, exp);
            changed = true;
        }
    }
    changed.then_some(out)
}

pub(crate) fn parse(expr: &str) -> Result<Spec, CronError> {
    let whole = 0..expr.len();
    if let Some(expanded) = expand(expr) {
        // Spans of an expansion point at the whole expression.
        return parse_fields(&expanded).map_err(|mut e| {
            e.span = whole.clone();
            e
        });
    }
    if let Some(at) = expr.trim_start().strip_prefix('@') {
        let name = at.split_ascii_whitespace().next().unwrap_or(at);
        let msg = if name == "reboot" {
            "supercronic has no @reboot (cronexpr refuses it, so supercronic refuses the whole \
             crontab)"
                .to_owned()
        } else {
            format!("unknown macro `@{name}` for dialect supercronic")
        };
        return Err(invalid(msg, whole));
    }
    parse_fields(expr)
}

fn parse_fields(expr: &str) -> Result<Spec, CronError> {
    let fields = split_fields(expr);
    let n = fields.len();
    let whole = 0..expr.len();
    if n < 5 {
        return Err(invalid(
            format!("dialect supercronic takes 5, 6 or 7 fields, this has {n} (missing field(s))"),
            whole,
        ));
    }
    if n > 7 {
        return Err(invalid(
            format!("dialect supercronic takes 5, 6 or 7 fields, this has {n} (too many fields)"),
            whole,
        ));
    }
    let get = |i: usize| fields.get(i).cloned().unwrap_or(("", whole.clone()));
    let off = usize::from(n == 7);
    let sec = if n == 7 {
        let (t, s) = get(0);
        field(t, s, Field::Sec)?.bits
    } else {
        1
    };
    let (t, s) = get(off);
    let min = field(t, s, Field::Min)?;
    let (t, s) = get(off + 1);
    let hour = field(t, s, Field::Hour)?;
    let (t, s) = get(off + 2);
    let dom = field(t, s, Field::Dom)?;
    let (t, s) = get(off + 3);
    let month = field(t, s, Field::Month)?;
    let (t, s) = get(off + 4);
    let dow = field(t, s, Field::Dow)?;
    let years = if n >= 6 {
        let (t, s) = get(off + 5);
        field(t, s.clone(), Field::Year)?.years
    } else {
        None
    };
    for (what, bits, (t, s)) in [
        ("second", if n == 7 { sec } else { 1 }, get(0)),
        ("minute", min.bits, get(off)),
        ("hour", hour.bits, get(off + 1)),
        ("month", month.bits, get(off + 3)),
    ] {
        if bits == 0 {
            // An empty list (`30-10/5`) makes cronexpr index an empty slice: supercronic
            // panics on the first `Next`.
            return Err(invalid(
                format!("the {what} field `{t}` allows no value (cronexpr would crash on it)"),
                s,
            ));
        }
    }
    if n >= 6 && years.is_none() {
        let (t, s) = get(off + 5);
        return Err(invalid(format!("the year field `{t}` allows no value"), s));
    }
    let day_and = !(dom.restricted && dow.restricted);
    Ok(Spec {
        sec,
        min: min.bits,
        hour: hour.bits as u32,
        dom: dom.bits as u32,
        month: month.bits as u16,
        dow: (dow.bits & 0x7f) as u8,
        dom_last: dom.last,
        dom_last_minus: 0,
        dom_nearest: dom.nearest,
        dom_last_weekday: dom.last_weekday,
        dow_nth: dow.nth,
        dow_last: dow.dow_last,
        years: Some(years.unwrap_or_else(default_years)),
        day_and,
        fixed: false,
        pm2_overflow: false,
    })
}

/// cronexpr's `yearDefaultList`: 1970-2099. After 2099 nothing fires.
fn default_years() -> Years {
    let mut y: Years = Box::new([0u64; 157]);
    for v in 1970u32..=2099 {
        if let Some(w) = y.get_mut((v / 64) as usize) {
            *w |= 1 << (v % 64);
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(e: &str) -> Spec {
        parse(e).unwrap_or_else(|err| panic!("{e}: {err}"))
    }

    #[test]
    fn six_fields_end_in_a_year() {
        let s = ok("0 3 * * * 2019");
        assert_eq!(s.sec, 1);
        assert_eq!(s.min, 1);
        let y = s.years.expect("years");
        assert_ne!(y[(2019 / 64) as usize] & (1 << (2019 % 64)), 0);
        assert_eq!(y[(2026 / 64) as usize] & (1 << (2026 % 64)), 0);
    }

    #[test]
    fn day_of_week_quirks() {
        assert_eq!(ok("0 0 * * 07").dow, 1);
        assert_eq!(ok("0 0 * * 01").dow, 1, "01 is not in dowTokens: Sunday");
        assert_eq!(ok("0 0 * * 0-7").dow, 1);
        assert!(parse("0 0 * * 5-7").is_err());
        assert_eq!(ok("0 0 * * MON-fri").dow, 0b0011_1110);
    }

    #[test]
    fn refusals() {
        for e in [
            "0 0 * *",
            "1 2 3 4 5 6 7 8",
            "@reboot",
            "@every 1h",
            "*/60 * * * *",
            "*/7 * * * 1-3/7",
            "0 0 * * * 1969",
            "0 0 * * L",
            "0 0 * * 1#6",
            "30-10/5 * * * *",
            "0 0 1 JANUARYX *",
        ] {
            assert!(parse(e).is_err(), "{e} parses");
        }
    }

    #[test]
    fn a_star_item_ends_the_generic_field() {
        // `genericFieldHandler` returns at `*` before it looks at `x`.
        assert!(parse("*,x 0 * * *").is_ok());
        assert!(parse("x,* 0 * * *").is_err());
    }
}
