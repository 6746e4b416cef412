#!/usr/bin/env python3
"""SPEC 10 lint benchmark: 10,000 jobs in 1,000 files, batchguard vs check-jsonschema.

One command: generates the files, builds batchguard (release), installs check-jsonschema
from PyPI into .venv-bench, times both (best of N runs, wall clock) and prints the ratio.

    python3 scripts/bench-lint.py [--files 1000] [--jobs-per-file 10] [--runs 5] [--duplicates 100]

--code N also writes a Node.js/TypeScript app of N modules (SPEC 3.7: `bench-data/lint-app`,
about 4 KiB each, imported as a tree from `src/index.ts`, one in 25 registering a node-cron
schedule, run by a PM2 cluster of 4 through a tsconfig-mapped `dist/` entry, a Deployment
and a Dockerfile) and times lint of the app alone.

--duplicates N also writes N registrations that duplicate manifest jobs (same argv, same
slots): half as Kubernetes CronJobs in multi-document files (with a ConfigMap and a
Deployment around them), half as crontab lines, and times the cross-file lint of
manifests + registrations next to the manifests alone.
"""
import argparse
import os
import pathlib
import resource
import subprocess
import sys
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "lint"
REGS = ROOT / "bench-data" / "lint-registrations"
APP = ROOT / "bench-data" / "lint-app"
BIN = cargo_target.profile_dir("release") / "batchguard"
VENV = ROOT / ".venv-bench"

JOB = """  - name: {name}
    schedule: "{minute} * * * *"
    expected_duration: 10m
    command: ["node", "jobs/{name}.js", "--chunk", "{i}"]
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: {ttl}
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
      owner: team-{f}
      on_call: "#svc-oncall"
      emergency_stop: "Set ENABLED=false and scale to 0"
      resume: "Re-enable, audit the gap, replay missed slots"
      communication: "#svc-incidents"
"""


def generate(files: int, per_file: int) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for old in DATA.glob("*.yaml"):
        old.unlink()
    for f in range(files):
        jobs = []
        for j in range(per_file):
            i = f * per_file + j
            # Every 50th job carries a real mistake, so the linter has findings to report.
            ttl = "15m" if i % 50 == 0 else "25m"
            jobs.append(JOB.format(name=f"job-{i}", minute=i % 60, ttl=ttl, i=i, f=f))
        text = (
            "# yaml-language-server: $schema=../../schemas/manifest.schema.json\n"
            f"version: 1\nservice: svc-{f}\ndeployment:\n  platform: kubernetes\n  instances: 2\njobs:\n"
            + "".join(jobs)
        )
        (DATA / f"svc-{f}.batchguard.yaml").write_text(text)


CRONJOB = """---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: job-{i}-legacy
spec:
  schedule: "{minute} * * * *"
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: job
              image: registry.example.com/svc:1.0.0
              command: ["node", "jobs/job-{i}.js", "--chunk", "{i}"]
"""

AROUND = """apiVersion: v1
kind: ConfigMap
metadata:
  name: config-{k}
data:
  ENABLED: "true"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api-{k}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: api
          image: registry.example.com/api:1.0.0
"""


def generate_duplicates(count: int, total_jobs: int) -> None:
    """`count` registrations of existing jobs (spread over the tree), CronJobs and crontab lines."""
    REGS.mkdir(parents=True, exist_ok=True)
    for old in REGS.glob("*"):
        old.unlink()
    step = max(1, total_jobs // max(1, count))
    picks = [(k * step) % total_jobs for k in range(count)]
    kube, cron = picks[: count // 2], picks[count // 2:]
    per_file = 10
    for k in range(0, len(kube), per_file):
        docs = [AROUND.format(k=k)] + [CRONJOB.format(i=i, minute=i % 60) for i in kube[k:k + per_file]]
        (REGS / f"cronjobs-{k // per_file}.yaml").write_text("".join(docs))
    lines = ["MAILTO=ops@example.com", "CRON_TZ=UTC"]
    lines += [f"{i % 60} * * * * node jobs/job-{i}.js --chunk {i}" for i in cron]
    (REGS / "legacy.crontab").write_text("\n".join(lines) + "\n")


MODULE = """import {{ EventEmitter }} from "node:events";
{imports}
{schedule}
export interface Record{i} {{
  id: string;
  amount: number;
  currency: "KRW" | "USD" | "EUR";
  createdAt: Date;
}}

const LIMIT_{i} = {i} * 10 + 100;

/** Service {i}: loads records, checks them and writes a summary. */
export class Service{i} extends EventEmitter {{
  private readonly cache = new Map<string, Record{i}>();

  constructor(private readonly name: string = "svc-{i}") {{
    super();
  }}

  async load(ids: string[]): Promise<Record{i}[]> {{
    const out: Record{i}[] = [];
    for (const id of ids) {{
      const hit = this.cache.get(id);
      if (hit) {{
        out.push(hit);
        continue;
      }}
      const rec: Record{i} = {{ id, amount: id.length * 100, currency: "KRW", createdAt: new Date() }};
      this.cache.set(id, rec);
      out.push(rec);
    }}
    return out;
  }}

  check(records: Record{i}[]): {{ ok: Record{i}[]; rejected: string[] }} {{
    const ok: Record{i}[] = [];
    const rejected: string[] = [];
    for (const r of records) {{
      if (r.amount <= 0 || r.amount > LIMIT_{i} * 1000) {{
        rejected.push(`${{r.id}}: amount ${{r.amount}} out of range`);
      }} else if (!["KRW", "USD", "EUR"].includes(r.currency)) {{
        rejected.push(`${{r.id}}: currency ${{r.currency}}`);
      }} else {{
        ok.push(r);
      }}
    }}
    this.emit("checked", {{ ok: ok.length, rejected: rejected.length }});
    return {{ ok, rejected }};
  }}

  summary(records: Record{i}[]): string {{
    const total = records.reduce((sum, r) => sum + r.amount, 0);
    const byCurrency = records.reduce<Record<string, number>>((acc, r) => {{
      acc[r.currency] = (acc[r.currency] ?? 0) + r.amount;
      return acc;
    }}, {{}});
    return JSON.stringify({{ name: this.name, total, byCurrency, at: new Date().toISOString() }});
  }}
}}

export function helper{i}(xs: number[]): number {{
  let best = Number.NEGATIVE_INFINITY;
  for (let k = 0; k < xs.length; k++) {{
    const v = xs[k] * (k % 2 === 0 ? 1 : -1);
    if (v > best) best = v;
  }}
  return best === Number.NEGATIVE_INFINITY ? 0 : best;
}}

export default new Service{i}();
"""


def generate_app(modules: int) -> None:
    """A TypeScript app of `modules` files, imported as a binary tree from src/index.ts."""
    import shutil
    shutil.rmtree(APP, ignore_errors=True)
    (APP / "src" / "modules").mkdir(parents=True)
    for i in range(modules):
        kids = [k for k in (2 * i + 1, 2 * i + 2) if k < modules]
        imports = "".join(f'import {{ helper{k} }} from "./m{k}";\n' for k in kids)
        schedule = ""
        if i % 25 == 0:
            imports += 'import cron from "node-cron";\n'
            schedule = f'cron.schedule("{i % 60} * * * *", async () => {{ await new Service{i}().load(["a"]); }});\n'
        (APP / "src" / "modules" / f"m{i}.ts").write_text(MODULE.format(i=i, imports=imports, schedule=schedule))
    (APP / "src" / "index.ts").write_text('import "./modules/m0";\nconsole.log("started");\n')
    (APP / "tsconfig.json").write_text('{\n  // emitted to dist/\n  "compilerOptions": { "outDir": "dist", "rootDir": "src", "strict": true },\n}\n')
    (APP / "package.json").write_text('{"name": "app", "scripts": {"start": "node dist/index.js"}}\n')
    (APP / "ecosystem.config.js").write_text(
        'module.exports = { apps: [{ name: "app", script: "dist/index.js", instances: 4, exec_mode: "cluster" }] };\n')
    (APP / "Dockerfile").write_text('FROM node:22\nWORKDIR /app\nCOPY . .\nCMD ["pm2-runtime", "ecosystem.config.js"]\n')
    (APP / "deploy").mkdir()
    (APP / "deploy" / "app.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 3\n"
        "  template:\n    spec:\n      containers:\n        - name: app\n          image: app:1\n")


def best_of(cmd, runs: int, ok=(0, 1)):
    """Best wall time over `runs`, and the CPU seconds (user + sys) of that run."""
    best = (float("inf"), 0.0)
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if p.returncode not in ok:
            sys.exit(f"{cmd[0]} failed ({p.returncode}): {p.stderr.decode()[:500]}")
        best = min(best, (elapsed, cpu))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--jobs-per-file", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--code", type=int, default=0,
                    help="also time lint of a Node.js/TypeScript app of this many modules")
    ap.add_argument("--code-only", action="store_true",
                    help="with --code: time the app alone (no manifests, no check-jsonschema)")
    ap.add_argument("--duplicates", type=int, default=0,
                    help="add this many duplicate registrations (CronJobs and crontab lines)")
    args = ap.parse_args()

    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if args.code > 0 and args.code_only:
        generate_app(args.code)
        app = best_of([str(BIN), "lint", str(APP), "--format", "json", "--now", "2026-03-01T00:00:00Z"],
                      args.runs)
        print(f"inputs: a Node.js/TypeScript app of {args.code} modules ({os.cpu_count()} cores)")
        print(f"{'':26}{'wall':>9}{'cpu':>9}")
        print(f"batchguard lint           {app[0]:8.3f}s {app[1]:7.3f}s")
        return
    generate(args.files, args.jobs_per_file)
    if not (VENV / "bin" / "check-jsonschema").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "check-jsonschema"], check=True)
    schema = ROOT / "bench-data" / "manifest.schema.json"
    schema.write_text(subprocess.run([str(BIN), "schema", "manifest"],
                                     capture_output=True, text=True, check=True).stdout)
    files = sorted(str(p) for p in DATA.glob("*.yaml"))
    ours = best_of([str(BIN), "lint", str(DATA), "--format", "json",
                    "--now", "2026-03-01T00:00:00Z"], args.runs)
    with_dups = None
    if args.duplicates > 0:
        generate_duplicates(args.duplicates, args.files * args.jobs_per_file)
        with_dups = best_of([str(BIN), "lint", str(DATA), str(REGS),
                             "--format", "json", "--now", "2026-03-01T00:00:00Z"], args.runs)
    app = None
    if args.code > 0:
        generate_app(args.code)
        app = best_of([str(BIN), "lint", str(APP), "--format", "json",
                       "--now", "2026-03-01T00:00:00Z"], args.runs)
    peer = best_of([str(VENV / "bin" / "check-jsonschema"), "--schemafile", str(schema), *files],
                   max(1, args.runs // 2))
    jobs = args.files * args.jobs_per_file
    print(f"inputs: {jobs} jobs in {args.files} files ({os.cpu_count()} cores)")
    print(f"{'':26}{'wall':>9}{'cpu':>9}")
    print(f"batchguard lint           {ours[0]:8.3f}s {ours[1]:7.3f}s")
    if with_dups is not None:
        print(f"  + {args.duplicates} duplicate regs.     {with_dups[0]:8.3f}s {with_dups[1]:7.3f}s"
              "   (manifests + CronJobs + crontab lines)")
    if app is not None:
        print(f"app of {args.code} JS/TS modules   {app[0]:8.3f}s {app[1]:7.3f}s"
              "   (oxc parse, imports, runners, BG611)")
    print(f"check-jsonschema          {peer[0]:8.3f}s {peer[1]:7.3f}s")
    print(f"ratio (peer / batchguard) {peer[0] / ours[0]:8.1f}x")
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1) * 0.5:
        print(f"note: load average {load:.1f} while measuring; wall times are pessimistic")


if __name__ == "__main__":
    main()
