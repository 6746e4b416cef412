//! `watch` and `metrics` on the command line: off a terminal a line (or a JSON object)
//! per refresh until `--for` or an alert, a JSONL ledger apart from the store, and what
//! cannot be read refused with exit 2 and a message that says why.

#[path = "common/live.rs"]
mod live;

use live::{Case, manifest, mins, minute, now, ok};

fn hourly_case() -> (Case, jiff::Timestamp) {
    let slot = minute(now() - mins(20));
    let hourly = format!("{} * * * *", live::minute_of_hour(slot));
    let c = Case::sqlite(&manifest(&[("j", &hourly, "1m", "10m", "")]));
    (c, slot)
}

#[test]
fn off_a_terminal_each_refresh_is_a_line_until_for_ends() {
    let (c, slot) = hourly_case();
    c.run("r1", "j", slot, slot + mins(1), Some(slot + mins(2)));
    let url = c.url();
    let o = c.bg(&[
        "watch",
        "--store",
        &url,
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "1h",
        "--interval",
        "1s",
        "--for",
        "1s",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    let first = text.lines().next().expect("a line per refresh");
    assert!(
        first.contains("jobs 1  running 0  starts 1  skips 0  missed 0  failed 0  alerts 0"),
        "{text}"
    );

    // The two slots of the window before the job's first run are not its to run: said
    // once, no alert, and a `--for` watch passes.
    let watch_3h = |for_: &str| {
        c.bg(&[
            "watch",
            "--store",
            &url,
            "--manifest",
            "m.batchguard.yaml",
            "--since",
            "3h",
            "--format",
            "json",
            "--exit-on-alert",
            "--for",
            for_,
        ])
    };
    let o = watch_3h("1s");
    ok(&o);
    let first = std::str::from_utf8(&o.stdout).unwrap().lines().next();
    let v: serde_json::Value = serde_json::from_str(first.expect("a line")).unwrap();
    assert_eq!(v["jobs"][0]["missed"], 0, "{v}");
    assert_eq!(v["notes"][0]["reason"], "before_first_run", "{v}");
    assert_eq!(v["notes"][0]["slots"], 2, "{v}");

    // JSON lines, and --exit-on-alert stops at the first refresh that has one: with
    // `since:` three hours ago, the two slots before the first run were missed.
    let since = live::ts(now() - mins(180));
    let m = c.path("m.batchguard.yaml");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, format!("{text}    since: {since}\n")).unwrap();
    let o = watch_3h("1m");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 1, "it stopped at the first refresh");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        v["alerts"][0]["kind"], "missed",
        "the two slots before it were never run"
    );
    assert_eq!(v["jobs"][0]["missed"], 2);
}

#[test]
fn a_jsonl_ledger_apart_from_the_store_is_followed() {
    let (c, slot) = hourly_case();
    let ledger = c.path("ledger.jsonl");
    // `run --ledger` writes the ledger apart; the store keeps the leases.
    let o = c.bg(&[
        "run",
        "--manifest",
        "m.batchguard.yaml",
        "--job",
        "j",
        "--store",
        &c.url(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--scheduled-at",
        &live::ts(slot),
        "--instance",
        "host-a",
        "--",
        "true",
    ]);
    ok(&o);
    let o = c.bg(&[
        "watch",
        "--store",
        &c.url(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "1h",
        "--once",
        "--format",
        "json",
    ]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["metrics"]["succeeded"], 1);
    assert_eq!(v["jobs"][0]["last_outcome"]["outcome"], "succeeded");
    assert!(
        v["source"].as_str().unwrap().contains("ledger.jsonl"),
        "{}",
        v["source"]
    );
    // Without a manifest: the ledger's jobs, without expected slots.
    let o = c.bg(&[
        "watch",
        "--ledger",
        ledger.to_str().unwrap(),
        "--once",
        "--format",
        "json",
    ]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["job"], "j");
    assert_eq!(v["jobs"][0]["declared"], false);
}

#[test]
fn what_cannot_be_followed_is_refused_with_the_reason() {
    let (c, _) = hourly_case();
    std::fs::write(c.path("l.csv"), "run_id,job,scheduled_at,event,at\n").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["watch", "--store", "sqlite:nowhere.db", "--once"],
            "no such store",
        ),
        (
            &["watch", "--ledger", "l.csv", "--once"],
            "cannot be followed as it grows",
        ),
        (
            &[
                "watch",
                "--store",
                &c.url(),
                "--manifest",
                "m.batchguard.yaml",
                "--job",
                "k",
                "--once",
            ],
            "--job `k` is no job of the manifests",
        ),
        (&["watch", "--once"], "--store"),
        (&["metrics", "--store", &c.url()], "--listen"),
    ];
    for (args, message) in cases {
        let o = c.bg(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

#[test]
fn mysql_sources_that_cannot_be_followed_are_refused_with_the_reason() {
    let Some(c) = Case::mysql(&manifest(&[("j", "0 * * * *", "1m", "10m", "")]), "refuse") else {
        return;
    };
    c.exec(
        "CREATE TABLE plain_events (run_id TEXT, job TEXT, scheduled_at TEXT, event TEXT, at TEXT)",
    );
    let plain = format!("{}?events_table=plain_events", c.url());
    let missing = format!("{}?events_table=nowhere", c.url());
    // Nothing listens on port 1: the password is masked in what is said.
    let unreachable = "mysql://bob:s3cret-pw@127.0.0.1:1/test";
    let cases: [(&[&str], &str); 4] = [
        (
            &["watch", "--ledger", &plain, "--once"],
            "table `plain_events` has no `id` column",
        ),
        (
            &["watch", "--ledger", &missing, "--once"],
            "no table `nowhere`",
        ),
        (
            &["watch", "--store", unreachable, "--once"],
            "mysql://bob:***@127.0.0.1:1/test: cannot connect",
        ),
        (
            &["metrics", "--ledger", unreachable, "--textfile", "m.prom"],
            "mysql://bob:***@127.0.0.1:1/test: cannot connect",
        ),
    ];
    for (args, message) in cases {
        let o = c.bg(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains("s3cret-pw"), "{err}");
    }
    // The team's table with the numbering is followed.
    c.exec(
        "ALTER TABLE plain_events ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE; \
         INSERT INTO plain_events (run_id, job, scheduled_at, event, at) VALUES \
         ('r1', 'j', '2026-03-01T02:00:00Z', 'start', '2026-03-01T02:00:01Z')",
    );
    let o = c.bg(&["watch", "--ledger", &plain, "--once", "--format", "json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["input"]["rows_read"], 1);
}

/// A schedule with slots every 10 seconds (node-cron under PM2): the table shows a slot
/// with its seconds, not as the minute it falls in.
#[test]
fn a_ten_second_slot_is_shown_with_its_seconds() {
    let m = manifest(&[("tick", "*/10 * * * * *", "1s", "1m", "")]).replacen(
        "jobs:\n",
        "deployment:\n  platform: pm2\njobs:\n",
        1,
    );
    let c = Case::sqlite(&m);
    let slot = minute(now()) + jiff::SignedDuration::from_secs(10);
    let slot = if slot > now() { slot - mins(1) } else { slot };
    c.run("r1", "tick", slot, slot, None);
    // Leases well past the test's own minute: one that ended at a minute's turn while the
    // test ran would be shown stale, not running.
    c.lease("tick", slot, ("host-a", "r1"), (slot, slot + mins(5)), true);
    // The slot on the whole minute before it: seconds too, as every slot of the job.
    let whole = slot - jiff::SignedDuration::from_secs(10);
    c.run("r0", "tick", whole, whole, None);
    c.lease(
        "tick",
        whole,
        ("host-b", "r0"),
        (whole, whole + mins(5)),
        true,
    );
    let o = c.bg(&[
        "watch",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "5m",
        "--once",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    let (hms, whole) = (
        slot.strftime("%H:%M:%S").to_string(),
        whole.strftime("%H:%M:%S").to_string(),
    );
    assert!(hms.ends_with(":10") && whole.ends_with(":00"));
    // The oldest run is the one shown running.
    assert!(
        text.contains(&format!("{whole} on host-a for")),
        "the running slot with its seconds:\n{text}"
    );
    for (holder, at) in [("host-a", &hms), ("host-b", &whole)] {
        let lease = text
            .lines()
            .find(|l| l.contains(holder) && l.contains(" r"))
            .unwrap();
        assert!(lease.contains(at.as_str()), "{lease}\n{text}");
    }
}

/// `run --ledger l.jsonl` creates `l.outputs.jsonl` at the first output: `watch
/// --outputs l.outputs.jsonl` before it follows no outputs yet (not exit 2), and reads
/// the file once it appears.
#[test]
fn the_outputs_file_run_has_not_created_yet_is_followed_once_it_appears() {
    let (c, slot) = hourly_case();
    let ledger = c.path("l.jsonl");
    let outputs = c.path("l.outputs.jsonl");
    ok(&c.bg(&[
        "run",
        "--manifest",
        "m.batchguard.yaml",
        "--job",
        "j",
        "--store",
        &c.url(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--scheduled-at",
        &live::ts(slot),
        "--",
        "true",
    ]));
    assert!(!outputs.exists());
    let mut child = c
        .cmd(&[
            "watch",
            "--ledger",
            ledger.to_str().unwrap(),
            "--outputs",
            outputs.to_str().unwrap(),
            "--manifest",
            "m.batchguard.yaml",
            "--since",
            "1h",
            "--interval",
            "1s",
            "--for",
            "2m",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("watch starts");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
        child.stdout.take().expect("stdout"),
    ));
    let mut next = || -> serde_json::Value {
        let line = lines.next().expect("a line per refresh").expect("read");
        serde_json::from_str(&line).expect("JSON")
    };
    let first = next();
    assert_eq!(first["jobs"][0]["metrics"]["outputs"], 0, "{first}");
    std::fs::write(
        &outputs,
        format!(
            "{{\"job\":\"j\",\"scheduled_at\":\"{}\",\"run_id\":\"r1\",\"output_key\":\"k1\",\"at\":\"{}\"}}\n",
            live::ts(slot),
            live::ts(slot + mins(1))
        ),
    )
    .unwrap();
    // The refresh after the file appeared counts its row.
    let mut seen = 0;
    for _ in 0..60 {
        let v = next();
        seen = v["jobs"][0]["metrics"]["outputs"].as_u64().unwrap();
        if seen == 1 {
            break;
        }
    }
    // SAFETY: ending the watch this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().expect("watch ends");
    assert_eq!(seen, 1, "the outputs file was read once it appeared");
    assert_eq!(status.code(), Some(143), "TERM ends it with 128 + 15");
}

/// `watch … | head -1`: once nobody reads its output, the next refresh ends it (exit
/// 128 + SIGPIPE, as a shell reports a process SIGPIPE ended) instead of running on.
#[test]
fn a_closed_output_ends_the_json_lines() {
    let (c, slot) = hourly_case();
    c.run("r1", "j", slot, slot + mins(1), Some(slot + mins(2)));
    let mut child = c
        .cmd(&[
            "watch",
            "--store",
            &c.url(),
            "--manifest",
            "m.batchguard.yaml",
            "--interval",
            "1s",
            "--for",
            "2m",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch starts");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).expect("a line");
    assert!(first.starts_with('{'), "{first}");
    drop(out);
    let status = child.wait().expect("watch ends");
    assert_eq!(status.code(), Some(128 + libc::SIGPIPE));
}
