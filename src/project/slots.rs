//! A schedule's slots over the year ahead, for "overlapping schedule" (BG601) and drift
//! (BG608).

use super::{Analysis, Place};
use crate::schedule::{Dialect, Schedule};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Distinct schedules of one command compared slot by slot. Real trees have a handful; the
/// cap bounds time and memory (a minutely schedule is ~527,000 slots a year) on hostile input.
pub const MAX_SCHEDULES_PER_COMMAND: usize = 32;

pub(super) type ScheduleKey = (Option<String>, Dialect, String);

fn tz_of(name: &str) -> Option<TimeZone> {
    TimeZone::get(name).ok()
}

/// Slots of a schedule in the 12 months from `now`, as seconds; None when it cannot be read.
pub fn year_slots(expr: &str, dialect: Dialect, zone: &str, now: Timestamp) -> Option<Vec<i64>> {
    let s = Schedule::parse(expr, dialect).ok()?;
    let tz = tz_of(zone)?;
    let to = crate::schedule::slot_year_after(now)?;
    Some(
        s.slots(&tz, now, to)
            .into_iter()
            .map(|t| t.as_second())
            .collect(),
    )
}

pub(super) fn share_a_slot(a: &[i64], b: &[i64]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

impl Analysis<'_> {
    pub(super) fn schedule_key(&self, p: Place) -> ScheduleKey {
        match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                (
                    job.schedule.as_ref().map(|s| s.value.clone()),
                    job.dialect,
                    job.zone().to_owned(),
                )
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                (
                    reg.schedule.as_ref().map(|s| s.value.clone()),
                    reg.dialect,
                    reg.zone().to_owned(),
                )
            }
        }
    }

    pub(super) fn slots_of(&self, p: Place) -> Option<Vec<i64>> {
        match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                let s = job.schedule.as_ref()?;
                year_slots(&s.value, job.dialect, job.zone(), self.now)
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                let s = reg.schedule.as_ref()?;
                year_slots(&s.value, reg.dialect, reg.zone(), self.now)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_sets_intersect() {
        assert!(share_a_slot(&[1, 5, 9], &[2, 9]));
        assert!(!share_a_slot(&[1, 5], &[2, 6]));
    }
}
