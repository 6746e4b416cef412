//! The wiring of docs/commands/run.md, as a team runs it (SPEC 7.1 items 13–20): two hosts (working
//! directories) with four PM2-like workers each call `batchguard run` on every tick against
//! one PostgreSQL store given by `BATCHGUARD_STORE`. One host cannot create its run
//! directories; one slot is cut short by a deploy's SIGTERM. Every slot is worked exactly
//! once, the interrupted one is caught up, nothing is dead-lettered, and `audit` of the
//! window is clean. Real processes, a real server; synchronised on exits and ledger rows.

#[path = "common/stores.rs"]
mod stores;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use stores::{Kind, bin, err};

const MANIFEST: &str = r#"version: 1
service: billing
deployment:
  platform: pm2
  instances: 4
jobs:
  - name: settle
    schedule: "* * * * *"
    expected_duration: 1s
    # Writes its output only once the work is done: a run cut short applied nothing.
    command: ["sh", "-c", "[ \"$HOLD\" = 1 ] && exec sleep 600; echo \"invoice-$BATCHGUARD_SCHEDULED_AT\" >> \"$BATCHGUARD_OUTPUTS\""]
    lock:
      key: "{job}:{scheduled_at}"
      ttl: 60s
      store: postgres
    retry:
      max_attempts: 10
      catch_up: 10m
"#;

fn slot(i: i64) -> String {
    jiff::Timestamp::from_second(1_772_330_400 + 60 * i)
        .expect("in range")
        .to_string()
}

struct Scene {
    dir: tempfile::TempDir,
    url: String,
}

impl Scene {
    fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn tick(&self, host: &str, worker: u32, slot: &str) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.host(host))
            .env("BATCHGUARD_STORE", &self.url)
            .env("NODE_APP_INSTANCE", worker.to_string())
            .env_remove("BATCHGUARD_INSTANCE")
            .env_remove("HOLD")
            .args(["run", "--manifest"])
            .arg(self.dir.path().join("billing.batchguard.yaml"))
            .args(["--job", "settle", "--scheduled-at", slot])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// `(event, scheduled_at µs, trigger, error_code, instance, detail)` in order.
    fn events(&self, db: &stores::Db) -> Vec<Vec<Option<String>>> {
        db.rows(
            "SELECT event, floor(extract(epoch from scheduled_at))::bigint::text, \"trigger\", \
             error_code, instance, detail FROM batchguard_events ORDER BY at, ctid",
        )
    }
}

fn wait_all(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect()
}

#[test]
fn two_hosts_four_workers_one_broken_host_one_deploy_every_slot_once() {
    let Some(db) = Kind::Pg.fresh("scene") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("billing.batchguard.yaml"), MANIFEST).expect("manifest");
    let s = Scene { dir, url: db.url() };
    for h in ["host-a", "host-b"] {
        std::fs::create_dir_all(s.host(h)).expect("host");
    }
    // host-b's working directory cannot hold run directories (a file is in the way: as
    // root, permissions would not stop it).
    std::fs::create_dir_all(s.host("host-b/.batchguard")).expect("dir");
    std::fs::write(s.host("host-b/.batchguard/runs"), b"").expect("file");
    let m = Command::new(bin())
        .args(["store", "migrate", "--store", &s.url])
        .output()
        .expect("migrate");
    assert!(m.status.success(), "{}", err(&m));

    // Slot 0: a deploy's TERM while host-a works it.
    let mut holder = s.tick("host-a", 0, &slot(0));
    let holder = holder.env("HOLD", "1").spawn().expect("spawn");
    let until = Instant::now() + Duration::from_secs(60);
    while !s
        .events(&db)
        .iter()
        .any(|e| e[0].as_deref() == Some("start"))
    {
        assert!(Instant::now() < until, "slot 0 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(holder.id() as i32, libc::SIGTERM) };
    let o = holder.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(143), "{}", err(&o));

    // Slot 1: host-b's workers tick first: one wins the lease and cannot start the job.
    // The slot is released, so host-a's workers, a moment later, still work it.
    let spawn = |h: &'static str, i: i64| -> Vec<Child> {
        (0..4)
            .map(|w| s.tick(h, w, &slot(i)).spawn().expect("spawn"))
            .collect()
    };
    let b = wait_all(spawn("host-b", 1));
    let failed = b.iter().filter(|o| o.status.code() == Some(125)).count();
    assert!(failed >= 1, "host-b never won slot 1");
    for o in b.iter().filter(|o| o.status.code() == Some(125)) {
        let e = err(o);
        assert!(
            e.contains("could not start on this host") && e.contains("(os error"),
            "{e}"
        );
        assert!(e.contains("replay it with: batchguard run"), "{e}");
    }
    for o in wait_all(spawn("host-a", 1)) {
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    }
    // Slots 2 and 3: every worker of both hosts on every tick, at once.
    for i in 2..=3 {
        let mut children = spawn("host-a", i);
        children.extend(spawn("host-b", i));
        for o in wait_all(children) {
            // 0 ran or skipped; 125 host-b could not prepare (said, and released).
            let code = o.status.code();
            assert!(matches!(code, Some(0) | Some(125)), "{code:?}: {}", err(&o));
            if code == Some(125) {
                assert!(
                    err(&o).contains("could not start on this host"),
                    "{}",
                    err(&o)
                );
            }
        }
    }
    // The healthy host's next ticks catch up whatever was left, one slot a tick, until
    // nothing is left behind.
    for _ in 0..8 {
        let o = s.tick("host-a", 0, &slot(4)).output().expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        if !err(&o).contains("catching it up") {
            break;
        }
    }

    let ev = s.events(&db);
    let at = |i: i64| {
        Some(
            jiff::Timestamp::from_second(1_772_330_400 + 60 * i)
                .expect("t")
                .as_second()
                .to_string(),
        )
    };
    for i in 0..=4 {
        let ends: Vec<&Vec<Option<String>>> = ev
            .iter()
            .filter(|e| e[0].as_deref() == Some("end") && e[1] == at(i))
            .collect();
        let ok = ends.iter().filter(|e| e[3].is_none()).count();
        assert_eq!(ok, 1, "slot {i} worked {ok} times: {ends:#?}");
    }
    // Slot 0 ended INTERRUPTED and was caught up.
    assert!(
        ev.iter()
            .any(|e| e[1] == at(0) && e[3].as_deref() == Some("INTERRUPTED")),
        "{ev:#?}"
    );
    assert!(
        ev.iter().any(|e| e[0].as_deref() == Some("end")
            && e[1] == at(0)
            && e[2].as_deref() == Some("catch_up")
            && e[3].is_none()),
        "{ev:#?}"
    );
    // A host's own failure never dead-letters a slot.
    assert!(
        ev.iter().all(|e| e[0].as_deref() != Some("dead_letter")),
        "{ev:#?}"
    );
    // Skips name their holder: a worker of a host, not only the host.
    let holders: Vec<&str> = ev
        .iter()
        .filter(|e| e[0].as_deref() == Some("skip"))
        .filter_map(|e| e[5].as_deref())
        .filter(|d| d.starts_with("held by "))
        .collect();
    assert!(!holders.is_empty(), "{ev:#?}");
    assert!(
        holders
            .iter()
            .all(|d| d.contains("/pm2:") && d.ends_with("store: postgres")),
        "{holders:#?}"
    );

    // `audit` of the window: clean.
    let a = Command::new(bin())
        .args(["audit", "--ledger", &s.url, "--manifest"])
        .arg(s.dir.path().join("billing.batchguard.yaml"))
        .args(["--from", &slot(0), "--to", &slot(5), "--format", "json"])
        .output()
        .expect("audit");
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&a.stdout),
        err(&a)
    );
}
