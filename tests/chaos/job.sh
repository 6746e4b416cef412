#!/bin/sh
# The chaos test's job, as `batchguard run` starts it. It records what it does in a history
# of its own (CHAOS_APPLIES: one JSON line per record, appended with O_APPEND, so the file's
# order is the order the writes happened), which the verdict is judged on; batchguard never
# writes there. Records: `begin` (the job started), `apply` (its effect), `fail` (it chose to
# fail, EX_TEMPFAIL, before applying). Times are the machine's real clock (libfaketime is
# taken off `date`), so a host whose clock is skewed still records when things happened.
#
# Odd fences apply from a worker that leaves the process group and the session (setsid)
# and applies after a delay: when batchguard is killed meanwhile, the worker is what
# SPEC 7.1 items 8 and 29 say must die before the lease can expire.
set -u

rec() {
  t=$(env -u LD_PRELOAD -u FAKETIME date +%s.%N 2>/dev/null)
  [ -n "$t" ] || t=null # `date` itself was killed: the record still counts, without a time
  printf '{"ev":"%s","t":%s,"fence":%s,"run":"%s","slot":"%s","attempt":%s,"host":"%s","via":"run","pid":%s}\n' \
    "$1" "$t" "$BATCHGUARD_FENCE" "$BATCHGUARD_RUN_ID" "$BATCHGUARD_SCHEDULED_AT" \
    "$BATCHGUARD_ATTEMPT" "$CHAOS_HOST" "$$" >>"$CHAOS_APPLIES"
}

apply() {
  rec apply
  echo "$BATCHGUARD_SCHEDULED_AT" >>"$BATCHGUARD_OUTPUTS"
}

if [ "${1:-}" = "--worker" ]; then
  sleep "$2"
  apply
  exit 0
fi

rec begin
# How long the work takes and whether it fails: a function of the fence and the seed.
work=$(awk -v f="$BATCHGUARD_FENCE" -v s="$CHAOS_SEED_SMALL" 'BEGIN { srand(f * 7919 + s); printf "%.2f", 0.2 + rand() * 1.3 }')
if [ $(((BATCHGUARD_FENCE * 7 + CHAOS_SEED_SMALL) % 11)) -eq 0 ]; then
  rec fail
  exit 75
fi
if [ $((BATCHGUARD_FENCE % 2)) -eq 1 ]; then
  # Half the workers take two lease ttls (CHAOS_LONG): their guard must stop them at the
  # deadline; when the guard is killed or frozen first, nothing else will.
  [ $((BATCHGUARD_FENCE % 4)) -eq 1 ] && work=$CHAOS_LONG
  setsid sh "$0" --worker "$work" &
  wait $!
  exit $?
fi
sleep "$work"
apply
