//! The fold's shortcuts keep the audit's meaning: a run id whose rows name several slots is
//! one execution (in the slot of its first row), slots with many executions, and outputs
//! folded on their own (`OutputTally`) with a job spelled `service/name` and `name`.

use batchguard::{AuditOptions, AuditResult, Auditor};
use batchguard::{Event, EventKind, Output, Status, Trigger};
use jiff::{SignedDuration, Timestamp};

const MANIFEST: &str = r#"
version: 1
service: billing
deployment:
  platform: kubernetes
jobs:
  - name: settle
    schedule: "0 * * * *"
    lock: {key: "{job}:{scheduled_at}", ttl: 15m, store: postgres}
"#;

fn hour(h: u32) -> Timestamp {
    format!("2026-03-01T{h:02}:00:00Z").parse().expect("time")
}

fn event(run: &str, slot: Timestamp, kind: EventKind, at_min: i64) -> Event {
    Event {
        run_id: run.into(),
        job: "settle".into(),
        scheduled_at: slot,
        event: kind,
        at: slot + SignedDuration::from_mins(at_min),
        instance: None,
        attempt: Some(1),
        status: (kind == EventKind::End).then_some(Status::Success),
        error_code: None,
        snapshot_digest: None,
        trigger: Trigger::Schedule,
    }
}

fn output(job: &str, run: &str, key: &str) -> Output {
    Output {
        job: job.into(),
        scheduled_at: hour(0),
        run_id: run.into(),
        output_key: key.into(),
        at: hour(0) + SignedDuration::from_mins(3),
    }
}

fn audit(events: &[Event], outputs: &[Output], tally: bool) -> AuditResult {
    let (_, loaded) = batchguard::load_manifest(MANIFEST.as_bytes());
    let service = loaded
        .manifest
        .service_name(std::path::Path::new("billing.batchguard.yaml"));
    let jobs = batchguard::jobs_from_manifest(&loaded, &service);
    let mut a = Auditor::new(
        jobs,
        AuditOptions {
            from: hour(0),
            to: hour(4),
            snapshots: None,
            with_manifest: true,
            with_outputs: true,
        },
    );
    for e in events {
        a.event(e.clone());
    }
    if tally {
        let mut t = a.output_tally();
        for o in outputs {
            t.output(o.clone());
        }
        a.merge_outputs(t);
    } else {
        for o in outputs {
            a.output(o.clone());
        }
    }
    a.finish()
}

fn codes(r: &AuditResult) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code).collect()
}

fn clean() -> Vec<Event> {
    let mut ev = Vec::new();
    for h in 0..4 {
        ev.push(event(&format!("r{h}"), hour(h), EventKind::Start, 1));
        ev.push(event(&format!("r{h}"), hour(h), EventKind::End, 5));
    }
    ev
}

#[test]
fn a_run_whose_rows_name_two_slots_is_one_execution() {
    let base = audit(&clean(), &[], false);
    assert!(base.findings.is_empty(), "{:#?}", base.findings);
    // r0's `end` names slot 01:00 and comes after r1's rows: still r0's execution, in slot
    // 00:00 (no AU103 there, no AU104 in 01:00).
    let mut ev = clean();
    let mut end = ev.remove(1);
    end.scheduled_at = hour(1);
    end.at = hour(0) + SignedDuration::from_mins(5);
    ev.insert(3, end);
    let r = audit(&ev, &[], false);
    assert_eq!(codes(&r), codes(&base), "{:#?}", r.findings);
    assert_eq!(r.totals.duration_max_s, base.totals.duration_max_s);
    // The same run again in slot 02:00, once more: a later start there joins the same
    // execution (a duplicate start of r0 changes nothing).
    ev.push(event("r0", hour(2), EventKind::Start, 2));
    let r = audit(&ev, &[], false);
    assert_eq!(codes(&r), codes(&base), "{:#?}", r.findings);
}

#[test]
fn a_slot_with_many_executions_keeps_each_once() {
    let mut ev = clean();
    let n = 40;
    for i in 0..n {
        ev.push(event(&format!("x{i}"), hour(1), EventKind::Start, 10 + i));
    }
    for i in (0..n).rev() {
        ev.push(event(&format!("x{i}"), hour(1), EventKind::End, 10 + i + 1));
    }
    // Rows of earlier runs again, after the slot went past the chain limit.
    ev.push(event("x0", hour(1), EventKind::End, 11));
    ev.push(event("x3", hour(1), EventKind::Start, 13));
    let r = audit(&ev, &[], false);
    let c = codes(&r);
    assert!(!c.contains(&"AU103") && !c.contains(&"AU104"), "{c:?}");
    // r1 succeeded at 01:05; every x run starts after it: one AU102 naming them all.
    let dup = r
        .findings
        .iter()
        .find(|f| f.code == "AU102")
        .expect("AU102");
    assert_eq!(dup.run_ids.len(), n as usize + 1, "{:?}", dup.run_ids);
    assert_eq!(r.totals.duration_max_s, Some(240.0));
}

#[test]
fn outputs_tally_matches_the_fold_and_joins_job_spellings() {
    let outs = vec![
        output("settle", "r0", "k1"),
        output("billing/settle", "r1", "k1"),
        output("billing/settle", "r0", "k2"),
        output("ghost", "r0", "k1"),
        output("ghost", "r2", "k1"),
        output("ghost", "r2", "k3"),
    ];
    let a = audit(&clean(), &outs, false);
    let b = audit(&clean(), &outs, true);
    assert_eq!(a.findings, b.findings);
    assert_eq!(a.input, b.input);
    let au201: Vec<_> = a.findings.iter().filter(|f| f.code == "AU201").collect();
    assert_eq!(au201.len(), 2, "{au201:#?}");
    for f in au201 {
        assert_eq!(f.output_key.as_deref(), Some("k1"));
        assert_eq!(f.count, Some(2));
        assert_eq!(f.run_ids[0], "r0", "the first application's run first");
    }
    let settle = a.jobs.iter().find(|j| j.job == "settle").expect("settle");
    assert_eq!(settle.metrics.outputs, 3);
}

#[test]
fn events_after_events_done_are_settled_at_finish() {
    let (_, loaded) = batchguard::load_manifest(MANIFEST.as_bytes());
    let service = loaded
        .manifest
        .service_name(std::path::Path::new("billing.batchguard.yaml"));
    let opts = AuditOptions {
        from: hour(0),
        to: hour(4),
        snapshots: None,
        with_manifest: true,
        with_outputs: false,
    };
    let base = {
        let mut a = Auditor::new(
            batchguard::jobs_from_manifest(&loaded, &service),
            opts.clone(),
        );
        for e in clean() {
            a.event(e);
        }
        a.finish()
    };
    // r0's end names slot 01:00 and arrives after `events_done`.
    let mut ev = clean();
    let mut end = ev.remove(1);
    end.scheduled_at = hour(1);
    let mut a = Auditor::new(batchguard::jobs_from_manifest(&loaded, &service), opts);
    for e in ev {
        a.event(e);
    }
    a.events_done();
    a.event(end);
    let r = a.finish();
    assert_eq!(codes(&r), codes(&base), "{:#?}", r.findings);
    assert_eq!(r.totals.duration_max_s, base.totals.duration_max_s);
}
