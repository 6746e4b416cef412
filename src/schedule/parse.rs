//! Parsing one cron expression under one dialect's rules into field bitsets.
//!
//! Every rule that differs between dialects is written out here, next to the library
//! behaviour it copies; `docs/schedules.md` lists them as a table.

use super::{CronError, CronErrorKind, Dialect};
use std::ops::Range;

/// Bitset of the years a croner 7-field expression allows (1..=9999).
pub(crate) type Years = Box<[u64; 157]>;

/// A parsed expression: one bitset per field plus the calendar specials (L, W, #).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spec {
    pub sec: u64,
    pub min: u64,
    pub hour: u32,
    /// Bits 1..=31.
    pub dom: u32,
    /// Bits 1..=12.
    pub month: u16,
    /// Bits 0..=6, Sunday = 0.
    pub dow: u8,
    /// `L`: the last day of the month.
    pub dom_last: bool,
    /// `L-n` (node-cron): bit n set means "n days before the last day".
    pub dom_last_minus: u32,
    /// `nW`: bit n set means "the weekday nearest to day n".
    pub dom_nearest: u32,
    /// `LW`: the last weekday (Mon-Fri) of the month.
    pub dom_last_weekday: bool,
    /// `d#n`: bit (n-1) of entry d means "the n-th weekday d of the month".
    pub dow_nth: [u8; 7],
    /// `dL` / `d#L`: bit d means "the last weekday d of the month".
    pub dow_last: u8,
    /// croner's optional 7th field; `None` means every year.
    pub years: Option<Years>,
    /// Day-of-month AND day-of-week (true) or OR (false), as the dialect decides.
    pub day_and: bool,
    /// A "fixed-time job" in the dialect's DST rules (crontab and croner only).
    pub fixed: bool,
    /// pm2: day-of-month and day-of-week are both restricted and day-of-month has a day
    /// some month lacks, so croner 4's month-end quirk applies (see `Spec::pm2_skips`).
    pub pm2_overflow: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sec,
    Min,
    Hour,
    Dom,
    Month,
    Dow,
    Year,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sec => "second",
            Kind::Min => "minute",
            Kind::Hour => "hour",
            Kind::Dom => "day-of-month",
            Kind::Month => "month",
            Kind::Dow => "day-of-week",
            Kind::Year => "year",
        }
    }
    fn bounds(self, d: Dialect) -> (u32, u32) {
        match self {
            Kind::Sec | Kind::Min => (0, 59),
            Kind::Hour => (0, 23),
            Kind::Dom => (1, 31),
            Kind::Month => (1, 12),
            // robfig/cron v3 (Kubernetes) rejects 7; every other dialect reads it as Sunday.
            Kind::Dow if d == Dialect::Kubernetes => (0, 6),
            Kind::Dow => (0, 7),
            Kind::Year => (1, 9999),
        }
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const FULL_DAYS: [&str; 7] = [
    "SUNDAY",
    "MONDAY",
    "TUESDAY",
    "WEDNESDAY",
    "THURSDAY",
    "FRIDAY",
    "SATURDAY",
];
const FULL_MONTHS: [&str; 12] = [
    "JANUARY",
    "FEBRUARY",
    "MARCH",
    "APRIL",
    "MAY",
    "JUNE",
    "JULY",
    "AUGUST",
    "SEPTEMBER",
    "OCTOBER",
    "NOVEMBER",
    "DECEMBER",
];

pub(crate) fn invalid(message: impl Into<String>, span: Range<usize>) -> CronError {
    CronError {
        kind: CronErrorKind::Invalid,
        message: message.into(),
        span,
    }
}

pub(crate) fn unsupported(
    message: impl Into<String>,
    span: Range<usize>,
    by: &[Dialect],
) -> CronError {
    CronError {
        kind: CronErrorKind::Unsupported {
            accepted_by: by.to_vec(),
        },
        message: message.into(),
        span,
    }
}

/// The macros each dialect knows, and whether their names are case-sensitive.
pub(crate) fn macro_expansion(d: Dialect, name: &str) -> Option<&'static str> {
    let key = match d {
        // Vixie/Debian cron and robfig compare the name byte for byte.
        Dialect::Crontab | Dialect::Kubernetes => name.to_string(),
        _ => name.to_ascii_lowercase(),
    };
    let common = match key.as_str() {
        "@yearly" => Some("0 0 1 1 *"),
        "@monthly" => Some("0 0 1 * *"),
        "@weekly" => Some("0 0 * * 0"),
        "@daily" => Some("0 0 * * *"),
        "@hourly" => Some("0 * * * *"),
        _ => None,
    };
    match d {
        // npm `cron` has no @annually/@midnight but four macros of its own.
        Dialect::CronNpm => common.or(match key.as_str() {
            "@minutely" => Some("0 * * * * *"),
            "@secondly" => Some("* * * * * *"),
            "@weekdays" => Some("0 0 0 * * 1-5"),
            "@weekends" => Some("0 0 0 * * 0,6"),
            _ => None,
        }),
        _ => common.or(match key.as_str() {
            "@annually" => Some("0 0 1 1 *"),
            "@midnight" => Some("0 0 * * *"),
            _ => None,
        }),
    }
}

/// Splits on ASCII whitespace, keeping each field's byte range in the expression.
pub(crate) fn split_fields(expr: &str) -> Vec<(&str, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in expr.char_indices() {
        if c.is_ascii_whitespace() {
            if let Some(s) = start.take() {
                out.push((&expr[s..i], s..i));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((&expr[s..], s..expr.len()));
    }
    out
}

pub(crate) fn parse(expr: &str, d: Dialect) -> Result<Spec, CronError> {
    let whole = 0..expr.len();
    if d == Dialect::Pm2 {
        return super::pm2::parse(expr);
    }
    if d == Dialect::Supercronic {
        return super::supercronic::parse(expr);
    }
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        let name = trimmed.split_ascii_whitespace().next().unwrap_or(trimmed);
        let start = expr.find('@').unwrap_or(0);
        let span = start..start + name.len();
        if trimmed.len() != name.len() {
            if name == "@every" && d == Dialect::Kubernetes {
                return Err(every(expr, start));
            }
            if name == "@every" {
                return Err(invalid(
                    format!("dialect {d} has no @every (robfig/cron, so Kubernetes, has it)"),
                    span,
                ));
            }
            return Err(invalid(format!("`{name}` takes no arguments here"), whole));
        }
        let Some(exp) = macro_expansion(d, name) else {
            let msg = if name.eq_ignore_ascii_case("@reboot") {
                format!("{name} runs at boot, not on a schedule: it has no slots")
            } else {
                format!("unknown macro `{name}` for dialect {d}")
            };
            return Err(invalid(msg, span));
        };
        // A macro's expansion cannot fail; map any error onto the macro's span anyway.
        return parse_fields(exp, d, true).map_err(|mut e| {
            e.span = span.clone();
            e
        });
    }
    parse_fields(expr, d, false)
}

/// `@every D` as robfig/cron reads it: the rest of the expression is one Go duration
/// (`time.ParseDuration`), rounded up to at least one second.
fn every(expr: &str, start: usize) -> CronError {
    let arg_at = start + "@every ".len();
    let arg = expr.get(arg_at..).unwrap_or("").trim_end();
    match go_duration(arg) {
        Some(nanos) => {
            let secs = (nanos / 1_000_000_000).max(1);
            let every = jiff::SignedDuration::from_secs(i64::try_from(secs).unwrap_or(i64::MAX));
            CronError {
                kind: CronErrorKind::Interval { every },
                message: format!(
                    "`@every {arg}` runs every {arg} counted from when the controller started, \
                     not from the clock"
                ),
                span: start..arg_at + arg.len(),
            }
        }
        None => invalid(
            format!("`{arg}` is not a Go duration (like `90s`, `15m` or `1h30m`)"),
            arg_at.min(expr.len())..expr.len(),
        ),
    }
}

/// Nanoseconds of a Go `time.ParseDuration` string, or `None` where Go refuses it
/// (negative durations count as zero: robfig then runs every second).
pub(crate) fn go_duration(s: &str) -> Option<u128> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    if !total.is_finite() || total > 9.3e18 {
        return None;
    }
    Some(if neg { 0 } else { total as u128 })
}

fn parse_fields(expr: &str, d: Dialect, from_macro: bool) -> Result<Spec, CronError> {
    let fields = split_fields(expr);
    let n = fields.len();
    let whole = 0..expr.len();
    if let Some((first, span)) = fields.first()
        && let Some(eq) = first.find('=')
        && matches!(&first[..eq], "CRON_TZ" | "TZ")
    {
        return Err(invalid(
            format!(
                "a `{}=` prefix is not part of a {d} schedule (only robfig/cron, so Kubernetes, \
                 reads it); set the job's timezone instead",
                &first[..eq]
            ),
            span.clone(),
        ));
    }
    let seconds_dialects = [
        Dialect::NodeCron,
        Dialect::CronNpm,
        Dialect::Pm2,
        Dialect::Croner,
    ];
    let allowed: &[usize] = match d {
        Dialect::Crontab | Dialect::Kubernetes => &[5],
        Dialect::NodeCron | Dialect::CronNpm | Dialect::Pm2 => &[5, 6],
        Dialect::Croner | Dialect::Supercronic => &[5, 6, 7],
    };
    if !allowed.contains(&n) {
        let counts: Vec<String> = allowed.iter().map(usize::to_string).collect();
        let allowed = match counts.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        if n == 6 {
            let span = fields.first().map(|f| f.1.clone()).unwrap_or(whole);
            return Err(unsupported(
                format!("dialect {d} has no seconds field: it takes 5 fields, this has 6"),
                span,
                &seconds_dialects,
            ));
        }
        if n == 7 && d != Dialect::Croner {
            let span = fields.first().map(|f| f.1.clone()).unwrap_or(whole);
            return Err(unsupported(
                format!("dialect {d} takes {allowed} fields, this has 7 (seconds and year)"),
                span,
                &[Dialect::Croner],
            ));
        }
        return Err(invalid(
            format!("dialect {d} takes {allowed} fields, this has {n}"),
            whole,
        ));
    }
    let has_sec = n >= 6;
    let off = usize::from(has_sec);
    let get = |i: usize| fields.get(i).cloned().unwrap_or(("", whole.clone()));
    let (sec_t, sec_s) = if has_sec { get(0) } else { ("0", 0..0) };
    let (min_t, min_s) = get(off);
    let (hour_t, hour_s) = get(off + 1);
    let (dom_t, dom_s) = get(off + 2);
    let (mon_t, mon_s) = get(off + 3);
    let (dow_t, dow_s) = get(off + 4);

    let sec = parse_field(sec_t, sec_s, Kind::Sec, d)?;
    let min = parse_field(min_t, min_s.clone(), Kind::Min, d)?;
    let hour = parse_field(hour_t, hour_s.clone(), Kind::Hour, d)?;
    let dom = parse_field(dom_t, dom_s.clone(), Kind::Dom, d)?;
    let month = parse_field(mon_t, mon_s.clone(), Kind::Month, d)?;
    let (dow_text, plus) = match dow_t.strip_prefix('+') {
        Some(rest) if d == Dialect::Croner => {
            if rest.is_empty() {
                return Err(invalid("day-of-week is empty after `+`", dow_s));
            }
            (rest, true)
        }
        _ => (dow_t, false),
    };
    let dow_span = if plus {
        dow_s.start + 1..dow_s.end
    } else {
        dow_s.clone()
    };
    let dow = parse_field(dow_text, dow_span, Kind::Dow, d)?;
    let years = if n == 7 {
        let (t, s) = get(6);
        let y = parse_field(t, s, Kind::Year, d)?;
        if t == "*" { None } else { y.years }
    } else {
        None
    };

    // Day-of-week bits 0..=7 fold 7 onto Sunday.
    let dow_bits = ((dow.bits & 0x7f) | ((dow.bits >> 7) & 1)) as u8;
    let dom_bits = dom.bits as u32;
    let month_bits = month.bits as u16;

    let day_and = match d {
        // Debian cron: AND when either field starts with `*` (so `*/2` too).
        Dialect::Crontab => dom_t.starts_with('*') || dow_t.starts_with('*'),
        // robfig: AND when either field has the star bit (`*`, `?`, `*/1`).
        Dialect::Kubernetes => dom.star || dow.star,
        Dialect::NodeCron | Dialect::Pm2 => true,
        // npm `cron`: OR only when both fields leave out some value.
        Dialect::CronNpm => dom_bits.count_ones() == 31 || dow_bits.count_ones() == 7,
        // croner: AND with `+`, or when either field is literally `*`/`?`.
        Dialect::Croner => plus || is_star(dom_t) || is_star(dow_text),
        // Read by `supercronic::parse`; never reached.
        Dialect::Supercronic => dom.star || dow.star,
    };

    // cronsim (crontab) and node-cron refuse a day that no chosen month has.
    let impossible = dom_bits != 0
        && !dom.special
        && (1..=12u32)
            .filter(|m| month_bits & (1 << m) != 0)
            .all(|m| u64::from(dom_bits) & ((2u64 << max_days(m)) - 1) == 0);
    if impossible && ((d == Dialect::Crontab && day_and) || d == Dialect::NodeCron) {
        return Err(invalid(
            format!("day-of-month `{dom_t}` does not occur in month `{mon_t}`"),
            dom_s.start..mon_s.end,
        ));
    }

    let fixed = match d {
        // Debian cron: minute and hour fields that do not start with `*`.
        Dialect::Crontab => !from_macro_wild(min_t) && !from_macro_wild(hour_t),
        // croner (fixedTimeRule "single-value"): one value each in seconds, minutes, hours.
        Dialect::Croner => [(sec_t, sec.bits), (min_t, min.bits), (hour_t, hour.bits)]
            .iter()
            .all(|(t, b)| {
                !t.contains('*') && !t.contains('?') && !t.contains('/') && b.count_ones() == 1
            }),
        _ => false,
    };
    let _ = from_macro;

    Ok(Spec {
        sec: sec.bits,
        min: min.bits,
        hour: hour.bits as u32,
        dom: dom_bits,
        month: month_bits,
        dow: dow_bits,
        dom_last: dom.last,
        dom_last_minus: dom.last_minus,
        dom_nearest: dom.nearest,
        dom_last_weekday: dom.last_weekday,
        dow_nth: dow.nth,
        dow_last: dow.dow_last,
        years,
        day_and,
        fixed,
        pm2_overflow: false,
    })
}

fn from_macro_wild(t: &str) -> bool {
    t.starts_with('*')
}

fn is_star(t: &str) -> bool {
    t == "*" || t == "?"
}

/// The most days month `m` can have (February: 29).
fn max_days(m: u32) -> u32 {
    match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[derive(Default)]
struct Field {
    bits: u64,
    /// robfig's star bit: some part is `*` or `?` with a step of at most 1.
    star: bool,
    /// The field uses L/W/#, so "impossible day" checks do not apply.
    special: bool,
    last: bool,
    last_minus: u32,
    nearest: u32,
    last_weekday: bool,
    nth: [u8; 7],
    dow_last: u8,
    years: Option<Years>,
}

impl Field {
    fn set(&mut self, kind: Kind, v: u32) {
        set_value(&mut self.bits, &mut self.years, kind == Kind::Year, v);
    }
}

/// Adds `v` to a field's set: a bit of `bits`, or of the year bitmap (made on first use)
/// when the field is a year.
pub(super) fn set_value(bits: &mut u64, years: &mut Option<Years>, year: bool, v: u32) {
    if year {
        let y = years.get_or_insert_with(|| Box::new([0u64; 157]));
        if let Some(w) = y.get_mut((v / 64) as usize) {
            *w |= 1 << (v % 64);
        }
    } else if v < 64 {
        *bits |= 1 << v;
    }
}

pub(crate) const LWH_DIALECTS: [Dialect; 2] = [Dialect::NodeCron, Dialect::Croner];

fn parse_field(text: &str, span: Range<usize>, kind: Kind, d: Dialect) -> Result<Field, CronError> {
    let mut f = Field::default();
    if text.is_empty() {
        return Err(invalid(format!("empty {} field", kind.name()), span));
    }
    // node-cron reads `?` only as a whole day field.
    if d == Dialect::NodeCron && text == "?" && matches!(kind, Kind::Dom | Kind::Dow) {
        let (lo, hi) = kind.bounds(d);
        for v in lo..=hi.min(if kind == Kind::Dow { 6 } else { hi }) {
            f.set(kind, v);
        }
        f.star = true;
        return Ok(f);
    }
    // A whole day-of-month `L` is the one special that PM2's croner 4 takes too.
    if kind == Kind::Dom && text.eq_ignore_ascii_case("L") && !LWH_DIALECTS.contains(&d) {
        return Err(unsupported(
            format!(
                "`{text}` (L, W or #) in the {} field is not accepted by dialect {d}",
                kind.name()
            ),
            span,
            &[Dialect::NodeCron, Dialect::Pm2, Dialect::Croner],
        ));
    }
    let mut pos = span.start;
    for part in text.split(',') {
        let pspan = pos..pos + part.len();
        pos += part.len() + 1;
        parse_part(part, pspan, kind, d, &mut f)?;
    }
    Ok(f)
}

fn parse_part(
    part: &str,
    span: Range<usize>,
    kind: Kind,
    d: Dialect,
    f: &mut Field,
) -> Result<(), CronError> {
    let what = kind.name();
    if part.is_empty() {
        return Err(invalid(
            format!("empty list item in the {what} field"),
            span,
        ));
    }
    let upper = part.to_ascii_uppercase();
    // Calendar specials: L, W and # (node-cron and croner only).
    if matches!(kind, Kind::Dom | Kind::Dow) && looks_special(&upper, kind) {
        if !LWH_DIALECTS.contains(&d) {
            return Err(unsupported(
                format!("`{part}` (L, W or #) in the {what} field is not accepted by dialect {d}"),
                span,
                &LWH_DIALECTS,
            ));
        }
        f.special = true;
        return parse_special(&upper, span, kind, d, f);
    }
    let (base, step) = match upper.split_once('/') {
        Some((b, s)) => {
            let step: u32 = s.parse().map_err(|_| {
                invalid(format!("bad step `{s}` in the {what} field"), span.clone())
            })?;
            if step == 0 {
                return Err(invalid(format!("step 0 in the {what} field"), span));
            }
            (b, Some(step))
        }
        None => (upper.as_str(), None),
    };
    let (lo_b, hi_b) = kind.bounds(d);
    let (lo_all, hi_all) = if kind == Kind::Dow {
        (0, 6)
    } else {
        (lo_b, hi_b)
    };
    let star = base == "*" || (base == "?" && matches!(d, Dialect::Kubernetes | Dialect::Croner));
    let (lo, hi) = if star {
        if step.unwrap_or(1) <= 1 {
            f.star = true;
        }
        (lo_all, hi_all)
    } else if base == "?" {
        return Err(invalid(format!("`?` is not accepted by dialect {d}"), span));
    } else if let Some((a, b)) = base.split_once('-') {
        let a = value(a, kind, d, &span)?;
        let b = value(b, kind, d, &span)?;
        (a, b)
    } else {
        let a = value(base, kind, d, &span)?;
        match step {
            // `5/15`: robfig, npm `cron` and Debian cron read "from 5 to the end".
            Some(_) if matches!(d, Dialect::Crontab | Dialect::Kubernetes | Dialect::CronNpm) => {
                (a, hi_b)
            }
            Some(_) => {
                return Err(invalid(
                    format!("`{part}`: dialect {d} needs `*/step` or `a-b/step`"),
                    span,
                ));
            }
            None => (a, a),
        }
    };
    // croner refuses a step larger than the field.
    if let Some(s) = step
        && d == Dialect::Croner
        && s > hi_all - lo_all + 1 + u32::from(kind == Kind::Dom || kind == Kind::Month)
    {
        return Err(invalid(
            format!("step {s} is larger than the {what} field"),
            span,
        ));
    }
    let step = step.unwrap_or(1);
    if lo > hi {
        // node-cron wraps a range that runs past the end (`22-2` in hours).
        if d == Dialect::NodeCron {
            let size = hi_b - lo_b + 1;
            let span_len = (hi + size - lo) % size;
            let mut o = 0;
            while o <= span_len {
                let mut v = lo + o;
                if v > hi_b {
                    v -= size;
                }
                f.set(kind, v);
                let Some(n) = o.checked_add(step) else { break };
                o = n;
            }
            return Ok(());
        }
        return Err(invalid(
            format!("range `{part}` runs backwards in the {what} field"),
            span,
        ));
    }
    let mut v = lo;
    while v <= hi {
        f.set(kind, v);
        let Some(n) = v.checked_add(step) else { break };
        v = n;
    }
    Ok(())
}

fn looks_special(upper: &str, kind: Kind) -> bool {
    match kind {
        Kind::Dom => upper == "L" || upper.starts_with("L-") || upper.ends_with('W'),
        Kind::Dow => {
            upper.contains('#')
                || (upper.ends_with('L')
                    && upper.len() > 1
                    && !DAYS.iter().any(|n| upper.ends_with(n)))
        }
        _ => false,
    }
}

fn parse_special(
    upper: &str,
    span: Range<usize>,
    kind: Kind,
    d: Dialect,
    f: &mut Field,
) -> Result<(), CronError> {
    let bad = |m: String| invalid(m, span.clone());
    if kind == Kind::Dom {
        if upper == "L" {
            f.last = true;
        } else if upper == "LW" {
            f.last_weekday = true;
        } else if let Some(n) = upper.strip_prefix("L-") {
            if d != Dialect::NodeCron {
                return Err(bad(format!("`{upper}`: dialect {d} has no L-n")));
            }
            let n: u32 = n.parse().map_err(|_| bad(format!("bad `{upper}`")))?;
            if !(1..=30).contains(&n) {
                return Err(bad(format!("`{upper}`: n must be 1-30")));
            }
            f.last_minus |= 1 << n;
        } else if let Some(n) = upper.strip_suffix('W') {
            let n: u32 = n.parse().map_err(|_| bad(format!("bad `{upper}`")))?;
            if !(1..=31).contains(&n) {
                return Err(bad(format!("`{upper}`: day must be 1-31")));
            }
            f.nearest |= 1 << n;
        } else {
            return Err(bad(format!("bad day-of-month `{upper}`")));
        }
        return Ok(());
    }
    // Day of week: `d#n`, `d#L` (croner), `dL`.
    let (day, nth) = if let Some((a, b)) = upper.split_once('#') {
        (a, b)
    } else if let Some(a) = upper.strip_suffix('L') {
        (a, "L")
    } else {
        return Err(bad(format!("bad day-of-week `{upper}`")));
    };
    let day = if let Some(i) = DAYS.iter().position(|n| *n == day) {
        if d == Dialect::NodeCron && nth == "L" && upper.contains('#') {
            return Err(bad(format!("`{upper}`: node-cron has no #L")));
        }
        i as u32
    } else {
        let v: u32 = day
            .parse()
            .map_err(|_| bad(format!("bad weekday in `{upper}`")))?;
        if v > 7 {
            return Err(bad(format!("weekday {v} is out of range 0-7")));
        }
        v % 7
    };
    if d == Dialect::NodeCron && nth == "L" && upper.contains('#') {
        return Err(bad(format!("`{upper}`: node-cron has no #L")));
    }
    if nth == "L" {
        f.dow_last |= 1 << day;
    } else {
        let n: u32 = nth
            .parse()
            .map_err(|_| bad(format!("bad `#` in `{upper}`")))?;
        if !(1..=5).contains(&n) {
            return Err(bad(format!("`{upper}`: the n-th weekday must be 1-5")));
        }
        if let Some(slot) = f.nth.get_mut(day as usize) {
            *slot |= 1 << (n - 1);
        }
    }
    Ok(())
}

/// One number or name, checked against the field's bounds.
fn value(t: &str, kind: Kind, d: Dialect, span: &Range<usize>) -> Result<u32, CronError> {
    let (lo, hi) = kind.bounds(d);
    let what = kind.name();
    if let Ok(v) = t.parse::<u32>() {
        if v < lo || v > hi {
            return Err(invalid(
                format!("{v} is out of range {lo}-{hi} for {what}"),
                span.clone(),
            ));
        }
        return Ok(v);
    }
    let names: &[&str] = match kind {
        Kind::Month => &MONTHS,
        Kind::Dow => &DAYS,
        _ => &[],
    };
    let base = if kind == Kind::Month { 1 } else { 0 };
    if let Some(i) = names.iter().position(|n| *n == t) {
        return Ok(i as u32 + base);
    }
    // node-cron also replaces full names (`monday`, `january`).
    if d == Dialect::NodeCron {
        let full: &[&str] = match kind {
            Kind::Month => &FULL_MONTHS,
            Kind::Dow => &FULL_DAYS,
            _ => &[],
        };
        if let Some(i) = full.iter().position(|n| *n == t) {
            return Ok(i as u32 + base);
        }
    }
    Err(invalid(
        format!("`{t}` is not a valid {what}"),
        span.clone(),
    ))
}
