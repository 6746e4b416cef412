//! MySQL / MariaDB ledgers (SPEC 5.4) on a real server: `DATETIME` columns have no offset
//! (refused row by row unless --assume-tz, like PostgreSQL's `timestamp`), a missing table
//! and an unreachable server are source errors without the password, table names are
//! validated identifiers (`db.table` allowed), and `--ledger mysql://` streams what `run`
//! wrote. A fresh database per test (`tests/common/mysqldb.rs`).

#[path = "common/stores.rs"]
mod stores;

#[path = "common/ledger.rs"]
mod ledger;

use batchguard::{Event, LedgerReadOptions, LedgerSource, RowError, read_events};
use ledger::{events_error, outputs_error};
use stores::mysqldb;

fn events(src: &LedgerSource, opts: &LedgerReadOptions) -> (Vec<Event>, Vec<RowError>) {
    let (mut ev, mut bad) = (Vec::new(), Vec::new());
    read_events(src, opts, &mut |e| ev.push(e), &mut |e| bad.push(e)).expect("read");
    (ev, bad)
}

const ROWS: &str = "INSERT INTO ev (run_id, job, scheduled_at, event, at, attempt) VALUES \
    ('r1', 'j', '2026-03-01 02:00:00', 'start', '2026-03-01 02:00:01.250000', 1), \
    ('r1', 'j', '2026-03-01 02:00:00', 'end', '2026-03-01 02:00:03', 1)";

#[test]
fn datetime_columns_need_assume_tz_and_timestamp_columns_do_not() {
    let Some(db) = mysqldb::fresh("dt") else {
        return;
    };
    db.exec("CREATE TABLE ev (run_id TEXT, job TEXT, scheduled_at DATETIME(6), event TEXT, at DATETIME(6), attempt INT, extra TEXT)");
    db.exec(ROWS);
    let src = LedgerSource::parse(&format!("{}?events_table=ev", db.url)).expect("src");
    let (ev, bad) = events(&src, &LedgerReadOptions::default());
    assert!(ev.is_empty());
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert_eq!(bad[0].column.as_deref(), Some("scheduled_at"));
    assert!(bad[0].message.contains("no UTC offset"), "{}", bad[0]);
    assert!(bad[0].to_string().contains(" ev:1"), "{}", bad[0]);
    let seoul = LedgerReadOptions {
        assume_tz: Some(jiff::tz::TimeZone::get("Asia/Seoul").unwrap()),
    };
    let (ev, bad) = events(&src, &seoul);
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(ev[0].scheduled_at.to_string(), "2026-02-28T17:00:00Z");
    assert_eq!(ev[0].at.to_string(), "2026-02-28T17:00:01.25Z");

    // TIMESTAMP holds an instant: read as UTC whatever the server's zone.
    db.exec("DROP TABLE ev");
    db.exec("CREATE TABLE ev (run_id TEXT, job TEXT, scheduled_at TIMESTAMP(6) NULL, event TEXT, at TIMESTAMP(6) NULL, attempt INT)");
    db.exec(&format!("SET time_zone = '+09:00'; {ROWS}"));
    let (ev, bad) = events(&src, &LedgerReadOptions::default());
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].scheduled_at.to_string(), "2026-02-28T17:00:00Z");
}

#[test]
fn a_missing_table_and_an_unreachable_server_are_source_errors_without_the_password() {
    let Some(db) = mysqldb::fresh("missing") else {
        return;
    };
    let src = LedgerSource::parse(&format!("{}?events_table=no_such_ev", db.url)).expect("src");
    let e = events_error(&src);
    assert!(e.0.contains("no table `no_such_ev`"), "{e}");
    let e = outputs_error(&src);
    assert!(e.0.contains("no table `batchguard_outputs`"), "{e}");

    let src = LedgerSource::parse("mysql://bob:sekrit-pw@127.0.0.1:1/ledger").expect("src");
    let e = events_error(&src);
    assert!(!e.0.contains("sekrit-pw"), "{e}");
    assert!(e.0.contains("bob:***@127.0.0.1:1"), "{e}");
    let bad_user = mysqldb::with_database(&mysqldb::admin_url(), &db.name).replacen(
        "://root",
        "://nobody_zz:sekrit-pw",
        1,
    );
    let e = read_events(
        &LedgerSource::parse(&bad_user).expect("src"),
        &LedgerReadOptions::default(),
        &mut |_| {},
        &mut |_| {},
    )
    .unwrap_err();
    assert!(!e.0.contains("sekrit-pw"), "{e}");
}

#[test]
fn table_names_are_identifiers_and_may_name_another_database() {
    let url = mysqldb::admin_url();
    assert!(LedgerSource::parse(&format!("{url}?events_table=x;drop table y")).is_err());
    assert!(LedgerSource::parse(&format!("{url}?events_table=x`y")).is_err());
    let Some(db) = mysqldb::fresh("qualified") else {
        return;
    };
    db.exec("CREATE TABLE ev (run_id TEXT, job TEXT, scheduled_at TEXT, event TEXT, at TEXT)");
    db.exec("INSERT INTO ev VALUES ('r1', 'j', '2026-03-01T02:00:00Z', 'start', '2026-03-01T02:00:01Z')");
    let src = LedgerSource::parse(&format!("{url}?events_table={}.ev", db.name)).expect("src");
    let (ev, bad) = events(&src, &LedgerReadOptions::default());
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(ev.len(), 1);
    assert_eq!(
        src.display(),
        format!(
            "{url}?events_table={}.ev&outputs_table=batchguard_outputs",
            db.name
        )
    );
}
