#!/usr/bin/env python3
"""Pretty lint vs JSON lint of one large manifest: pretty rendering must stay linear.

One command: generates a ~2 MB manifest whose jobs carry ~900 findings, builds batchguard
(release, unless --bin is given), times `lint --format pretty` and `lint --format json`
(best of N runs, wall clock) and prints both and their ratio.

    python3 scripts/bench-pretty.py [--jobs 900] [--pad 1400] [--runs 3] [--bin PATH]

Every job is complete but one: its lock TTL is shorter than twice its expected duration
(BG202), so the file has one finding per job. `--pad` bytes of comment lines per job bring
the file to its size without adding findings.
"""
import argparse
import pathlib
import subprocess
import sys
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "pretty"

JOB = """  - name: {name}
    schedule: "{minute} * * * *"
    expected_duration: 10m
    command: ["node", "jobs/{name}.js", "--chunk", "{i}"]
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: 15m
      store: postgres
    idempotency:
      strategy: processed_at
      key: record_id
    retry:
      max_attempts: 3
      backoff: exponential
      initial_delay: 30s
      max_delay: 5m
      retryable: [ETIMEDOUT, HTTP_503]
      fatal: [VALIDATION_ERROR]
      on_unknown: dead_letter
    dead_letter:
      target: {name}-dlq
    alerts:
      max_latency: 15m
      channel: "#svc-oncall"
    snapshot:
      path: "snapshots/{name}/{{scheduled_at_compact}}.jsonl"
      format: jsonl
      key: record_id
      retention: 120d
    runbook:
      owner: team-svc
      on_call: "#svc-oncall"
      emergency_stop: "Set ENABLED=false and scale to 0"
      resume: "Re-enable, audit the gap, replay missed slots"
      communication: "#svc-incidents"
"""


def generate(jobs: int, pad: int) -> pathlib.Path:
    DATA.mkdir(parents=True, exist_ok=True)
    line = "    # " + "x" * 70 + "\n"
    padding = line * max(0, pad // len(line))
    parts = ["version: 1\nservice: svc\ndeployment:\n  platform: kubernetes\n  instances: 2\njobs:\n"]
    for i in range(jobs):
        parts.append(JOB.format(name=f"job-{i}", minute=i % 60, i=i))
        parts.append(padding)
    path = DATA / "big.batchguard.yaml"
    path.write_text("".join(parts))
    return path


def best(cmd: list, runs: int) -> tuple:
    times, out = [], b""
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
        out = p.stdout
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=900)
    ap.add_argument("--pad", type=int, default=1400)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=None)
    a = ap.parse_args()
    path = generate(a.jobs, a.pad)
    if a.bin is None:
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
        binary = str(cargo_target.profile_dir("release") / "batchguard")
    else:
        binary = a.bin
    base = [binary, "lint", str(path), "--now", "2026-03-01T00:00:00Z"]
    json_t, json_out = best(base + ["--format", "json"], a.runs)
    pretty_t, _ = best(base + ["--format", "pretty"], a.runs)
    findings = json_out.count(b'"code":')
    size = path.stat().st_size
    print(f"file: {path.relative_to(ROOT)}, {size / 1e6:.2f} MB, {findings} findings")
    print(f"json:   {json_t:.3f} s")
    print(f"pretty: {pretty_t:.3f} s")
    print(f"ratio (pretty / json): {pretty_t / json_t:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
