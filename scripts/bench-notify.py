#!/usr/bin/env python3
"""What check-ins and OpenTelemetry cost `batchguard run -- true` (docs/benchmarks.md).

For each configuration, `--runs` runs of `batchguard run -- true` on new slots of one SQLite
store (every run acquires, writes `start`, runs `true`, writes `end`, releases) counted
with `perf stat -e instructions:u` (user-space instructions: a count that a loaded machine
does not inflate), or, where the CPU exposes no counter to perf (most VMs), with valgrind's
cachegrind (the instructions of `run` itself, every thread); and as many runs timed:

  * `before`: the binary given with `--before` (a build without check-ins or tracing);
  * `off`: the binary under test with no `monitor` and no OTEL_* variable (the default);
  * `monitor`: a Healthchecks `monitor` pointed at a local server that answers 200;
  * `otel`: OTEL_EXPORTER_OTLP_ENDPOINT pointed at the same local server.

The configurations are interleaved run by run, so a change in the machine's load falls on
all of them alike. Binary sizes are printed too.

    python3 scripts/bench-notify.py --bin target/release/batchguard \
        [--before /path/to/older/batchguard] [--runs 50]
"""
import argparse
import http.server
import os
import pathlib
import statistics
import subprocess
import tempfile
import threading
import time

MANIFEST = """version: 1
service: bench
jobs:
  - name: j
    schedule: "* * * * *"
    expected_duration: 1s
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: 60s
    retry:
      max_attempts: 1
{monitor}"""

BASE_SLOT = 1_772_330_400  # 2026-03-01T02:00:00Z


# This rig names slots of 2026-03-01 one after another within seconds: SPEC 7.1 item 22
# would refuse them against a real clock, so its bound is off here (docs/commands/run.md).
os.environ["BATCHGUARD_CLOCK_CHECK"] = "off"

def slot(i):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE_SLOT + 60 * i))


class Ok(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    do_GET = do_POST

    def log_message(self, *a):
        pass


def counter_argv(kind, out):
    if kind == "perf":
        return ["perf", "stat", "-x,", "-e", "instructions:u", "-o", str(out), "--"]
    # Valgrind counts the instructions of `run` itself (not of the `true` it starts), all
    # threads included; where the CPU exposes no counter to perf (most VMs) it still works.
    return ["valgrind", "--tool=cachegrind", "--cache-sim=no",
            "--cachegrind-out-file=/dev/null", f"--log-file={out}"]


def count(kind, out):
    text = out.read_text()
    for line in text.splitlines():
        if kind == "perf" and "instructions" in line:
            v = line.split(",")[0]
            return None if v.startswith("<not") else int(v)
        if kind == "valgrind" and "I" in line and "refs:" in line:
            return int(line.split(":")[1].strip().replace(",", ""))
    raise SystemExit("no instruction count in: " + text)


def one(binary, cwd, manifest, i, env, kind):
    """Two runs on new slots: one timed, one counted."""
    base = [binary, "run", "--manifest", manifest, "--job", "j", "--instance", "b"]
    t0 = time.perf_counter()
    r = subprocess.run(base + ["--scheduled-at", slot(2 * i), "--", "true"], cwd=cwd,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"run failed ({r.returncode}): {r.stderr.decode()}")
    out = pathlib.Path(cwd) / "count.txt"
    argv = counter_argv(kind, out) + base + ["--scheduled-at", slot(2 * i + 1), "--", "true"]
    r = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise SystemExit(f"counted run failed ({r.returncode}): {r.stderr.decode()}")
    return count(kind, out), dt


def pick_counter(binary):
    """perf's instructions:u when the CPU exposes it, else valgrind."""
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "p.txt"
        r = subprocess.run(counter_argv("perf", out) + [binary, "--version"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0 and count("perf", out) is not None:
            return "perf"
    return "valgrind"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--before")
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TRACEPARENT", None)
    configs = []
    if a.before:
        configs.append(("before", a.before, "", env))
    configs.append(("off", a.bin, "", env))
    configs.append(("monitor", a.bin,
                    f"    monitor:\n      healthchecks: \"{base}/hc/bench\"\n", env))
    configs.append(("otel", a.bin, "", dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=base)))

    dirs = {}
    for name, _, monitor, _ in configs:
        d = tempfile.mkdtemp(prefix=f"bg-notify-{name}-")
        pathlib.Path(d, "m.batchguard.yaml").write_text(MANIFEST.format(monitor=monitor))
        dirs[name] = d
    kind = pick_counter(a.bin)
    res = {name: ([], []) for name, *_ in configs}
    # One warm-up run each (creates the SQLite store), not counted.
    for name, binary, _, e in configs:
        one(binary, dirs[name], "m.batchguard.yaml", 0, e, kind)
    for i in range(1, a.runs + 1):
        for name, binary, _, e in configs:
            ins, dt = one(binary, dirs[name], "m.batchguard.yaml", i, e, kind)
            res[name][0].append(ins)
            res[name][1].append(dt)
    srv.shutdown()

    ref = statistics.median(res["before" if a.before else "off"][0])
    what = "instructions:u (perf)" if kind == "perf" else "instructions (valgrind)"
    print(f"{a.runs} counted and {a.runs} timed runs each, interleaved\n")
    print(f"| configuration | {what}, median | vs. reference | wall, median |")
    print("|---|---:|---:|---:|")
    for name, *_ in configs:
        ins, dts = res[name]
        m = statistics.median(ins)
        print(f"| {name} | {m:,.0f} | {100 * (m - ref) / ref:+.2f}% | "
              f"{1000 * statistics.median(dts):.2f} ms |")
    print()
    for label, p in [("before", a.before), ("after", a.bin)]:
        if p:
            print(f"size of {label}: {os.path.getsize(p):,} bytes")


if __name__ == "__main__":
    main()
