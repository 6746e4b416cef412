use crate::declare_rule;
use crate::finding::Location;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Dep;
use crate::schedule::Schedule;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// How far ahead slots are compared.
const WINDOW_DAYS: i64 = 7;

declare_rule! {
    /// ## What it does
    /// For each resolved `depends_on` edge, takes the job's slots in the 7 days from
    /// `--now` and, for each, the dependency's latest slot at or before it. When the
    /// dependency's slot plus its `expected_duration` is later than the job's slot, the job
    /// starts before its input is ready; the first such slot is reported.
    ///
    /// ## Why it matters
    /// A job that starts before its dependency finished reads yesterday's data and reports
    /// success: the silent kind of missed work the source article warns about, found only
    /// when someone counts outcomes.
    ///
    /// ## Example
    /// ```yaml
    /// - name: import
    ///   schedule: "0 2 * * *"
    ///   expected_duration: 30m
    /// - name: settle
    ///   schedule: "10 2 * * *"     # import is still running
    ///   depends_on: [import]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// - name: settle
    ///   schedule: "0 3 * * *"
    ///   depends_on: [import]
    /// ```
    pub struct DependencyOrder {
        code: "BG703",
        name: "dependency-order",
        severity: Warning,
        scope: Project,
        summary: "a job is scheduled before its dependency's slot plus expected duration has passed",
        help: "schedule the job after its dependency's slot plus expected_duration",
    }
}

fn slots(
    expr: &str,
    dialect: crate::schedule::Dialect,
    zone: &str,
    from: i64,
    to: i64,
) -> Option<Vec<i64>> {
    let s = Schedule::parse(expr, dialect).ok()?;
    let tz = TimeZone::get(zone).ok()?;
    let (from, to) = (
        Timestamp::from_second(from).ok()?,
        Timestamp::from_second(to).ok()?,
    );
    Some(
        s.slots(&tz, from, to)
            .into_iter()
            .map(|t| t.as_second())
            .collect(),
    )
}

fn show(t: i64) -> String {
    Timestamp::from_second(t).map_or_else(|_| t.to_string(), |t| t.to_string())
}

impl Rule for DependencyOrder {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        let now = cx.now.as_second();
        let end = now + WINDOW_DAYS * 86_400;
        for (j, deps) in cx.deps.iter().enumerate() {
            let job = &cx.project.jobs[j];
            let Some(js) = &job.schedule else { continue };
            for d in deps {
                let Dep::Resolved(t) = *d else { continue };
                let dep = &cx.project.jobs[t];
                if t == j {
                    continue;
                }
                let (Some(ds), Some(dur)) = (&dep.schedule, dep.expected_secs) else {
                    continue;
                };
                let (Some(a), Some(b)) = (
                    slots(&js.value, job.dialect, job.zone(), now, end),
                    slots(&ds.value, dep.dialect, dep.zone(), now - 2 * 86_400, end),
                ) else {
                    continue;
                };
                let dur = i64::try_from(dur).unwrap_or(i64::MAX);
                let clash = a.iter().find_map(|&s| {
                    let i = b.partition_point(|&x| x <= s);
                    let prev = *b.get(i.checked_sub(1)?)?;
                    (prev.saturating_add(dur) > s).then_some((s, prev))
                });
                let Some((s, prev)) = clash else { continue };
                out.emit(
                    Location {
                        file: job.file,
                        span: js.span,
                    },
                    Some(job.service.clone()),
                    Some(job.name.clone()),
                    format!(
                        "job `{}` runs at {} but its dependency `{}` starts at {} and is expected to take {}, until {}",
                        job.key(),
                        show(s),
                        dep.key(),
                        show(prev),
                        crate::manifest::duration::Duration(dur.unsigned_abs()),
                        show(prev.saturating_add(dur))
                    ),
                    Self::META.help.to_owned(),
                    vec![(
                        Location {
                            file: dep.file,
                            span: ds.span,
                        },
                        format!("`{}` is scheduled here", dep.key()),
                    )],
                );
            }
        }
    }
}
