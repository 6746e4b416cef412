#!/usr/bin/env bash
# The bundled demo: lint the demo service's manifest, audit one day of its ledger, then
# `batchguard run` at work on the embedded SQLite store in a scratch directory: two
# instances on one tick (one runs, one skips naming the holder), a retry after exit 75,
# and an audit of what run wrote; then `batchguard drill` of the two example Node.js jobs
# (the idempotent one passes, the naive one fails where it must; skipped without node).
# Lint and audit find the demo's deliberate mistakes (exit 1 each); only "could not run"
# (2) fails the demo.
set -uo pipefail
cd "$(dirname "$0")/.."
# The binary wherever cargo puts it (CARGO_TARGET_DIR, CARGO_BUILD_TARGET_DIR, a
# target-dir in .cargo/config.toml), as cargo reports it. DEMO_PROFILE picks the cargo
# profile (default release; CI uses dev, the build `cargo test` made already).
. scripts/cargo-exe.sh
bg=$(cargo_exe batchguard --profile "${DEMO_PROFILE:-release}" --quiet) || exit 2
status=0
echo "== batchguard lint fixtures/demo"
"$bg" lint fixtures/demo --now 2026-03-01T00:00:00Z || [ $? -eq 1 ] || status=2
echo
echo "== batchguard audit (one day of the demo ledger)"
"$bg" audit --ledger fixtures/demo/events.csv --outputs fixtures/demo/outputs.csv \
  --manifest fixtures/demo/billing.batchguard.yaml \
  --from 2026-03-01T00:00:00+09:00 --to 2026-03-02T00:00:00+09:00 || [ $? -eq 1 ] || status=2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/batchguard-demo.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/billing.batchguard.yaml" <<'YAML'
version: 1
service: billing
jobs:
  - name: settle
    schedule: "* * * * *"
    expected_duration: 2s
    command: ["sh", "-c", "touch started; sleep 1; echo \"invoice-$BATCHGUARD_SCHEDULED_AT\" >> \"$BATCHGUARD_OUTPUTS\""]
    lock:
      key: "{job}:{scheduled_at}"
      ttl: 60s
    retry:
      max_attempts: 1
  - name: sync-bank
    schedule: "* * * * *"
    expected_duration: 2s
    command: ["sh", "-c", "if [ \"$BATCHGUARD_ATTEMPT\" = 1 ]; then echo 'bank API busy, try later' >&2; exit 75; fi; echo \"synced (attempt $BATCHGUARD_ATTEMPT, fence $BATCHGUARD_FENCE)\""]
    lock:
      key: "{job}:{scheduled_at}"
      ttl: 60s
    retry:
      max_attempts: 3
      backoff: fixed
      initial_delay: 1s
YAML
# This minute's slot, so the audit's latency is real (GNU date, then BSD date).
tick=$(date -u +%Y-%m-%dT%H:%M:00Z)
next=$(date -u -d "$tick + 1 minute" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null \
  || date -u -j -v+1M -f %Y-%m-%dT%H:%M:%SZ "$tick" +%Y-%m-%dT%H:%M:%SZ) || exit 2
run() { (cd "$tmp" && "$bg" run --manifest billing.batchguard.yaml --scheduled-at "$tick" "$@"); }
echo
echo "== batchguard run: two instances on one tick (store: sqlite:.batchguard/store.db in a scratch dir)"
run --job settle --instance web-1 & first=$!
for _ in $(seq 1 200); do [ -e "$tmp/started" ] && break; sleep 0.05; done
run --job settle --instance web-2 || status=2
wait $first || status=2
echo
echo "== batchguard run: exit 75 is retried (new attempt, new fence)"
run --job sync-bank --instance web-1 || status=2
echo
echo "== batchguard store status"
(cd "$tmp" && "$bg" store status) || status=2
echo
echo "== batchguard audit --ledger sqlite:.batchguard/store.db"
(cd "$tmp" && "$bg" audit --ledger sqlite:.batchguard/store.db --manifest billing.batchguard.yaml \
  --from "$tick" --to "$next") || [ $? -eq 1 ] || status=2

echo
echo "== batchguard drill: the quarterly rehearsal (examples/jobs, Node.js)"
if command -v node >/dev/null 2>&1; then
  drill() {
    "$bg" drill --manifest examples/jobs/billing.batchguard.yaml --job "$1" \
      --snapshot examples/snapshots/settle-payments/2026-03-01T02:00:00Z.jsonl \
      --scheduled-at 2026-03-01T02:00:00Z --sandbox "$tmp/drill-$1"
  }
  echo "-- the idempotent settlement passes every scenario"
  drill settle-payments || status=2
  echo
  echo "-- the naive settlement fails rerun, crash, retry and stale, naming what it settled twice"
  drill settle-payments-naive; [ $? -eq 1 ] || status=2
else
  echo "skipped: node is not on PATH (the example jobs are Node.js)"
fi
exit $status
