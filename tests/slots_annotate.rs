//! `batchguard slots --annotate`: the DST changes that alter what a job runs, as `#` lines
//! at their place in the stream; the instants themselves stay one per line.

use assert_cmd::Command;

fn slots(args: &[&str]) -> String {
    let mut c = Command::cargo_bin("batchguard").expect("binary builds");
    let out = c
        .env("NO_COLOR", "1")
        .arg("slots")
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8 output")
}

fn ny(schedule: &str, dialect: &str, from: &str, to: &str, annotate: bool) -> String {
    let mut args = vec![
        "--schedule",
        schedule,
        "--dialect",
        dialect,
        "--timezone",
        "America/New_York",
        "--from",
        from,
        "--to",
        to,
    ];
    if annotate {
        args.push("--annotate");
    }
    slots(&args)
}

const SPRING: (&str, &str) = ("2026-03-07T00:00:00-05:00", "2026-03-10T00:00:00-04:00");
const FALL: (&str, &str) = ("2026-10-31T00:00:00-04:00", "2026-11-03T00:00:00-05:00");

#[test]
fn kubernetes_skips_the_spring_gap_and_the_annotation_stands_where_the_slot_was() {
    let out = ny("30 2 * * *", "kubernetes", SPRING.0, SPRING.1, true);
    assert_eq!(
        out,
        "2026-03-07T02:30:00-05:00\n\
         # 02:30 does not exist on 2026-03-08 (clocks spring forward): kubernetes skips it\n\
         2026-03-09T02:30:00-04:00\n"
    );
}

#[test]
fn crontab_runs_the_gap_slot_late_and_says_so_before_it() {
    let out = ny("30 2 * * *", "crontab", SPRING.0, SPRING.1, true);
    assert_eq!(
        out,
        "2026-03-07T02:30:00-05:00\n\
         # 02:30 does not exist on 2026-03-08 (clocks spring forward): crontab runs it late, at 2026-03-08T03:00:00-04:00\n\
         2026-03-08T03:00:00-04:00\n\
         2026-03-09T02:30:00-04:00\n"
    );
}

#[test]
fn kubernetes_runs_the_repeated_hour_twice_and_the_note_comes_before_both() {
    let out = ny("30 1 * * *", "kubernetes", FALL.0, FALL.1, true);
    assert_eq!(
        out,
        "2026-10-31T01:30:00-04:00\n\
         # 01:30 happens twice on 2026-11-01 (clocks fall back): kubernetes runs it twice, at 2026-11-01T01:30:00-04:00 and 2026-11-01T01:30:00-05:00\n\
         2026-11-01T01:30:00-04:00\n\
         2026-11-01T01:30:00-05:00\n\
         2026-11-02T01:30:00-05:00\n"
    );
}

#[test]
fn an_ordinary_day_gets_no_annotation() {
    // crontab runs a fixed-time job once in the repeated hour: its ordinary day.
    let plain = ny("30 1 * * *", "crontab", FALL.0, FALL.1, false);
    assert_eq!(ny("30 1 * * *", "crontab", FALL.0, FALL.1, true), plain);
    // An hourly kubernetes job keeps its cadence through both changes.
    let plain = ny("0 * * * *", "kubernetes", SPRING.0, SPRING.1, false);
    assert_eq!(
        ny("0 * * * *", "kubernetes", SPRING.0, SPRING.1, true),
        plain
    );
}

#[test]
fn without_annotate_every_line_is_an_instant() {
    for (sched, dialect, (from, to)) in [
        ("30 2 * * *", "kubernetes", SPRING),
        ("30 2 * * *", "crontab", SPRING),
        ("30 1 * * *", "kubernetes", FALL),
    ] {
        let out = ny(sched, dialect, from, to, false);
        for line in out.lines() {
            assert!(
                line.parse::<jiff::Timestamp>().is_ok(),
                "{sched} {dialect}: `{line}` is not an instant"
            );
        }
    }
}

#[test]
fn stripping_the_comment_lines_gives_the_plain_output() {
    for dialect in [
        "kubernetes",
        "crontab",
        "node-cron",
        "cron-npm",
        "pm2",
        "croner",
        "supercronic",
    ] {
        for sched in ["30 2 * * *", "30 1 * * *", "*/20 1-2 * * *"] {
            for (from, to) in [SPRING, FALL] {
                let plain = ny(sched, dialect, from, to, false);
                let annotated = ny(sched, dialect, from, to, true);
                let stripped: String = annotated
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .map(|l| format!("{l}\n"))
                    .collect();
                assert_eq!(stripped, plain, "{sched} under {dialect}");
            }
        }
    }
}

#[test]
fn a_skip_at_the_end_of_the_window_is_still_annotated() {
    let out = ny(
        "30 2 * * *",
        "kubernetes",
        "2026-03-08T00:00:00-05:00",
        "2026-03-08T12:00:00-04:00",
        true,
    );
    assert_eq!(
        out,
        "# 02:30 does not exist on 2026-03-08 (clocks spring forward): kubernetes skips it\n"
    );
}

#[test]
fn manifest_form_annotates_in_the_jobs_dialect() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("billing.batchguard.yaml");
    std::fs::write(
        &path,
        "version: 1\ndeployment:\n  platform: crontab\njobs:\n  - name: nightly\n    schedule: \"30 2 * * *\"\n    timezone: America/New_York\n",
    )
    .expect("write manifest");
    let p = path.display().to_string();
    let out = slots(&[
        "--manifest",
        &p,
        "--job",
        "nightly",
        "--from",
        SPRING.0,
        "--to",
        SPRING.1,
        "--annotate",
    ]);
    assert!(
        out.contains("# 02:30 does not exist on 2026-03-08 (clocks spring forward): crontab runs it late, at 2026-03-08T03:00:00-04:00\n2026-03-08T03:00:00-04:00\n"),
        "{out}"
    );
}
