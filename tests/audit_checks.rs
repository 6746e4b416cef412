//! Every audit check fires on a crafted ledger and stays silent on its clean twin; DST-zone
//! jobs are audited without false missed or duplicate runs.

use batchguard::{AuditOptions, AuditResult, Auditor};
use batchguard::{Event, EventKind, Output, RowError, RowLocation, Status, Trigger};
use jiff::Timestamp;
use std::path::PathBuf;

const MANIFEST: &str = r#"
version: 1
service: billing
deployment:
  platform: kubernetes
jobs:
  - name: settle
    schedule: "0 * * * *"
    expected_duration: 5m
    lock: {key: "{job}:{scheduled_at}", ttl: 15m, store: postgres}
    retry: {max_attempts: 3, retryable: [ETIMEDOUT], fatal: [BAD_INPUT]}
    alerts: {max_latency: 30m}
    snapshot: {path: "snap/{job}/{scheduled_at_compact}.jsonl", key: id, retention: 30d}
"#;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

fn jobs(yaml: &str) -> Vec<batchguard::AuditJob> {
    let (_, loaded) = batchguard::load_manifest(yaml.as_bytes());
    let service = loaded
        .manifest
        .service_name(std::path::Path::new("x.batchguard.yaml"));
    batchguard::jobs_from_manifest(&loaded, &service)
}

#[derive(Clone)]
struct Ledger {
    events: Vec<Event>,
    outputs: Vec<Output>,
}

fn event(run: &str, job: &str, slot: Timestamp, kind: EventKind, at_min: i64) -> Event {
    Event {
        run_id: run.into(),
        job: job.into(),
        scheduled_at: slot,
        event: kind,
        at: slot + jiff::SignedDuration::from_mins(at_min),
        instance: Some("pod-1".into()),
        attempt: Some(1),
        status: (kind == EventKind::End).then_some(Status::Success),
        error_code: None,
        snapshot_digest: None,
        trigger: Trigger::Schedule,
    }
}

fn hour(h: u32) -> Timestamp {
    ts(&format!("2026-03-01T{h:02}:00:00Z"))
}

/// Slots 00:00-05:00 UTC, each run once, one output each.
fn clean() -> Ledger {
    let mut l = Ledger {
        events: vec![],
        outputs: vec![],
    };
    for h in 0..6 {
        let run = format!("r{h}");
        l.events
            .push(event(&run, "settle", hour(h), EventKind::Start, 1));
        l.events
            .push(event(&run, "settle", hour(h), EventKind::End, 5));
        l.outputs.push(Output {
            job: "settle".into(),
            scheduled_at: hour(h),
            run_id: run,
            output_key: format!("k{h}"),
            at: hour(h) + jiff::SignedDuration::from_mins(3),
        });
    }
    l
}

fn opts(manifest: bool, snapshots: Option<PathBuf>) -> AuditOptions {
    AuditOptions {
        from: hour(0),
        to: hour(6),
        snapshots,
        with_manifest: manifest,
        with_outputs: true,
    }
}

fn run(l: &Ledger, o: AuditOptions) -> AuditResult {
    let js = if o.with_manifest {
        jobs(MANIFEST)
    } else {
        vec![]
    };
    let mut a = Auditor::new(js, o);
    for e in l.events.iter().cloned() {
        a.event(e);
    }
    for x in l.outputs.iter().cloned() {
        a.output(x);
    }
    a.finish()
}

fn codes(r: &AuditResult) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code).collect()
}

fn find<'a>(l: &'a mut Ledger, run: &str, kind: EventKind) -> &'a mut Event {
    l.events
        .iter_mut()
        .find(|e| e.run_id == run && e.event == kind)
        .expect("event in the clean ledger")
}

#[test]
fn clean_ledger_is_silent() {
    let r = run(&clean(), opts(true, None));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let m = &r.totals;
    assert_eq!((m.expected, m.started, m.succeeded), (6, 6, 6));
    assert_eq!(m.first_attempt_success_rate, Some(1.0));
    assert_eq!(m.latency_p50_s, Some(300.0));
    assert_eq!(m.duration_max_s, Some(240.0));
    assert_eq!(m.outputs, 6);
    assert_eq!(r.input.rows_read, 18);
}

fn assert_fires(code: &str, l: &Ledger, o: AuditOptions) -> AuditResult {
    let r = run(l, o);
    assert!(
        codes(&r).contains(&code),
        "{code} expected, got {:#?}",
        r.findings
    );
    r
}

#[test]
fn au101_missed_run() {
    let mut l = clean();
    l.events.retain(|e| e.run_id != "r3");
    let r = assert_fires("AU101", &l, opts(true, None));
    assert_eq!(r.totals.missed, 1);
    assert_eq!(r.findings[0].scheduled_at, Some(hour(3)));
    // A slot younger than the grace (30m) at `to` is not due yet.
    let mut o = opts(true, None);
    o.to = ts("2026-03-01T05:20:00Z");
    l.events.retain(|e| e.run_id != "r5");
    let r = run(&l, o);
    assert_eq!(r.findings.iter().filter(|f| f.code == "AU101").count(), 1);
}

#[test]
fn au102_duplicate_run_and_retry_is_not_one() {
    let mut l = clean();
    l.events
        .push(event("dup", "settle", hour(2), EventKind::Start, 2));
    l.events
        .push(event("dup", "settle", hour(2), EventKind::End, 6));
    let r = assert_fires("AU102", &l, opts(true, None));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "AU102")
        .expect("AU102");
    assert_eq!(f.run_ids, vec!["r2", "dup"]);
    assert_eq!(r.totals.duplicated, 1);
    // Started after the first succeeded: still a duplicate.
    let mut l2 = clean();
    l2.events
        .push(event("late", "settle", hour(2), EventKind::Start, 20));
    l2.events
        .push(event("late", "settle", hour(2), EventKind::End, 22));
    assert_fires("AU102", &l2, opts(true, None));
    // A retry after a failure is not a duplicate.
    let mut l3 = clean();
    find(&mut l3, "r2", EventKind::End).status = Some(Status::Failure);
    let mut retry = event("r2b", "settle", hour(2), EventKind::Start, 7);
    retry.attempt = Some(2);
    retry.trigger = Trigger::Retry;
    l3.events.push(retry);
    l3.events
        .push(event("r2b", "settle", hour(2), EventKind::End, 9));
    let r = run(&l3, opts(true, None));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(r.totals.success_after_retry_rate, Some(1.0));
    // Without a manifest AU102 still runs.
    assert_fires("AU102", &l, opts(false, None));
}

#[test]
fn au103_lost_run() {
    let mut l = clean();
    l.events
        .retain(|e| !(e.run_id == "r2" && e.event == EventKind::End));
    let r = assert_fires("AU103", &l, opts(true, None));
    assert!(
        codes(&r).contains(&"AU111"),
        "a lost-only slot is also failed"
    );
    assert_eq!(r.totals.lost, 1);
    assert_fires("AU103", &l, opts(false, None));
}

#[test]
fn au104_orphan_end() {
    let mut l = clean();
    l.events
        .retain(|e| !(e.run_id == "r2" && e.event == EventKind::Start));
    assert_fires("AU104", &l, opts(true, None));
    assert_fires("AU104", &l, opts(false, None));
}

#[test]
fn au105_ttl_exceeded() {
    let mut l = clean();
    find(&mut l, "r2", EventKind::End).at = hour(2) + jiff::SignedDuration::from_mins(20);
    let r = assert_fires("AU105", &l, opts(true, None));
    assert!(!codes(&r).contains(&"AU106"));
}

#[test]
fn au106_latency_breach() {
    let mut l = clean();
    // Started late, ran 4 minutes: within ttl, over the 30m latency.
    find(&mut l, "r2", EventKind::Start).at = hour(2) + jiff::SignedDuration::from_mins(36);
    find(&mut l, "r2", EventKind::End).at = hour(2) + jiff::SignedDuration::from_mins(40);
    let r = assert_fires("AU106", &l, opts(true, None));
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
    assert_eq!(r.totals.latency_max_s, Some(2400.0));
}

#[test]
fn au107_unknown_job_and_service_names() {
    let mut l = clean();
    l.events
        .push(event("g1", "ghost", hour(1), EventKind::Start, 1));
    l.events
        .push(event("g1", "ghost", hour(1), EventKind::End, 2));
    let r = assert_fires("AU107", &l, opts(true, None));
    assert_eq!(r.findings.len(), 1);
    // `service/name` is the manifest job `name` of that service.
    let mut l2 = clean();
    for e in &mut l2.events {
        e.job = "billing/settle".into();
    }
    let r = run(&l2, opts(true, None));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn au108_off_schedule_run() {
    let mut l = clean();
    let off = ts("2026-03-01T02:30:00Z");
    l.events
        .push(event("o1", "settle", off, EventKind::Start, 1));
    l.events.push(event("o1", "settle", off, EventKind::End, 2));
    assert_fires("AU108", &l, opts(true, None));
    // A manual run at an off-schedule instant is not reported.
    for e in l.events.iter_mut().filter(|e| e.run_id == "o1") {
        e.trigger = Trigger::Manual;
    }
    let r = run(&l, opts(true, None));
    assert!(!codes(&r).contains(&"AU108"), "{:#?}", r.findings);
}

fn retries(l: &mut Ledger, n: u32, first_code: &str) {
    find(l, "r2", EventKind::End).status = Some(Status::Failure);
    find(l, "r2", EventKind::End).error_code = Some(first_code.into());
    for a in 2..=n {
        let run = format!("r2-{a}");
        let mut s = event(&run, "settle", hour(2), EventKind::Start, 5 + i64::from(a));
        s.attempt = Some(a);
        s.trigger = Trigger::Retry;
        let mut e = event(&run, "settle", hour(2), EventKind::End, 5 + i64::from(a));
        e.attempt = Some(a);
        if a < n {
            e.status = Some(Status::Failure);
            e.error_code = Some("ETIMEDOUT".into());
        }
        l.events.push(s);
        l.events.push(e);
    }
}

#[test]
fn au109_retry_limit_exceeded() {
    let mut l = clean();
    retries(&mut l, 4, "ETIMEDOUT");
    let r = assert_fires("AU109", &l, opts(true, None));
    assert!(!codes(&r).contains(&"AU102"));
    let mut ok = clean();
    retries(&mut ok, 3, "ETIMEDOUT");
    let r = run(&ok, opts(true, None));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn au110_fatal_error_retried() {
    let mut l = clean();
    retries(&mut l, 2, "BAD_INPUT");
    assert_fires("AU110", &l, opts(true, None));
}

#[test]
fn au111_failed_run() {
    let mut l = clean();
    find(&mut l, "r2", EventKind::End).status = Some(Status::Failure);
    l.events
        .push(event("r2", "settle", hour(2), EventKind::DeadLetter, 6));
    let r = assert_fires("AU111", &l, opts(true, None));
    assert_eq!(r.totals.failed, 1);
    assert_eq!(r.totals.dead_lettered, 1);
    assert_eq!(r.totals.first_attempt_success_rate, Some(0.833333));
}

#[test]
fn au201_duplicate_output() {
    let mut l = clean();
    let mut o = l.outputs[2].clone();
    o.run_id = "r3".into();
    l.outputs.push(o);
    let r = assert_fires("AU201", &l, opts(true, None));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "AU201")
        .expect("AU201");
    assert_eq!(f.output_key.as_deref(), Some("k2"));
    assert_eq!(f.count, Some(2));
    assert_eq!(f.run_ids, vec!["r2", "r3"]);
    assert_eq!(r.totals.duplicate_outputs, 1);
    assert_fires("AU201", &l, opts(false, None));
}

/// Writes a snapshot for every slot: records `k{h}` (which has an output) plus `extra`.
fn snapshots(l: &mut Ledger, extra: &[(u32, &str)], skip: Option<u32>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("snap/settle")).expect("mkdir");
    for h in 0..6 {
        if skip == Some(h) {
            continue;
        }
        let mut body = format!("{{\"id\":\"k{h}\"}}\n");
        for (eh, k) in extra {
            if *eh == h {
                body.push_str(&format!("{{\"id\":\"{k}\"}}\n"));
            }
        }
        let name = batchguard::snapshot_name(hour(h));
        std::fs::write(dir.path().join(format!("snap/settle/{name}.jsonl")), &body)
            .expect("write snapshot");
        find(l, &format!("r{h}"), EventKind::Start).snapshot_digest =
            Some(batchguard::snapshot_digest(body.as_bytes()));
    }
    dir
}

#[test]
fn snapshots_clean_twin_is_silent() {
    let mut l = clean();
    let d = snapshots(&mut l, &[], None);
    let r = run(&l, opts(true, Some(d.path().into())));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn au202_missing_output() {
    let mut l = clean();
    let d = snapshots(&mut l, &[(1, "lost-a"), (1, "lost-b")], None);
    let r = assert_fires("AU202", &l, opts(true, Some(d.path().into())));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "AU202")
        .expect("AU202");
    assert_eq!(f.count, Some(2));
    assert_eq!(
        f.keys.as_deref(),
        Some(&["lost-a".to_string(), "lost-b".to_string()][..])
    );
    assert_eq!(r.totals.missing_outputs, 2);
}

#[test]
fn au203_snapshot_missing() {
    let mut l = clean();
    let d = snapshots(&mut l, &[], Some(4));
    let r = assert_fires("AU203", &l, opts(true, Some(d.path().into())));
    assert_eq!(r.findings.len(), 1);
}

#[test]
fn au204_snapshot_digest_mismatch() {
    let mut l = clean();
    let d = snapshots(&mut l, &[], None);
    find(&mut l, "r3", EventKind::Start).snapshot_digest =
        Some(format!("sha256:{}", "0".repeat(64)));
    let r = assert_fires("AU204", &l, opts(true, Some(d.path().into())));
    assert_eq!(r.findings.len(), 1);
}

#[test]
fn without_manifest_skipped_checks_are_named() {
    let r = run(&clean(), opts(false, None));
    assert!(r.findings.is_empty());
    let skipped: Vec<&str> = r.skipped.iter().flat_map(|s| s.codes.clone()).collect();
    for c in [
        "AU101", "AU105", "AU106", "AU107", "AU108", "AU109", "AU110", "AU111",
    ] {
        assert!(skipped.contains(&c), "{c} should be listed as skipped");
    }
}

#[test]
fn malformed_rows_are_counted_and_the_rest_audited() {
    let mut a = Auditor::new(jobs(MANIFEST), opts(true, None));
    for e in clean().events {
        a.event(e);
    }
    a.row_error(RowError {
        at: RowLocation {
            source: "events.csv".into(),
            row: 7,
        },
        column: Some("at".into()),
        message: "not an RFC 3339 instant".into(),
    });
    let r = a.finish();
    assert_eq!(r.input.rows_read, 13);
    assert_eq!(r.input.rows_rejected, 1);
    assert_eq!(r.row_errors.len(), 1);
    assert_eq!(r.totals.succeeded, 6);
}

const DST: &str = r#"
version: 1
service: ops
deployment: {platform: kubernetes}
jobs:
  - name: nightly
    schedule: "30 1 * * *"
    timezone: America/New_York
    lock: {ttl: 10m}
  - name: gap
    schedule: "30 2 * * *"
    timezone: America/New_York
    lock: {ttl: 10m}
"#;

#[test]
fn dst_repeated_hour_double_run_is_expected_under_kubernetes() {
    let js = jobs(DST);
    let (from, to) = (ts("2026-10-31T12:00:00Z"), ts("2026-11-02T12:00:00Z"));
    let mut a = Auditor::new(
        js.clone(),
        AuditOptions {
            from,
            to,
            snapshots: None,
            with_manifest: true,
            with_outputs: false,
        },
    );
    let nightly = js[0].schedule.as_ref().expect("schedule");
    let slots = nightly.slots(&js[0].tz, from, to);
    // 2026-11-01 01:30 EDT and 01:30 EST are two slots, plus the night after.
    assert_eq!(slots.len(), 3, "{slots:?}");
    for (i, s) in slots.iter().enumerate() {
        let run = format!("n{i}");
        a.event(event(&run, "nightly", *s, EventKind::Start, 1));
        a.event(event(&run, "nightly", *s, EventKind::End, 3));
    }
    let gap = js[1].schedule.as_ref().expect("schedule");
    for (i, s) in gap.slots(&js[1].tz, from, to).iter().enumerate() {
        let run = format!("g{i}");
        a.event(event(&run, "gap", *s, EventKind::Start, 1));
        a.event(event(&run, "gap", *s, EventKind::End, 3));
    }
    let r = a.finish();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(r.totals.expected, r.totals.succeeded);
}

#[test]
fn dst_spring_gap_is_not_missed_under_kubernetes() {
    let js = jobs(DST);
    let (from, to) = (ts("2026-03-07T12:00:00Z"), ts("2026-03-09T12:00:00Z"));
    let gap = js[1].schedule.as_ref().expect("schedule");
    let slots = gap.slots(&js[1].tz, from, to);
    // 02:30 does not exist on 2026-03-08 in New York: kubernetes skips it.
    assert_eq!(slots.len(), 1, "{slots:?}");
    let mut a = Auditor::new(
        js,
        AuditOptions {
            from,
            to,
            snapshots: None,
            with_manifest: true,
            with_outputs: false,
        },
    );
    for s in &slots {
        a.event(event("g", "gap", *s, EventKind::Start, 1));
        a.event(event("g", "gap", *s, EventKind::End, 3));
    }
    let r = a.finish();
    let missed: Vec<_> = r.findings.iter().filter(|f| f.code == "AU101").collect();
    // `nightly` never ran in this window: its two slots are missed, `gap` is not.
    assert!(missed.iter().all(|f| f.job == "nightly"), "{missed:#?}");
}
