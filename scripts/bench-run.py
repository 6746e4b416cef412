#!/usr/bin/env python3
"""SPEC 10 `run` benchmark: the guard's overhead, round trips and contention, per store.

One command: builds batchguard (release), then prints, for each store that is reachable
(SQLite always; PostgreSQL, Redis and MySQL/MariaDB when their servers answer):

  * median and p95 wall time of `batchguard run -- true` (a new slot each time, so every run
    acquires, writes `start`, runs `true`, writes `end` and releases), interleaved with bare
    `true` (and `flock -n FILE true`), and the overhead over bare `true`;
  * round trips of one successful run with `--scheduled-at`, after connecting, counted by a
    proxy that reads the store's protocol (PostgreSQL: simple `Query` and `Sync` messages;
    MySQL: command packets; Redis: commands sent together count as one), and of a skip;
  * 50 contenders released at once on one slot: how many `start`s, `skip`s and `end`s the
    ledger got, and each contender's wall time.

Then one table with every store side by side (the one in docs/benchmarks.md).

With `--idle-procs N`, the SQLite runs are measured again while N idle processes (`sleep`)
run beside them, and then once more without them: the guard's clean-up must cost the same
whatever the host's process count. `--only sqlite,redis` measures only the stores named.

Besides wall time, each row gives the median CPU time (user + system, of `run` and the
`true` it starts, from `wait4`), which a loaded machine inflates far less than wall time.

    python3 scripts/bench-run.py [--runs 200] [--pg URL] [--redis URL] [--mysql URL]
                                 [--only STORES] [--idle-procs N] [--bin PATH]

Defaults: postgres://postgres@127.0.0.1:5432/test, redis://127.0.0.1:6379/0,
mysql://root@127.0.0.1:3306/test (or BATCHGUARD_TEST_PG / _REDIS / _MYSQL). PostgreSQL needs
`psql` and MySQL the `mysql` client on PATH, for a scratch database `bg_bench_<pid>` that is
dropped at the end; Redis uses the key prefix `bg-bench-<pid>` and deletes its keys. A Redis
store writes its ledger apart, to a JSONL file (`--ledger ledger.jsonl`), as a team with only
Redis would; its slots are in 2026, so its URL keeps markers for 100 years
(`retention=36500d`).
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASE = cargo_target.profile_dir("release")
BASE_SLOT = 1_772_330_400  # 2026-03-01T02:00:00Z
CONTENDED = 100000  # the slot index the 50 contenders race for

MANIFEST = """version: 1
service: bench
jobs:
  - name: j
    schedule: "* * * * *"
    expected_duration: 1s
    command: ["true"]
    lock:
      key: "{job}:{scheduled_at}"
      ttl: 60s
    retry:
      max_attempts: 1
"""


# This rig names slots of 2026-03-01 one after another within seconds: SPEC 7.1 item 22
# would refuse them against a real clock, so its bound is off here (docs/commands/run.md).
os.environ["BATCHGUARD_CLOCK_CHECK"] = "off"

def slot(i):
    t = time.gmtime(BASE_SLOT + 60 * i)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


CPU = {}  # id(list of wall times) -> CPU times of the same runs


def timed(argv, cwd, cpu=None):
    """Wall time (ms) of one run; its CPU time (user + system, ms) is appended to `cpu`."""
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=err)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        err.seek(0)
        sys.exit(f"{argv[0]} failed ({p.returncode}): {err.read().decode(errors='replace')}")
    if cpu is not None:
        cpu.append((ru.ru_utime + ru.ru_stime) * 1000.0)
    return dt * 1000.0


def sample(xs, argv, cwd):
    """Appends one run's wall time to `xs` and its CPU time beside it."""
    xs.append(timed(argv, cwd, CPU.setdefault(id(xs), [])))


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def row(name, xs, base=None):
    med, p95 = statistics.median(xs), pct(xs, 95)
    extra = ""
    if base is not None:
        extra = f"   +{med - statistics.median(base):6.2f} ms median over bare true"
    cpu = CPU.get(id(xs))
    if cpu:
        extra += f"   cpu median {statistics.median(cpu):6.2f} ms"
    print(f"  {name:<40} median {med:7.2f} ms   p95 {p95:7.2f} ms{extra}")


def cpu_median(xs):
    cpu = CPU.get(id(xs))
    return statistics.median(cpu) if cpu else float("nan")


def host_processes():
    return sum(1 for e in os.listdir("/proc") if e.isdigit())


def idle_processes(n):
    """n idle processes (`sleep`), started now; the caller stops them."""
    sleep = shutil.which("sleep")
    return [subprocess.Popen([sleep, "3600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def sqlite_overhead(bg, work, runs, offset):
    """run -- true on SQLite, interleaved with bare true: (true times, run times)."""
    base = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j", "--store",
            "sqlite:.batchguard/store.db"]
    true = shutil.which("true")
    t_bare, t_run = [], []
    for i in range(runs):
        sample(t_bare, [true], work)
        sample(t_run, base + ["--scheduled-at", slot(offset + i), "--", true], work)
    return t_bare, t_run


# ------------------------------------------------------------------ protocol proxies

class Proxy:
    """Forwards 127.0.0.1:<port> to the server; `read_client` logs what the client sends."""

    def __init__(self, target):
        self.target = target
        self.log = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.sock.accept()
            s = socket.create_connection(self.target)
            threading.Thread(target=self.pump, args=(c, s), daemon=True).start()
            threading.Thread(target=self.copy, args=(s, c), daemon=True).start()

    @staticmethod
    def copy(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @staticmethod
    def read(c, n):
        buf = b""
        while len(buf) < n:
            d = c.recv(n - len(buf))
            if not d:
                raise EOFError
            buf += d
        return buf

    def pump(self, c, s):
        try:
            self.read_client(c, s)
        except (EOFError, OSError):
            pass

    def note(self, what):
        with self.lock:
            self.log.append(what)

    def take(self):
        time.sleep(0.05)
        with self.lock:
            out, self.log = self.log, []
        return out


class PgProxy(Proxy):
    """Round trips: simple `Query` (Q) and `Sync` (S) messages."""

    def read_client(self, c, s):
        startup = True
        while True:
            if startup:
                head = self.read(c, 4)
                (n,) = struct.unpack("!I", head)
                body = self.read(c, n - 4)
                s.sendall(head + body)
                code = struct.unpack("!I", body[:4])[0] if len(body) >= 4 else 0
                startup = code in (80877103, 80877104)
                continue
            head = self.read(c, 5)
            (n,) = struct.unpack("!I", head[1:])
            body = self.read(c, n - 4)
            s.sendall(head + body)
            if chr(head[0]) in "QS":
                self.note(chr(head[0]))


class MysqlProxy(Proxy):
    """Round trips: command packets (sequence number 0), COM_QUIT (answered by nothing) left out."""

    def read_client(self, c, s):
        while True:
            head = self.read(c, 4)
            n = head[0] | head[1] << 8 | head[2] << 16
            body = self.read(c, n)
            s.sendall(head + body)
            if head[3] == 0 and body and body[0] != 0x01:
                self.note({0x03: "COM_QUERY", 0x16: "COM_STMT_PREPARE",
                           0x17: "COM_STMT_EXECUTE"}.get(body[0], hex(body[0])))


class RedisProxy(Proxy):
    """Round trips: the commands a client sends together (one write) count as one."""

    def read_client(self, c, s):
        buf = b""
        while True:
            d = c.recv(65536)
            if not d:
                raise EOFError
            s.sendall(d)
            buf += d
            names = []
            while True:
                cmd, buf = self.parse(buf)
                if cmd is None:
                    break
                names.append(cmd)
            if names:
                self.note("+".join(names))

    @staticmethod
    def parse(buf):
        """(command name, rest) of a whole RESP array at the start of buf, else (None, buf)."""
        try:
            end = buf.index(b"\r\n")
            n = int(buf[1:end])
            pos, name = end + 2, None
            for i in range(n):
                e = buf.index(b"\r\n", pos)
                ln = int(buf[pos + 1:e])
                if len(buf) < e + 2 + ln + 2:
                    return None, buf
                if i == 0:
                    name = buf[e + 2:e + 2 + ln].decode().upper()
                pos = e + 2 + ln + 2
            return name, buf[pos:]
        except ValueError:
            return None, buf


def host_port(url, default):
    rest = url.split("://", 1)[1]
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    hp = authority.rsplit("@", 1)[-1]
    host, _, port = hp.partition(":")
    return host, int(port or default)


def via(url, proxy, default):
    h, p = host_port(url, default)
    authority = f"{h}:{p}" if f"{h}:{p}" in url else h
    return url.replace(authority, f"127.0.0.1:{proxy.port}", 1)


def db_url(url, db):
    head, _, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{db}" + (f"?{query}" if query else "")


def psql(url, sql):
    return subprocess.run(["psql", url, "-XAtqc", sql], capture_output=True, text=True)


def mysql_cli(url, sql, db=None):
    rest = url.split("://", 1)[1]
    authority, _, path = rest.partition("/")
    user = authority.rsplit("@", 1)[0] if "@" in authority else "root"
    user, _, password = user.partition(":")
    host, port = host_port(url, 3306)
    argv = ["mysql", "-h", host, "-P", str(port), "-u", user, "-N", "-B", "-e", sql]
    if password:
        argv.insert(1, f"-p{password}")
    db = db or path.split("?", 1)[0]
    if db:
        argv.append(db)
    return subprocess.run(argv, capture_output=True, text=True)


# ------------------------------------------------------------------ one store

class Store:
    def __init__(self, name, url, ledger=None, counts=None, proxy=None, proxy_url=None):
        self.name, self.url, self.ledger = name, url, ledger
        self.counts, self.proxy, self.proxy_url = counts, proxy, proxy_url

    def args(self, url=None):
        a = ["--store", url or self.url]
        if self.ledger:
            a += ["--ledger", self.ledger]
        return a


def contenders(bg, cwd, store, n=50):
    """n runs of one slot released at once; returns their wall times (ms)."""
    args = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j", *store.args(),
            "--scheduled-at", slot(CONTENDED)]
    gate = threading.Event()
    times = [0.0] * n

    def one(i):
        gate.wait()
        times[i] = timed(args + ["--instance", f"i{i}", "--", "sleep", "0.5"], cwd)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    return times


def measure(bg, work, store, runs, offset, t_true):
    """Overhead samples, round trips, contention for one store; returns the table's row."""
    print(f"\n== {store.name}: {store.url}")
    base = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j"]
    true = shutil.which("true")
    timed(base + store.args() + ["--scheduled-at", slot(offset), "--", true], work)  # warm-up
    t_run, t_bare = [], []
    for i in range(1, runs + 1):
        sample(t_bare, [true], work)
        sample(t_run, base + store.args() + ["--scheduled-at", slot(offset + i), "--", true], work)
    row("true", t_bare)
    row(f"batchguard run -- true ({store.name})", t_run, t_bare)
    trips = skip_trips = "-"
    if store.proxy:
        store.proxy.take()
        timed(base + store.args(store.proxy_url) + ["--scheduled-at", slot(offset + runs + 1),
                                                    "--", true], work)
        msgs = store.proxy.take()
        trips = len(msgs)
        timed(base + store.args(store.proxy_url) + ["--scheduled-at", slot(offset + runs + 1),
                                                    "--", true], work)
        skip = store.proxy.take()
        skip_trips = len(skip)
        print(f"  round trips after connecting: successful run {trips} {msgs}; skip {skip_trips} {skip}")
    times = contenders(bg, work, store)
    counts = store.counts()
    print(f"  50 contenders on one slot: {counts}")
    row("contender wall time", times)
    return {
        "store": store.name,
        "median": statistics.median(t_run),
        "p95": pct(t_run, 95),
        "over": statistics.median(t_run) - statistics.median(t_bare),
        "cpu": cpu_median(t_run) - cpu_median(t_bare),
        "trips": trips,
        "skip_trips": skip_trips,
        "counts": counts,
        "contender": (statistics.median(times), pct(times, 95)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--pg", default=os.environ.get(
        "BATCHGUARD_TEST_PG", "postgres://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--redis", default=os.environ.get(
        "BATCHGUARD_TEST_REDIS", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--mysql", default=os.environ.get(
        "BATCHGUARD_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test"))
    ap.add_argument("--only", default="sqlite,postgres,redis,mysql",
                    help="the stores to measure, comma-separated")
    ap.add_argument("--idle-procs", type=int, default=0,
                    help="measure SQLite again with this many idle processes beside it")
    ap.add_argument("--bin", help="measure this binary instead of building one")
    a = ap.parse_args()
    only = set(a.only.split(","))

    if a.bin is None:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "batchguard", "--bin",
                        "batchguard"], cwd=ROOT, check=True)
    bg = os.path.abspath(a.bin) if a.bin else str(RELEASE / "batchguard")
    true = shutil.which("true")
    flock = shutil.which("flock")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bg-bench-run-"))
    (work / "m.batchguard.yaml").write_text(MANIFEST)
    print(f"batchguard {bg}\nscratch {work}")
    cleanup = []
    rows = []
    try:
        # ---- the peers: bare true and flock
        t_true, t_flock = [], []
        for _ in range(a.runs):
            sample(t_true, [true], work)
            if flock:
                sample(t_flock, [flock, "-n", str(work / "flock"), true], work)
        print(f"\npeers, {a.runs} runs each")
        row("true", t_true)
        if flock:
            row("flock -n FILE true", t_flock, t_true)

        def ledger_counts(q):
            return lambda: ", ".join(f"{e} x{n}" for e, n in q())

        contended = slot(CONTENDED)

        # ---- SQLite
        def sqlite_counts():
            with sqlite3.connect(work / ".batchguard/store.db") as c:
                return c.execute("SELECT event, count(*) FROM batchguard_events WHERE scheduled_at"
                                 " = ? GROUP BY event ORDER BY event", (contended,)).fetchall()
        if "sqlite" in only:
            rows.append(measure(bg, work, Store("SQLite", "sqlite:.batchguard/store.db",
                                                counts=ledger_counts(sqlite_counts)),
                                a.runs, 0, t_true))

        # ---- SQLite beside many idle processes, then without them again
        idle_rows = []
        if a.idle_procs > 0:
            print(f"\n== SQLite beside {a.idle_procs} idle processes")
            for label, offset, n in (("without", 200000, 0), ("with", 300000, a.idle_procs),
                                     ("without, after", 400000, 0)):
                procs = idle_processes(n)
                try:
                    count = host_processes()
                    t_bare, t_run = sqlite_overhead(bg, work, a.runs, offset)
                finally:
                    for p in procs:
                        p.kill()
                    for p in procs:
                        p.wait()
                row(f"true ({count} processes on the host)", t_bare)
                row(f"run -- true, {label} idle processes", t_run, t_bare)
                idle_rows.append((label, count, statistics.median(t_run), pct(t_run, 95),
                                  statistics.median(t_run) - statistics.median(t_bare),
                                  cpu_median(t_run) - cpu_median(t_bare)))

        # ---- PostgreSQL
        if "postgres" not in only:
            pass
        elif shutil.which("psql") and psql(a.pg, "SELECT 1").returncode == 0:
            db = f"bg_bench_{os.getpid()}"
            psql(a.pg, f"CREATE DATABASE {db}")
            cleanup.append(lambda: psql(a.pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            url = db_url(a.pg, db)
            subprocess.run([bg, "store", "migrate", "--store", url], check=True,
                           stdout=subprocess.DEVNULL)
            proxy = PgProxy(host_port(url, 5432))
            purl = via(url, proxy, 5432)
            purl += ("&" if "?" in purl else "?") + "sslmode=disable"

            def pg_counts():
                r = psql(url, "SELECT event || '|' || count(*) FROM batchguard_events WHERE "
                         f"scheduled_at = '{contended}' GROUP BY event ORDER BY event")
                return [tuple(l.split("|")) for l in r.stdout.split()]
            rows.append(measure(bg, work, Store("PostgreSQL", url, counts=ledger_counts(pg_counts),
                                                proxy=proxy, proxy_url=purl),
                                a.runs, 10000, t_true))
        else:
            print(f"\nPostgreSQL: skipped ({a.pg} unreachable or no psql)")

        # ---- Redis, with a JSONL ledger apart
        prefix = f"bg-bench-{os.getpid()}"
        probe = subprocess.run(["redis-cli", "-u", a.redis, "PING"], capture_output=True,
                               text=True) if shutil.which("redis-cli") else None
        if "redis" not in only:
            pass
        elif probe is not None and probe.stdout.strip() == "PONG":
            def drop_keys():
                keys = subprocess.run(["redis-cli", "-u", a.redis, "--scan", "--pattern",
                                       f"{prefix}:*"], capture_output=True, text=True).stdout.split()
                for k in keys:
                    subprocess.run(["redis-cli", "-u", a.redis, "DEL", k], capture_output=True)
            cleanup.append(drop_keys)
            sep = "&" if "?" in a.redis else "?"
            url = f"{a.redis}{sep}prefix={prefix}&retention=36500d"
            # The epoch every acquire checks (SPEC 7.1 item 16).
            subprocess.run([bg, "store", "migrate", "--store", url], check=True,
                           capture_output=True)
            proxy = RedisProxy(host_port(url, 6379))
            purl = via(url, proxy, 6379)

            def redis_counts():
                seen = {}
                for line in (work / "ledger.jsonl").read_text().splitlines():
                    v = json.loads(line)
                    if v.get("scheduled_at") == contended:
                        seen[v["event"]] = seen.get(v["event"], 0) + 1
                return sorted(seen.items())
            rows.append(measure(bg, work, Store("Redis (JSONL ledger)", url, ledger="ledger.jsonl",
                                                counts=ledger_counts(redis_counts), proxy=proxy,
                                                proxy_url=purl),
                                a.runs, 20000, t_true))
        else:
            print(f"\nRedis: skipped ({a.redis} unreachable or no redis-cli)")

        # ---- MySQL / MariaDB
        if "mysql" not in only:
            pass
        elif shutil.which("mysql") and mysql_cli(a.mysql, "SELECT 1").returncode == 0:
            db = f"bg_bench_{os.getpid()}"
            mysql_cli(a.mysql, f"CREATE DATABASE {db}")
            cleanup.append(lambda: mysql_cli(a.mysql, f"DROP DATABASE IF EXISTS {db}"))
            url = db_url(a.mysql, db)
            subprocess.run([bg, "store", "migrate", "--store", url], check=True,
                           stdout=subprocess.DEVNULL)
            proxy = MysqlProxy(host_port(url, 3306))
            purl = via(url, proxy, 3306)
            purl += ("&" if "?" in purl else "?") + "ssl-mode=disabled"

            def my_counts():
                r = mysql_cli(url, "SELECT event, count(*) FROM batchguard_events WHERE "
                              f"scheduled_at = '{contended[:-1]}.000000Z' GROUP BY event ORDER BY event")
                return [tuple(l.split("\t")) for l in r.stdout.splitlines()]
            rows.append(measure(bg, work, Store("MySQL (MariaDB)", url, counts=ledger_counts(my_counts),
                                                proxy=proxy, proxy_url=purl),
                                a.runs, 30000, t_true))
        else:
            print(f"\nMySQL: skipped ({a.mysql} unreachable or no mysql client)")

        # ---- the table
        print(f"\nrun -- true, {a.runs} runs per store; bare true median "
              f"{statistics.median(t_true):.2f} ms" +
              (f", flock -n FILE true median {statistics.median(t_flock):.2f} ms" if flock else ""))
        print(f"load average before the table: {os.getloadavg()[0]:.1f}")
        print("\n| store | median | p95 | over bare `true` (median) | CPU over bare `true` (median) "
              "| round trips, successful run (skip) | 50 contenders on one slot "
              "| contender wall time median / p95 |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['store']} | {r['median']:.2f} ms | {r['p95']:.2f} ms | +{r['over']:.2f} ms "
                  f"| +{r['cpu']:.2f} ms | {r['trips']} ({r['skip_trips']}) | {r['counts']} "
                  f"| {r['contender'][0]:.0f} ms / {r['contender'][1]:.0f} ms |")
        if idle_rows:
            print("\n| SQLite `run -- true` | processes on the host | median | p95 "
                  "| over bare `true` (median) | CPU over bare `true` (median) |")
            print("|---|---|---|---|---|---|")
            for label, count, med, p95, over, cpu in idle_rows:
                print(f"| {label} idle processes | {count} | {med:.2f} ms | {p95:.2f} ms "
                      f"| +{over:.2f} ms | +{cpu:.2f} ms |")
    finally:
        for c in cleanup:
            c()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
