//! Slot enumeration: day by day, times from precomputed bitsets, one offset per calm day.
//!
//! A day is *calm* when no UTC-offset change falls within three hours of it: every
//! dialect then fires exactly at `local time - offset`, so a month of a minutely job costs
//! one integer subtraction per slot. Only days next to a transition take the slow path,
//! where each dialect's DST rule (SPEC 4) decides what a local time means.

use super::Dialect;
use super::parse::Spec;
use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};

const DAY: i64 = 86_400;
const MARGIN: i64 = 3 * 3600;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(crate) fn local_day_secs(date: Date) -> i64 {
    days_from_civil(
        i64::from(date.year()),
        i64::from(date.month()),
        i64::from(date.day()),
    ) * DAY
}

fn wall(date: Date, sod: u32) -> DateTime {
    let h = (sod / 3600) as i8;
    let m = ((sod / 60) % 60) as i8;
    let s = (sod % 60) as i8;
    DateTime::new(date.year(), date.month(), date.day(), h, m, s, 0)
        .unwrap_or(date.to_datetime(jiff::civil::Time::midnight()))
}

fn ts(secs: i64) -> Option<Timestamp> {
    Timestamp::from_second(secs).ok()
}

fn offset_at(tz: &TimeZone, secs: i64) -> i64 {
    ts(secs).map_or(0, |t| i64::from(tz.to_offset(t).seconds()))
}

fn local_of(tz: &TimeZone, secs: i64) -> Option<DateTime> {
    ts(secs).map(|t| tz.to_datetime(t))
}

impl Spec {
    /// Whether the schedule runs on this calendar day, under the dialect's DOM/DOW rule.
    pub(crate) fn day_matches(&self, date: Date) -> bool {
        let (y, m, d) = (date.year(), date.month() as u32, date.day() as u32);
        if self.month & (1 << m) == 0 {
            return false;
        }
        if let Some(years) = &self.years {
            let y = y as u32;
            let hit = years
                .get((y / 64) as usize)
                .is_some_and(|w| w & (1 << (y % 64)) != 0);
            if !hit {
                return false;
            }
        }
        let last = date.days_in_month() as u32;
        let wd = date.weekday().to_sunday_zero_offset() as u32;
        let mut dom = self.dom & (1 << d) != 0;
        if !dom && self.dom_last && d == last {
            dom = true;
        }
        if !dom
            && self.dom_last_minus != 0
            && last > d
            && self.dom_last_minus & (1 << (last - d)) != 0
        {
            dom = true;
        }
        if !dom && (self.dom_nearest != 0 || self.dom_last_weekday) {
            let mut bits = self.dom_nearest;
            while bits != 0 {
                let t = bits.trailing_zeros();
                bits &= bits - 1;
                if nearest_weekday(date, t, last) == Some(d) {
                    dom = true;
                    break;
                }
            }
            if !dom && self.dom_last_weekday && nearest_weekday(date, last, last) == Some(d) {
                dom = true;
            }
        }
        let mut dow = self.dow & (1 << wd) != 0;
        if !dow {
            let nth = self.dow_nth.get(wd as usize).copied().unwrap_or(0);
            if nth != 0 && nth & (1 << ((d - 1) / 7)) != 0 {
                dow = true;
            }
            if self.dow_last & (1 << wd) != 0 && d + 7 > last {
                dow = true;
            }
        }
        let _ = y;
        let hit = if self.day_and { dom && dow } else { dom || dow };
        hit && !(self.pm2_overflow && d < 12 && self.pm2_skips(date))
    }

    /// croner 4 (PM2) at a month's end: when no day of the set is left in the month, its
    /// day search lands on a day the month lacks (`31` in February), and its day-of-week
    /// loop then walks on from that day's normalised date (3 March) without looking at
    /// day-of-month again. The first days of the next month are never looked at:
    /// `0 12 */10 * SUN` does not run on Sunday 1 March 2026. This replays the chain
    /// through the previous month (as a long-running PM2 has it) and says whether `date`
    /// lies before the point where it lands.
    fn pm2_skips(&self, date: Date) -> bool {
        let Ok(prev) = date.first_of_month().yesterday() else {
            return false;
        };
        if self.month & (1 << prev.month() as u32) == 0 {
            return false;
        }
        let first = prev.first_of_month();
        let len = i32::from(prev.days_in_month());
        let dow_ok = |d: Date| self.dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        let (mut c, mut inclusive) = (1i32, true);
        for _ in 0..64 {
            let next = (c..=31).find(|&s| (inclusive || s > c) && self.dom & (1 << s) != 0);
            let Some(d) = next else { return false };
            let Ok(mut at) = first.checked_add(jiff::Span::new().days(d - 1)) else {
                return false;
            };
            let mut walked = false;
            for _ in 0..7 {
                if dow_ok(at) {
                    break;
                }
                let Ok(n) = at.tomorrow() else { return false };
                at = n;
                walked = true;
            }
            if at.month() != prev.month() {
                return date < at;
            }
            if !walked && d <= len {
                (c, inclusive) = (d, false);
            } else {
                (c, inclusive) = (i32::from(at.day()), true);
            }
        }
        false
    }
}

/// The weekday (Mon-Fri) nearest to day `target` within its month, as node-cron and croner
/// compute it (never crossing into another month).
fn nearest_weekday(date: Date, target: u32, last: u32) -> Option<u32> {
    if target < 1 || target > last {
        return None;
    }
    let first_wd = date.first_of_month().weekday().to_sunday_zero_offset() as u32;
    let wd = (first_wd + target - 1) % 7;
    Some(match wd {
        6 if target == 1 => target + 2,
        6 => target - 1,
        0 if target == last => target - 2,
        0 => target + 1,
        _ => target,
    })
}

/// A range of instants over which the zone's offset is constant.
#[derive(Clone, Copy)]
struct Calm {
    off: i64,
    from: i64,
    until: i64,
}

pub(crate) struct Engine<'a> {
    pub spec: &'a Spec,
    pub sods: &'a [u32],
    pub dialect: Dialect,
    pub tz: &'a TimeZone,
    calm: Option<Calm>,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(spec: &'a Spec, sods: &'a [u32], dialect: Dialect, tz: &'a TimeZone) -> Self {
        Engine {
            spec,
            sods,
            dialect,
            tz,
            calm: None,
        }
    }

    /// The constant offset of a calm day, or `None` when a transition is near.
    fn calm_offset(&mut self, day_local: i64) -> Option<i64> {
        let fits = |c: &Calm| {
            let s = day_local - c.off - MARGIN;
            let e = day_local - c.off + DAY + MARGIN;
            s >= c.from && e <= c.until
        };
        if let Some(c) = self.calm.filter(fits) {
            return Some(c.off);
        }
        let probe = ts(day_local)?;
        let off = i64::from(self.tz.to_offset(probe).seconds());
        // `preceding` is strict, so ask from just after the probe.
        let from = self
            .tz
            .preceding(ts(day_local + 1)?)
            .next()
            .map_or(i64::MIN / 2, |t| t.timestamp().as_second());
        let until = self
            .tz
            .following(probe)
            .next()
            .map_or(i64::MAX / 2, |t| t.timestamp().as_second());
        let c = Calm { off, from, until };
        self.calm = Some(c);
        fits(&c).then_some(off)
    }

    /// Appends the instants (Unix seconds) the dialect fires for wall-clock day `date`,
    /// sorted and without repeats.
    pub(crate) fn day_slots(&mut self, date: Date, out: &mut Vec<i64>) {
        if !self.spec.day_matches(date) {
            return;
        }
        let day_local = local_day_secs(date);
        if let Some(off) = self.calm_offset(day_local) {
            let base = day_local - off;
            out.extend(self.sods.iter().map(|&s| base + i64::from(s)));
            return;
        }
        let start = out.len();
        if self.dialect == Dialect::CronNpm {
            self.cron_npm_day(date, out);
        } else if self.dialect == Dialect::Pm2 {
            self.pm2_day(date, day_local, out);
        } else if self.dialect == Dialect::Supercronic {
            self.supercronic_day(day_local, out);
        } else {
            for &sod in self.sods {
                self.resolve(wall(date, sod), day_local + i64::from(sod), out);
            }
        }
        let mut seg = out.split_off(start.min(out.len()));
        seg.sort_unstable();
        seg.dedup();
        out.extend(seg);
    }

    /// What the dialect fires for local time `dt` (`local` = its seconds as if UTC) near a
    /// transition.
    fn resolve(&self, dt: DateTime, local: i64, out: &mut Vec<i64>) {
        let tz = self.tz;
        match tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Unambiguous { offset } => {
                out.push(local - i64::from(offset.seconds()))
            }
            AmbiguousOffset::Gap { before: _, after } => {
                let runs_late = match self.dialect {
                    Dialect::Crontab | Dialect::Croner => self.spec.fixed,
                    _ => false,
                };
                if runs_late {
                    // The first instant after the gap: the transition itself, same day only.
                    let probe = local - i64::from(after.seconds());
                    if let Some(t) = ts(probe).and_then(|p| tz.following(p).next()) {
                        let at = t.timestamp().as_second();
                        if local_of(tz, at).is_some_and(|l| l.date() == dt.date()) {
                            out.push(at);
                        }
                    }
                }
            }
            AmbiguousOffset::Fold { before, after } => {
                let earlier = local - i64::from(before.seconds());
                let later = local - i64::from(after.seconds());
                match self.dialect {
                    Dialect::Crontab | Dialect::Croner if self.spec.fixed => out.push(earlier),
                    // croner 4 builds a local `Date`, which takes the earlier instant, and
                    // chains from the last run's wall clock, so the second pass never comes.
                    Dialect::Pm2 => out.push(earlier),
                    Dialect::NodeCron => out.push(self.node_cron_instant(local)),
                    _ => {
                        out.push(earlier);
                        out.push(later);
                    }
                }
            }
        }
    }

    /// croner 4 (PM2) near a transition. Its chain finds the next matching wall-clock time;
    /// one in a gap is normalised by `Date` to `time + gap`, and the search goes on from
    /// there. So the slots in the gap are skipped and, where the gap is not a whole hour
    /// (Australia/Lord_Howe), so are the slots between the end of the gap and the first
    /// gap slot plus the gap.
    fn pm2_day(&self, date: Date, day_local: i64, out: &mut Vec<i64>) {
        let mut resume: Option<i64> = None;
        for &sod in self.sods {
            let local = day_local + i64::from(sod);
            if resume.is_some_and(|r| local < r) {
                continue;
            }
            let dt = wall(date, sod);
            if let AmbiguousOffset::Gap { before, after } =
                self.tz.to_ambiguous_timestamp(dt).offset()
            {
                let gap = i64::from(after.seconds()) - i64::from(before.seconds());
                resume.get_or_insert(local + gap);
                continue;
            }
            self.resolve(dt, local, out);
        }
    }

    /// supercronic near a transition, as its loop runs (`cron/cron.go` `startFunc`):
    /// `nextRun = expression.Next(nextRun)`, where cronexpr's `Next` finds the first
    /// matching wall-clock time strictly after `nextRun`'s own wall clock and builds it with
    /// Go's `time.Date` ([`go_instant`]). A gap time moves by the gap (west of UTC before the
    /// change, east of UTC after it); a repeated time takes one instant. A result that is not
    /// in the future makes the loop set `nextRun = now` and ask again, spinning until `Next`
    /// returns a future time. So after a gap time resolved to before the change, the loop
    /// spins until the change, and everything up to and including the change is lost; and
    /// the chain goes on from the wall clock of each run, so the other pass of a repeated
    /// hour never comes.
    fn supercronic_day(&self, day_local: i64, out: &mut Vec<i64>) {
        let tz = self.tz;
        let end = day_local + DAY;
        // The loop enters the day from just before its midnight.
        let mut from_wall = day_local - 1;
        let mut now = go_instant(tz, day_local) - 1;
        let budget = self.sods.len() + 2 * DAY as usize;
        for _ in 0..budget {
            let i = self
                .sods
                .partition_point(|&s| day_local + i64::from(s) <= from_wall);
            let Some(&sod) = self.sods.get(i) else { break };
            let wall = day_local + i64::from(sod);
            if wall >= end {
                break;
            }
            let at = go_instant(tz, wall);
            if at > now {
                out.push(at);
                now = at;
                from_wall = at + offset_at(tz, at);
            } else {
                // "job took too long": `nextRun = now`, one second later.
                now += 1;
                from_wall = now + offset_at(tz, now);
            }
        }
    }

    /// node-cron's `localTimeToTimestamp`: guess with the offset at "local as UTC", then
    /// correct once. In a repeated hour this picks the earlier instant west of UTC and the
    /// later one east of it.
    fn node_cron_instant(&self, local: i64) -> i64 {
        let tz = self.tz;
        let off1 = offset_at(tz, local);
        let c1 = local - off1;
        let off2 = offset_at(tz, c1);
        if off1 == off2 {
            return c1;
        }
        let c2 = local - off2;
        let reads_back = |c: i64| {
            local_of(tz, c).map(|d| local_day_secs(d.date()) + secs_of_day(d)) == Some(local)
        };
        if reads_back(c1) {
            c1
        } else if reads_back(c2) {
            c2
        } else {
            c1.max(c2)
        }
    }

    /// npm `cron` near a transition: its own `getNextDateFrom`, chained from the start of
    /// the day as the library chains it from each fire time.
    fn cron_npm_day(&self, date: Date, out: &mut Vec<i64>) {
        let tz = self.tz;
        let day_start = tz
            .to_ambiguous_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
            .compatible()
            .map_or(local_day_secs(date), |t| t.as_second());
        let mut t = day_start - 1;
        // At most one fire per scheduled second of the day, plus the repeated hour.
        for _ in 0..self.sods.len() * 2 + 8 {
            let Some((at, wdate)) = self.cron_npm_next(t) else {
                break;
            };
            if wdate != date || at <= t {
                break;
            }
            out.push(at);
            t = at;
        }
    }

    /// A port of npm `cron` 4.4 `CronTime.getNextDateFrom(start)`: search wall-clock time,
    /// convert as luxon does, then its DST adjustments.
    fn cron_npm_next(&self, start: i64) -> Option<(i64, Date)> {
        let tz = self.tz;
        let start_wall = local_of(tz, start)?;
        let (wdate, sod) = self.next_wall_after(start_wall)?;
        let local = local_day_secs(wdate) + i64::from(sod);
        // luxon: a gap time moves forward by the gap; a repeated time takes the offset
        // luxon guessed at process start, which is standard time (the later instant) for a
        // process started in winter. See docs/schedules.md.
        let mut date = match tz.to_ambiguous_timestamp(wall(wdate, sod)).offset() {
            AmbiguousOffset::Unambiguous { offset } => local - i64::from(offset.seconds()),
            AmbiguousOffset::Gap { before, .. } => local - i64::from(before.seconds()),
            AmbiguousOffset::Fold { after, .. } => local - i64::from(after.seconds()),
        };
        let dl = local_of(tz, date)?;
        let (eh, em) = ((sod / 3600) as i8, ((sod / 60) % 60) as i8);
        let jan1 = tz
            .to_ambiguous_timestamp(DateTime::new(dl.year(), 1, 1, 0, 0, 0, 0).ok()?)
            .compatible()
            .ok()?;
        let ref_off = i64::from(tz.to_offset(jan1).seconds());
        if (eh != dl.hour() || em != dl.minute()) && ref_off != offset_at(tz, date) {
            let mut n = 0;
            while offset_at(tz, date - 60) != ref_off && n < 24 * 60 {
                date -= 60;
                n += 1;
            }
            return Some((date, wdate));
        }
        let hour = |s: i64| local_of(tz, s).map(|d| d.hour());
        let minute = |s: i64| local_of(tz, s).map(|d| d.minute());
        let hour_test = date - 3600;
        let two_hour = date - 7200;
        if (hour(hour_test) == hour(date) || hour(two_hour) == hour(hour_test)) && hour_test > start
        {
            date = hour_test;
        }
        let half = date - 1800;
        if (minute(half) == minute(date) || minute(hour_test) == minute(half)) && half > start {
            date = half;
        }
        Some((date, wdate))
    }

    /// The first wall-clock (date, second of day) strictly after `after` that the
    /// expression matches, ignoring zones; gives up after 30 years.
    fn next_wall_after(&self, after: DateTime) -> Option<(Date, u32)> {
        let mut date = after.date();
        let after_sod = secs_of_day_u32(after);
        if self.spec.day_matches(date)
            && let Some(&s) = self.sods.iter().find(|&&s| s > after_sod)
        {
            return Some((date, s));
        }
        let first = *self.sods.first()?;
        for _ in 0..366 * 30 {
            date = date.tomorrow().ok()?;
            if self.spec.day_matches(date) {
                return Some((date, first));
            }
        }
        None
    }
}

/// Go's `time.Date` for local seconds `local` (as if UTC): the offset in force at that
/// instant taken as a guess, kept when the result still lies in the guess's period, else
/// the offset at the result (`time.go`, `Date`). So a gap time moves by the gap, towards
/// the offset of the guess, and a repeated time takes the offset of the guess.
pub(crate) fn go_instant(tz: &TimeZone, local: i64) -> i64 {
    let guess = offset_at(tz, local);
    let utc = local - guess;
    let at_utc = offset_at(tz, utc);
    if at_utc == guess { utc } else { local - at_utc }
}

fn secs_of_day(d: DateTime) -> i64 {
    i64::from(d.hour()) * 3600 + i64::from(d.minute()) * 60 + i64::from(d.second())
}

fn secs_of_day_u32(d: DateTime) -> u32 {
    secs_of_day(d) as u32
}
