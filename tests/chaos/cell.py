"""A cell: one store and the hosts that share it. Each host has a working directory of its
own and a TCP proxy to the store (the nemesis cuts or stalls one host's link there):

- `a`, `b`: a scheduler's timer that calls `batchguard run --scheduled-at TICK` every step;
- `c`: the same under libfaketime (+1 h or -1 h, by the seed): its ticks are its clock's
  (not in the SQLite cell: a SQLite store is one host's, whose processes share one clock);
- `n`: a Node.js process that ticks in-process through `guard()` (npm/batchguard).

Every process the cell starts carries CHAOS_MARK in its environment (so does whatever it
starts), which is how the leftover check finds them in /proc.
"""

import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def iso(t):
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def manifest(job, kind, step, ttl, catch_up, since):
    return f"""version: 1
service: chaos
deployment: {{platform: pm2, scheduler: node-cron, instances: 4}}
jobs:
  - name: {job}
    schedule: "*/{step} * * * * *"
    since: {since}
    expected_duration: 2s
    command: ["sh", "{HERE}/job.sh"]
    lock: {{key: "{{job}}:{{scheduled_at}}", ttl: {ttl}s, store: {kind}}}
    retry: {{max_attempts: 3, backoff: fixed, initial_delay: 0s, on_unknown: retry, catch_up: {catch_up}s}}
"""


class Host:
    def __init__(self, cell, name, skew=0):
        self.cell, self.name, self.skew = cell, name, skew
        self.instance = f"{cell.kind}/{name}"
        self.dir = os.path.join(cell.dir, name)
        os.makedirs(self.dir)
        self.proxy = None
        self.procs = []  # Popen of `run`, with .tick and .code once reaped
        self.node = None
        self.stderr = os.path.join(self.dir, "stderr.log")

    def store_url(self):
        return self.cell.store_url(self.proxy.port if self.proxy else None)

    def env(self):
        e = dict(os.environ)
        e.update(self.cell.run.marker_env)
        e.update({
            "NO_COLOR": "1", "CHAOS_CELL": self.cell.kind, "CHAOS_HOST": self.instance,
            "CHAOS_APPLIES": self.cell.applies, "BATCHGUARD_INSTANCE": self.instance,
        })
        if self.skew:
            e.update({"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"{self.skew:+d}s",
                      "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1"})
        return e

    def tick(self, t):
        """One tick of this host's scheduler: `run` for the slot its own clock names."""
        argv = [self.cell.run.binary, "run", "--manifest", self.cell.manifest, "--job",
                self.cell.job, "--store", self.store_url(), "--scheduled-at", iso(t + self.skew),
                "--instance", self.instance]
        if self.cell.ledger_arg:
            argv += ["--ledger", self.cell.ledger_arg]
        with open(self.stderr, "ab") as err:
            p = subprocess.Popen(argv, cwd=self.dir, env=self.env(), stdin=subprocess.DEVNULL,
                                 stdout=err, stderr=err)
        p.tick, p.code = t, None
        self.procs.append(p)
        self.cell.run.figures["ticks"] += 1

    def start_node(self):
        e = self.env()
        e.update({
            "BATCHGUARD_BINARY": self.cell.run.binary,
            "CHAOS_PACKAGE": os.path.join(REPO, "npm", "batchguard", "index.js"),
            "CHAOS_MANIFEST": self.cell.manifest, "CHAOS_JOB": self.cell.job,
            "CHAOS_STORE": self.store_url(), "CHAOS_LEDGER": self.cell.ledger_arg or "",
            "CHAOS_STEP_MS": str(self.cell.step * 1000),
            "CHAOS_RESULTS": os.path.join(self.dir, "results.jsonl"),
            "CHAOS_STOP": os.path.join(self.dir, "stop"), "CHAOS_STDERR": self.stderr,
        })
        with open(self.stderr, "ab") as err:
            self.node = subprocess.Popen(["node", os.path.join(HERE, "guard_host.mjs")],
                                         cwd=self.dir, env=e, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err)

    def live_guards(self):
        """The `batchguard` processes this host's scheduler started and that still run."""
        if self.node:
            if self.node.poll() is None:
                return [pid for pid in children(self.node.pid) if exe(pid) == self.cell.run.binary]
            return []
        return [p.pid for p in self.procs if p.poll() is None]


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        k, _, v = item.partition(b"=")
        if k:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def marked(mark):
    """Live (not zombie) processes whose environment carries the run's marker."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            pid = int(d)
            if environ(pid).get("CHAOS_MARK") == mark and state(pid) not in (None, "Z"):
                out.append(pid)
    return out


class Cell:
    def __init__(self, run, kind, server):
        self.run, self.kind, self.server = run, kind, server
        self.dir = os.path.join(run.root, kind)
        os.makedirs(self.dir)
        self.job = f"chaos-{kind}"
        self.applies = os.path.join(self.dir, "applies.jsonl")
        open(self.applies, "w").close()
        self.step, self.ttl, self.catch_up = run.step, run.ttl, run.catch_up
        self.manifest = os.path.join(self.dir, "chaos.batchguard.yaml")
        with open(self.manifest, "w") as f:
            f.write(manifest(self.job, kind, self.step, self.ttl, self.catch_up, iso(run.t0)))
        self.ledger_arg = os.path.join(self.dir, "ledger.jsonl") if kind == "redis" else None
        if self.ledger_arg:
            # The operator's ledger exists from the start: a Redis that loses its data before
            # the first event is written is repaired against an empty ledger (`store repair`
            # refuses a ledger file that is missing, which may be a mistyped path). Fences
            # handed out before that loss were never used: a job starts after its `start`.
            open(self.ledger_arg, "a").close()
        skew = run.rng.choice([3600, -3600])
        if kind == "sqlite":
            # A SQLite store is one host's, and its clock is that host's (SPEC 7.1 item 2):
            # every process there reads one clock, so no host of this cell is skewed.
            skew = 0
        self.hosts = [Host(self, "a"), Host(self, "b"), Host(self, "c", skew), Host(self, "n")]
        if kind != "sqlite":
            from proxy import Proxy
            for h in self.hosts:
                h.proxy = Proxy(server.port)
        self.stopping = threading.Event()
        self.threads = []
        self.lock = threading.Lock()  # held while the store is being restarted or repaired

    def store_url(self, port=None):
        if self.kind == "sqlite":
            return f"sqlite:{os.path.join(self.dir, 'store.db')}"
        return self.server.url(port)

    def admin_url(self):
        return self.store_url()

    def bg(self, args, cwd=None):
        """A `batchguard` command of the operator's (not a host's), to its end."""
        return subprocess.run([self.run.binary] + args, cwd=cwd or self.dir, capture_output=True,
                              text=True, env={**os.environ, **self.run.marker_env, "NO_COLOR": "1"})

    def migrate(self):
        if self.kind == "sqlite":
            return
        r = self.bg(["store", "migrate", "--store", self.admin_url()])
        if r.returncode != 0:
            raise RuntimeError(f"store migrate ({self.kind}): {r.stderr.strip()}")

    def start(self):
        for h in self.hosts:
            if h.name == "n":
                h.start_node()
                self.threads.append(threading.Thread(target=self._watch_node, args=(h,), daemon=True))
            else:
                self.threads.append(threading.Thread(target=self._ticker, args=(h,), daemon=True))
        self.threads.append(threading.Thread(target=self._reaper, daemon=True))
        for t in self.threads:
            t.start()

    def _ticker(self, h):
        """A scheduler's timer: wakes at every multiple of the step (real clock) and calls run."""
        while not self.stopping.is_set():
            now = time.time()
            nxt = (int(now) // self.step + 1) * self.step
            if self.stopping.wait(nxt - now):
                return
            h.tick(nxt)

    def _watch_node(self, h):
        """PM2's part: a Node.js host that died (the nemesis killed it) is started again."""
        while True:
            code = h.node.wait()
            if self.stopping.is_set():
                return
            self.run.figures["node_restarts"] += 1
            self.run.note(f"{h.instance}: node exited {code}, restarted")
            h.start_node()

    def _reaper(self):
        while True:
            done = self.stopping.is_set()
            for h in self.hosts:
                for p in h.procs:
                    if p.code is None and p.poll() is not None:
                        p.code = p.returncode
                        self.run.figures["exits"][str(p.code)] = self.run.figures["exits"].get(str(p.code), 0) + 1
            if done and all(p.code is not None for h in self.hosts for p in h.procs):
                return
            time.sleep(0.1)

    def stop_ticking(self):
        self.stopping.set()
        for h in self.hosts:
            if h.node:
                open(os.path.join(h.dir, "stop"), "w").close()

    def wait_all(self, limit):
        """Waits for every process the hosts started to end; the ones still there after
        `limit` seconds (a guard that never finished) are named and killed."""
        hung = []
        end = time.monotonic() + limit
        for h in self.hosts:
            for p in h.procs + ([h.node] if h.node else []):
                try:
                    p.wait(max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    hung.append(f"{h.instance} pid {p.pid}: {' '.join(p.args[:2])} (tick {getattr(p, 'tick', '-')})")
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                    p.wait()
        for t in self.threads:
            t.join(limit)
        return hung

    def flush(self):
        """The operator writes every host's spool (SPEC 7.1 item 10) before the verdict."""
        for h in self.hosts:
            if os.path.isdir(os.path.join(h.dir, ".batchguard")):
                args = ["store", "flush", "--store", self.admin_url()]
                if self.ledger_arg:
                    args += ["--ledger", self.ledger_arg]
                r = self.bg(args, cwd=h.dir)
                if r.returncode != 0:
                    self.run.note(f"{h.instance}: store flush exited {r.returncode}: {r.stderr.strip()[:300]}")

    def close(self):
        for h in self.hosts:
            if h.proxy:
                h.proxy.close()
