//! A registration source in lint: read it, run the file, registration and schedule rules
//! that the reading's [`Checks`](super::Checks) select on it.

use crate::finding::{Finding, Location};
use crate::schedule::Schedule;
use crate::sources::Registration;
use crate::text::SourceFile;
use jiff::tz::TimeZone;

/// What a per-registration rule sees.
pub struct RegCx<'a> {
    pub reg: &'a Registration,
    pub text: &'a str,
}

/// Reads one registration source and runs the per-registration rules on it; the run
/// judges suppressions once, at the end.
pub fn lint_source(
    kind: crate::sources::SourceKind,
    path: &std::path::Path,
    bytes: &[u8],
    opts: &super::LintOptions,
    read_options: &crate::sources::ReadOptions,
    checks: super::Checks,
) -> super::FileLint {
    let read = crate::sources::read(kind, path, bytes, read_options);
    let mut file = SourceFile::new(path.to_path_buf(), super::display_path(path), read.text);
    let mut findings = Vec::new();
    for root in &read.roots {
        let cx = super::FileCx {
            root,
            text: &file.text,
        };
        for rule in checks.rules() {
            let mut em = super::rule::Emitter {
                meta: rule.meta(),
                file: 0,
                service: "",
                job: None,
                job_line: None,
                out: &mut findings,
            };
            rule.check_file(&cx, &mut em);
        }
    }
    for p in &read.problems {
        let meta = super::rule_of(p.issue);
        if !checks.wants(meta) {
            continue;
        }
        findings.push(
            Finding::new(
                meta,
                Location {
                    file: 0,
                    span: p.span,
                },
                p.message.clone(),
            )
            .help(p.help.clone()),
        );
    }
    for reg in &read.registrations {
        let cx = RegCx {
            reg,
            text: &file.text,
        };
        let service = reg
            .tie
            .as_ref()
            .and_then(|t| t.service.clone())
            .unwrap_or_default();
        let line = file.line_col(reg.span.start).0;
        for rule in checks.rules() {
            let mut em = super::rule::Emitter {
                meta: rule.meta(),
                file: 0,
                service: &service,
                job: Some(&reg.label),
                job_line: Some(line),
                out: &mut findings,
            };
            rule.check_registration(&cx, &mut em);
        }
    }
    for reg in &read.registrations {
        schedule_rules(reg, &file, opts, checks, &mut findings);
    }
    for f in &mut findings {
        if f.service.as_deref() == Some("") {
            f.service = None;
        }
        if f.rule.masks {
            file.mask(f.at.span);
        }
    }
    super::FileLint {
        file,
        findings,
        jobs: 0,
        facts: Vec::new(),
        regs: read.registrations,
        unscheduled: read.unscheduled,
        notes: read.notes,
        boot: read.boot,
        code: super::CodeFacts {
            imports: read.imports,
            runners: read.runners,
            hpas: read.hpas,
        },
    }
}

/// Runs the schedule rules ([`Scope::Schedule`](crate::finding::Scope): SPEC 3.5, BG1xx
/// apply to registrations, those that need no manifest declaration; BG104 and BG408
/// compare with `expected_duration` and the retry policy, which only a manifest carries)
/// on a registration's schedule, zone and dialect.
fn schedule_rules(
    reg: &Registration,
    file: &SourceFile,
    opts: &super::LintOptions,
    checks: super::Checks,
    out: &mut Vec<Finding>,
) {
    let Some(sched) = &reg.schedule else {
        return;
    };
    let name = reg.label.replace('`', "");
    let cx = super::ScheduleCx {
        name: &name,
        expr: Some(sched),
        zone: reg.timezone.as_ref(),
        enabled: !reg.suspended(),
        dialect: reg.dialect,
        now: opts.now,
        text: &file.text,
        schedule: Some(Schedule::parse(&sched.value, reg.dialect)),
        tz: match &reg.timezone {
            None => Some(TimeZone::UTC),
            Some(z) => TimeZone::get(&z.value).ok(),
        },
    };
    let line = file.line_col(reg.span.start).0;
    let before = out.len();
    for rule in checks
        .rules()
        .filter(|r| r.meta().scope == crate::finding::Scope::Schedule)
    {
        let mut em = super::rule::Emitter {
            meta: rule.meta(),
            file: 0,
            service: "",
            job: Some(&reg.label),
            job_line: Some(line),
            out: &mut *out,
        };
        rule.check_schedule(&cx, &mut em);
    }
    if reg.zone_assumed {
        // BG103 speaks of the zone: say that it was assumed, not written.
        for f in out.iter_mut().skip(before).filter(|f| f.code == "BG103") {
            f.message.push_str(&format!("; zone: {}", reg.zone_label()));
        }
    }
}
