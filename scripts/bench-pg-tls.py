#!/usr/bin/env python3
"""What TLS costs a `batchguard run` on PostgreSQL: `run -- true` with `sslmode=disable`
against the default (`prefer`, TLS when the server offers it), in turns, on a fresh
database of the server at BATCHGUARD_TEST_PG (default postgres://postgres@127.0.0.1:5432).

    python3 scripts/bench-pg-tls.py [--pairs 100]

Builds the release binary, creates (and drops) its own database, prints both medians and
the median of the paired differences. Each run is a new slot, so every one acquires,
runs `true` and finishes. The server must have `ssl = on` for the comparison to mean
anything; the script says when it is off.
"""

import argparse
import datetime
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
BG = cargo_target.profile_dir("release") / "batchguard"
MANIFEST = """version: 1
service: bench
jobs:
  - name: j
    schedule: "* * * * *"
    expected_duration: 1m
    lock:
      ttl: 10m
    retry:
      max_attempts: 1
"""


# This rig names slots of 2026-03-01 one after another within seconds: SPEC 7.1 item 22
# would refuse them against a real clock, so its bound is off here (docs/commands/run.md).
os.environ["BATCHGUARD_CLOCK_CHECK"] = "off"

def psql(url, sql):
    return subprocess.run(["psql", url, "-qtAc", sql], capture_output=True, text=True, check=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=100)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    admin = os.environ.get("BATCHGUARD_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
    name = f"bg_bench_tls_{os.getpid()}"
    base = admin.rsplit("/", 1)[0] + "/" + name
    psql(admin, f"CREATE DATABASE {name}")
    try:
        ssl = psql(base, "SHOW ssl")
        with tempfile.TemporaryDirectory() as d:
            (pathlib.Path(d) / "m.batchguard.yaml").write_text(MANIFEST)
            subprocess.run([str(BG), "store", "migrate", "--store", base], check=True, stdout=subprocess.DEVNULL)
            t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
            slots = (t0 + datetime.timedelta(minutes=k) for k in range(10**9))
            res = {"disable": [], "prefer": []}
            for _ in range(a.pairs):
                for mode, url in (("disable", base + "?sslmode=disable"), ("prefer", base)):
                    slot = next(slots).strftime("%Y-%m-%dT%H:%M:%SZ")
                    t = time.perf_counter()
                    subprocess.run([str(BG), "run", "--manifest", "m.batchguard.yaml", "--job", "j",
                                    "--store", url, "--scheduled-at", slot, "--", "true"],
                                   cwd=d, check=True, capture_output=True)
                    res[mode].append(time.perf_counter() - t)
    finally:
        psql(admin, f"DROP DATABASE IF EXISTS {name}")
    print(f"server ssl = {ssl}; {a.pairs} pairs; load average {os.getloadavg()[0]:.1f}")
    for mode, xs in res.items():
        print(f"run -- true, sslmode={mode:8} median {statistics.median(xs) * 1000:7.1f} ms")
    diff = statistics.median(p - q for q, p in zip(res["disable"], res["prefer"]))
    print(f"prefer - disable (median of pairs): {diff * 1000:+.1f} ms")


if __name__ == "__main__":
    main()
