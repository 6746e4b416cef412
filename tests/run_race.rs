//! THE RACE (SPEC 7.1 items 3, 8, SPEC 10): at least 8 real `batchguard run` processes per
//! slot, a random tenth of them SIGKILLed (and the holder of every tenth slot killed
//! mid-run), on every store: one SQLite store, one PostgreSQL database (a fresh one,
//! `tests/common/pgdb.rs`), one MySQL/MariaDB database (`tests/common/mysqldb.rs`) and one
//! Redis key prefix with a JSONL ledger apart (`tests/common/redisdb.rs`). The job proves exclusivity itself: a non-blocking OS file lock per slot
//! that it must never find taken, and monotonic intervals that never overlap. Rounds go on
//! (synchronised on process exits and ledger rows, never on sleeps) until every slot has
//! succeeded; then each slot succeeded exactly once, fences rise per slot, and `audit` finds
//! no duplicate run or output.
//!
//! `BATCHGUARD_RACE_SLOTS` sets the slot count (default 200 under `CI=true`, else 30);
//! `BATCHGUARD_RACE_PROCS` the processes per slot (default 8). The two stores race one
//! after the other (the host's cores are the limit, not the stores). The Redis race keeps
//! its markers for 100 years (`retention=36500d`): its slots are in 2026, whatever today is.

mod common;
#[path = "common/stores.rs"]
mod stores;

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use stores::{mysqldb, pgdb, redisdb};

const JOB: &str = r#"
import fcntl, os, sys, time, random
d = sys.argv[1]
slot = os.environ["BATCHGUARD_SCHEDULED_AT"].replace(":", "")
lk = open(os.path.join(d, "lock-" + slot), "w")
try:
    fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    open(os.path.join(d, "VIOLATION"), "a").write(slot + "\n")
    sys.exit(3)
t0 = time.monotonic_ns()
with open(os.path.join(d, "started-" + slot), "a") as f:
    # The guard: the job's parent is run's supervisor, whose parent is batchguard.
    f.write("%s\n" % open("/proc/%d/stat" % os.getppid()).read().rsplit(")", 1)[1].split()[1])
time.sleep(random.uniform(0.02, 0.08))
# Idempotent, as a real job must be: a killed holder may already have applied the key.
try:
    os.close(os.open(os.path.join(d, "applied-" + slot), os.O_CREAT | os.O_EXCL))
    open(os.environ["BATCHGUARD_OUTPUTS"], "a").write("key-" + slot + "\n")
except FileExistsError:
    pass
t1 = time.monotonic_ns()
with open(os.path.join(d, "intervals"), "a") as f:
    f.write("%s %s %d %d\n" % (slot, os.environ["BATCHGUARD_FENCE"], t0, t1))
"#;

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small xorshift: the test needs no crate for "random".
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The store under race: the default SQLite file, a PostgreSQL or MySQL database, or a
/// Redis prefix (whose ledger is a JSONL file apart).
enum Store {
    Sqlite,
    Pg(pgdb::TestDb),
    Mysql(mysqldb::TestDb),
    Redis(redisdb::TestRedis),
}

impl Store {
    /// `run` of job `r` for `slot` as `instance`, from `dir`, on this store (with its ledger
    /// apart, where it needs one); stdin closed.
    fn run(&self, dir: &std::path::Path, slot: &str, instance: &str) -> Command {
        let mut c = Command::new(common::bin());
        c.current_dir(dir)
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "r"])
            .args(["--store", &self.url()])
            .args(
                self.ledger_apart()
                    .map(|l| ["--ledger", l])
                    .into_iter()
                    .flatten(),
            )
            .args(["--scheduled-at", slot, "--instance", instance])
            .stdin(Stdio::null());
        c
    }

    /// The fencing counter's value (the last fence handed out).
    fn counter(&self, dir: &std::path::Path) -> i64 {
        let text = match self {
            Store::Sqlite => {
                let v: Vec<(i64,)> = common::sqlite_rows(
                    &dir.join(".batchguard/store.db"),
                    "SELECT value FROM batchguard_fence",
                );
                return v[0].0;
            }
            Store::Pg(db) => db.rows("SELECT last_value::text FROM batchguard_fence")[0][0].clone(),
            Store::Mysql(db) => {
                db.rows("SELECT CAST(value AS CHAR) FROM batchguard_fence")[0][0].clone()
            }
            Store::Redis(r) => r.cmd::<Option<String>>(&["GET", &format!("{}:fence:r", r.prefix)]),
        };
        text.and_then(|t| t.parse().ok()).unwrap_or(0)
    }

    /// Ends every lease in the store's time.
    fn expire_leases(&self, dir: &std::path::Path) {
        match self {
            Store::Sqlite => {
                let _: Vec<(String,)> = common::sqlite_rows(
                    &dir.join(".batchguard/store.db"),
                    "UPDATE batchguard_leases SET lease_until = 0 RETURNING key",
                );
            }
            Store::Pg(db) => {
                db.exec("UPDATE batchguard_leases SET lease_until = now() - interval '1 second'")
            }
            Store::Mysql(db) => db.exec("UPDATE batchguard_leases SET lease_until = 0"),
            Store::Redis(r) => {
                for k in r.keys().iter().filter(|k| k.contains(":lease:")) {
                    let _: i64 = r.cmd(&["PEXPIRE", k, "1"]);
                    while r.cmd::<i64>(&["EXISTS", k]) == 1 {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }
}

/// The ledger apart of the Redis race, in its working directory.
const REDIS_LEDGER: &str = "ledger.jsonl";

impl Store {
    /// The `--store` URL, as seen from the race's working directory.
    fn url(&self) -> String {
        match self {
            Store::Sqlite => "sqlite:.batchguard/store.db".into(),
            Store::Pg(db) => db.url.clone(),
            Store::Mysql(db) => db.url.clone(),
            Store::Redis(r) => format!("{}&retention=36500d", r.url()),
        }
    }

    /// The `--ledger` of `run`, when it is not the store.
    fn ledger_apart(&self) -> Option<&'static str> {
        matches!(self, Store::Redis(_)).then_some(REDIS_LEDGER)
    }

    /// The `--ledger` (and `--outputs`) that `audit` reads.
    fn audit_args(&self) -> Vec<String> {
        match self.ledger_apart() {
            Some(l) => vec![
                "--ledger".into(),
                l.into(),
                "--outputs".into(),
                "ledger.outputs.jsonl".into(),
            ],
            None => vec!["--ledger".into(), self.url()],
        }
    }
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn racing_processes_never_hold_one_slot_twice() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    race(Store::Sqlite);
}

#[test]
fn racing_processes_never_hold_one_slot_twice_on_postgres() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = pgdb::fresh("race") else {
        return;
    };
    let m = Command::new(common::bin())
        .args(["store", "migrate", "--store", &db.url])
        .output()
        .expect("migrate");
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    race(Store::Pg(db));
}

#[test]
fn racing_processes_never_hold_one_slot_twice_on_mysql() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = mysqldb::fresh("race") else {
        return;
    };
    let m = Command::new(common::bin())
        .args(["store", "migrate", "--store", &db.url])
        .output()
        .expect("migrate");
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    race(Store::Mysql(db));
}

#[test]
fn racing_processes_never_hold_one_slot_twice_on_redis() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = redisdb::fresh("race") else {
        return;
    };
    let store = Store::Redis(r);
    migrate(&store);
    race(store);
}

/// `store migrate` of a database or Redis store (SQLite needs none).
fn migrate(store: &Store) {
    let m = Command::new(common::bin())
        .args(["store", "migrate", "--store", &store.url()])
        .output()
        .expect("migrate");
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
}

#[test]
fn racing_processes_take_consecutive_fences() {
    consecutive(Store::Sqlite);
}

#[test]
fn racing_processes_take_consecutive_fences_on_postgres() {
    if let Some(db) = pgdb::fresh("fences") {
        consecutive(Store::Pg(db));
    }
}

#[test]
fn racing_processes_take_consecutive_fences_on_mysql() {
    if let Some(db) = mysqldb::fresh("fences") {
        consecutive(Store::Mysql(db));
    }
}

#[test]
fn racing_processes_take_consecutive_fences_on_redis() {
    if let Some(r) = redisdb::fresh("fences") {
        consecutive(Store::Redis(r));
    }
}

/// SPEC 7.1 item 16: the counter moves only when a lease is granted. Six processes race
/// for each of four slots (one start and five skips each), then a holder dies, and the
/// acquire that finds its slot's attempts used up dead-letters it: the fences handed out
/// are 1, 2, 3, 4, 5 and the counter stands at 5, however many skips and refusals there were.
fn consecutive(store: Store) {
    if !matches!(store, Store::Sqlite) {
        migrate(&store);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("m.batchguard.yaml"),
        "version: 1\nservice: race\njobs:\n  - name: r\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: [\"sleep\", \"0.2\"]\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 60s\n    retry:\n      max_attempts: 1\n",
    )
    .unwrap();
    let run = |slot: &str, instance: &str, extra: &[&str]| {
        let mut c = store.run(d, slot, instance);
        c.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
        c
    };
    let base = jiff::Timestamp::from_second(1_772_330_400).unwrap();
    let slot = |i: i64| {
        base.checked_add(jiff::SignedDuration::from_mins(i))
            .unwrap()
            .to_string()
    };
    for i in 0..4 {
        let children: Vec<Child> = (0..6)
            .map(|p| run(&slot(i), &format!("i{p}"), &[]).spawn().expect("spawn"))
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
    }
    assert_eq!(store.counter(d), 4, "skips took no fence");
    // A holder that dies (its job kills it) leaves the slot's one attempt used.
    let died = run(
        &slot(4),
        "dier",
        &[
            "--",
            "sh",
            "-c",
            "kill -9 $(cut -d' ' -f4 /proc/$PPID/stat); sleep 5",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&died.status),
        Some(9)
    );
    store.expire_leases(d);
    let o = run(&slot(4), "late", &[]).output().unwrap();
    assert!(o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("dead-lettered (all 1 attempts were used)"),
        "{e}"
    );
    assert_eq!(store.counter(d), 5, "the dead letter took no fence");
    let mut fences: Vec<i64> = rows(&store, d)
        .into_iter()
        .filter(|r| r.1 == "start")
        .map(|r| r.3.expect("a start has its fence"))
        .collect();
    fences.sort();
    assert_eq!(fences, [1, 2, 3, 4, 5]);
    let skips = rows(&store, d).iter().filter(|r| r.1 == "skip").count();
    assert_eq!(skips, 4 * 5 + 1);
}

fn race(store: Store) {
    let url = store.url();
    // Fewer slots at once on PostgreSQL: every process holds a connection.
    let per_chunk = if matches!(store, Store::Pg(_) | Store::Mysql(_)) {
        6
    } else {
        10
    };
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let slots = env_n("BATCHGUARD_RACE_SLOTS", if ci { 200 } else { 30 });
    let procs = env_n("BATCHGUARD_RACE_PROCS", 8).max(8);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("job.py"), JOB).unwrap();
    std::fs::write(
        d.join("m.batchguard.yaml"),
        format!(
            "version: 1\nservice: race\njobs:\n  - name: r\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: [\"python3\", \"job.py\", \"{}\"]\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 6s\n    retry:\n      max_attempts: 100\n      backoff: fixed\n      initial_delay: 0s\n      on_unknown: retry\n",
            d.display()
        ),
    )
    .unwrap();
    let bin = common::bin();
    let base = jiff::Timestamp::from_second(1_772_330_400).unwrap(); // 2026-03-01T02:00:00Z
    let slot_of = |i: usize| {
        base.checked_add(jiff::SignedDuration::from_mins(i as i64))
            .unwrap()
            .to_string()
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ slots as u64);
    let mut pending: Vec<usize> = (0..slots).collect();
    let mut killed = 0usize;
    let mut spawned = 0usize;
    let started = Instant::now();
    let mut round = 0;
    while !pending.is_empty() {
        round += 1;
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "slots never finished: {pending:?}"
        );
        for chunk in pending.chunks(per_chunk) {
            let mut children: Vec<(usize, Child)> = Vec::new();
            for &i in chunk {
                for p in 0..procs {
                    let c = store
                        .run(d, &slot_of(i), &format!("i{p}"))
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn run");
                    spawned += 1;
                    children.push((i, c));
                }
            }
            // A random tenth of the processes, killed at once (some before, some after the acquire).
            for (_, c) in children.iter_mut() {
                if round == 1 && rng.next().is_multiple_of(10) {
                    let _ = c.kill();
                    killed += 1;
                }
            }
            // The holder of every tenth slot, killed mid-run (once its job said it started).
            if round == 1 {
                for &i in chunk.iter().filter(|i| *i % 10 == 3) {
                    let marker = d.join(format!("started-{}", slot_of(i).replace(':', "")));
                    let until = Instant::now() + Duration::from_secs(20);
                    while Instant::now() < until {
                        if let Ok(s) = std::fs::read_to_string(&marker)
                            && let Some(pid) = s.lines().next().and_then(|l| l.parse::<i32>().ok())
                        {
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                            killed += 1;
                            break;
                        }
                        if children
                            .iter_mut()
                            .filter(|(s, _)| *s == i)
                            .all(|(_, c)| matches!(c.try_wait(), Ok(Some(_))))
                        {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
            for (_, mut c) in children {
                let _ = c.wait();
            }
        }
        let done = succeeded_slots(&store, d);
        let before = pending.len();
        pending.retain(|i| !done.contains(&slot_of(*i)));
        if pending.len() == before {
            // Every remaining slot is held by a killed run whose lease has not expired yet.
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    eprintln!("race on {url}: {slots} slots, {spawned} processes, {killed} killed, {round} rounds");
    assert!(
        !d.join("VIOLATION").exists(),
        "a job found its slot's lock taken: {}",
        std::fs::read_to_string(d.join("VIOLATION")).unwrap_or_default()
    );
    // Intervals of one slot never overlap.
    let text = std::fs::read_to_string(d.join("intervals")).unwrap_or_default();
    let mut by_slot: HashMap<String, Vec<(i64, u128, u128)>> = HashMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        by_slot.entry(f[0].into()).or_default().push((
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        ));
    }
    for (slot, mut iv) in by_slot {
        iv.sort_by_key(|x| x.1);
        for w in iv.windows(2) {
            assert!(w[0].2 <= w[1].1, "slot {slot}: intervals overlap: {w:?}");
        }
    }
    // The ledger: one success per slot, fences strictly rising per slot.
    let (ends, fences) = ledger(&store, d);
    for i in 0..slots {
        let s = slot_of(i);
        assert_eq!(
            ends.get(&s).copied().unwrap_or(0),
            1,
            "slot {s} succeeded {:?} times",
            ends.get(&s)
        );
        let f = &fences[&s];
        assert!(f.windows(2).all(|w| w[0] < w[1]), "slot {s}: fences {f:?}");
    }
    let to = base
        .checked_add(jiff::SignedDuration::from_mins(slots as i64))
        .unwrap()
        .to_string();
    let audit = Command::new(&bin)
        .current_dir(d)
        .arg("audit")
        .args(store.audit_args())
        .args(["--manifest", "m.batchguard.yaml"])
        .args(["--from", &base.to_string(), "--to", &to, "--format", "json"])
        .output()
        .unwrap();
    let codes: HashSet<String> = stores::audit_codes(&audit).into_iter().collect();
    assert!(
        !codes.contains("AU102") && !codes.contains("AU201"),
        "audit: {codes:?}"
    );
}

/// Ledger rows as (scheduled_at, event, status, fence), in the order they were written.
fn rows(
    store: &Store,
    dir: &std::path::Path,
) -> Vec<(String, String, Option<String>, Option<i64>)> {
    match store {
        Store::Sqlite => common::sqlite_rows(
            &dir.join(".batchguard/store.db"),
            "SELECT scheduled_at, event, status, fence FROM batchguard_events ORDER BY rowid",
        ),
        Store::Pg(db) => db
            .rows(
                "SELECT to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
                 event, status, fence::text FROM batchguard_events ORDER BY at, ctid",
            )
            .into_iter()
            .map(|r| {
                (
                    r[0].clone().unwrap(),
                    r[1].clone().unwrap(),
                    r[2].clone(),
                    r[3].as_deref().and_then(|f| f.parse().ok()),
                )
            })
            .collect(),
        Store::Mysql(db) => db
            .rows(
                "SELECT scheduled_at, event, status, CAST(fence AS CHAR) FROM batchguard_events ORDER BY id",
            )
            .into_iter()
            .map(|r| {
                let s: jiff::Timestamp = r[0].as_deref().unwrap().parse().unwrap();
                (
                    s.to_string(),
                    r[1].clone().unwrap(),
                    r[2].clone(),
                    r[3].as_deref().and_then(|f| f.parse().ok()),
                )
            })
            .collect(),
        Store::Redis(_) => std::fs::read_to_string(dir.join(REDIS_LEDGER))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| {
                (
                    v["scheduled_at"].as_str().unwrap_or_default().to_owned(),
                    v["event"].as_str().unwrap_or_default().to_owned(),
                    v["status"].as_str().map(str::to_owned),
                    v["fence"].as_i64(),
                )
            })
            .collect(),
    }
}

fn succeeded_slots(store: &Store, dir: &std::path::Path) -> HashSet<String> {
    rows(store, dir)
        .into_iter()
        .filter(|r| r.1 == "end" && r.2.as_deref() == Some("success"))
        .map(|r| r.0)
        .collect()
}

fn ledger(
    store: &Store,
    dir: &std::path::Path,
) -> (HashMap<String, usize>, HashMap<String, Vec<i64>>) {
    let mut ends = HashMap::new();
    let mut fences: HashMap<String, Vec<i64>> = HashMap::new();
    for (s, e, st, f) in rows(store, dir) {
        if e == "end" && st.as_deref() == Some("success") {
            *ends.entry(s.clone()).or_insert(0) += 1;
        }
        if e == "start" {
            fences.entry(s).or_default().push(f.unwrap_or(0));
        }
    }
    (ends, fences)
}
