#!/usr/bin/env python3
"""Where the milliseconds of `batchguard run -- true` (SQLite store) go.

One command: builds batchguard (release), measures the median CPU time (user + system,
from `wait4`) of `run -- true` and of bare `true`, then samples `--runs` runs with
`perf record --call-graph dwarf` and attributes every sample of batchguard's threads to
the step of `run` it was taken in (the outermost matching frame wins), so each step's share
of the samples times the median CPU time is its cost per run.

    python3 scripts/profile-run.py [--runs 30] [--freq 20000] [--bin PATH]

Needs `perf` (and permission to record: root, or `kernel.perf_event_paranoid` <= 1).
The figures are CPU time; on an idle host wall time adds little to them (the guard
waits only on the command and on SQLite's file locks), on a loaded host much more.
"""
import argparse
import collections
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import importlib.util
import tempfile

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASE = cargo_target.profile_dir("release")
# The manifest and slots of scripts/bench-run.py, so both measure the same job.
_spec = importlib.util.spec_from_file_location("bench_run", ROOT / "scripts" / "bench-run.py")
bench_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_run)
MANIFEST, slot = bench_run.MANIFEST, bench_run.slot

# (step, frame substring), main thread: the outermost frame that matches names the step.
MAIN_STEPS = [
    ("command: fork and exec of `true` (child side)", "Command>::do_exec"),
    ("command: fork", "__libc_fork"),
    ("command: spawn, wait, clean-up", "batchguard::process::run"),
    ("manifest: read, parse, plan", "guard::plan::plan"),
    ("slot check (--scheduled-at)", "Plan::given_slot"),
    ("store: open (runtime, connection, pragmas, schema)", "store::open_with"),
    ("store: spool and leftovers (catch-up)", "guard::catch_up"),
    ("store: acquire transaction", "Store>::acquire"),
    ("store: finish transaction", "Store>::finish"),
    ("store: close", "drop_in_place<batchguard::store"),
    ("run directory: create, lock, remove", "DirBuilder"),
    ("run directory: create, lock, remove", "remove_run_dir"),
    ("run directory: create, lock, remove", "hold_run_dir"),
    ("outcome: classify, outputs", "classify::classify"),
    ("outcome: classify, outputs", "read_outputs"),
    ("arguments (clap)", "clap_builder"),
    ("process exit (allocator, destructors)", "_dl_fini"),
    ("process exit (allocator, destructors)", "__run_exit_handlers"),
    ("process exit (allocator, destructors)", "do_exit"),
    ("process start: dynamic loader, relocations", "_dl_start"),
    ("process start: dynamic loader, relocations", "dl_main"),
    ("process start: exec (kernel)", "execve"),
]
# SQLite's own work, wherever it runs: on the main thread (the store calls SQLite there),
# or, in binaries before the store moved to rusqlite, on sqlx's worker thread.
WORKER_STEPS = [
    ("sqlite: WAL index recovery and schema read on open", "sqlite3InitOne"),
    ("sqlite: checkpoint", "sqlite3WalCheckpoint"),
    ("sqlite: prepare statements", "sqlite3Prepare"),
    ("sqlite: run statements", "sqlite3_step"),
    ("sqlite: open the file", "openDatabase"),
    ("sqlite: worker thread start", "thread_info::set_current_info"),
    ("sqlite: hand-offs with the worker", "flume"),
]


def cpu_of(argv, cwd):
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{argv} failed ({p.returncode})")
    return (ru.ru_utime + ru.ru_stime) * 1000.0


def step_of(frames, steps, inner):
    """The step of the outermost frame that matches (frames are innermost first)."""
    if inner:
        for f in frames:
            for name, sub in inner:
                if sub in f:
                    return name
    for f in reversed(frames):
        for name, sub in steps:
            if sub in f:
                return name
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--freq", type=int, default=20000)
    ap.add_argument("--bin", help="profile this binary instead of building one")
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf is not on PATH")
    if a.bin is None:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "batchguard", "--bin",
                        "batchguard"], cwd=ROOT, check=True)
    bg = os.path.abspath(a.bin) if a.bin else str(RELEASE / "batchguard")
    true = shutil.which("true")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bg-profile-run-"))
    (work / "m.batchguard.yaml").write_text(MANIFEST)
    run = [bg, "run", "--manifest", "m.batchguard.yaml", "--job", "j"]
    try:
        cpu_run, cpu_true = [], []
        for i in range(a.runs):
            cpu_true.append(cpu_of([true], work))
            cpu_run.append(cpu_of(run + ["--scheduled-at", slot(i), "--", true], work))
        med_run, med_true = statistics.median(cpu_run), statistics.median(cpu_true)
        script = work / "loop.sh"
        lines = [" ".join(run + ["--scheduled-at", slot(10000 + i), "--", true])
                 for i in range(a.runs)]
        script.write_text("\n".join(lines) + "\n")
        data = work / "perf.data"
        subprocess.run(["perf", "record", "-q", "-F", str(a.freq), "--call-graph", "dwarf,32768",
                        "-o", str(data), "--", "sh", str(script)], cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(["perf", "script", "--no-inline", "-i", str(data), "-F", "comm,ip,sym"],
                             capture_output=True, text=True).stdout
        counts = collections.Counter()
        total = 0
        for block in out.split("\n\n"):
            lines = [x.strip() for x in block.strip().split("\n") if x.strip()]
            if not lines:
                continue
            comm = lines[0].split()[0]
            frames = [x.split(None, 1)[-1] for x in lines[1:]]
            if comm.startswith("sqlx-sqlite"):
                step = step_of(frames, WORKER_STEPS, WORKER_STEPS[:2]) or "sqlite: other"
            elif comm == os.path.basename(bg)[:15]:
                # SQLite's work first (whichever store step called it), then the steps.
                step = (step_of(frames, [], WORKER_STEPS[:2])
                        or step_of(frames, WORKER_STEPS[2:5], None)
                        or step_of(frames, MAIN_STEPS, None))
                if step is None and any("guard::guarded" in f for f in frames):
                    step = "guard: the rest (events, environment, tokio)"
                elif step is None and any("lang_start_internal" in f for f in frames) and \
                        not any(k in f for f in frames for k in ("batchguard::", "tokio", "sqlx")):
                    step = "process start: Rust runtime, allocator arena"
                elif step is None and any("tokio" in f or "sqlx" in f for f in frames):
                    step = "store: tokio and sqlx (main thread side)"
                elif step is None:
                    step = "other (main thread)"
            else:
                continue
            counts[step] += 1
            total += 1
        print(f"{a.runs} runs of `batchguard run -- true` (SQLite), load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"median CPU time: run {med_run:.2f} ms, bare true {med_true:.2f} ms "
              f"(+{med_run - med_true:.2f} ms)\n")
        print("| step | share of batchguard's samples | CPU per run |")
        print("|---|---|---|")
        # `run`'s own CPU without the `true` it starts, spread by the samples' shares.
        own = med_run - med_true
        for step, n in counts.most_common():
            print(f"| {step} | {100.0 * n / total:.1f}% | {own * n / total:.2f} ms |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
