#!/usr/bin/env bash
# Proof that a change to the audit changed nothing users see: runs two batchguard binaries
# over the same ledgers and diffs every output byte for byte.
#
#   scripts/compare-audit.sh OLD_BINARY NEW_BINARY [GENERATOR]
#
# The ledgers: generated ones (several seeds, so several dialects; CSV, JSONL and SQLite
# built from the CSV), the demo ledger (with snapshot files written for some of its slots,
# so AU202-AU204 fire), and the malformed fixtures (AU001). Each is audited in every
# format (json, markdown, csv, pretty, html) and with the variants that change what runs
# (no manifest, --job, --timezone, --fail-on warning); the exit code is compared too, and
# so are `rules` (text and markdown) and `explain` of every audit check.
#
# GENERATOR is the ledger generator (`gen-ledger`, crates/ledger-gen); default: built from this tree.
# WORK (default /tmp/compare-audit) keeps the ledgers and both sides' outputs.
# Prints `identical` and exits 0, or prints the diff and exits 1. With MEND=durations, a
# difference only in how durations are written is accepted and counted (issue 10's mend).
# With MEND=au301, OLD predates AU301 (issue 12): NEW may differ only by AU301 itself (the
# rule list, its `explain`, AU001's doc naming drill records, and the skipped-AU301 note of
# an audit without drill records); everything else must be byte-identical.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
old="$(realpath "${1:?usage: compare-audit.sh OLD NEW [GENERATOR]}")"
new="$(realpath "${2:?usage: compare-audit.sh OLD NEW [GENERATOR]}")"
gen="${3:-}"
work="${WORK:-/tmp/compare-audit}"
if [ -z "$gen" ]; then
  . "$root/scripts/cargo-exe.sh"
  gen=$(cd "$root" && cargo_exe gen-ledger --release --quiet -p batchguard-ledger-gen) || {
    echo "compare-audit: could not build gen-ledger (crates/ledger-gen); pass the generator as GENERATOR" >&2
    exit 2
  }
fi
rm -rf "$work"
mkdir -p "$work/ledgers" "$work/old" "$work/new"
cd "$root"

# ---------------------------------------------------------------- ledgers
seeds="1 2 3 4"
for seed in $seeds; do
  for fmt in csv jsonl; do
    "$gen" --out "$work/ledgers/s$seed-$fmt" --seed "$seed" --events 30000 --jobs 40 \
      --defect-rate 0.05 --format "$fmt" 2>/dev/null
  done
done
# SQLite: the CSV ledgers of two seeds loaded into the documented schema.
python3 - "$work/ledgers" <<'PY'
import csv, pathlib, sqlite3, sys
base = pathlib.Path(sys.argv[1])
ddl = pathlib.Path("schemas/ledger.sqlite.sql").read_text()
for seed in (1, 2):
    src = base / f"s{seed}-csv"
    dst = base / f"s{seed}-sqlite"
    dst.mkdir()
    (dst / "expected.json").write_text((src / "expected.json").read_text())
    (dst / "manifest.batchguard.yaml").write_text((src / "manifest.batchguard.yaml").read_text())
    db = sqlite3.connect(dst / "ledger.db")
    db.executescript(ddl)
    for table, name in (("batchguard_events", "events.csv"), ("batchguard_outputs", "outputs.csv")):
        with open(src / name, newline="") as f:
            r = csv.reader(f)
            cols = next(r)
            q = f'INSERT INTO {table} ({", ".join(chr(34) + c + chr(34) for c in cols)}) VALUES ({", ".join("?" * len(cols))})'
            db.executemany(q, ([v if v != "" else None for v in row] for row in r))
    db.commit()
    db.close()
PY
# The demo ledger with snapshots: the first settle-payments slots get a file holding their
# outputs' keys and one key without an output; the third file's digest is wrong, the
# slots after the fourth have no file.
python3 - "$work/ledgers/demo-snap" <<'PY'
import csv, hashlib, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True)
outputs = list(csv.DictReader(open("fixtures/demo/outputs.csv", newline="")))
rows = list(csv.DictReader(open("fixtures/demo/events.csv", newline="")))
slots = sorted({r["scheduled_at"] for r in rows if r["job"] == "settle-payments"})
digests = {}
for i, s in enumerate(slots[:4]):
    keys = [o["output_key"] for o in outputs if o["job"] == "settle-payments" and o["scheduled_at"] == s]
    body = "".join(json.dumps({"payment_id": k}) + "\n" for k in keys + [f"pay-none-{i}"])
    compact = s.replace("-", "").replace(":", "")
    p = out / "snapshots" / "settle-payments" / f"{compact}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(body)
    d = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    digests[s] = d if i != 2 else "sha256:" + "0" * 64
with open(out / "events.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    for r in rows:
        if r["event"] == "start" and r["scheduled_at"] in digests:
            r["snapshot_digest"] = digests[r["scheduled_at"]]
        w.writerow(r)
PY

# ---------------------------------------------------------------- cases
# Each case: a name and the audit arguments; every case runs in every format.
cases=()
add() { cases+=("$1"$'\t'"$2"); }
window() { python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(e["from"], e["to"])' "$1/expected.json"; }
for seed in $seeds; do
  for fmt in csv jsonl; do
    d="$work/ledgers/s$seed-$fmt"
    read -r from to < <(window "$d")
    add "s$seed-$fmt" "--ledger $d/events.$fmt --outputs $d/outputs.$fmt --manifest $d/manifest.batchguard.yaml --from $from --to $to"
  done
done
for seed in 1 2; do
  d="$work/ledgers/s$seed-sqlite"
  read -r from to < <(window "$d")
  add "s$seed-sqlite" "--ledger sqlite:$d/ledger.db --manifest $d/manifest.batchguard.yaml --from $from --to $to"
done
d="$work/ledgers/s1-csv"
read -r from to < <(window "$d")
job="$(grep -m1 -E '^\s*- name: ' "$d/manifest.batchguard.yaml" | sed -E 's/.*name: *//')"
add s1-no-manifest "--ledger $d/events.csv --outputs $d/outputs.csv --from $from --to $to"
add s1-no-outputs "--ledger $d/events.csv --manifest $d/manifest.batchguard.yaml --from $from --to $to"
add s1-job "--ledger $d/events.csv --outputs $d/outputs.csv --manifest $d/manifest.batchguard.yaml --job $job --from $from --to $to"
add s1-job-no-manifest "--ledger $d/events.csv --outputs $d/outputs.csv --job $job --from $from --to $to"
add s1-seoul "--ledger $d/events.csv --outputs $d/outputs.csv --manifest $d/manifest.batchguard.yaml --timezone Asia/Seoul --from $from --to $to"
add s1-fail-on-warning "--ledger $d/events.csv --outputs $d/outputs.csv --manifest $d/manifest.batchguard.yaml --fail-on warning --from $from --to $to"
demo="--outputs fixtures/demo/outputs.csv --manifest fixtures/demo/billing.batchguard.yaml"
add demo-day "--ledger fixtures/demo/events.csv $demo --from 2026-03-01T00:00:00+09:00 --to 2026-03-02T00:00:00+09:00"
add demo-all "--ledger fixtures/demo/events.csv $demo --from 2026-02-01T00:00:00Z --to 2026-04-01T00:00:00Z"
add demo-no-manifest "--ledger fixtures/demo/events.csv --outputs fixtures/demo/outputs.csv --from 2026-02-01T00:00:00Z --to 2026-04-01T00:00:00Z"
s="$work/ledgers/demo-snap"
add demo-snapshots "--ledger $s/events.csv $demo --snapshots $s --from 2026-03-01T00:00:00+09:00 --to 2026-03-02T00:00:00+09:00"
add demo-snapshots-no-outputs "--ledger $s/events.csv --manifest fixtures/demo/billing.batchguard.yaml --snapshots $s --from 2026-03-01T00:00:00+09:00 --to 2026-03-02T00:00:00+09:00"
for ext in csv jsonl; do
  add "malformed-$ext" "--ledger fixtures/ledger/events-malformed.$ext --outputs fixtures/ledger/outputs.$ext --from 2026-01-01T00:00:00Z --to 2027-01-01T00:00:00Z"
  add "fixture-$ext" "--ledger fixtures/ledger/events.$ext --outputs fixtures/ledger/outputs.$ext --from 2026-01-01T00:00:00Z --to 2027-01-01T00:00:00Z"
done

run_side() {
  local bin="$1" dir="$2" entry name args f
  for entry in "${cases[@]}"; do
    name="${entry%%$'\t'*}"
    args="${entry#*$'\t'}"
    for f in json markdown csv pretty html; do
      # shellcheck disable=SC2086 # args are words on purpose
      NO_COLOR=1 "$bin" audit $args --format "$f" >"$dir/$name.$f" 2>"$dir/$name.$f.stderr" \
        && echo 0 >"$dir/$name.$f.exit" || echo $? >"$dir/$name.$f.exit"
    done
  done
  "$bin" rules --format markdown >"$dir/rules.md"
  "$bin" rules >"$dir/rules.txt"
  for code in AU001 AU101 AU102 AU103 AU104 AU105 AU106 AU107 AU108 AU109 AU110 AU111 \
    AU201 AU202 AU203 AU204 AU301; do
    "$bin" explain "$code" >"$dir/explain-$code.txt" 2>&1 || true
  done
}
run_side "$old" "$work/old"
run_side "$new" "$work/new"

if diff -r "$work/old" "$work/new" >"$work/diff.txt"; then
  echo "identical ($(ls "$work/old" | wc -l) files, ${#cases[@]} cases)"
  exit 0
fi
# MEND=durations: the outputs may differ only in how durations are written (the audit
# once wrote `15m00s`, `1h00m00s`; everything now writes `15m`, `1h`, as lint does) and in
# the table padding that follows from it. Both sides are rewritten to one canonical form;
# anything left over is a real difference.
if [ "${MEND:-}" = durations ]; then
  python3 - "$work" <<'PY'
import pathlib, re, sys
work = pathlib.Path(sys.argv[1])
unit = re.compile(r"(?<![\w.:-])(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?!\w)")
def canon(m):
    if not any(m.groups()):
        return m.group(0)
    d, h, mi, s = (int(g or 0) for g in m.groups())
    t = ((d * 24 + h) * 60 + mi) * 60 + s
    out = ""
    for n, u in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if t >= n:
            out += f"{t // n}{u}"
            t %= n
    return out or "0s"
def norm(text):
    text = unit.sub(canon, text)
    return re.sub(r"-{2,}", "-", re.sub(r"[ \t]+", " ", text))
changed = left = 0
for old in sorted((work / "old").iterdir()):
    new = work / "new" / old.name
    a, b = old.read_text(errors="replace"), new.read_text(errors="replace")
    if a == b:
        continue
    changed += 1
    if norm(a) != norm(b):
        left += 1
        print(f"differs beyond the duration style: {old.name}")
print(f"{changed} files differ only in the duration style" if not left else f"{left} files differ in more than the duration style")
sys.exit(1 if left else 0)
PY
  exit $?
fi
if [ "${MEND:-}" = au301 ]; then
  python3 - "$work" <<'PY'
import json, pathlib, re, sys
work = pathlib.Path(sys.argv[1])
def mend(name, text):
    """NEW's text with AU301's additions taken out."""
    if name.startswith("rules."):
        return "".join(l for l in text.splitlines(True) if "AU301" not in l)
    if name == "explain-AU001.txt":
        return text.replace(" (the events ledger, the outputs, the drill records)", " (the events ledger, the outputs)")
    if name.endswith(".json"):
        try:
            v = json.loads(text)
        except ValueError:
            return text
        if isinstance(v, dict) and isinstance(v.get("skipped_checks"), list):
            kept = []
            for s in v["skipped_checks"]:
                s["codes"] = [c for c in s["codes"] if c != "AU301"]
                if s["codes"]:
                    kept.append(s)
            v["skipped_checks"] = kept
        return json.dumps(v, indent=2, ensure_ascii=False) + "\n"
    # A note that was the only skipped one leaves its section (and the pretty blank line).
    if name.endswith(".pretty"):
        text = re.sub(r"\nskipped AU301: [^\n]*", "", text)
        if "\nskipped " not in text:
            text = re.sub(r"\n\n(\n(?:found|clean): )", r"\n\1", text)
    elif name.endswith(".markdown"):
        text = re.sub(r"(?m)^- AU301: .*\n", "", text)
        text = re.sub(r"\n## Checks not run\n\n$", "", text)
    elif name.endswith(".html"):
        text = re.sub(r"<li>AU301: .*?</li>", "", text)
        text = text.replace("<h2>Checks not run</h2><ul></ul>", "")
    return text.replace(", AU301: no --manifest", ": no --manifest")
def norm_old(name, text):
    if name.endswith(".json"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
        except ValueError:
            return text
    return text
changed = left = 0
for old in sorted((work / "old").iterdir()):
    new = work / "new" / old.name
    a, b = old.read_text(errors="replace"), new.read_text(errors="replace")
    if a == b:
        continue
    changed += 1
    if old.name.startswith("explain-AU301."):
        continue
    if norm_old(old.name, a) != mend(old.name, b):
        left += 1
        print(f"differs beyond AU301: {old.name}")
print(f"{changed} files differ only by AU301" if not left else f"{left} files differ in more than AU301")
sys.exit(1 if left else 0)
PY
  exit $?
fi
cat "$work/diff.txt"
exit 1
