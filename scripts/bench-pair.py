#!/usr/bin/env python3
"""Two batchguard binaries on the same command, side by side in one run.

    python3 scripts/bench-pair.py OLD NEW [--runs 7] [--warmup 1] -- ARGS...

Runs `OLD ARGS` and `NEW ARGS` in turns (A B A B ...), so both see the same machine load,
and prints each side's median wall and CPU time (user + system of the process and its
children, from wait4) and the median of the per-pair ratios NEW/OLD. Output goes to
/dev/null; the exit codes must agree (a lint that finds something exits 1 on both sides).
Used for the "within 5 %" proof of a restructuring: see docs/benchmarks.md.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def once(argv):
    """Wall seconds, CPU seconds and exit code of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=1)
    argv = sys.argv[1:]
    if "--" not in argv:
        ap.error("give the command's arguments after --")
    cut = argv.index("--")
    a = ap.parse_args(argv[:cut])
    args = argv[cut + 1 :]
    if not args:
        ap.error("give the command's arguments after --")
    sides = {"old": [a.old, *args], "new": [a.new, *args]}
    for _ in range(a.warmup):
        for argv in sides.values():
            once(argv)
    res = {"old": [], "new": []}
    for _ in range(a.runs):
        for name, argv in sides.items():
            res[name].append(once(argv))
    codes = {name: {r[2] for r in rs} for name, rs in res.items()}
    if codes["old"] != codes["new"] or len(codes["old"]) != 1:
        sys.exit(f"exit codes differ: old {sorted(codes['old'])}, new {sorted(codes['new'])}")
    if codes["old"] & {2, 125}:
        sys.exit(f"the command could not run (exit {sorted(codes['old'])}): {' '.join(args)}")
    med = {n: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for n, rs in res.items()}
    wall_ratio = statistics.median(n[0] / o[0] for o, n in zip(res["old"], res["new"]))
    cpu_ratio = statistics.median(n[1] / o[1] for o, n in zip(res["old"], res["new"]) if o[1] > 0)
    print(f"command: {' '.join(args)}  ({a.runs} pairs, exit {codes['old'].pop()})")
    print(f"{'':6} {'wall s':>9} {'cpu s':>9}")
    for n in ("old", "new"):
        print(f"{n:6} {med[n][0]:9.3f} {med[n][1]:9.3f}")
    print(f"new/old (median of pairs): wall {wall_ratio:.3f}, cpu {cpu_ratio:.3f}")


if __name__ == "__main__":
    main()
