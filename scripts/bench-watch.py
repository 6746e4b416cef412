#!/usr/bin/env python3
"""`watch` and `metrics` benchmark (issue 14): refresh cost over a store with 1M events,
and /metrics scrape latency with 1,000 jobs.

One command: builds batchguard (release), writes its own stores, prints the figures.

    python3 scripts/bench-watch.py [--events 1000000] [--jobs 100] [--metrics-jobs 1000]
                                   [--seconds 20] [--scrapes 50]

1. **watch**: a SQLite store (`store migrate`) filled with `--events` event rows of
   `--jobs` minutely jobs, slots running back in time from now (start + end per slot, a
   skip on one slot in four), written straight into `batchguard_events`. `batchguard
   watch --once --format json` is run for each window; then `batchguard watch --format
   json --interval 1s` (one JSON line per refresh) runs for `--seconds` while another
   thread appends the rows of new slots (a start, an end, a skip every 100 ms, as running
   jobs would). Each refresh reports `refresh_ms` (reading the new rows, the leases, the
   audit of the window, the figures; not printing) and `new_rows`. Printed: the first
   refresh (the whole ledger read once), then median / p95 / max of the following ones,
   beside `batchguard audit --since` over the same store and window: what a watch that
   re-read the ledger at each refresh would pay.
2. **metrics**: a store of `--metrics-jobs` hourly jobs over 7 days; `batchguard metrics
   --listen 127.0.0.1:0` is scraped `--scrapes` times (OpenMetrics, as Prometheus asks),
   one at a time; printed: median / p95 / max latency seen by the client, size and series.
"""
import argparse
import http.client
import json
import os
import pathlib
import random
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASE = cargo_target.profile_dir("release")
BG = RELEASE / "batchguard"


def rfc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(t))) + ".%06dZ" % int(
        round((t - int(t)) * 1e6)
    )


def slot_text(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


def manifest(jobs, schedule):
    out = ["version: 1", "service: bench", "jobs:"]
    for name, expr in jobs:
        out += [
            f"  - name: {name}",
            f'    schedule: "{expr}"',
            "    expected_duration: 20s",
            '    command: ["true"]',
            "    lock:",
            '      key: "{job}:{scheduled_at}"',
            "      ttl: 1m",
            "    alerts:",
            "      max_latency: 5m",
        ]
    return "\n".join(out) + "\n"


def migrate(store):
    subprocess.run([str(BG), "store", "migrate", "--store", f"sqlite:{store}"], check=True,
                   stdout=subprocess.DEVNULL)


INSERT = (
    "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, attempt,"
    " status, \"trigger\", fence, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'schedule', ?, ?)"
)


def slot_rows(job, s, k, rng):
    """The rows of one slot: start, end, and on one slot in four a skip."""
    run = f"{job}-{int(s)}"
    start = s + rng.uniform(0.1, 2.0)
    end = start + rng.uniform(1.0, 15.0)
    rows = [
        (run, job, slot_text(s), "start", rfc(start), "host-a", 1, None, k, None),
        (run, job, slot_text(s), "end", rfc(end), "host-a", 1, "success", None, None),
    ]
    if k % 4 == 0:
        rows.append((f"{run}-b", job, slot_text(s), "skip", rfc(start + 0.01), "host-b", None,
                     None, None, f"held by host-a (run {run}, fence {k}, lease ends in 59 s)"))
    return rows


def fill(store, jobs, step, events, now, rng):
    """Slots of every job back from `now` every `step` seconds until `events` rows."""
    db = sqlite3.connect(store)
    db.execute("PRAGMA journal_mode=WAL")
    n, k = 0, 0
    base = now - now % step
    batch = []
    while n < events:
        s = base - step * (k + 1)
        for j in jobs:
            rows = slot_rows(j, s, k, rng)
            batch += rows
            n += len(rows)
        k += 1
        if len(batch) > 50_000:
            db.executemany(INSERT, batch)
            db.commit()
            batch = []
    if batch:
        db.executemany(INSERT, batch)
        db.commit()
    db.close()
    return n, k


def stats(xs):
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return statistics.median(xs), p95, xs[-1]


def watch_bench(a, tmp):
    rng = random.Random(1)
    store = tmp / "watch.db"
    migrate(store)
    jobs = [f"job-{i:03}" for i in range(a.jobs)]
    (tmp / "m.batchguard.yaml").write_text(manifest([(j, "* * * * *") for j in jobs], None))
    t0 = time.time()
    n, slots = fill(store, jobs, 60, a.events, time.time(), rng)
    print(f"watch: {n:,} events, {a.jobs} minutely jobs, {slots:,} slots each back from now "
          f"(written in {time.time() - t0:.1f} s)")
    print()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print()
    print("| window | rows in window | first refresh (whole ledger) | next refreshes: wall median / p95 / max | CPU per refresh | new rows per refresh | audit --since, same window (re-reads the ledger) | ratio (audit / median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for since in a.windows:
        # The writer: new slots' rows as jobs would write them, every 100 ms.
        stop = threading.Event()

        def writer():
            db = sqlite3.connect(store, timeout=30)
            k = 10**9
            while not stop.is_set():
                j = rng.choice(jobs)
                now = time.time()
                db.executemany(INSERT, slot_rows(j, now - now % 60, k, rng))
                db.commit()
                k += 1
                time.sleep(0.1)
            db.close()

        w = threading.Thread(target=writer)
        w.start()
        p = subprocess.Popen(
            [str(BG), "watch", "--store", f"sqlite:{store}", "--manifest", "m.batchguard.yaml",
             "--since", since, "--interval", "1s", "--format", "json", "--for", f"{a.seconds}s"],
            cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        refreshes = [json.loads(p.stdout.readline())]
        # CPU time of the process after its first refresh: what the later refreshes cost,
        # whatever else the machine runs (wall times grow with the load, CPU time does not).
        tick = os.sysconf("SC_CLK_TCK")
        stat = pathlib.Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu_first = (int(stat[11]) + int(stat[12])) / tick
        refreshes += [json.loads(line) for line in p.stdout]
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
        w.join()
        if p.returncode != 0:
            raise SystemExit(p.stderr.read())
        first, rest = refreshes[0], refreshes[1:]
        cpu = (ru.ru_utime + ru.ru_stime - cpu_first) / len(rest) * 1000
        med, p95, mx = stats([r["refresh_ms"] for r in rest])
        new = statistics.median([r["input"]["new_rows"] for r in rest])
        window_rows = rest[-1]["input"]["window_events"]
        # The naive alternative: the audit of the same window, reading the whole store.
        times = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([str(BG), "audit", "--ledger", f"sqlite:{store}", "--manifest",
                            "m.batchguard.yaml", "--since", since, "--format", "json"], cwd=tmp,
                           stdout=subprocess.DEVNULL, check=False)
            times.append((time.perf_counter() - t) * 1000)
        audit = min(times)
        print(f"| {since} | {window_rows:,} | {first['refresh_ms']:.0f} ms | "
              f"**{med:.1f}** / {p95:.1f} / {mx:.1f} ms ({len(rest)} refreshes) | {cpu:.1f} ms | "
              f"{new:.0f} | {audit:.0f} ms | {audit / med:.0f}x |")


def metrics_bench(a, tmp):
    rng = random.Random(2)
    store = tmp / "metrics.db"
    migrate(store)
    jobs = [f"job-{i:04}" for i in range(a.metrics_jobs)]
    (tmp / "m1000.batchguard.yaml").write_text(
        manifest([(j, f"{i % 60} * * * *") for i, j in enumerate(jobs)], None))
    # Hourly slots of 7 days, every job on its own minute: written per job.
    db = sqlite3.connect(store)
    n = 0
    now = time.time()
    for i, j in enumerate(jobs):
        rows = []
        top = now - now % 3600 + 60 * (i % 60)
        if top > now:
            top -= 3600
        for k in range(24 * 7):
            rows += slot_rows(j, top - 3600 * k, k, rng)
        db.executemany(INSERT, rows)
        n += len(rows)
    db.commit()
    db.close()
    p = subprocess.Popen(
        [str(BG), "metrics", "--store", f"sqlite:{store}", "--manifest", "m1000.batchguard.yaml",
         "--listen", "127.0.0.1:0"],
        cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
    lat, size, series = [], 0, 0
    try:
        for _ in range(a.scrapes):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            t = time.perf_counter()
            c.request("GET", "/metrics",
                      headers={"Accept": "application/openmetrics-text; version=1.0.0"})
            body = c.getresponse().read()
            lat.append((time.perf_counter() - t) * 1000)
            c.close()
            size = len(body)
            series = sum(1 for l in body.split(b"\n") if l and not l.startswith(b"#"))
    finally:
        p.terminate()
        p.wait()
    med, p95, mx = stats(lat)
    print()
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"metrics: {a.metrics_jobs:,} hourly jobs, {n:,} events over 7 days, window 24h")
    print()
    print("| scrapes | median | p95 | max | body | series |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {a.scrapes} | **{med:.1f} ms** | {p95:.1f} ms | {mx:.1f} ms | "
          f"{size / 1e6:.1f} MB | {series:,} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--metrics-jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--scrapes", type=int, default=50)
    ap.add_argument("--windows", nargs="*", default=["30m", "24h"])
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--dir", help="write the stores here and keep them (default: a temporary folder)")
    ap.add_argument("--only", choices=["watch", "metrics"], help="run one of the two")
    a = ap.parse_args()
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "batchguard"],
                       cwd=ROOT, check=True)
    if a.dir:
        tmp = pathlib.Path(a.dir)
        tmp.mkdir(parents=True, exist_ok=True)
        for f in tmp.glob("*.db*"):
            f.unlink()
        run(a, tmp)
        return
    with tempfile.TemporaryDirectory(prefix="bg-bench-watch-") as d:
        run(a, pathlib.Path(d))


def run(a, tmp):
    if a.only != "metrics":
        watch_bench(a, tmp)
    if a.only != "watch":
        metrics_bench(a, tmp)


if __name__ == "__main__":
    main()
