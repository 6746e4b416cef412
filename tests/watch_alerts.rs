//! Every alert of `watch` (and `metrics`) fires on a crafted ledger and stays silent on
//! its clean twin: the same jobs and slots, without the defect. The rows are written into
//! a real SQLite store by hand, relative to the host's clock (the store's, for SQLite),
//! with minutes of margin around every threshold.

#[path = "common/live.rs"]
mod live;

use live::{Case, manifest, mins, minute, minute_of_hour, now};

/// Four jobs on one hourly slot 20 minutes ago, each with one defect when `crafted`:
/// - `latency` (max_latency 5m) succeeded 10 minutes after its slot (clean: 2 minutes);
/// - `missed` never started (clean: it ran);
/// - `stale`'s holder started 10 minutes ago and died: its 5-minute lease expired 5
///   minutes ago and was never released (clean: it ended and released);
/// - `overrun` (expected_duration 1m) has been running for 5 minutes (clean: 30 s).
fn ledger(crafted: bool) -> Case {
    let now = now();
    let slot = minute(now - mins(20));
    let hourly = format!("{} * * * *", minute_of_hour(slot));
    // Deployed a day ago: its slot is its own to run even though it never ran.
    let deployed = format!("    since: {}\n", live::ts(now - mins(24 * 60)));
    let c = Case::sqlite(&manifest(&[
        (
            "latency",
            &hourly,
            "1m",
            "10m",
            "    alerts:\n      max_latency: 5m\n",
        ),
        ("missed", &hourly, "1m", "10m", &deployed),
        ("overrun", &hourly, "1m", "10m", ""),
        ("stale", &hourly, "1m", "5m", ""),
    ]));
    let late = if crafted { 10 } else { 2 };
    c.run(
        "lat-1",
        "latency",
        slot,
        slot + mins(1),
        Some(slot + mins(late)),
    );
    if !crafted {
        c.run(
            "mis-1",
            "missed",
            slot,
            slot + mins(1),
            Some(slot + mins(2)),
        );
    }
    let died = now - mins(10);
    c.run(
        "sta-1",
        "stale",
        slot,
        died,
        (!crafted).then(|| died + mins(1)),
    );
    c.lease(
        "stale",
        slot,
        ("host-a", "sta-1"),
        (died, died + mins(5)),
        crafted,
    );
    let start = if crafted {
        now - mins(5)
    } else {
        now - jiff::SignedDuration::from_secs(30)
    };
    c.run("ovr-1", "overrun", slot, start, None);
    c.lease(
        "overrun",
        slot,
        ("host-b", "ovr-1"),
        (start, start + mins(10)),
        true,
    );
    c
}

fn kinds(v: &serde_json::Value) -> Vec<(String, String)> {
    v["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .map(|a| {
            (
                a["job"].as_str().unwrap().to_owned(),
                a["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_alert_fires_on_the_crafted_ledger() {
    let c = ledger(true);
    let (v, o) = c.watch_json(&["--since", "1h"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "without --exit-on-alert, alerts do not fail"
    );
    assert_eq!(
        kinds(&v),
        [
            ("latency", "latency"),
            ("missed", "missed"),
            ("overrun", "overrun"),
            ("stale", "stale_lease"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let counts = &v["alert_counts"];
    for k in ["latency", "missed", "stale_lease", "overrun"] {
        assert_eq!(counts[k], 1, "{k}: {counts}");
    }
    assert_eq!(counts["total"], 4);
    // The messages name what crossed which threshold.
    let text = serde_json::to_string(&v["alerts"]).unwrap();
    assert!(text.contains("alerts.max_latency (5m)"), "{text}");
    assert!(text.contains("alerts.missing_tolerance (0)"), "{text}");
    assert!(text.contains("past its TTL (5m)"), "{text}");
    assert!(text.contains("2 x expected_duration (1m)"), "{text}");
    // Each job row counts its own alert.
    for j in v["jobs"].as_array().unwrap() {
        assert_eq!(j["alerts"], 1, "{}", j["job"]);
    }

    let (_, o) = c.watch_json(&["--since", "1h", "--exit-on-alert"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "--exit-on-alert exits 1 when one fires"
    );

    // The table says so, and the metrics count them.
    let o = c.bg(&[
        "watch",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "1h",
        "--once",
    ]);
    let table = String::from_utf8_lossy(&o.stdout);
    for word in [
        "LATENCY",
        "MISSED",
        "STALE LEASE",
        "OVERRUN",
        "4 alerts firing",
    ] {
        assert!(table.contains(word), "{word} in\n{table}");
    }
    let prom = c.path("alerts.prom");
    live::ok(&c.bg(&[
        "metrics",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "1h",
        "--textfile",
        prom.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&prom).unwrap();
    for (job, alert) in [
        ("latency", "latency"),
        ("missed", "missed"),
        ("stale", "stale_lease"),
        ("overrun", "overrun"),
    ] {
        let line = format!("batchguard_alerts_firing{{job_name=\"{job}\",alert=\"{alert}\"}} 1");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

#[test]
fn no_alert_fires_on_the_clean_twin() {
    let c = ledger(false);
    let (v, o) = c.watch_json(&["--since", "1h", "--exit-on-alert"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(kinds(&v), Vec::<(String, String)>::new());
    assert_eq!(v["alert_counts"]["total"], 0);
    // The same jobs are there, with the runs the twin has.
    let jobs: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, ["latency", "missed", "overrun", "stale"]);
    let overrun = &v["jobs"][2];
    assert_eq!(overrun["running"][0]["run_id"], "ovr-1");
    assert_eq!(overrun["running"][0]["instance"], "host-a");
}
