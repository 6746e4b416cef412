//! `ledger::tail`, which `watch` and `metrics` follow a ledger with: each poll reads only
//! what was written since the last one, from SQLite (rowid), PostgreSQL and MySQL /
//! MariaDB (the `id` column, with the ids of transactions that commit late) and JSONL files
//! (byte offset, a line being written waits for its newline).

#[path = "common/live.rs"]
mod live;

use batchguard::{LedgerReadOptions, LedgerSource};
use batchguard::{OutputRef, RowError};
use batchguard::{Polled, Tail, TailEvent, TailSink};
use live::{Case, Kind};

#[derive(Default)]
struct Seen {
    runs: Vec<String>,
    details: Vec<Option<String>>,
    fences: Vec<Option<i64>>,
    outputs: Vec<String>,
    errors: Vec<String>,
}

impl TailSink for Seen {
    fn event(&mut self, e: &TailEvent<'_>) {
        self.runs.push(e.event.run_id.to_owned());
        self.details.push(e.detail.map(str::to_owned));
        self.fences.push(e.fence);
    }
    fn output(&mut self, o: &OutputRef<'_>) {
        self.outputs.push(o.output_key.to_owned());
    }
    fn error(&mut self, e: RowError) {
        self.errors.push(e.to_string());
    }
}

fn skip_row(run: &str) -> String {
    skip_row_quoted(run, "\"trigger\"")
}

/// [`skip_row`] with `trigger` (a reserved word) quoted as the database wants it.
fn skip_row_quoted(run: &str, trigger: &str) -> String {
    format!(
        "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, {trigger}, detail) \
         VALUES ('{run}', 'j', '2026-03-01T02:00:00Z', 'skip', '2026-03-01T02:00:01Z', 'host-b', 'schedule', \
         'held by host-a (run r0, fence 1, lease ends in 9 s)')"
    )
}

fn poll(t: &mut Tail) -> (Seen, Polled) {
    let mut s = Seen::default();
    let p = t.poll(&mut s).expect("poll");
    (s, p)
}

#[test]
fn sqlite_polls_read_only_the_rows_written_since() {
    let c = Case::sqlite("version: 1\njobs: []\n");
    let db = c.path("store.db");
    for i in 0..2_000 {
        if i % 500 == 0 {
            // Rows in batches, as runs write them.
            let sql: String = (i..i + 500)
                .map(|k| format!("{};", skip_row(&format!("r{k}"))))
                .collect();
            live::sqlite_exec(&db, &sql);
        }
    }
    let mut t = Tail::open(
        &LedgerSource::Sqlite(db.clone()),
        None,
        LedgerReadOptions::default(),
    )
    .expect("open");
    assert!(t.has_outputs(), "the store has its outputs table");
    let (s, p) = poll(&mut t);
    assert_eq!(p.events, 2_000);
    assert_eq!(s.runs[1_999], "r1999");
    assert_eq!(
        s.details[0].as_deref(),
        Some("held by host-a (run r0, fence 1, lease ends in 9 s)")
    );
    assert_eq!(
        poll(&mut t).1,
        Polled::default(),
        "nothing new, nothing read"
    );

    live::sqlite_exec(
        &db,
        &format!(
            "{}; INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, fence) VALUES \
         ('r-new', 'j', '2026-03-01T02:00:00Z', 'start', '2026-03-01T02:00:02Z', 7); \
         INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at) VALUES \
         ('r-bad', 'j', 'yesterday', 'start', '2026-03-01T02:00:02Z'); \
         INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at) VALUES \
         ('j', '2026-03-01T02:00:00Z', 'r-new', 'k1', '2026-03-01T02:00:03Z')",
            skip_row("r2000")
        ),
    );
    let (s, p) = poll(&mut t);
    assert_eq!((p.events, p.outputs, p.rejected), (2, 1, 1));
    assert_eq!(s.runs, ["r2000", "r-new"]);
    assert_eq!(s.fences[1], Some(7));
    assert_eq!(s.outputs, ["k1"]);
    // A row that cannot be read is named by its rowid.
    assert!(
        s.errors[0].contains("batchguard_events:2003"),
        "{:?}",
        s.errors
    );
    assert!(s.errors[0].contains("scheduled_at"), "{:?}", s.errors);
}

#[test]
fn jsonl_lines_are_read_once_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let line = |run: &str| {
        format!(
            "{{\"run_id\":\"{run}\",\"job\":\"j\",\"scheduled_at\":\"2026-03-01T02:00:00Z\",\"event\":\"skip\",\"at\":\"2026-03-01T02:00:01Z\",\"detail\":\"held by host-a\",\"fence\":3}}\n"
        )
    };
    let third = line("r3");
    let (head, tail) = third.split_at(20);
    std::fs::write(&path, format!("{}\n{}{head}", line("r1"), line("r2"))).unwrap();
    let mut t = Tail::open(
        &LedgerSource::Jsonl(path.clone()),
        None,
        LedgerReadOptions::default(),
    )
    .unwrap();
    assert!(!t.has_outputs());
    let (s, _) = poll(&mut t);
    assert_eq!(
        s.runs,
        ["r1", "r2"],
        "a blank line skipped, the line being written left"
    );
    assert_eq!(s.fences, [Some(3), Some(3)]);
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(format!("{tail}not json\n").as_bytes()).unwrap();
    let (s, p) = poll(&mut t);
    assert_eq!(s.runs, ["r3"]);
    assert_eq!(p.rejected, 1);
    assert!(
        s.errors[0].starts_with(&format!("{}:5", path.display())),
        "{:?}",
        s.errors
    );
    // A ledger only grows: one that shrank was replaced.
    std::fs::write(&path, line("r9")).unwrap();
    let mut s = Seen::default();
    let e = t.poll(&mut s).unwrap_err();
    assert!(e.0.contains("shrank"), "{}", e.0);

    // What cannot be followed is refused when opened.
    let gz = dir.path().join("ledger.jsonl.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
    let e = Tail::open(&LedgerSource::Jsonl(gz), None, LedgerReadOptions::default())
        .err()
        .unwrap();
    assert!(e.0.contains("compressed"), "{}", e.0);
    let e = Tail::open(
        &LedgerSource::Jsonl("-".into()),
        None,
        LedgerReadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(e.0.contains("standard input"), "{}", e.0);
    let e = Tail::open(
        &LedgerSource::Csv(dir.path().join("l.csv")),
        None,
        LedgerReadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(e.0.contains("cannot be followed"), "{}", e.0);
}

#[test]
fn postgres_rows_committed_late_are_read_on_a_later_poll() {
    late_commits(
        Kind::Pg,
        "CREATE TABLE plain_events (run_id text, job text, scheduled_at timestamptz, event text, at timestamptz)",
    );
}

#[test]
fn mysql_rows_committed_late_are_read_on_a_later_poll() {
    late_commits(
        Kind::MySql,
        "CREATE TABLE plain_events (run_id TEXT, job TEXT, scheduled_at TIMESTAMP NULL, event TEXT, at TIMESTAMP NULL)",
    );
}

/// A fresh database of `kind` (migrated), written by `exec` and, for a transaction left
/// open while others commit, by `slow`: rows appended between polls are read once each, a
/// row committed late is read on the poll after its commit, and a table without `id`
/// (`plain`, a team's own) is refused with what to do.
fn late_commits(kind: Kind, plain: &str) {
    let Some(c) = Case::on(kind, "version: 1\njobs: []\n", "tail") else {
        return;
    };
    let live::Db::Server(db) = &c.db else {
        unreachable!()
    };
    let mut slow = db.session();
    let url = &c.url();
    let exec = |sql: &str| c.exec(sql);
    let q = kind.trigger_column();
    let src = LedgerSource::parse(url).unwrap();
    let mut t = Tail::open(&src, None, LedgerReadOptions::default()).expect("open");
    assert!(t.has_outputs(), "the store has its outputs table");
    exec(&skip_row_quoted("r1", q));
    let (s, p) = poll(&mut t);
    assert_eq!(s.runs, ["r1"]);
    assert_eq!(
        s.details[0].as_deref(),
        Some("held by host-a (run r0, fence 1, lease ends in 9 s)")
    );
    assert_eq!(p.events, 1);
    assert_eq!(
        poll(&mut t).1,
        Polled::default(),
        "nothing new, nothing read"
    );
    exec(&format!(
        "{}; {}; INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at) VALUES \
         ('j', '2026-03-01T02:00:00Z', 'r2', 'k1', '2026-03-01T02:00:03Z')",
        skip_row_quoted("r2", q),
        skip_row_quoted("r3", q)
    ));
    let (s, p) = poll(&mut t);
    assert_eq!(s.runs, ["r2", "r3"]);
    assert_eq!(s.outputs, ["k1"]);
    assert_eq!((p.events, p.outputs), (2, 1));

    // This row takes the next id, but commits after the one below.
    slow.exec(&format!("BEGIN; {}", skip_row_quoted("r-late", q)));
    exec(&skip_row_quoted("r-early", q));
    let (s, _) = poll(&mut t);
    assert_eq!(
        s.runs,
        ["r-early"],
        "the open transaction's row is not visible yet"
    );
    slow.exec("COMMIT");
    let (s, _) = poll(&mut t);
    assert_eq!(
        s.runs,
        ["r-late"],
        "the id skipped below is asked for again"
    );
    assert_eq!(poll(&mut t).1, Polled::default(), "and read once");

    // A table without the numbering is refused with what to do.
    exec(plain);
    let src = LedgerSource::parse(&format!(
        "{url}?events_table=plain_events&outputs_table=batchguard_outputs"
    ))
    .unwrap();
    let e = Tail::open(&src, None, LedgerReadOptions::default())
        .err()
        .unwrap();
    assert!(
        e.0.contains("has no `id` column") && e.0.contains("store migrate"),
        "{}",
        e.0
    );
}
