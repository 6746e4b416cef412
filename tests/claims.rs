//! Claims (SPEC 7.5) on the real servers: the SQL function `batchguard_claim` inside a job's
//! own transaction (PostgreSQL, MySQL / MariaDB), the crash test of issue 29 (a job that
//! applies 200 records, killed with SIGKILL at each point of its loop in turn, caught up by
//! the next attempt: every record once in its table and once in the outputs ledger, audit
//! clean; without claims the doubles show), a stale holder's claim refused, and `batchguard
//! claim` on SQLite and Redis. Real processes and signals; every wait is on a fact the test
//! can see (a line the client printed, a session waiting for a lock, a process's exit).

#[path = "common/stores.rs"]
mod stores;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use stores::{Case, Db, Kind};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_batchguard"))
}

/// `PATH` with the built `batchguard` first, so a job calls the one under test.
fn path_with_bin() -> String {
    let dir = bin().parent().expect("bin dir").display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The command line of the database's own client (`psql`, `mysql`), reading statements on
/// stdin, printing bare values, stopping at the first error.
fn client_argv(db: &Db) -> Vec<String> {
    let url = db.url();
    match db {
        Db::Pg(_) => [
            "psql",
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            &url,
        ]
        .map(String::from)
        .to_vec(),
        Db::My(_) => {
            let rest = url.split_once("://").expect("a URL").1;
            let (auth, hostdb) = rest.rsplit_once('@').expect("user@host");
            let (hostport, name) = hostdb.split_once('/').expect("host/db");
            let name = name.split('?').next().unwrap_or(name);
            let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
            let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
            let mut v: Vec<String> = [
                "mysql", "-h", host, "-P", port, "-u", user, "-N", "-B", "-n",
            ]
            .map(String::from)
            .to_vec();
            if !password.is_empty() {
                v.push(format!("-p{password}"));
            }
            v.push(name.to_owned());
            v
        }
        Db::Redis(_) => panic!("no SQL client for Redis"),
    }
}

/// A client session kept open: statements sent, and what they printed read back up to a
/// marker, so the test knows the server has run them.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    pg: bool,
}

impl Client {
    fn open(db: &Db) -> Client {
        let argv = client_argv(db);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the database's client starts");
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Client {
            child,
            stdin,
            out,
            pg: matches!(db, Db::Pg(_)),
        }
    }

    /// Sends `sql` without waiting for it.
    fn send(&mut self, sql: &str) {
        let w = self.stdin.as_mut().expect("open");
        writeln!(w, "{sql}").and_then(|()| w.flush()).expect("send");
    }

    /// Sends `sql` and waits until it ran: the lines it printed (`None`: the client ended,
    /// an error stopped it).
    fn q(&mut self, sql: &str) -> Option<Vec<String>> {
        let sync = if self.pg { "\\echo @@" } else { "SELECT '@@';" };
        self.send(&format!("{sql}\n{sync}"));
        self.read()
    }

    /// The lines up to the marker of the last [`Client::q`].
    fn read(&mut self) -> Option<Vec<String>> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end().to_owned();
            if line == "@@" {
                return Some(lines);
            }
            lines.push(line);
        }
    }

    fn begin(&mut self) {
        let b = if self.pg {
            "BEGIN;"
        } else {
            "START TRANSACTION;"
        };
        self.q(b).expect("begin");
    }

    fn claim_sql(job: &str, key: &str, run: &str, fence: &str) -> String {
        format!("SELECT batchguard_claim('{job}', '{key}', '{run}', {fence});")
    }

    /// The client's end: its exit and stderr, stdin closed.
    fn end(mut self) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let out = self.child.wait_with_output().expect("client ends");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn truth(v: &str) -> bool {
    matches!(v, "t" | "1")
}

/// A store made by `store migrate` with job `j` running `command`; `None` when the server is
/// unreachable outside CI.
fn case(kind: Kind, tag: &str, retry: &str, command: &str) -> Option<Case> {
    let c = Case::new(kind, tag, "60s", retry, command)?;
    // `store migrate` again: idempotent, and it keeps the rows.
    let again = c.migrate();
    assert!(again.status.success(), "{}", text(&again));
    Some(c)
}

/// The environment a job's first attempt wrote to `env.txt` (`KEY=VALUE` lines).
fn job_env(c: &Case) -> BTreeMap<String, String> {
    std::fs::read_to_string(c.path("env.txt"))
        .expect("the job wrote env.txt")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

const WRITE_ENV: &str = "[\"sh\", \"-c\", \"env | grep ^BATCHGUARD_ > env.txt\"]";

/// A run that succeeded, and its job, run id and fence (the slot's latest holder).
fn one_run(kind: Kind, tag: &str) -> Option<(Case, String, String, String)> {
    let c = case(kind, tag, stores::NO_RETRY, WRITE_ENV)?;
    let o = c.run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    let env = job_env(&c);
    let get = |k: &str| env.get(k).cloned().expect(k);
    Some((
        c,
        get("BATCHGUARD_JOB"),
        get("BATCHGUARD_RUN_ID"),
        get("BATCHGUARD_FENCE"),
    ))
}

fn count(db: &Db, sql: &str) -> i64 {
    let wrapped = match db {
        Db::Pg(_) => format!("SELECT ({sql})::text"),
        _ => format!("SELECT CAST(({sql}) AS CHAR)"),
    };
    db.rows(&wrapped)[0][0]
        .as_deref()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count: {sql}"))
}

/// Waits (on the server's own view) until `n` sessions wait for a lock.
fn until_waiting(db: &Db, n: usize) {
    let start = std::time::Instant::now();
    while db.lock_waiters() < n {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no session waits for the lock"
        );
        std::thread::yield_now();
    }
}

/// The SQL function in the job's own transaction: the business write and the claim commit
/// together; a refused claim aborts the transaction (the write rolls back); a second claim
/// answers false; two open transactions claiming one key: exactly one true, whichever way
/// the first ends.
fn the_function_in_a_transaction(kind: Kind) {
    let Some((c, job, run, fence)) = one_run(kind, "fn") else {
        return;
    };
    let db = &c.db;
    db.exec("CREATE TABLE biz (k VARCHAR(64) NOT NULL)");
    let claim = |key: &str, f: &str| Client::claim_sql(&job, key, &run, f);

    // The write and the claim commit together.
    let mut a = Client::open(db);
    a.begin();
    a.q("INSERT INTO biz VALUES ('one');").expect("insert");
    let got = a.q(&claim("one", &fence)).expect("claim");
    assert!(truth(&got[0]), "{got:?}");
    a.q("COMMIT;").expect("commit");
    assert_eq!(count(db, "SELECT COUNT(*) FROM biz WHERE k = 'one'"), 1);
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM batchguard_outputs WHERE output_key = 'one'"
        ),
        1
    );

    // Claimed before: false, nothing written.
    a.begin();
    let got = a.q(&claim("one", &fence)).expect("claim");
    assert!(!truth(&got[0]), "{got:?}");
    a.q("COMMIT;").expect("commit");
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM batchguard_outputs WHERE output_key = 'one'"
        ),
        1
    );
    assert_eq!(a.end().0, Some(0));

    // Refused (another fence): the transaction aborts, the write rolls back.
    let wrong = (fence.parse::<i64>().expect("fence") + 1).to_string();
    let mut r = Client::open(db);
    r.begin();
    r.q("INSERT INTO biz VALUES ('refused');").expect("insert");
    assert!(r.q(&claim("two", &wrong)).is_none(), "the claim must fail");
    let (code, err) = r.end();
    assert_ne!(code, Some(0));
    assert!(
        err.contains(&format!(
            "run {run} (fence {wrong}) is no longer its slot's latest holder: claim of two refused"
        )),
        "{err}"
    );
    assert_eq!(count(db, "SELECT COUNT(*) FROM biz WHERE k = 'refused'"), 0);
    assert_eq!(count(db, "SELECT COUNT(*) FROM batchguard_claims"), 1);

    // Two open transactions, one key: the second waits for the first; committed, the second
    // answers false; rolled back, true.
    for first_commits in [true, false] {
        let key = if first_commits { "race-a" } else { "race-b" };
        let mut x = Client::open(db);
        let mut y = Client::open(db);
        x.begin();
        y.begin();
        assert!(truth(&x.q(&claim(key, &fence)).expect("claim")[0]));
        let sync = if y.pg { "\\echo @@" } else { "SELECT '@@';" };
        y.send(&format!("{}\n{sync}", claim(key, &fence)));
        until_waiting(db, 1);
        x.q(if first_commits {
            "COMMIT;"
        } else {
            "ROLLBACK;"
        })
        .expect("end x");
        let second = y.read().expect("the second claim answers");
        assert_eq!(truth(&second[0]), !first_commits, "{key}: {second:?}");
        y.q("COMMIT;").expect("commit y");
        assert_eq!(x.end().0, Some(0));
        assert_eq!(y.end().0, Some(0));
        assert_eq!(
            count(
                db,
                &format!("SELECT COUNT(*) FROM batchguard_outputs WHERE output_key = '{key}'")
            ),
            1
        );
    }
    // `store migrate` once more keeps every row.
    let again = c.migrate();
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(count(db, "SELECT COUNT(*) FROM batchguard_claims"), 3);
}

#[test]
fn pg_the_function_in_a_transaction() {
    the_function_in_a_transaction(Kind::Pg);
}

#[test]
fn mysql_the_function_in_a_transaction() {
    the_function_in_a_transaction(Kind::MySql);
}

/// `retry:` of the crash test's job: the attempt a kill ended is retried at once (a new
/// acquisition: new run id, new fence), which catches up the slot.
const RETRY_KILLED: &str = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n      retryable: [SIGNAL_KILL]\n";

const RECORDS: usize = 200;

/// One crash run: a job applying [`RECORDS`] records (claims or not), killed once at `die`
/// (`POINT:N`), caught up by the next attempt. Answers the case and the run's exit.
fn crash_run(kind: Kind, tag: &str, claims: bool, die: &str) -> Option<(Case, Output)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claims/apply.py");
    let command = format!("[\"python3\", \"{}\"]", script.display());
    let c = case(kind, tag, RETRY_KILLED, &command)?;
    c.db.exec("CREATE TABLE applied (rec INT NOT NULL)");
    let client = serde_json::to_string(&client_argv(&c.db)).expect("json");
    let o = c
        .cmd(&[])
        .env("CLIENT", client)
        .env("KIND", if kind == Kind::Pg { "pg" } else { "my" })
        .env("CLAIMS", if claims { "1" } else { "0" })
        .env("DIE_AT", die)
        .env("DIE_MARK", c.path("died"))
        .env("RECORDS", RECORDS.to_string())
        .env("TABLE", "applied")
        .output()
        .expect("run");
    assert!(
        c.path("died").exists(),
        "the job was not killed at {die}: {}",
        text(&o)
    );
    Some((c, o))
}

/// Records applied more than once in the job's table, and output keys more than once in the
/// outputs ledger.
fn doubles(c: &Case) -> (i64, i64, i64, i64) {
    let db = &c.db;
    (
        count(db, "SELECT COUNT(DISTINCT rec) FROM applied"),
        count(db, "SELECT COUNT(*) FROM applied"),
        count(
            db,
            "SELECT COUNT(DISTINCT output_key) FROM batchguard_outputs",
        ),
        count(db, "SELECT COUNT(*) FROM batchguard_outputs"),
    )
}

fn audit(c: &Case) -> Output {
    // A window around now with whole hours of margin: `--since` ends at a whole second, which
    // can fall before a slot that began a moment ago.
    let now = jiff::Timestamp::now();
    let hour = jiff::SignedDuration::from_hours(1);
    let from = (now - hour).to_string();
    let to = (now + hour).to_string();
    let mut args: Vec<String> = vec!["audit".into(), "--from".into(), from, "--to".into(), to];
    args.extend(c.ledger_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = c.bg(&args);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains(" 0 outside the window") || !said.contains("outside the window"),
        "every row is in the window: {}",
        text(&o)
    );
    o
}

/// Done when 1 (issue 29): killed at every point of the loop in turn, each time caught up:
/// every record exactly once in the job's table and in the outputs ledger, audit clean.
fn the_crash_test(kind: Kind) {
    let n = RECORDS as i64;
    for (i, die) in ["before:37", "claim:74", "inside:111", "commit:148"]
        .into_iter()
        .enumerate()
    {
        let Some((c, o)) = crash_run(kind, &format!("crash{i}"), true, die) else {
            return;
        };
        assert!(o.status.success(), "{die}: {}", text(&o));
        assert_eq!(doubles(&c), (n, n, n, n), "{die}: {}", text(&o));
        // The claims are the outputs: one per record, none listed twice.
        assert_eq!(count(&c.db, "SELECT COUNT(*) FROM batchguard_claims"), n);
        let a = audit(&c);
        assert!(a.status.success(), "{die}: audit: {}", text(&a));
        assert!(
            !String::from_utf8_lossy(&a.stdout).contains("AU201"),
            "{}",
            text(&a)
        );
    }
    // The same job without claims, killed after a commit: the catch-up applies again what
    // the dead attempt committed, and audit sees it (the test can fail).
    let Some((c, o)) = crash_run(kind, "crashnoclaim", false, "commit:148") else {
        return;
    };
    assert!(o.status.success(), "{}", text(&o));
    let (distinct, rows, keys, outputs) = doubles(&c);
    assert_eq!((distinct, keys), (n, n));
    assert_eq!(rows, n + 148, "records 1..=148 applied twice");
    assert_eq!(
        outputs,
        n + 147,
        "the dead attempt's listed outputs, then all again"
    );
    let a = audit(&c);
    assert!(!a.status.success(), "{}", text(&a));
    assert!(
        String::from_utf8_lossy(&a.stdout).contains("AU201"),
        "{}",
        text(&a)
    );
}

#[test]
fn pg_the_crash_test() {
    the_crash_test(Kind::Pg);
}

#[test]
fn mysql_the_crash_test() {
    the_crash_test(Kind::MySql);
}

/// Done when 3: a stale holder (stopped with SIGSTOP inside its transaction while its
/// attempt ended and a newer attempt took the slot, then SIGCONT) cannot claim: its
/// transaction rolls back.
fn a_stale_holder_cannot_claim(kind: Kind) {
    // Attempt 1 writes its environment, waits for `go`, and asks to be retried (75); attempt
    // 2, the slot's newer holder, succeeds.
    let command = stores_sh(
        "if [ ! -f env.txt ]; then env | grep ^BATCHGUARD_ > env.txt; while [ ! -f go ]; do sleep 0.01; done; exit 75; fi; env | grep ^BATCHGUARD_ > env2.txt",
    );
    let retry = "      max_attempts: 2\n      backoff: fixed\n      initial_delay: 0s\n";
    let Some(c) = case(kind, "stale", retry, &command) else {
        return;
    };
    c.db.exec("CREATE TABLE biz (k VARCHAR(64) NOT NULL)");
    let mut run = c
        .cmd(&[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let started = std::time::Instant::now();
    while !c.path("env.txt").exists() {
        assert!(run.try_wait().expect("wait").is_none(), "run ended early");
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::yield_now();
    }
    // env.txt may be half written: wait for its last variable.
    let env = loop {
        let e = std::fs::read_to_string(c.path("env.txt")).unwrap_or_default();
        if e.contains("BATCHGUARD_FENCE=") && e.contains("BATCHGUARD_RUN_ID=") && e.ends_with('\n')
        {
            break job_env(&c);
        }
        std::thread::yield_now();
    };
    let (job, run_id, fence) = (
        env["BATCHGUARD_JOB"].clone(),
        env["BATCHGUARD_RUN_ID"].clone(),
        env["BATCHGUARD_FENCE"].clone(),
    );
    // The holder's own session: its write inside its transaction, then it is stopped.
    let mut stale = Client::open(&c.db);
    stale.begin();
    stale
        .q("INSERT INTO biz VALUES ('stale');")
        .expect("insert");
    // On PostgreSQL the session's client is stopped (SIGSTOP) while the newer holder works
    // and continued after; `mysql` may end on the interrupted read that SIGCONT leaves it,
    // so there the session simply waits, idle in its open transaction, which is all the
    // server sees of a stopped process either way.
    let pid = stale.child.id() as libc::pid_t;
    let stop = kind == Kind::Pg;
    // SAFETY: a signal to a child this test started and has not reaped.
    assert!(!stop || unsafe { libc::kill(pid, libc::SIGSTOP) } == 0);
    std::fs::write(c.path("go"), b"").expect("go");
    let o = run.wait_with_output().expect("run ends");
    assert!(o.status.success(), "{}", text(&o));
    assert!(c.path("env2.txt").exists(), "a newer attempt took the slot");
    // SAFETY: as above.
    assert!(!stop || unsafe { libc::kill(pid, libc::SIGCONT) } == 0);
    assert!(
        stale
            .q(&Client::claim_sql(&job, "stale-key", &run_id, &fence))
            .is_none()
    );
    let (code, err) = stale.end();
    assert_ne!(code, Some(0));
    // (MySQL cuts a SIGNAL's message at 128 characters.)
    assert!(
        err.contains(&format!(
            "batchguard: run {run_id} (fence {fence}) is no longer its slot's latest holder"
        )),
        "{err}"
    );
    assert_eq!(
        count(&c.db, "SELECT COUNT(*) FROM biz"),
        0,
        "the stale write rolled back"
    );
    assert_eq!(count(&c.db, "SELECT COUNT(*) FROM batchguard_claims"), 0);
}

fn stores_sh(script: &str) -> String {
    format!(
        "[\"sh\", \"-c\", {}]",
        serde_json::to_string(script).expect("json")
    )
}

#[test]
fn pg_a_stale_holder_cannot_claim() {
    a_stale_holder_cannot_claim(Kind::Pg);
}

#[test]
fn mysql_a_stale_holder_cannot_claim() {
    a_stale_holder_cannot_claim(Kind::MySql);
}

/// The job of the CLI tests: claims `a` twice and `b` once under `run` (BATCHGUARD_STORE
/// from `run`), lists `b` in its outputs too, then claims with a stale fence; each exit
/// written to `codes.txt`.
const CLI_JOB: &str = "batchguard claim --key a; echo \"a1=$?\" >> codes.txt; \
    batchguard claim --key a; echo \"a2=$?\" >> codes.txt; \
    batchguard claim --key b; echo \"b1=$?\" >> codes.txt; echo b >> \"$BATCHGUARD_OUTPUTS\"; \
    batchguard claim --key c --fence $((BATCHGUARD_FENCE + 1)) 2> refused.txt; echo \"c1=$?\" >> codes.txt; \
    env -u BATCHGUARD_STORE batchguard claim --key d 2> nostore.txt; echo \"d1=$?\" >> codes.txt";

fn codes(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("codes.txt")).expect("codes.txt")
}

#[test]
fn the_cli_claims_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = format!(
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 60s\n",
        stores_sh(CLI_JOB)
    );
    std::fs::write(dir.path().join("m.batchguard.yaml"), manifest).expect("manifest");
    let o = Command::new(bin())
        .current_dir(dir.path())
        .env_remove("BATCHGUARD_STORE")
        .env("PATH", path_with_bin())
        .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(codes(dir.path()), "a1=0\na2=1\nb1=0\nc1=125\nd1=125\n");
    let refused = std::fs::read_to_string(dir.path().join("refused.txt")).expect("refused");
    assert!(
        refused.contains("is no longer its slot's latest holder: claim of c refused"),
        "{refused}"
    );
    let nostore = std::fs::read_to_string(dir.path().join("nostore.txt")).expect("nostore");
    assert!(nostore.contains("BATCHGUARD_STORE"), "{nostore}");
    // `run` made the store (a relative path, made absolute for the job): `a` and `b` once
    // each in the outputs, though `b` was also listed.
    let db = dir.path().join(".batchguard/store.db");
    let rows: Vec<(String, i64)> = sqlite_rows(
        &db,
        "SELECT output_key, COUNT(*) FROM batchguard_outputs GROUP BY output_key ORDER BY 1",
    );
    assert_eq!(rows, vec![("a".into(), 1), ("b".into(), 1)]);
}

fn sqlite_rows<T>(db: &Path, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    stores::server::rt().block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
            .await
            .expect("open");
        sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&mut c)
            .await
            .expect("query")
    })
}

#[test]
fn the_cli_claims_on_redis() {
    let Some(c) = case(Kind::Redis, "cli", stores::NO_RETRY, &stores_sh(CLI_JOB)) else {
        return;
    };
    let o = c
        .cmd(&[])
        .env_remove("BATCHGUARD_STORE")
        .env("PATH", path_with_bin())
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(codes(c.dir.path()), "a1=0\na2=1\nb1=0\nc1=125\nd1=125\n");
    let refused = std::fs::read_to_string(c.path("refused.txt")).expect("refused");
    assert!(
        refused.contains("is no longer its slot's latest holder: claim of c refused"),
        "{refused}"
    );
    // Redis keeps no ledger: the claims went to the ledger apart with the run's end, each
    // once (`b` was also listed).
    let outputs = std::fs::read_to_string(c.path("ledger.outputs.jsonl")).expect("outputs");
    let mut keys: Vec<String> = outputs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .map(|v| v["output_key"].as_str().expect("output_key").to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, ["a", "b"], "{outputs}");
    // A second run of the slot is a skip; a claim after it by the finished run is refused
    // on Redis (its lease is gone).
    let after = c
        .command(&["claim", "--key", "e"])
        .env("BATCHGUARD_STORE", c.url())
        .env("BATCHGUARD_JOB", "j")
        .env("BATCHGUARD_RUN_ID", "no-such-run")
        .env("BATCHGUARD_FENCE", "1")
        .output()
        .expect("claim");
    assert_eq!(after.status.code(), Some(125), "{}", text(&after));
}

/// The link's `claim` (docs/node-protocol.md): answered `claimed` with the driver's id, true
/// once, false after; a bad key refused without the store; a claimed key also sent as an
/// `output` is recorded once.
#[test]
fn the_link_claims_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 60s\n";
    std::fs::write(dir.path().join("m.batchguard.yaml"), manifest).expect("manifest");
    let mut child = Command::new(bin())
        .current_dir(dir.path())
        .env_remove("BATCHGUARD_STORE")
        .args([
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "j",
            "--link",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run --link");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut read = || {
        let mut line = String::new();
        out.read_line(&mut line).expect("a line");
        serde_json::from_str::<serde_json::Value>(&line).expect("json")
    };
    assert_eq!(read()["event"], "acquired");
    let mut answers = Vec::new();
    for (id, op, key) in [
        (1, "claim", "x"),
        (2, "claim", "x"),
        (3, "output", "x"),
        (4, "claim", ""),
    ] {
        let msg = serde_json::json!({"op": op, "id": id, "key": key});
        writeln!(stdin, "{msg}").expect("send");
        answers.push(read());
    }
    assert_eq!(
        answers[0],
        serde_json::json!({"event": "claimed", "id": 1, "ok": true, "claimed": true})
    );
    assert_eq!(
        answers[1],
        serde_json::json!({"event": "claimed", "id": 2, "ok": true, "claimed": false})
    );
    assert_eq!(answers[2]["event"], "ack");
    assert_eq!(answers[3]["code"], "E_CLAIM_KEY");
    writeln!(
        stdin,
        "{}",
        serde_json::json!({"op": "done", "status": "success"})
    )
    .expect("done");
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    let rows: Vec<(String, i64)> = sqlite_rows(
        &dir.path().join(".batchguard/store.db"),
        "SELECT output_key, COUNT(*) FROM batchguard_outputs GROUP BY output_key",
    );
    assert_eq!(rows, vec![("x".into(), 1)]);
}
