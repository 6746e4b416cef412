#!/usr/bin/env python3
"""SPEC 10 drill benchmark: a 10,000-record snapshot through every scenario of the
idempotent example job, against that job's own single run.

One command: builds batchguard (release), writes the snapshot, then prints side by side

  * the median wall time of one plain run of the job (`node settle-idempotent.js` on a
    fresh state directory, writing its outputs file as under `run`, no batchguard), run
    right after each drill so that both see the same filesystem, and of the whole drill
    (all six scenarios);
    with each `--jobs` setting (default 1 and 2: one sandbox at a time, and two);
  * their ratios (SPEC 10 target: the drill under 10 x the job's own run time; with 2
    cores and `--jobs 2`, under 4 x);
  * CPU seconds of the drill's process tree, and the share of it that is batchguard's own:
    the tree's CPU minus what the job's executions and replay.verify used (the drill's
    report says, `job_cpu_seconds`, measured by the tap that reaps each execution).

    python3 scripts/bench-drill.py [--records 10000] [--runs 3] [--jobs 1,2] [--state files|pg]

`--state pg` drills `settle-pg` of examples/jobs/settle-pg.batchguard.yaml instead: a job
whose state is a PostgreSQL schema per sandbox (replay.setup/teardown), one statement per
payment through `psql` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test); the
job alone then runs in a schema of its own made and dropped outside the timing.

Needs `node` on PATH (and `psql` with `--state pg`).
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASE = cargo_target.profile_dir("release")
JOBS = ROOT / "examples" / "jobs"
# --state: (the job's script, its manifest, the job's name)
STATES = {
    "files": (JOBS / "settle-idempotent.js", JOBS / "billing.batchguard.yaml", "settle-payments"),
    "pg": (JOBS / "settle-pg.js", JOBS / "settle-pg.batchguard.yaml", "settle-pg"),
}
SLOT = "2026-03-01T02:00:00Z"


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv, env=None, cwd=ROOT):
    c0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    return p, wall, children_cpu() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", default="1,2",
                    help="comma-separated --jobs settings of the drill to compare (default 1,2)")
    ap.add_argument("--state", choices=sorted(STATES), default="files",
                    help="the job drilled: state in files under the sandbox, or in PostgreSQL")
    a = ap.parse_args()
    JOB, MANIFEST, NAME = STATES[a.state]
    if a.state == "pg" and shutil.which("psql") is None:
        sys.exit("bench-drill: --state pg needs psql on PATH")
    jobs_list = [int(j) for j in a.jobs.split(",") if j.strip()]
    if shutil.which("node") is None:
        sys.exit("bench-drill: node is not on PATH")
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "batchguard",
                    "--bin", "batchguard"], cwd=ROOT, check=True)
    bg = str(RELEASE / "batchguard")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bg-bench-drill-"))
    try:
        snap = work / "snapshot.jsonl"
        with open(snap, "w") as f:
            for i in range(a.records):
                f.write(json.dumps({"payment_id": f"pay-{i:06d}", "amount": (i * 137) % 900 + 100},
                                   separators=(",", ":")) + "\n")
        job_walls, job_cpus = [], []
        drill_walls = {j: [] for j in jobs_list}
        drill_cpus = {j: [] for j in jobs_list}
        jobs_in_drill = {j: [] for j in jobs_list}
        reports = {}
        for run in range(a.runs):
            # Each setting's drill, then the job alone, in every round: all of them see
            # the same load of the shared machine, round by round.
            for j in jobs_list:
                out = work / f"drill-{run}-{j}.json"
                p, wall, cpu = timed([bg, "drill", "--manifest", str(MANIFEST), "--job", NAME,
                                      "--snapshot", str(snap), "--scheduled-at", SLOT,
                                      "--jobs", str(j), "--format", "json", "--out", str(out)])
                if p.returncode != 0:
                    sys.exit(f"the drill did not pass ({p.returncode}):\n{p.stderr.decode()}")
                reports[j] = json.loads(out.read_text())
                drill_walls[j].append(wall)
                drill_cpus[j].append(cpu)
                jobs_in_drill[j].append(reports[j]["job_cpu_seconds"])
            # The job alone right after the drills, on the filesystem the drills' own
            # executions saw: the drill has just deleted its sandboxes, and ext4 allocates
            # inodes slowly for minutes after many deletions (its `recently_deleted` scan),
            # which a job that creates a file per record pays. Measured on a quiet
            # filesystem instead, the job looks up to ten times faster than it runs
            # inside the drill, and the ratio would measure the filesystem.
            # A directory made the way the drill makes its sandbox root (a new temporary
            # directory, just after the last one was deleted), so that its files land
            # where the drill's did.
            alone = pathlib.Path(tempfile.mkdtemp(prefix="batchguard-drill-"))
            state = alone / "state"
            # As under `run`: it reports each applied key to its outputs file.
            env = dict(os.environ, BATCHGUARD_SANDBOX=str(state),
                       BATCHGUARD_OUTPUTS=str(work / f"outputs-{run}"), BATCHGUARD_FENCE="1")
            if a.state == "pg":
                # Its own schema, as replay.setup makes one per sandbox (not timed).
                state.mkdir(parents=True)
                subprocess.run(["node", str(JOBS / "pg-state.js"), "setup"], env=env, cwd=ROOT,
                               check=True, stdout=subprocess.DEVNULL)
            p, wall, cpu = timed(["node", str(JOB), "--input", str(snap)], env)
            if a.state == "pg":
                subprocess.run(["node", str(JOBS / "pg-state.js"), "teardown"], env=env, cwd=ROOT,
                               check=True, stdout=subprocess.DEVNULL)
            if p.returncode != 0:
                sys.exit(p.stderr.decode())
            job_walls.append(wall)
            job_cpus.append(cpu)
            shutil.rmtree(alone, ignore_errors=True)
        job = statistics.median(job_walls)
        print(f"job: {NAME} (state: {a.state}), records: {a.records}, runs: {a.runs} (medians), "
              f"cores: {os.cpu_count()}")
        print(f"{'':32}{'wall s':>10}{'x job':>8}")
        print(f"{'job alone (node, one run)':32}{job:>10.3f}")
        for j in jobs_list:
            drill = statistics.median(drill_walls[j])
            print(f"{'drill, all 6, --jobs ' + str(j):32}{drill:>10.3f}{drill / job:>7.1f}x"
                  f"   (sandboxes at a time: {reports[j]['scenarios_at_once']})")
        print("targets: under 10x (SPEC 10); with 2 cores and --jobs 2, under 4x")
        print(f"job alone CPU: {statistics.median(job_cpus):.3f} s")
        for j in jobs_list:
            # The drill reports the CPU its job executions (measured by the tap that reaps
            # each) and, when it ran one sandbox at a time, replay.verify used; the rest
            # of the process tree is batchguard's.
            job_cpu = statistics.median(jobs_in_drill[j])
            tree = statistics.median(drill_cpus[j])
            ours = max(tree - job_cpu, 0.0)
            note = "" if reports[j]["scenarios_at_once"] == 1 else " (verify's CPU counted as batchguard's)"
            print(f"--jobs {j}: drill process tree CPU {tree:.3f} s; job executions {job_cpu:.3f} s; "
                  f"batchguard's own {ours:.3f} s{note}")
        for j in jobs_list:
            print(f"scenarios, --jobs {j} (last run):")
            for s in reports[j]["scenarios"]:
                print(f"  {s['name']:<10} {s['seconds']:>7.3f} s  passed={s['passed']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
