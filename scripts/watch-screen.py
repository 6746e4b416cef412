#!/usr/bin/env python3
"""The screen of `batchguard watch` (`docs/watch-screen.txt`), as a terminal shows it.

    python3 scripts/watch-screen.py [OUT]

Builds batchguard (debug), makes a store with half an hour of history of three billing jobs
(written into the ledger as `run` writes it: starts, ends, three instances contending for
each slot of `settle-payments`, one slot of `import-bank-statements` that nobody ran and
one that failed), then takes the current slot of `settle-payments` with a real `batchguard
run` that keeps running, lets a second instance be refused, starts `batchguard watch` in a
tmux window of 160x34 and saves what the window shows once the holder is on it.
"""
import os
import pathlib
import random
import sqlite3
import subprocess
import sys
import tempfile
import time

import cargo_target  # scripts/cargo_target.py: where cargo puts the binaries

ROOT = pathlib.Path(__file__).resolve().parent.parent
BG = cargo_target.profile_dir("debug") / "batchguard"

MANIFEST = """version: 1
service: billing
jobs:
  - name: settle-payments
    schedule: "*/5 * * * *"
    expected_duration: 2m
    command: ["sleep", "600"]
    lock: {key: "{job}:{scheduled_at}", ttl: 5m}
    alerts: {max_latency: 15m}
  - name: import-bank-statements
    schedule: "* * * * *"
    expected_duration: 20s
    command: ["true"]
    lock: {key: "{job}:{scheduled_at}", ttl: 1m}
    alerts: {max_latency: 5m, missing_tolerance: 0}
  - name: send-invoices
    schedule: "0 * * * *"
    expected_duration: 5m
    command: ["true"]
    lock: {key: "{job}:{scheduled_at}", ttl: 15m}
    alerts: {max_latency: 30m}
"""

INSERT = (
    "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, instance, attempt,"
    " status, error_code, \"trigger\", fence, detail) VALUES (?,?,?,?,?,?,?,?,?,'schedule',?,?)"
)


def rfc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(t))) + ".%06dZ" % int((t % 1) * 1e6)


def slot(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "watch-screen.txt")
    subprocess.run(["cargo", "build", "-q", "-p", "batchguard"], cwd=ROOT, check=True)
    rng = random.Random(7)
    d = pathlib.Path(tempfile.mkdtemp(prefix="bg-screen-"))
    (d / "billing.batchguard.yaml").write_text(MANIFEST)
    store = d / "store.db"
    url = f"sqlite:{store}"
    subprocess.run([str(BG), "store", "migrate", "--store", url], check=True,
                   stdout=subprocess.DEVNULL)
    now = time.time()
    db = sqlite3.connect(store)
    fence = 0
    rows = []

    def run(job, s, start, secs, instance="host-a", fail=None):
        nonlocal fence
        fence += 1
        rid = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(int(start)))}-{rng.randrange(1000, 9999)}"
        rows.append((rid, job, slot(s), "start", rfc(start), instance, 1, None, None, fence, None))
        status = "failure" if fail else "success"
        rows.append((rid, job, slot(s), "end", rfc(start + secs), instance, 1, status, fail, None,
                     "exit status 3: upstream returned 503" if fail else None))
        return rid, fence

    minute = now - now % 60
    for k in range(1, 31):
        s = minute - 60 * k
        if k == 7:
            continue  # nobody ran it: a missed slot
        run("import-bank-statements", s, s + rng.uniform(0.2, 1.5), rng.uniform(3, 14),
            fail="EXIT_3" if k == 12 else None)
    five = now - now % 300
    for k in range(1, 7):
        s = five - 300 * k
        start = s + rng.uniform(0.1, 0.6)
        rid, f = run("settle-payments", s, start, rng.uniform(40, 95))
        for inst in ("host-b", "host-c"):
            rows.append((f"{rid}-{inst}", "settle-payments", slot(s), "skip", rfc(start + 0.05),
                         inst, None, None, None, None,
                         f"held by host-a (run {rid}, fence {f}, lease ends in 299 s)"))
    hour = now - now % 3600
    run("send-invoices", hour, hour + 0.8, 212.0)
    db.executemany(INSERT, rows)
    # The fencing counter goes on from the tokens the history handed out.
    db.execute("UPDATE batchguard_fence SET value = ?", (fence,))
    db.commit()
    db.close()

    # The current slot, taken for real by host-a (still running), refused to host-b.
    cur = slot(five)
    base = [str(BG), "run", "--manifest", "billing.batchguard.yaml", "--job", "settle-payments",
            "--store", url, "--scheduled-at", cur]
    holder = subprocess.Popen(base + ["--instance", "host-a"], cwd=d, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 30
        while True:
            c = sqlite3.connect(store)
            n = c.execute("SELECT count(*) FROM batchguard_events WHERE scheduled_at = ? AND "
                          "event = 'start' AND job = 'settle-payments'", (cur,)).fetchone()[0]
            c.close()
            if n:
                break
            if time.time() > deadline:
                raise SystemExit("the holder never started")
            time.sleep(0.05)
        subprocess.run(base + ["--instance", "host-b"], cwd=d, check=True,
                       stderr=subprocess.DEVNULL)
        tmux = ["tmux", "-L", f"bg-screen-{os.getpid()}", "-f", "/dev/null"]
        script = (f"cd {d} && NO_COLOR=1 {BG} watch --store {url} --manifest "
                  "billing.batchguard.yaml --since 30m --interval 1s")
        subprocess.run(tmux + ["new-session", "-d", "-s", "w", "-x", "160", "-y", "34", script],
                       check=True)
        try:
            deadline = time.time() + 60
            while True:
                screen = subprocess.run(tmux + ["capture-pane", "-p", "-t", "w"],
                                        capture_output=True, text=True).stdout
                if "on host-a for" in screen and "held by host-a" in screen:
                    break
                if time.time() > deadline:
                    raise SystemExit(f"watch never showed the holder:\n{screen}")
                time.sleep(0.1)
            # Let it count a few seconds of the running slot.
            time.sleep(3)
            screen = subprocess.run(tmux + ["capture-pane", "-p", "-t", "w"],
                                    capture_output=True, text=True).stdout
        finally:
            subprocess.run(tmux + ["kill-server"], check=False)
    finally:
        os.killpg(holder.pid, 15)
        holder.wait()
    # The store's temporary path says nothing to a reader: it is shown as the default.
    screen = screen.replace(f"sqlite:{store}", "sqlite:.batchguard/store.db")
    lines = screen.rstrip("\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    out.write_text("\n".join(l.rstrip() for l in lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
