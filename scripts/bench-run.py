#!/usr/bin/env python3
"""SPEC 10 `run` benchmark: the guard's overhead, round trips and contention.

One command: builds batchguard (release), then prints side by side

  * median and p95 wall time of `batchguard run -- true` on the SQLite store (a new slot
    each time, so every run acquires, runs, writes `end` and releases), of bare `true`,
    and of `flock -n FILE true`, interleaved, with the overhead over bare `true`;
  * 50 contenders released at once on one slot, on SQLite and (when reachable) PostgreSQL:
    how many `start`s and `skip`s the ledger got, and each contender's wall time;
  * with PostgreSQL reachable: client->server protocol messages of one acquire and of one
    whole run, counted by a proxy that reads the protocol (a round trip is a simple `Query`
    or a `Sync`: each is answered by one `ReadyForQuery`).

    python3 scripts/bench-run.py [--runs 200] [--pg postgres://postgres@127.0.0.1:5432/test]

PostgreSQL needs `psql` on PATH (to create and drop a scratch database `bg_bench_<pid>`).
"""
import argparse
import os
import pathlib
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASE = ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release"
BASE_SLOT = 1_772_330_400  # 2026-03-01T02:00:00Z

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


def slot(i):
    t = time.gmtime(BASE_SLOT + 60 * i)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


def timed(argv, cwd):
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{argv[0]} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return dt * 1000.0


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def row(name, xs, base=None):
    med, p95 = statistics.median(xs), pct(xs, 95)
    extra = ""
    if base is not None:
        extra = f"   +{med - statistics.median(base):6.2f} ms median over bare true"
    print(f"  {name:<34} median {med:7.2f} ms   p95 {p95:7.2f} ms{extra}")


def contenders(bg, cwd, store, n=50):
    """n runs of one slot released at once; returns their wall times (ms)."""
    args = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j", "--store", store,
            "--scheduled-at", slot(100000)]
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


# ------------------------------------------------------------------ PostgreSQL proxy

class Proxy:
    """Forwards 127.0.0.1:<port> to the server, recording client->server message types."""

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
        startup = True
        try:
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
                with self.lock:
                    self.log.append(chr(head[0]))
        except (EOFError, OSError):
            pass

    def take(self):
        with self.lock:
            out, self.log = self.log, []
        return out


def pg_db_url(url, db):
    head, _, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{db}" + (f"?{query}" if query else "")


def host_port(url):
    rest = url.split("://", 1)[1]
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    hp = authority.rsplit("@", 1)[-1]
    host, _, port = hp.partition(":")
    return host, int(port or 5432)


def psql(url, sql):
    return subprocess.run(["psql", url, "-XAtqc", sql], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--pg", default=os.environ.get(
        "BATCHGUARD_TEST_PG", "postgres://postgres@127.0.0.1:5432/test"))
    a = ap.parse_args()

    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "batchguard", "--bin",
                    "batchguard"], cwd=ROOT, check=True)
    bg = str(RELEASE / "batchguard")
    true = shutil.which("true")
    flock = shutil.which("flock")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bg-bench-run-"))
    (work / "m.batchguard.yaml").write_text(MANIFEST)
    print(f"batchguard {bg}\nscratch {work}\n")

    # ---- overhead on SQLite, interleaved
    base = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j"]
    timed(base + ["--scheduled-at", slot(0), "--", true], work)  # creates the store file
    t_true, t_flock, t_run = [], [], []
    for i in range(1, a.runs + 1):
        t_true.append(timed([true], work))
        if flock:
            t_flock.append(timed([flock, "-n", str(work / "flock"), true], work))
        t_run.append(timed(base + ["--scheduled-at", slot(i), "--", true], work))
    print(f"run overhead, {a.runs} runs each, interleaved (SPEC 10 target: under 10 ms median over bare true)")
    row("true", t_true)
    if flock:
        row("flock -n FILE true", t_flock, t_true)
    row("batchguard run -- true (SQLite)", t_run, t_true)
    ratio = statistics.median(t_run) / statistics.median(t_true)
    print(f"  ratio run/true (median): {ratio:.1f}x"
          + (f"; run/flock: {statistics.median(t_run) / statistics.median(t_flock):.1f}x" if flock else ""))

    # ---- contention on SQLite
    times = contenders(bg, work, "sqlite:.batchguard/store.db")
    r = subprocess.run(["sqlite3", str(work / ".batchguard/store.db"),
                        f"SELECT event, count(*) FROM batchguard_events WHERE scheduled_at = '{slot(100000)}' GROUP BY event ORDER BY event"],
                       capture_output=True, text=True) if shutil.which("sqlite3") else None
    print("\n50 contenders on one slot, SQLite")
    if r is not None:
        print("  ledger: " + ", ".join(l.replace("|", " x") for l in r.stdout.split()))
    row("contender wall time", times)

    # ---- PostgreSQL
    if not shutil.which("psql"):
        print("\nPostgreSQL: skipped (no psql on PATH)")
        return
    probe = psql(a.pg, "SELECT 1")
    if probe.returncode != 0:
        print(f"\nPostgreSQL: skipped ({a.pg} unreachable: {probe.stderr.strip()})")
        return
    db = f"bg_bench_{os.getpid()}"
    psql(a.pg, f"CREATE DATABASE {db}")
    url = pg_db_url(a.pg, db)
    try:
        subprocess.run([bg, "store", "migrate", "--store", url], check=True,
                       stdout=subprocess.DEVNULL)
        proxy = Proxy(host_port(url))
        h, p = host_port(url)
        purl = url.replace(f"{h}:{p}", f"127.0.0.1:{proxy.port}", 1)
        purl += ("&" if "?" in purl else "?") + "sslmode=disable"
        pbase = base + ["--store", purl]

        def counted(extra):
            proxy.take()
            timed(pbase + extra + ["--", true], work)
            time.sleep(0.05)
            msgs = proxy.take()
            return sum(1 for m in msgs if m in "QS"), "".join(msgs)

        run_rt, run_msgs = counted(["--scheduled-at", slot(1)])
        skip_rt, skip_msgs = counted(["--scheduled-at", slot(1)])
        clock_rt, clock_msgs = counted([])
        print("\nPostgreSQL round trips after connecting (proxy count of client messages; Q = simple query, S = sync)")
        print(f"  acquire (with start)                      1 (one Query: the acquire statement)")
        print(f"  run with --scheduled-at (acquire, finish) {run_rt}   messages {run_msgs}")
        print(f"  run, slot from the store's clock          {clock_rt}   messages {clock_msgs}")
        print(f"  skip (acquire, skip event)                {skip_rt}   messages {skip_msgs}")
        t_pg = [timed(base + ["--store", url, "--scheduled-at", slot(1000 + i), "--", true], work)
                for i in range(min(a.runs, 50))]
        row("batchguard run -- true (PostgreSQL)", t_pg, t_true)

        times = contenders(bg, work, url)
        counts = psql(url, f"SELECT event || ' x' || count(*) FROM batchguard_events WHERE scheduled_at = '{slot(100000)}' GROUP BY event ORDER BY event")
        print("\n50 contenders on one slot, PostgreSQL")
        print("  ledger: " + ", ".join(counts.stdout.split("\n")).strip(", "))
        row("contender wall time", times)
    finally:
        psql(a.pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
