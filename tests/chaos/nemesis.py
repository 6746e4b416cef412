"""The nemesis: faults chosen by a seeded PRNG (the seed is printed; CHAOS_SEED replays the
same sequence of choices; the processes' own timing still varies from run to run).

Faults: SIGKILL and SIGSTOP/SIGCONT of a host's `batchguard` (a `run`, or the `guard()`
link child of a Node.js host), of the job's own processes, of a whole Node.js host;
a restart of the private PostgreSQL (a crash: `pg_ctl stop -m immediate`) and of the
private Redis (every key lost: the operator then runs `store repair`); a cut or a stall of
one host's link to its store through its proxy. Every fault with a duration is healed by
the nemesis itself, and all of them are healed when it stops.
"""

import heapq
import os
import signal
import threading
import time

import cell as cellmod

ACTIONS = [
    ("kill_guard", 4), ("stop_guard", 3), ("kill_job", 2), ("stop_job", 1), ("stop_node", 1),
    ("kill_node", 0.5), ("restart_store", 0.6), ("cut", 1), ("stall", 1),
]


class Nemesis:
    def __init__(self, run):
        self.run = run
        self.rng = run.rng_nemesis
        self.pending = []  # (due, seq, fn, what): heals to do
        self.seq = 0
        self.stopping = threading.Event()
        self.restarts = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.thread.start()

    def _later(self, delay, fn, what):
        self.seq += 1
        heapq.heappush(self.pending, (time.monotonic() + delay, self.seq, fn, what))

    def _heal_due(self, everything=False):
        while self.pending and (everything or self.pending[0][0] <= time.monotonic()):
            _, _, fn, _ = heapq.heappop(self.pending)
            fn()

    def _loop(self):
        next_fault = time.monotonic() + self.rng.uniform(0.5, 1.5)
        while not self.stopping.is_set():
            self._heal_due()
            if time.monotonic() >= next_fault:
                self._fault()
                next_fault = time.monotonic() + self.rng.uniform(0.2, 1.2)
            self.stopping.wait(0.05)
        self._heal_due(everything=True)

    def stop(self):
        """Stops faulting, heals what is open, waits for restarts (and repairs) to finish."""
        self.stopping.set()
        self.thread.join()
        for t in self.restarts:
            t.join()

    def _fault(self):
        run = self.run
        names = [a for a, _ in ACTIONS]
        action = self.rng.choices(names, weights=[w for _, w in ACTIONS])[0]
        cell = self.rng.choice(run.cells)
        # The skewed host `c` works slots nobody else does (an hour off): it is picked less.
        host = cell.hosts[self.rng.choice([0, 1, 3, 0, 1, 3, 2])]
        getattr(self, action)(cell, host)

    def _signal(self, pid, sig):
        """Signals `pid` only if it is still one of this run's processes: the pid is opened
        as a pidfd first and its marker checked after, so a pid reused by a stranger (the
        machine's other tests, 32768 pids go round fast) is never signalled."""
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            return False
        try:
            if cellmod.environ(pid).get("CHAOS_MARK") != self.run.mark:
                return False
            signal.pidfd_send_signal(fd, sig)
            return True
        except (ProcessLookupError, OSError):
            return False
        finally:
            os.close(fd)

    def _blame(self, pids, what):
        """Remembers which runs a fault hit (the BATCHGUARD_RUN_ID of the job processes under
        each pid), so a violation can name the faults behind it."""
        runs = set()
        for pid in cellmod.marked(self.run.mark):
            env = cellmod.environ(pid)
            rid = env.get("BATCHGUARD_RUN_ID")
            if not rid:
                continue
            chain, p = {pid}, pid
            for _ in range(3):
                p = cellmod.ppid(p)
                if p:
                    chain.add(p)
            if chain & set(pids):
                runs.add(rid)
        for rid in runs:
            self.run.faults_by_run.setdefault(rid, []).append(f"{time.strftime('%H:%M:%S')} {what}")

    def _stop_for(self, pids, what):
        """SIGSTOP now, SIGCONT after a pause that may outlast the lease (up to 2 ttl)."""
        pause = self.rng.uniform(0.3, 2 * self.run.ttl)
        self._blame(pids, f"SIGSTOP {what} for {pause:.1f} s")
        stopped = [p for p in pids if self._signal(p, signal.SIGSTOP)]
        if stopped:
            self.run.figures["stops"] += 1
            self.run.note(f"SIGSTOP {what} {stopped} for {pause:.1f} s")
            self._later(pause, lambda: [self._signal(p, signal.SIGCONT) for p in stopped], what)

    def _guards(self, cell, host):
        """The chosen host's live guards, else any host's of the cell."""
        pids = host.live_guards()
        if not pids:
            for h in cell.hosts:
                pids += h.live_guards()
        return pids

    def kill_guard(self, cell, host):
        pids = self._guards(cell, host)
        if pids:
            pid = self.rng.choice(pids)
            self._blame([pid], f"SIGKILL of its batchguard ({pid})")
            if self._signal(pid, signal.SIGKILL):
                self.run.figures["kills"] += 1
                self.run.note(f"SIGKILL batchguard {pid} in {cell.kind}")

    def stop_guard(self, cell, host):
        pids = self._guards(cell, host)
        if pids:
            pid = self.rng.choice(pids)
            self._stop_for([pid], f"batchguard {pid}")

    def _jobs(self, cell):
        """The job's processes (the command and its worker, not `sleep`) in this cell."""
        out = []
        for pid in cellmod.marked(self.run.mark):
            env = cellmod.environ(pid)
            if env.get("CHAOS_CELL") == cell.kind and "BATCHGUARD_RUN_ID" in env \
                    and cellmod.exe(pid) != self.run.binary and "job.sh" in cellmod.cmdline(pid):
                out.append(pid)
        return sorted(out)

    def kill_job(self, cell, host):
        pids = self._jobs(cell)
        if pids:
            pid = self.rng.choice(pids)
            self._blame([pid], "SIGKILL of its job process")
            if self._signal(pid, signal.SIGKILL):
                self.run.figures["job_kills"] += 1
                self.run.note(f"SIGKILL job process {pid} ({cellmod.cmdline(pid)[:60]}) in {cell.kind}")

    def stop_job(self, cell, host):
        pids = self._jobs(cell)
        if pids:
            self._stop_for([self.rng.choice(pids)], f"job process in {cell.kind}")

    def _node(self, cell):
        return next((h for h in cell.hosts if h.node), None)

    def stop_node(self, cell, host):
        h = self._node(cell)
        if h and h.node.poll() is None:
            self._stop_for([h.node.pid] + cellmod.children(h.node.pid), f"node host {h.instance}")

    def kill_node(self, cell, host):
        h = self._node(cell)
        if h and h.node.poll() is None and self._signal(h.node.pid, signal.SIGKILL):
            self.run.figures["kills"] += 1
            self.run.note(f"SIGKILL node host {h.instance} ({h.node.pid})")

    def restart_store(self, cell, host):
        if cell.kind not in ("postgres", "redis") or not cell.lock.acquire(blocking=False):
            return
        down = self.rng.uniform(0.3, 3.0)
        t = threading.Thread(target=self._restart, args=(cell, down), daemon=True)
        self.restarts.append(t)
        t.start()

    def _restart(self, cell, down):
        try:
            self.run.figures["restarts"] += 1
            self.run.note(f"restart {cell.kind} (down {down:.1f} s)")
            cell.server.crash()
            time.sleep(down)  # how long the server stays down: a fault parameter
            cell.server.start()
            if cell.kind == "redis":
                # The operator's runbook after a Redis that lost its data: leases given before
                # the loss are honoured until they would have expired (one ttl), then
                # `store repair` from the ledger (SPEC 7.1 item 16).
                time.sleep(cell.ttl)
                r = cell.bg(["store", "repair", "--store", cell.admin_url(), "--ledger", cell.ledger_arg])
                self.run.figures["repairs"] += 1
                if r.returncode != 0:
                    self.run.note(f"store repair exited {r.returncode}: {r.stderr.strip()[:300]}")
                    self.run.stderr_extra.append(r.stderr)
        finally:
            cell.lock.release()

    def _link(self, cell, host, how):
        if not host.proxy or host.proxy.state != "pass":
            return
        self._blame(host.live_guards(), f"{how} of its link")
        getattr(host.proxy, how)()
        self.run.figures[how + "s"] += 1
        pause = self.rng.uniform(0.3, 2 * self.run.ttl)
        self.run.note(f"{how} {host.instance}'s link for {pause:.1f} s")
        self._later(pause, host.proxy.heal, f"heal {host.instance}")

    def cut(self, cell, host):
        self._link(cell, host, "cut")

    def stall(self, cell, host):
        self._link(cell, host, "stall")
