//! SPEC 7.1 item 16 with a real data loss: a `redis-server` of this test's own (no RDB, no
//! AOF) restarted between runs, with two working directories standing for two hosts that
//! share it and one JSONL ledger. After the restart every host is refused (exit 125, the
//! counter untouched, the job not run) until `batchguard store repair`; after it, no slot
//! that succeeded or was dead-lettered runs again, from either host, and every new fence is
//! above every old one.

mod common;
#[path = "common/tls.rs"]
mod tls;

use common::bin;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use tls::{free_port, need, text, wait_listening};

/// A `redis-server` that keeps nothing on disk, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    fn start(dir: &Path, port: u16) -> Server {
        let child = Command::new("redis-server")
            .current_dir(dir)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir", "."])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        wait_listening(port, "redis-server");
        Server {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    /// Killed and started again on the same port: everything it held is gone.
    fn restart(mut self) -> Server {
        let _ = self.child.kill();
        let _ = self.child.wait();
        Server::start(&self.dir.clone(), self.port)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn get(&self, key: &str) -> Option<String> {
        let client = redis::Client::open(self.url()).expect("client");
        let mut c = client.get_connection().expect("connect");
        redis::cmd("GET").arg(key).query(&mut c).expect("GET")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host: a working directory of its own with the manifest; the ledger and the record of
/// what ran are shared.
struct Host {
    dir: PathBuf,
    shared: PathBuf,
}

impl Host {
    fn new(shared: &Path, name: &str) -> Host {
        let dir = shared.join(name);
        std::fs::create_dir_all(&dir).expect("host dir");
        // Exit 1 on the slot whose name says so: that slot is dead-lettered.
        let job = format!(
            "echo \"$BATCHGUARD_SCHEDULED_AT $BATCHGUARD_FENCE\" >> {}/ran.txt; case \"$BATCHGUARD_SCHEDULED_AT\" in *:03:00Z) exit 1;; esac",
            shared.display()
        );
        std::fs::write(
            dir.join("m.batchguard.yaml"),
            format!(
                "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 60s\n      store: redis\n    retry:\n      max_attempts: 1\n",
                common::sh(&job)
            ),
        )
        .expect("manifest");
        Host {
            dir,
            shared: shared.to_path_buf(),
        }
    }

    fn bg(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .current_dir(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("batchguard runs")
    }

    fn run(&self, store: &str, slot: &str) -> Output {
        let ledger = self.shared.join("ledger.jsonl");
        self.bg(&[
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "j",
            "--store",
            store,
            "--ledger",
            ledger.to_str().expect("utf-8 path"),
            "--scheduled-at",
            slot,
        ])
    }
}

/// The minute `i` of the hour two hours ago (inside the markers' retention).
fn slot(i: i64) -> String {
    let now = jiff::Timestamp::now().as_second();
    jiff::Timestamp::from_second(now - now.rem_euclid(3600) - 7200 + 60 * i)
        .expect("in range")
        .to_string()
}

/// (slot, fence) of every execution, in order.
fn ran(shared: &Path) -> Vec<(String, i64)> {
    std::fs::read_to_string(shared.join("ran.txt"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (s, f) = l.split_once(' ').expect("slot and fence");
            (s.to_owned(), f.parse().expect("fence"))
        })
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn after_a_restart_that_lost_its_data_no_host_runs_until_repair_and_no_done_slot_runs_again() {
    if !need(&["redis-server"]) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let shared = tmp.path();
    let server_dir = shared.join("server");
    std::fs::create_dir_all(&server_dir).unwrap();
    let server = Server::start(&server_dir, free_port());
    let url = server.url();
    let (a, b) = (Host::new(shared, "a"), Host::new(shared, "b"));

    // Before: set up, then slots 0-2 succeed and slot 3 is dead-lettered, on both hosts.
    let m = a.bg(&["store", "migrate", "--store", &url]);
    assert!(m.status.success(), "{}", text(&m));
    assert!(
        String::from_utf8_lossy(&m.stdout).contains("epoch written"),
        "{}",
        text(&m)
    );
    for (host, i) in [(&a, 0), (&b, 1), (&a, 2)] {
        let o = host.run(&url, &slot(i));
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = b.run(&url, &slot(3));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let before = ran(shared);
    assert_eq!(before.len(), 4);
    let old_max = before.iter().map(|r| r.1).max().unwrap();
    assert_eq!(old_max, 4);

    // The restart: Redis comes back empty.
    let server = server.restart();
    assert_eq!(server.get("batchguard:epoch"), None);
    for (host, i) in [(&a, 0), (&b, 1), (&a, 4), (&b, 4)] {
        let o = host.run(&url, &slot(i));
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        let e = stderr(&o);
        assert!(e.contains("Redis has no batchguard epoch"), "{e}");
        assert!(
            e.contains(&format!(
                "batchguard store repair --store '{url}' --ledger SOURCE"
            )),
            "{e}"
        );
    }
    assert_eq!(ran(shared), before, "no host ran anything");
    assert_eq!(
        server.get("batchguard:fence:j"),
        None,
        "the counter did not move"
    );

    // `store migrate` will not pass the loss off as a new Redis: host a was given fences.
    let m = a.bg(&["store", "migrate", "--store", &url]);
    assert_eq!(m.status.code(), Some(2), "{}", text(&m));
    assert!(stderr(&m).contains("it lost its data"), "{}", text(&m));

    let rep = b.bg(&[
        "store",
        "repair",
        "--store",
        &url,
        "--ledger",
        shared.join("ledger.jsonl").to_str().unwrap(),
    ]);
    assert!(rep.status.success(), "{}", text(&rep));
    let said = String::from_utf8_lossy(&rep.stdout);
    assert!(said.contains("the highest fence there is 4"), "{said}");
    assert!(
        said.contains("4 slot markers restored (3 succeeded, 1 dead-lettered)"),
        "{said}"
    );
    assert!(said.contains("epoch written (repair "), "{said}");

    // After: every slot done before is skipped, from either host; the new slot runs once,
    // with a fence above every old one.
    for (host, i, why) in [
        (&b, 0, "already succeeded"),
        (&a, 1, "already succeeded"),
        (&b, 2, "already succeeded"),
        (&a, 3, "dead-lettered"),
    ] {
        let o = host.run(&url, &slot(i));
        assert!(o.status.success(), "{}", text(&o));
        assert!(stderr(&o).contains(why), "{}", text(&o));
    }
    for host in [&a, &b] {
        let o = host.run(&url, &slot(4));
        assert!(o.status.success(), "{}", text(&o));
    }
    let after = ran(shared);
    assert_eq!(after.len(), 5, "{after:?}");
    assert_eq!(after[4].0, slot(4));
    assert!(after[4].1 > old_max, "{after:?}");

    // The audit of what both hosts wrote: no slot ran twice.
    let audit = a.bg(&[
        "audit",
        "--manifest",
        "m.batchguard.yaml",
        "--ledger",
        shared.join("ledger.jsonl").to_str().unwrap(),
        "--from",
        &slot(0),
        "--to",
        &slot(5),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).expect("audit json");
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(!codes.contains(&"AU102"), "{codes:?}");
}
