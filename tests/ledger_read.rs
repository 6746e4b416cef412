//! The file readers (SPEC 5): CSV and JSONL give the same values; bad rows are reported with
//! their line and column and the rest is read.

#[path = "common/ledger.rs"]
mod ledger;

use batchguard::{
    Event, EventKind, LedgerReadOptions, LedgerSource, Output, RowError, Status, Trigger,
    read_events, read_outputs,
};
use jiff::Timestamp;
use ledger::{events_error, outputs_error};

fn events(src: &str, opts: &LedgerReadOptions) -> (u64, Vec<Event>, Vec<RowError>) {
    let src = LedgerSource::parse(src).expect("source");
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    let n = read_events(&src, opts, &mut |e| good.push(e), &mut |e| bad.push(e)).expect("read");
    (n, good, bad)
}

fn outputs(src: &str) -> (u64, Vec<Output>, Vec<RowError>) {
    let src = LedgerSource::parse(src).expect("source");
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    let n = read_outputs(
        &src,
        &LedgerReadOptions::default(),
        &mut |e| good.push(e),
        &mut |e| bad.push(e),
    )
    .expect("read");
    (n, good, bad)
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

#[test]
fn csv_and_jsonl_give_identical_events() {
    let opts = LedgerReadOptions::default();
    let (n_csv, csv, bad_csv) = events("fixtures/ledger/events.csv", &opts);
    let (n_jsonl, jsonl, bad_jsonl) = events("fixtures/ledger/events.jsonl", &opts);
    assert!(bad_csv.is_empty(), "{bad_csv:?}");
    assert!(bad_jsonl.is_empty(), "{bad_jsonl:?}");
    assert_eq!((n_csv, n_jsonl), (11, 11));
    assert_eq!(csv, jsonl);

    let first = &csv[0];
    assert_eq!(first.run_id, "r-0001");
    assert_eq!(first.job, "billing/settle-payments");
    assert_eq!(first.event, EventKind::Start);
    assert_eq!(first.at, ts("2026-03-01T00:00:02.125Z"));
    assert_eq!(first.attempt, Some(1));
    assert_eq!(first.status, None);
    assert!(
        first
            .snapshot_digest
            .as_deref()
            .unwrap_or("")
            .starts_with("sha256:")
    );
    // Offsets other than Z are the same instant.
    assert_eq!(csv[2].at, ts("2026-03-01T01:00:01Z"));
    assert_eq!(csv[3].status, Some(Status::Failure));
    assert_eq!(csv[3].error_code.as_deref(), Some("ETIMEDOUT"));
    assert_eq!(csv[4].trigger, Trigger::Retry);
    // Empty optional fields are absent; an absent trigger is `schedule`.
    assert_eq!(csv[6].event, EventKind::Skip);
    assert_eq!(csv[6].attempt, None);
    assert_eq!(csv[6].error_code, None);
    assert_eq!(csv[6].trigger, Trigger::Schedule);
    assert_eq!(csv[8].event, EventKind::DeadLetter);
    assert_eq!(csv[10].event, EventKind::Manual);
    assert_eq!(csv[10].trigger, Trigger::Manual);
}

#[test]
fn csv_and_jsonl_give_identical_outputs() {
    let (n, csv, bad) = outputs("fixtures/ledger/outputs.csv");
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(n, 4);
    let (_, jsonl, bad) = outputs("fixtures/ledger/outputs.jsonl");
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(csv, jsonl);
    assert_eq!(csv[3].output_key, "pay-10002");
    assert_eq!(csv[3].run_id, "r-0003");
    assert_eq!(csv[1].at, ts("2026-03-01T00:01:00.5Z"));
}

fn located(bad: &[RowError]) -> Vec<(u64, Option<&str>)> {
    bad.iter()
        .map(|e| (e.at.row, e.column.as_deref()))
        .collect()
}

#[test]
fn malformed_csv_rows_are_located_and_the_rest_read() {
    let (n, good, bad) = events(
        "fixtures/ledger/events-malformed.csv",
        &LedgerReadOptions::default(),
    );
    assert_eq!(n, 10);
    assert_eq!(
        good.iter().map(|e| e.run_id.as_str()).collect::<Vec<_>>(),
        ["r-1", "r-10"]
    );
    assert_eq!(
        located(&bad),
        [
            (3, Some("event")),
            (4, Some("attempt")),
            (5, Some("run_id")),
            (6, Some("scheduled_at")),
            (7, Some("status")),
            (8, Some("at")),
            (9, Some("at")),
            (10, Some("trigger")),
        ]
    );
    let msg = bad[3].to_string();
    assert!(
        msg.starts_with("fixtures/ledger/events-malformed.csv:6: column `scheduled_at`"),
        "{msg}"
    );
    assert!(msg.contains("no UTC offset"), "{msg}");
    assert!(bad[0].message.contains("`begin`"), "{}", bad[0]);
}

#[test]
fn assume_tz_reads_offsetless_timestamps_in_that_zone() {
    let opts = LedgerReadOptions {
        assume_tz: Some(jiff::tz::TimeZone::get("Asia/Seoul").expect("zone")),
    };
    let (n, good, bad) = events("fixtures/ledger/events-malformed.csv", &opts);
    assert_eq!(n, 10);
    assert_eq!(bad.len(), 7);
    let r5 = good.iter().find(|e| e.run_id == "r-5").expect("r-5 read");
    assert_eq!(r5.scheduled_at, ts("2026-03-01T00:00:00Z"));
}

#[test]
fn malformed_jsonl_lines_are_located_and_the_rest_read() {
    let (n, good, bad) = events(
        "fixtures/ledger/events-malformed.jsonl",
        &LedgerReadOptions::default(),
    );
    assert_eq!(n, 8, "blank lines are not rows");
    assert_eq!(
        good.iter().map(|e| e.run_id.as_str()).collect::<Vec<_>>(),
        ["r-1", "r-8"]
    );
    assert_eq!(
        located(&bad),
        [
            (2, None),
            (4, Some("attempt")),
            (5, None),
            (6, Some("scheduled_at")),
            (7, None),
            (8, None),
        ]
    );
    assert!(bad[0].message.starts_with("invalid JSON"), "{}", bad[0]);
    assert!(bad[1].message.contains("boolean"), "{}", bad[1]);
    assert!(
        bad[4].message.contains("duplicate key `run_id`"),
        "{}",
        bad[4]
    );
    assert!(bad[5].message.contains("trailing"), "{}", bad[5]);
}

#[test]
fn missing_required_columns_are_a_source_error_naming_them() {
    let src = LedgerSource::parse("fixtures/ledger/events-missing-columns.csv").expect("source");
    let e = events_error(&src);
    assert!(e.0.contains("`scheduled_at`, `at`"), "{e}");
    assert!(!e.0.contains("`job`"), "{e}");
}

#[test]
fn an_events_file_is_not_an_outputs_file() {
    let src = LedgerSource::parse("fixtures/ledger/events.csv").expect("source");
    let e = outputs_error(&src);
    assert!(e.0.contains("`output_key`"), "{e}");
}

#[test]
fn a_missing_file_is_a_source_error() {
    for p in ["fixtures/ledger/nope.csv", "fixtures/ledger/nope.jsonl"] {
        let src = LedgerSource::parse(p).expect("source");
        let e = events_error(&src);
        assert!(e.0.contains("nope"), "{e}");
    }
}

#[test]
fn an_empty_csv_has_no_header_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("empty.csv");
    std::fs::write(&p, "").expect("write");
    let src = LedgerSource::Csv(p);
    let e = events_error(&src);
    assert!(e.0.contains("`run_id`"), "{e}");
}

#[test]
fn invalid_utf8_and_crlf_are_handled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("x.csv");
    let mut data = b"run_id,job,scheduled_at,event,at\r\nr1,j,2026-03-01T00:00:00Z,start,2026-03-01T00:00:01Z\r\n".to_vec();
    data.extend_from_slice(b"r2,j\xff,2026-03-01T00:00:00Z,start,2026-03-01T00:00:01Z\r\n");
    std::fs::write(&p, data).expect("write");
    let src = LedgerSource::Csv(p);
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    let n = read_events(
        &src,
        &LedgerReadOptions::default(),
        &mut |e| good.push(e),
        &mut |e| bad.push(e),
    )
    .expect("read");
    assert_eq!(n, 2);
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].at, ts("2026-03-01T00:00:01Z"));
    assert_eq!(located(&bad), [(3, Some("job"))]);
}

#[test]
fn a_utf8_bom_is_not_part_of_the_first_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("bom.csv");
    std::fs::write(
        &csv,
        "\u{feff}run_id,job,scheduled_at,event,at\nr1,j,2026-03-01T00:00:00Z,start,2026-03-01T00:00:01Z\n",
    )
    .expect("write");
    let jsonl = dir.path().join("bom.jsonl");
    std::fs::write(
        &jsonl,
        "\u{feff}{\"run_id\":\"r1\",\"job\":\"j\",\"scheduled_at\":\"2026-03-01T00:00:00Z\",\"event\":\"start\",\"at\":\"2026-03-01T00:00:01Z\"}\n",
    )
    .expect("write");
    let (_, a, bad_a) = events(&csv.display().to_string(), &LedgerReadOptions::default());
    let (_, b, bad_b) = events(&jsonl.display().to_string(), &LedgerReadOptions::default());
    assert!(bad_a.is_empty() && bad_b.is_empty(), "{bad_a:?} {bad_b:?}");
    assert_eq!(a.len(), 1);
    assert_eq!(a, b);
}
