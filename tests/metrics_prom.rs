//! `batchguard metrics` as Prometheus sees it: the real Prometheus server (Debian's
//! `prometheus` package) scrapes `/metrics` on loopback and a PromQL query returns the
//! number of runs the ledger holds; `promtool check metrics` accepts what `/metrics` and
//! `--textfile` write. Each wait is for an observable fact (a port in a log line, a query
//! answer), with a deadline only to fail instead of hanging.

#[path = "common/live.rs"]
mod live;

use live::{Case, bin, manifest, mins, minute, now, ok};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `tool` is on PATH; in CI it must be (`.ci/run` installs Debian's prometheus).
fn need(tool: &str) -> bool {
    let here = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is required in CI (.ci/run installs the prometheus package)"
        );
        eprintln!("skipped: {tool} is not on PATH (apt-get install prometheus)");
    }
    here
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A GET on loopback: (status line, body).
fn get(port: u16, path: &str, accept: Option<&str>) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    (
        head.lines().next().unwrap_or("").to_owned(),
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    )
}

/// A chunked HTTP/1.1 body (what Prometheus sends for longer answers), joined.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("a chunk size, not {size:?}"));
        if n == 0 {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    body
}

/// `batchguard metrics --listen 127.0.0.1:0` and the port it says it serves on.
fn serve(c: &Case) -> (Killed, u16) {
    let mut child = c
        .cmd(&[
            "metrics",
            "--store",
            &c.url(),
            "--manifest",
            "m.batchguard.yaml",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("metrics starts");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .expect("its first line");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches("/metrics").parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (Killed(child), port)
}

fn settle_manifest() -> String {
    manifest(&[(
        "settle",
        "* * * * *",
        "1s",
        "1m",
        "    retry:\n      max_attempts: 1\n",
    )])
}

/// A SQLite store where `run` ran `n` slots of `settle` (one of them failing) and one
/// instance was refused a slot that had succeeded.
fn store(n: i64) -> (Case, i64) {
    let c = Case::sqlite(&settle_manifest());
    ran(&c, n);
    (c, n)
}

/// What [`store`] has `run` do, on any store.
/// What `metrics --textfile NAME` writes for `c`'s store and manifest.
fn textfile(c: &Case, name: &str) -> String {
    let file = c.path(name);
    ok(&c.bg(&[
        "metrics",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--textfile",
        file.to_str().unwrap(),
    ]));
    std::fs::read_to_string(&file).unwrap()
}

fn ran(c: &Case, n: i64) {
    let url = c.url();
    let first = minute(now()) - mins(n);
    for k in 0..n {
        let slot = live::ts(first + mins(k));
        let cmd = if k == 1 { "false" } else { "true" };
        c.bg(&[
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "settle",
            "--store",
            &url,
            "--scheduled-at",
            &slot,
            "--instance",
            "host-a",
            "--",
            cmd,
        ]);
    }
    let slot = live::ts(first);
    ok(&c.bg(&[
        "run",
        "--manifest",
        "m.batchguard.yaml",
        "--job",
        "settle",
        "--store",
        &url,
        "--scheduled-at",
        &slot,
        "--instance",
        "host-b",
        "--",
        "true",
    ]));
}

/// The real Prometheus scraping `127.0.0.1:port` every second, and the port of its own
/// web server.
fn prometheus(c: &Case, port: u16) -> (Killed, u16) {
    // A free port for Prometheus's own web server.
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = c.path("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: batchguard\n    static_configs:\n      - targets: [\"127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    let prom = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", c.path("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    (prom, web)
}

/// A PromQL query's answer, or `None` while Prometheus does not answer yet.
fn query(web: u16, q: &str) -> Option<serde_json::Value> {
    let s = TcpStream::connect(("127.0.0.1", web)).ok()?;
    drop(s);
    let path = format!("/api/v1/query?query={}", urlencode(q));
    let (status, body) = get(web, &path, None);
    if !status.contains("200") {
        return None;
    }
    serde_json::from_str(&body).ok()
}

/// The value of `q`'s first series, once Prometheus has scraped what it needs.
fn first_answer(web: u16, q: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = query(web, q);
        let got = v.as_ref().and_then(|v| {
            v["data"]["result"][0]["value"][1]
                .as_str()
                .map(str::to_owned)
        });
        if let Some(n) = got {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never answered {q}: {v:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_scrapes_the_run_count_the_ledger_holds() {
    if !need("prometheus") {
        return;
    }
    let (c, runs) = store(4);
    let (_metrics, port) = serve(&c);
    let (_prom, web) = prometheus(&c, port);
    let total = first_answer(web, "sum(batchguard_runs_total)");
    assert_eq!(total, runs.to_string(), "every run the ledger holds");
    // By outcome, under the batch job's own label (the scrape keeps `job` for itself).
    let query = |q: &str| query(web, q);
    let failed = query("batchguard_runs_total{job_name=\"settle\",outcome=\"failed\"}").unwrap();
    assert_eq!(failed["data"]["result"][0]["value"][1], "1");
    assert_eq!(failed["data"]["result"][0]["metric"]["job"], "batchguard");
    let skips =
        query("sum by (reason) (batchguard_skips_total{reason=\"already_succeeded\"})").unwrap();
    assert_eq!(skips["data"]["result"][0]["value"][1], "1");
    // The scrape was read as OpenMetrics (what Prometheus asks for first) without error.
    let (_, targets) = get(web, "/api/v1/targets", None);
    let t: serde_json::Value = serde_json::from_str(&targets).unwrap();
    let target = &t["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(target["lastError"], "", "{target}");
}

#[test]
fn promtool_accepts_what_metrics_and_the_textfile_write() {
    if !need("promtool") {
        return;
    }
    let (c, _) = store(3);
    let check = promtool_accepts;
    let (_m, port) = serve(&c);
    let (status, body) = get(port, "/metrics", None);
    assert!(status.contains("200 OK"), "{status}");
    assert!(
        body.contains("batchguard_runs_total{job_name=\"settle\",outcome=\"succeeded\"} 2"),
        "{body}"
    );
    check(&body);

    // OpenMetrics when asked for it: counters typed by family, units, `# EOF`.
    let (_, om) = get(
        port,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert!(om.contains("# TYPE batchguard_runs counter\n"), "{om}");
    assert!(
        om.contains("# UNIT batchguard_run_duration_seconds seconds\n"),
        "{om}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert_eq!(get(port, "/nothing", None).0, "HTTP/1.1 404 Not Found");

    let text = textfile(&c, "batchguard.prom");
    assert!(
        !text.contains("# EOF"),
        "the textfile collector reads the classic format"
    );
    check(&text);
    // A name node_exporter would not read is refused.
    let o = Command::new(bin())
        .args(["metrics", "--store", &c.url(), "--textfile", "metrics.txt"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("*.prom"));
}

/// The case: a job expected to take 4 s whose runs take 3.0 to 3.4 s. With the
/// fixed buckets (1, 5, 10 s …) `histogram_quantile(0.95)` said 4.8 s; on the ladder around
/// expected_duration it is within the width of the bucket holding the true p95, and that
/// width is a fifth of the value at most.
#[test]
fn prometheus_p50_and_p95_are_within_a_bucket_of_the_true_durations() {
    if !need("prometheus") {
        return;
    }
    let c = Case::sqlite(&manifest(&[("settle", "* * * * *", "4s", "1m", "")]));
    let n = 40;
    let first = minute(now()) - mins(n + 1);
    let mut durations: Vec<f64> = Vec::new();
    for k in 0..n {
        let slot = first + mins(k);
        let start = slot + jiff::SignedDuration::from_secs(1);
        // 3.0 s to 3.4 s in steps of about 10 ms, written as `run` writes them.
        let ms = 3000 + 400 * k / (n - 1);
        durations.push(ms as f64 / 1000.0);
        let end = start + jiff::SignedDuration::from_millis(ms);
        c.run(&format!("r{k}"), "settle", slot, start, Some(end));
    }
    // Nearest rank, as the audit and `watch` compute them.
    let truth = |q: f64| durations[((q * n as f64).ceil() as usize).max(1) - 1];
    let (_metrics, port) = serve(&c);
    let (_prom, web) = prometheus(&c, port);
    let bounds: Vec<f64> = {
        first_answer(web, "count(batchguard_run_duration_seconds_bucket)");
        let v = query(
            web,
            "batchguard_run_duration_seconds_bucket{job_name=\"settle\"}",
        )
        .unwrap();
        let mut b: Vec<f64> = v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["metric"]["le"].as_str().unwrap().parse::<f64>().unwrap())
            .collect();
        b.sort_by(f64::total_cmp);
        b
    };
    assert!(
        bounds.contains(&4.0),
        "a bound at expected_duration: {bounds:?}"
    );
    assert_eq!(bounds.first(), Some(&0.25), "1/16 x expected: {bounds:?}");
    assert_eq!(
        bounds[bounds.len() - 2],
        16.0,
        "4 x expected, then +Inf: {bounds:?}"
    );
    for q in [0.5, 0.95] {
        let got: f64 = first_answer(
            web,
            &format!(
                "histogram_quantile({q}, sum by (job_name, le) (batchguard_run_duration_seconds_bucket{{job_name=\"settle\"}}))"
            ),
        )
        .parse()
        .unwrap();
        let t = truth(q);
        let i = bounds.partition_point(|&b| b < t);
        let width = bounds[i] - if i == 0 { 0.0 } else { bounds[i - 1] };
        assert!(
            (got - t).abs() <= width,
            "p{}: Prometheus says {got} s, the runs say {t} s; the bucket is {width} s wide",
            q * 100.0
        );
        assert!(
            width <= 0.2 * t,
            "p{}: a bucket of {width} s around {t} s",
            q * 100.0
        );
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The Grafana dashboard in `examples/` queries only metrics `metrics` writes, in PromQL
/// that promtool parses (as recording rules, Grafana's variables given values).
#[test]
fn the_grafana_dashboard_queries_metrics_that_exist() {
    if !need("promtool") {
        return;
    }
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("examples/grafana-dashboard.json").unwrap())
            .expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            exprs.push(t["expr"].as_str().expect("an expr").to_owned());
        }
    }
    assert!(exprs.len() >= 10, "{exprs:?}");
    let (c, _) = store(2);
    // A drill record, so the drill gauge is there to be queried too.
    c.exec(&format!(
        "{} INSERT INTO batchguard_drills VALUES \
         ('settle', '2026-03-01T02:00:00Z', '2026-03-02T10:00:00Z', 1, 'clean:passed', 'sha256:00')",
        include_str!("../schemas/drills.sqlite.sql")
    ));
    let text = textfile(&c, "m.prom");
    assert!(
        text.contains(
            "batchguard_last_passed_drill_timestamp_seconds{job_name=\"settle\"} 1772445600"
        ),
        "{text}"
    );
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$job_name", ".*")
            .replace("$__rate_interval", "1m");
        let mut rest = e.as_str();
        while let Some(k) = rest.find("batchguard_") {
            let name: String = rest[k..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("{name} "))),
                "the dashboard queries {name}, which metrics does not write"
            );
            rest = &rest[k + name.len()..];
        }
        rules.push_str(&format!(
            "      - record: dashboard:panel{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    let path = c.path("dashboard.rules.yml");
    std::fs::write(&path, rules).unwrap();
    let o = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// promtool accepts `text` (the exposition format).
fn promtool_accepts(text: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn metrics_of_a_mysql_store_count_its_runs_and_its_last_passed_drill() {
    let Some(c) = Case::mysql(&settle_manifest(), "metrics") else {
        return;
    };
    ran(&c, 3);
    // Drill records in the store's database: the passing one counts, the later failure
    // does not move it.
    let drill = |at: &str, passed: bool| batchguard::DrillRecord {
        job: "settle".into(),
        scheduled_at: "2026-03-01T02:00:00Z".parse().unwrap(),
        at: at.parse().unwrap(),
        passed,
        scenarios: batchguard::format_scenarios([("clean", passed)]),
        report_digest: "sha256:00".into(),
    };
    batchguard::append_drill(&c.url(), &drill("2026-03-02T10:00:00Z", true)).unwrap();
    batchguard::append_drill(&c.url(), &drill("2026-03-05T10:00:00Z", false)).unwrap();
    let text = textfile(&c, "m.prom");
    for line in [
        "batchguard_runs_total{job_name=\"settle\",outcome=\"succeeded\"} 2",
        "batchguard_runs_total{job_name=\"settle\",outcome=\"failed\"} 1",
        "batchguard_skips_total{job_name=\"settle\",reason=\"already_succeeded\"} 1",
        "batchguard_last_passed_drill_timestamp_seconds{job_name=\"settle\"} 1772445600",
        "batchguard_live_leases{job_name=\"settle\"} 0",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    if need("promtool") {
        promtool_accepts(&text);
    }
}
