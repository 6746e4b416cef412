#!/usr/bin/env python3
"""SPEC 10 audit benchmark: 10M events + 5M outputs as CSV, batchguard vs DuckDB.

One command: builds batchguard and the generator (release), generates the ledger with
`gen-ledger` (`crates/ledger-gen`; skipped when bench-data/audit already holds it), installs
DuckDB from PyPI into .venv-bench, runs `batchguard audit` and DuckDB running the equivalent SQL over the
same CSV files, and prints wall time, peak RSS and the ratios.

    python3 scripts/bench-audit.py [--events 10000000] [--runs 1]

Peak RSS is the child's ru_maxrss (os.wait4), wall time is best of --runs.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-bench"
# Where cargo puts the binaries: CARGO_TARGET_DIR (relative to the root) or target/.
RELEASE = cargo_target.profile_dir("release")

SQL = r"""
PRAGMA threads={threads};
CREATE TEMP TABLE jobs AS SELECT * FROM (VALUES {jobs}) t(name, ttl_s, lat_s);
CREATE VIEW ev AS
  SELECT run_id, CASE WHEN contains(job, '/') THEN split_part(job, '/', 2) ELSE job END AS job,
         scheduled_at, event, "at", attempt, status
  FROM read_csv('{events}', header=true, types={{'scheduled_at':'TIMESTAMPTZ','at':'TIMESTAMPTZ','attempt':'INTEGER'}})
  WHERE scheduled_at >= TIMESTAMPTZ '{frm}' AND scheduled_at < TIMESTAMPTZ '{to}';
-- executions, one per run_id, from one scan of the events file
CREATE TEMP TABLE ex AS
  SELECT run_id, any_value(job) job, any_value(scheduled_at) slot,
         min("at") FILTER (WHERE event = 'start') s, max("at") FILTER (WHERE event = 'end') e,
         bool_or(event = 'end' AND status = 'success') ok, max(coalesce(attempt, 1)) attempt,
         count(*) FILTER (WHERE event = 'skip') skips
  FROM ev GROUP BY run_id;
CREATE TEMP TABLE ex2 AS
  SELECT ex.*, j.ttl_s, j.lat_s,
    max(coalesce(e, s + to_seconds(coalesce(j.ttl_s, 1e9)::BIGINT))) OVER w AS prev_active,
    min(CASE WHEN ok THEN e END) OVER w AS prev_ok_end
  FROM ex LEFT JOIN jobs j ON j.name = ex.job
  WHERE s IS NOT NULL
  WINDOW w AS (PARTITION BY job, slot ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);
-- per slot
CREATE TEMP TABLE slots AS
  SELECT job, slot, count(*) starts,
    bool_or(s < prev_active OR s >= prev_ok_end) dup,
    bool_or(e IS NULL) lost,
    min(CASE WHEN ok THEN e END) first_ok,
    max(attempt) max_attempt
  FROM ex2 GROUP BY job, slot;
SELECT 'AU102', count(*) FROM slots WHERE dup
UNION ALL SELECT 'AU103', count(*) FROM ex WHERE s IS NOT NULL AND e IS NULL
UNION ALL SELECT 'AU104', count(*) FROM ex WHERE s IS NULL AND e IS NOT NULL
UNION ALL SELECT 'AU105', count(*) FROM ex2 WHERE e IS NOT NULL AND epoch(e) - epoch(s) > ttl_s
UNION ALL SELECT 'AU106', count(*) FROM slots JOIN jobs j ON j.name = slots.job WHERE epoch(first_ok) - epoch(slot) > j.lat_s
UNION ALL SELECT 'AU111', count(*) FROM slots WHERE first_ok IS NULL
UNION ALL SELECT 'AU201', count(*) FROM (
  SELECT job, output_key FROM read_csv('{outputs}', header=true, types={{'scheduled_at':'TIMESTAMPTZ'}})
  WHERE scheduled_at >= TIMESTAMPTZ '{frm}' AND scheduled_at < TIMESTAMPTZ '{to}'
  GROUP BY ALL HAVING count(*) > 1);
-- per-job metrics (SPEC 6), with exact percentiles
SELECT x.job, count(*) slots, count(*) FILTER (WHERE first_ok IS NOT NULL) succeeded,
  count(*) FILTER (WHERE dup) duplicated, count(*) FILTER (WHERE lost) lost,
  quantile_cont(epoch(first_ok) - epoch(slot), [0.5, 0.95, 0.99]) latency,
  max(epoch(first_ok) - epoch(slot)) latency_max,
  (SELECT quantile_cont(epoch(e) - epoch(s), [0.5, 0.95, 0.99]) FROM ex2 WHERE ex2.job = x.job) duration,
  (SELECT sum(skips) FROM ex WHERE ex.job = x.job) skipped
FROM slots x GROUP BY x.job ORDER BY x.job;
"""


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


def measure(cmd, stdout=subprocess.DEVNULL):
    """Wall seconds and peak RSS (MiB) of one child."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024, code


def secs(d):
    n = 0
    for num, unit in re.findall(r"(\d+)([smhd])", d):
        n += int(num) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return n


def manifest_jobs(path):
    """name, lock.ttl and alerts.max_latency of each job (the generator's simple layout)."""
    jobs, cur = [], None
    for line in path.read_text().splitlines():
        m = re.match(r"\s*- name: (\S+)", line)
        if m:
            cur = {"name": m.group(1), "ttl": None, "lat": None}
            jobs.append(cur)
        elif cur is not None:
            m = re.match(r"\s*ttl: (\S+)", line)
            if m:
                cur["ttl"] = secs(m.group(1))
            m = re.match(r"\s*max_latency: (\S+)", line)
            if m:
                cur["lat"] = secs(m.group(1))
    return jobs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    data = ROOT / "bench-data" / f"audit-{a.events}-{a.seed}"
    run(["cargo", "build", "--release", "--quiet", "--bin", "batchguard", "--bin", "gen-ledger"], cwd=ROOT)
    bg = RELEASE / "batchguard"
    if not (data / "expected.json").exists():
        run([RELEASE / "gen-ledger", "--out", data,
             "--seed", str(a.seed), "--events", str(a.events), "--jobs", "200",
             "--dialect", "kubernetes"])
    exp = json.loads((data / "expected.json").read_text())
    if not (VENV / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", VENV])
    if subprocess.run([VENV / "bin" / "python", "-c", "import duckdb"], capture_output=True).returncode:
        run([VENV / "bin" / "pip", "install", "-q", "duckdb"])
    events, outputs = data / "events.csv", data / "outputs.csv"
    jobs = manifest_jobs(data / "manifest.batchguard.yaml")
    values = ", ".join(f"('{j['name']}', {j['ttl'] or 'NULL'}, {j['lat'] or 'NULL'})" for j in jobs)
    sql = SQL.format(threads=os.cpu_count() or 2, jobs=values, events=events, outputs=outputs,
                     frm=exp["from"], to=exp["to"])
    (data / "audit.sql").write_text(sql)
    duck = data / "duck.py"
    duck.write_text(
        "import duckdb, sys\n"
        "con = duckdb.connect()\n"
        "for stmt in open(sys.argv[1]).read().split(';'):\n"
        "    s = stmt.strip()\n"
        "    if s and not all(l.startswith('--') for l in s.splitlines()):\n"
        "        rows = con.execute(s).fetchall()\n"
        "        if s.startswith('SELECT'): print(rows[:20])\n")
    bg_cmd = [bg, "audit", "--ledger", events, "--outputs", outputs, "--manifest",
              data / "manifest.batchguard.yaml", "--from", exp["from"], "--to", exp["to"],
              "--format", "json", "--out", data / "audit.json"]
    duck_cmd = [VENV / "bin" / "python", duck, data / "audit.sql"]
    size = (events.stat().st_size + outputs.stat().st_size) / 2**20
    print(f"ledger: {exp['events']:,} events + {exp['outputs']:,} outputs, {size:,.0f} MiB of CSV, "
          f"{exp['jobs']} jobs, {exp['due_slots']:,} due slots ({data})")
    results = {}
    for name, cmd in (("batchguard", bg_cmd), ("duckdb", duck_cmd)):
        best = None
        for _ in range(a.runs):
            wall, rss, code = measure(cmd, stdout=None if name == "duckdb" else subprocess.DEVNULL)
            if name == "batchguard" and code not in (0, 1):
                sys.exit(f"batchguard exited {code}")
            if name == "duckdb" and code != 0:
                sys.exit(f"duckdb exited {code}")
            best = (wall, rss) if best is None or wall < best[0] else (best[0], max(best[1], rss))
        results[name] = best
    found = json.loads((data / "audit.json").read_text())
    counts = {}
    for f in found["findings"]:
        counts[f["code"]] = counts.get(f["code"], 0) + 1
    ok = all(counts.get(c, 0) == n for c, n in exp["findings"].items())
    (bw, br), (dw, dr) = results["batchguard"], results["duckdb"]
    print(f"{'':12}{'wall s':>10}{'peak RSS MiB':>15}")
    print(f"{'batchguard':12}{bw:>10.2f}{br:>15.0f}")
    print(f"{'duckdb':12}{dw:>10.2f}{dr:>15.0f}")
    print(f"ratio (duckdb / batchguard): time {dw / bw:.2f}x, memory {dr / br:.2f}x")
    print(f"batchguard findings match expected.json: {ok}")


if __name__ == "__main__":
    main()
