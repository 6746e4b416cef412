#!/usr/bin/env bash
# The bundled demo: lint the demo service's manifest, then audit one day of its ledger.
# Both find the demo's deliberate mistakes (exit 1 each); only "could not run" (2) fails the demo.
set -uo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet || exit 2
bg=target/release/batchguard
status=0
echo "== batchguard lint fixtures/demo"
"$bg" lint fixtures/demo --now 2026-03-01T00:00:00Z || [ $? -eq 1 ] || status=2
echo
echo "== batchguard audit (one day of the demo ledger)"
"$bg" audit --ledger fixtures/demo/events.csv --outputs fixtures/demo/outputs.csv \
  --manifest fixtures/demo/billing.batchguard.yaml \
  --from 2026-03-01T00:00:00+09:00 --to 2026-03-02T00:00:00+09:00 || [ $? -eq 1 ] || status=2
exit $status
