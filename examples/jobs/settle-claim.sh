#!/bin/sh
# A CLI job under `batchguard run` that charges each invoice due by its slot exactly once,
# with psql and the store's SQL function (no npm, no driver): each invoice is one
# transaction that claims it first, then charges it.
#
#   BEGIN;
#   SELECT batchguard_claim(job, 'invoice-ID', run_id, fence);  -- f: claimed before: ROLLBACK
#   INSERT INTO payments …; UPDATE invoices …;                  -- (an error: refused, rolled back)
#   COMMIT;                                                     -- the claim and the charge together
#
# The claim's row is the output row `batchguard audit` reads, so this job writes nothing to
# BATCHGUARD_OUTPUTS. The store must be the invoices' database (the function lives there):
#
#   batchguard store migrate --store "$DATABASE_URL"
#   batchguard run --manifest examples/jobs/settle-claim.batchguard.yaml --job settle-claim \
#     --store "$DATABASE_URL"
#
# BATCHGUARD_JOB, BATCHGUARD_RUN_ID, BATCHGUARD_FENCE and BATCHGUARD_SCHEDULED_AT come from
# `run`; DATABASE_URL defaults to BATCHGUARD_STORE. The tables: examples/node/settle.js's
# migrate() (invoices: id, due_at, amount, settled_at, settled_by; payments: invoice_id,
# amount, run_id).
set -eu
db="${DATABASE_URL:-${BATCHGUARD_STORE:?set DATABASE_URL or BATCHGUARD_STORE}}"

# The invoices due by the slot and not settled yet: a hint, not the guard (another holder
# may settle one between this read and its transaction; the claim is the guard).
ids=$(psql "$db" -XAtq -v ON_ERROR_STOP=1 -v slot="$BATCHGUARD_SCHEDULED_AT" <<'SQL'
SELECT id FROM invoices WHERE settled_at IS NULL AND due_at <= :'slot' ORDER BY id;
SQL
)

settled=0
before=0
for id in $ids; do
  # ON_ERROR_STOP: a refused claim (a newer holder has the slot) ends psql with exit 3 and
  # the open transaction is rolled back with it.
  if ! answer=$(psql "$db" -XAtq -v ON_ERROR_STOP=1 -v id="$id" -v key="invoice-$id" \
      -v job="$BATCHGUARD_JOB" -v run="$BATCHGUARD_RUN_ID" -v fence="$BATCHGUARD_FENCE" <<'SQL'
BEGIN;
SELECT batchguard_claim(:'job', :'key', :'run', :'fence') AS claimed \gset
\if :claimed
INSERT INTO payments (invoice_id, amount, run_id) SELECT id, amount, :'run' FROM invoices WHERE id = :id;
UPDATE invoices SET settled_at = now(), settled_by = :'run' WHERE id = :id;
COMMIT;
\echo settled
\else
ROLLBACK;
\echo claimed-before
\endif
SQL
  ); then
    echo "invoice $id: claim refused (fence $BATCHGUARD_FENCE is no longer the slot's latest): stopping" >&2
    if [ -n "${BATCHGUARD_ERROR:-}" ]; then echo STALE_FENCE > "$BATCHGUARD_ERROR"; fi
    exit 1
  fi
  case "$answer" in
    settled) settled=$((settled + 1)) ;;
    claimed-before) before=$((before + 1)) ;;
    *) echo "invoice $id: unexpected answer: $answer" >&2; exit 1 ;;
  esac
done
echo "settled $settled invoices, $before claimed before (run $BATCHGUARD_RUN_ID, fence $BATCHGUARD_FENCE)"
