#!/usr/bin/env python3
"""batchguard's own chaos test (docs/chaos.md): hosts ticking a fast job through `run` and
`guard()` on private PostgreSQL and Redis servers, a SQLite file and a MariaDB database,
under a seeded nemesis; judged on the job's own history and `audit` of the window.

    scripts/chaos.py --duration 3600 --seed 42 --stores postgres,redis,sqlite,mysql

Exit 0: every property held. 1: violations (each printed with the seed). 2: the run could
not be set up (a server missing under CI=true, a bad argument).
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "chaos"))

import cell as cellmod  # noqa: E402
import checks  # noqa: E402
import nemesis as nemesismod  # noqa: E402
import servers  # noqa: E402

KINDS = ["postgres", "redis", "sqlite", "mysql"]


class Run:
    def __init__(self, args):
        self.seed = args.seed
        self.binary = os.path.abspath(args.binary)
        self.step, self.ttl, self.catch_up = args.step, args.ttl, args.catch_up
        self.rng = random.Random(self.seed)
        self.rng_nemesis = random.Random(self.seed * 7 + 1)
        self.root = tempfile.mkdtemp(prefix=f"batchguard-chaos-{self.seed}-")
        os.chmod(self.root, 0o755)  # the private PostgreSQL runs as its own user
        self.mark = f"chaos-{os.getpid()}-{self.seed}"
        self.marker_env = {"CHAOS_MARK": self.mark, "CHAOS_SEED_SMALL": str(self.seed % 1000),
                           "CHAOS_LONG": str(2 * self.ttl)}
        self.faults_by_run = {}  # run id -> the faults that hit its guard or its job
        self.figures = {k: 0 for k in [
            "ticks", "applies", "kills", "job_kills", "stops", "restarts", "repairs", "cuts",
            "stalls", "node_restarts", "slots", "succeeded", "dead_lettered", "superseded",
            "unresolved", "reapplied_slots", "reruns_after_a_spooled_finish"]}
        self.figures["exits"] = {}
        self.log_lock = threading.Lock()
        self.verbose = args.verbose
        self.notes = []
        self.stderr_extra = []
        self.cells = []
        self.t0 = 0

    def note(self, text):
        with self.log_lock:
            line = f"[{time.strftime('%H:%M:%S')}] {text}"
            self.notes.append(line)
            if self.verbose:
                print(line, flush=True)


def say(run, text):
    print(f"chaos (seed {run.seed}): {text}", flush=True)


def make_server(run, kind):
    if kind == "postgres":
        return servers.Postgres.make(run.root)
    if kind == "redis":
        return servers.Redis.make(run.root)
    if kind == "mysql":
        return servers.MariaDb.make(f"bg_chaos_{os.getpid()}_{run.seed % 100000}")
    return None, None


def main():
    # The guarantees are judged with item 22's clock bound on, whatever the caller's
    # environment says (the project's test suite turns it off for its other rigs).
    os.environ.pop("BATCHGUARD_CLOCK_CHECK", None)
    # A TERM (a CI timeout, `kill`) ends the run through its clean-up, as Ctrl-C does: the
    # private servers and every marked process are stopped, never left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=600, help="seconds of faults (default 600)")
    p.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", "0")) or random.SystemRandom().randrange(1, 10**9))
    p.add_argument("--stores", default=",".join(KINDS))
    p.add_argument("--binary", default=os.environ.get("BATCHGUARD_BINARY", "target/debug/batchguard"))
    p.add_argument("--step", type=int, default=3, help="the job's schedule step in seconds")
    p.add_argument("--ttl", type=int, default=6)
    p.add_argument("--catch-up", type=int, default=12)
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    p.add_argument("--verbose", action="store_true", help="print every fault as it happens")
    args = p.parse_args()
    kinds = [k for k in args.stores.split(",") if k]
    if any(k not in KINDS for k in kinds) or not os.access(args.binary, os.X_OK):
        print(f"chaos: bad --stores ({args.stores}) or no binary at {args.binary}", file=sys.stderr)
        return 2
    run = Run(args)
    say(run, f"replay with CHAOS_SEED={run.seed} (scratch {run.root})")
    ci = os.environ.get("CI") == "true"
    for tool in ["node", "setsid"]:
        if not shutil.which(tool):
            if ci:
                say(run, f"{tool} is required under CI=true")
                return 2
            say(run, f"skipped: {tool} is not on PATH")
            return 0
    srv = {}
    code = 2
    try:
        for kind in kinds:
            server, why = make_server(run, kind)
            if why:
                if ci:
                    say(run, f"{kind}: cannot start a private server under CI=true: {why}")
                    return 2
                say(run, f"{kind}: skipped ({why})")
                continue
            srv[kind] = server
            if server is None:  # SQLite: a file, no server
                continue
        step = run.step
        run.t0 = (int(time.time()) // step + 2) * step
        for kind in srv:
            c = cellmod.Cell(run, kind, srv[kind])
            c.migrate()
            run.cells.append(c)
        if not run.cells:
            say(run, "no store to test")
            return 0 if not ci else 2
        for c in run.cells:
            c.start()
        nem = nemesismod.Nemesis(run)
        nem.start()
        say(run, f"{len(run.cells)} cells ({', '.join(c.kind for c in run.cells)}), 4 hosts each, "
                 f"step {step} s, ttl {run.ttl} s, faults for {args.duration:.0f} s")
        time.sleep(args.duration)  # the length of the run: how long the nemesis works
        nem.stop()
        w1 = (int(time.time()) // step) * step
        w0 = run.t0
        # Healing: faults have stopped; the hosts tick on until every slot of the window
        # is settled in the ledger or the catch-up reach has passed (a count of ticks).
        heal = run.catch_up // step + 2
        say(run, f"nemesis stopped; healing for up to {heal} ticks")
        for _ in range(heal):
            t = (int(time.time()) // step + 1) * step
            time.sleep(max(0, t - time.time()) + 0.5)
            if all(settled(c, w0, w1) for c in run.cells):
                break
        for c in run.cells:
            c.stop_ticking()
        violations = []
        for c in run.cells:
            for hung in c.wait_all(limit=120):
                violations.append(("guard_hung", f"{c.kind}: {hung}"))
        # Every process the run started must be gone now that every guard has returned.
        left = cellmod.marked(run.mark)
        for pid in left:
            violations.append(("leftover", f"pid {pid} still running: {cellmod.cmdline(pid)[:160]}"))
        for pid in left:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for c in run.cells:
            c.flush()
        # Audit's window ends one grace (the lock ttl) after the last slot: the ledger's
        # clock must have passed it for the slot to be due (SPEC 7.1 item 26).
        while time.time() < w1 + run.ttl + 1:
            time.sleep(0.2)
        for c in run.cells:
            violations += checks.judge(c, w0, w1, run.figures, run.faults_by_run)
        for text in run.stderr_extra:
            if "panicked at" in text:
                violations.append(("panic", text.strip()[:200]))
        print_figures(run, violations, w0, w1)
        code = 1 if violations else 0
        return code
    finally:
        for c in run.cells:
            c.stopping.set()
            c.close()
        for pid in cellmod.marked(run.mark):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for s in srv.values():
            if s:
                s.stop()
        if args.keep or code == 1:
            say(run, f"scratch kept: {run.root}")
        else:
            shutil.rmtree(run.root, ignore_errors=True)


def settled(c, w0, w1):
    try:
        events, _, _ = checks.ledger(c)
    except (subprocess.CalledProcessError, OSError, ValueError):
        return False
    done = {checks.slot_key(e["scheduled_at"]) for e in events
            if (e["event"] == "end" and e.get("status") == "success") or e["event"] == "dead_letter"}
    return all(s in done for s in range(w0, w1 + 1, c.step))


def print_figures(run, violations, w0, w1):
    f = run.figures
    say(run, f"window {checks.iso(w0)} .. {checks.iso(w1)}")
    say(run, "ticks {ticks}, applies {applies}, slots {slots} (succeeded {succeeded}, dead-lettered "
             "{dead_lettered}, unresolved {unresolved}, applied by 2+ runs {reapplied_slots}), superseded ends "
             "{superseded}, re-runs after a finish spooled past its lease (audit: AU102) "
             "{reruns_after_a_spooled_finish}".format(**f))
    say(run, "faults: kills {kills}, job kills {job_kills}, stops {stops}, restarts {restarts} (repairs "
             "{repairs}), cuts {cuts}, stalls {stalls}, node restarts {node_restarts}".format(**f))
    say(run, "run exits: " + ", ".join(f"{k}: {v}" for k, v in sorted(f["exits"].items())))
    kinds = {}
    for kind, _ in violations:
        kinds[kind] = kinds.get(kind, 0) + 1
    say(run, "violations: " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"))
    shown = {}
    for kind, text in violations:
        shown[kind] = shown.get(kind, 0) + 1
        if shown[kind] <= 8:
            print(f"  [{kind}] {text} (seed {run.seed})")
        elif shown[kind] == 9:
            print(f"  [{kind}] ... and {kinds[kind] - 8} more (seed {run.seed})")
    if violations:
        say(run, f"FAILED: replay with CHAOS_SEED={run.seed}")


if __name__ == "__main__":
    sys.exit(main())
