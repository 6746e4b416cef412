"""The verdict: the job's own history (applies.jsonl, written by the job, never by
batchguard) against the ledger, the store's slot table and `batchguard audit` of the window.
Each function returns violations as (kind, text); docs/chaos.md says what each kind means.
"""

import datetime as dt
import glob
import json
import os
import re
import sqlite3
from collections import defaultdict

COLS = ["run_id", "job", "scheduled_at", "event", "at", "instance", "attempt", "status",
        "error_code", "fence", "detail"]


def ts(value):
    """An RFC 3339 instant (any offset, fraction) as epoch seconds."""
    v = value.strip().replace(" ", "T")
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    if "+" not in v[10:] and "-" not in v[10:]:
        v += "+00:00"
    return dt.datetime.fromisoformat(v).timestamp()


def slot_key(value):
    return int(round(ts(value)))


def show(t):
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%H:%M:%SZ")


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        out.append({"ev": "garbled", "line": line})
    return out


def ledger(cell):
    """(events in ledger order, outputs, slot rows) of the cell's job."""
    job = cell.job
    if cell.kind == "redis":
        ev = [e for e in read_jsonl(cell.ledger_arg) if e.get("job") == job]
        out = [o for o in read_jsonl(cell.ledger_arg[: -len(".jsonl")] + ".outputs.jsonl") if o.get("job") == job]
        return ev, out, None
    if cell.kind == "sqlite":
        db = sqlite3.connect(os.path.join(cell.dir, "store.db"))
        db.row_factory = sqlite3.Row
        ev = [dict(r) for r in db.execute(
            f"SELECT {', '.join(COLS)} FROM batchguard_events WHERE job = ? ORDER BY rowid", (job,))]
        out = [dict(r) for r in db.execute(
            "SELECT run_id, scheduled_at, output_key FROM batchguard_outputs WHERE job = ? ORDER BY rowid", (job,))]
        slots = [dict(r) for r in db.execute(
            "SELECT scheduled_at, attempts, state, run_id FROM batchguard_slots WHERE job = ?", (job,))]
        db.close()
        return ev, out, slots
    if cell.kind == "postgres":
        q = cell.server.query_json
        cols = ", ".join(COLS)
        ev = q(f"SELECT {cols} FROM batchguard_events WHERE job = '{job}' ORDER BY id")
        out = q(f"SELECT run_id, scheduled_at, output_key FROM batchguard_outputs WHERE job = '{job}' ORDER BY id")
        slots = q(f"SELECT scheduled_at, attempts, state, run_id FROM batchguard_slots WHERE job = '{job}'")
        return ev, out, slots
    q = cell.server.query_json  # MariaDB
    obj = ", ".join(f"'{c}', `{c}`" for c in COLS)
    ev = q(f"SELECT JSON_OBJECT({obj}) FROM batchguard_events WHERE job = '{job}' ORDER BY id")
    out = q("SELECT JSON_OBJECT('run_id', run_id, 'scheduled_at', scheduled_at, 'output_key', output_key) "
            f"FROM batchguard_outputs WHERE job = '{job}' ORDER BY id")
    slots = q("SELECT JSON_OBJECT('scheduled_at', scheduled_at, 'attempts', attempts, 'state', state, 'run_id', run_id) "
              f"FROM batchguard_slots WHERE job = '{job}'")
    return ev, out, slots


def audit(cell, w0, w1):
    args = ["audit", "--ledger", cell.ledger_arg or cell.admin_url(), "--manifest", cell.manifest,
            "--from", iso(w0), "--to", iso(w1 + cell.ttl + 1), "--format", "json"]
    if cell.ledger_arg:
        args += ["--outputs", cell.ledger_arg[: -len(".jsonl")] + ".outputs.jsonl"]
    r = cell.bg(args)
    try:
        return json.loads(r.stdout), r
    except json.JSONDecodeError:
        return None, r


def iso(t):
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def judge(cell, w0, w1, figures, faults_by_run=None):
    """Every property on one cell; `w0..w1` are the window's first and last slot."""
    v = []
    step = cell.step
    tol = min(2.0, step / 10)
    window = list(range(w0, w1 + 1, step))
    hist = read_jsonl(cell.applies)
    events, outputs, slots = ledger(cell)
    report, audit_run = audit(cell, w0, w1)
    k = cell.kind

    applies = [h for h in hist if h.get("ev") == "apply"]
    figures["applies"] += len(applies)
    for h in hist:
        if h.get("ev") == "garbled":
            v.append(("history", f"{k}: a garbled line in the job's history: {h['line'][:120]}"))

    # 1. No stale apply: an apply by fence f after a newer fence g > f began the same slot.
    newest = {}
    for h in hist:
        if h.get("ev") not in ("begin", "apply"):
            continue
        s = slot_key(h["slot"])
        if h["ev"] == "begin":
            newest[s] = max(newest.get(s, 0), h["fence"])
        elif h["fence"] < newest.get(s, 0):
            v.append(("stale_apply", f"{k}: slot {show(s)} applied by fence {h['fence']} ({h['host']} via {h['via']}, "
                                     f"run {h['run']}) after fence {newest[s]} had begun it"))

    # 2. No slot applied before it was due by the real clock, nor long after it stopped
    #    being due (a slot the store's clock would never have handed out).
    reach = cell.catch_up + tol + step + cell.ttl * 3 + 5
    for h in applies:
        s = ts(h["slot"])
        if h.get("t") is None:
            continue
        if h["t"] < s - tol - 0.05:
            v.append(("not_due", f"{k}: slot {show(s)} applied {s - h['t']:.1f} s before it was due "
                                 f"({h['host']}, fence {h['fence']})"))
        elif h["t"] > s + reach:
            v.append(("not_due", f"{k}: slot {show(s)} applied {h['t'] - s:.0f} s after it (reach {reach:.0f} s; "
                                 f"{h['host']}, fence {h['fence']})"))

    # Ledger facts per slot, in ledger order.
    by_slot = defaultdict(list)
    for i, e in enumerate(events):
        e["_i"] = i
        by_slot[slot_key(e["scheduled_at"])].append(e)
    if cell.ledger_arg:
        # A ledger apart (the JSONL file of the Redis cell) is appended in the order its
        # writes arrive, and a spooled finish arrives late: the store judged it when it
        # was written (`at`, the store's clock), which is the order that counts.
        for evs in by_slot.values():
            evs.sort(key=lambda e: ts(e["at"]))
    fence_of = {e["run_id"]: e["fence"] for e in events if e["event"] == "start" and e.get("fence") is not None}
    ends_per_run = defaultdict(int)
    for e in events:
        if e["event"] == "end":
            ends_per_run[e["run_id"]] += 1
    for run, n in ends_per_run.items():
        if n > 1:
            e = next(x for x in events if x["run_id"] == run and x["event"] == "end")
            v.append(("duplicate_end", f"{k}: run {run} (slot {show(ts(e['scheduled_at']))}) has {n} `end` rows"))
    out_count = defaultdict(int)
    for o in outputs:
        out_count[(o["run_id"], o["output_key"])] += 1
    for (run, key), n in out_count.items():
        if n > 1:
            v.append(("duplicate_end", f"{k}: run {run} recorded output {key} {n} times"))

    # Runs whose finish did not reach the store while their lease lasted (a cut link): the
    # store took them for lost, so another host re-ran the slot (SPEC 7.1 items 10, 20).
    # Only `audit` can tell that truth then: such a re-run is explained when audit reports
    # the slot as run twice (AU102); unexplained otherwise.
    spooled = set()
    for path in glob.glob(os.path.join(cell.dir, "*", "stderr.log")):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"spooled to \S*?-(\d{8}T\d{6}-[0-9a-f]+-[0-9a-f]{16})-finish\.json", line)
                if m:
                    spooled.add(m.group(1))
    twice = set()
    for f in (report or {}).get("findings", []):
        if f.get("code") == "AU102" and f.get("scheduled_at"):
            twice.add(slot_key(f["scheduled_at"]))

    succeeded, dead = set(), set()
    for s, evs in by_slot.items():
        first_success = None
        newest_start = 0
        for e in evs:
            f = e.get("fence") if e.get("fence") is not None else fence_of.get(e["run_id"])
            if e["event"] == "start":
                if first_success is not None and first_success in spooled and s in twice:
                    figures["reruns_after_a_spooled_finish"] += 1
                elif first_success is not None:
                    v.append(("rerun_after_success", f"{k}: slot {show(s)} started again (run {e['run_id']}, fence {f}, "
                                                     f"{e.get('instance')}) after run {first_success} succeeded"))
                newest_start = max(newest_start, f or 0)
            elif e["event"] in ("end", "dead_letter") and e.get("status") != "superseded":
                if f is not None and f < newest_start:
                    what = "dead_letter" if e["event"] == "dead_letter" else f"end {e.get('status')} {e.get('error_code') or ''}".strip()
                    v.append(("stale_verdict", f"{k}: slot {show(s)}: run {e['run_id']} (fence {f}, {e.get('instance')}) "
                                               f"wrote `{what}` after fence {newest_start} had started the slot"))
                if e["event"] == "end" and e.get("status") == "success" and first_success is None:
                    first_success = e["run_id"]
                    succeeded.add(s)
                if e["event"] == "dead_letter":
                    dead.add(s)
        if s in succeeded and s in dead:
            v.append(("contradiction", f"{k}: slot {show(s)} has both `end success` and `dead_letter` in the ledger"))

    if slots is not None:
        for row in slots:
            s = slot_key(row["scheduled_at"])
            if row["state"] == "succeeded" and s not in succeeded:
                v.append(("contradiction", f"{k}: batchguard_slots says {show(s)} succeeded; the ledger has no success"))
            if row["state"] == "dead_lettered" and s in succeeded:
                v.append(("contradiction", f"{k}: batchguard_slots says {show(s)} dead-lettered; the ledger has a success"))
            if row["state"] == "succeeded" and s in dead:
                v.append(("contradiction", f"{k}: batchguard_slots says {show(s)} succeeded; the ledger has a dead_letter"))

    # 3. Audit equal to the truth.
    named = defaultdict(set)
    if report is None:
        v.append(("audit_untrue", f"{k}: audit printed no JSON (exit {audit_run.returncode}): {audit_run.stderr.strip()[:300]}"))
    else:
        for f in report.get("findings", []):
            if f.get("scheduled_at"):
                named[slot_key(f["scheduled_at"])].add(f.get("code"))
            if f.get("code") == "AU101" and f.get("scheduled_at") and slot_key(f["scheduled_at"]) in succeeded:
                v.append(("audit_untrue", f"{k}: audit says slot {show(slot_key(f['scheduled_at']))} was missed (AU101); it succeeded"))
    applied_by = defaultdict(set)
    for h in applies:
        applied_by[h["run"]].add(slot_key(h["slot"]))
    started = {e["run_id"] for e in events if e["event"] == "start"}
    for h in applies:
        if h["run"] not in started and w0 <= slot_key(h["slot"]) <= w1:
            v.append(("audit_untrue", f"{k}: slot {show(ts(h['slot']))} was applied by run {h['run']} "
                                      f"({h['host']}), which the ledger has no `start` for"))
    for e in events:
        if e["event"] == "end" and e.get("status") == "success" and slot_key(e["scheduled_at"]) not in applied_by[e["run_id"]]:
            v.append(("audit_untrue", f"{k}: run {e['run_id']} ended success for {show(ts(e['scheduled_at']))} "
                                      f"but the job never applied it"))
    for o in outputs:
        if slot_key(o["output_key"]) not in applied_by[o["run_id"]]:
            v.append(("audit_untrue", f"{k}: output {o['output_key']} of run {o['run_id']} was never applied by it"))

    # 4. No slot silently lost.
    lost = [s for s in window if s not in succeeded and s not in dead]
    figures["unresolved"] += len(lost)
    for s in lost:
        if not named.get(s):
            v.append(("lost_slot", f"{k}: slot {show(s)} neither succeeded nor dead-lettered, and audit names it nowhere"))

    # 5. No panic.
    for path in glob.glob(os.path.join(cell.dir, "*", "stderr.log")):
        with open(path, errors="replace") as f:
            for line in f:
                if "panicked at" in line:
                    v.append(("panic", f"{path}: {line.strip()[:200]}"))

    figures["slots"] += len(window)
    figures["succeeded"] += len([s for s in window if s in succeeded])
    figures["dead_lettered"] += len([s for s in window if s in dead])
    figures["superseded"] += len([e for e in events if e.get("status") == "superseded"])
    runs_per_slot = defaultdict(set)
    for h in applies:
        runs_per_slot[slot_key(h["slot"])].add(h["run"])
    figures["reapplied_slots"] += len([s for s, r in runs_per_slot.items() if len(r) > 1])
    blame = faults_by_run or {}
    out = []
    for kind, text in v:
        hit = [f"{r[:8]}…: {'; '.join(blame[r])}" for r in blame if r in text]
        out.append((kind, text + (f" [faults: {' | '.join(hit)}]" if hit else "")))
    return out
