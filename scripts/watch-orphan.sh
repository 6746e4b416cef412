#!/bin/sh
# What a `watch` screen does when its terminal goes away, and what it costs while idle.
#
#   scripts/watch-orphan.sh BATCHGUARD [orphan|idle]
#
# Starts `BATCHGUARD watch` (the table on a terminal) in a tmux session of its own, over
# a one-row JSONL ledger in a temporary folder. `orphan` (default) kills the session and,
# 5 s later, says whether watch ended (and its exit code) or is still running, with its
# CPU share over those 5 s (from /proc/PID/stat). `idle` leaves it on screen for 5 s and
# prints its CPU share, then quits it with `q`.
set -eu
B=$1; MODE=${2:-orphan}
D=$(mktemp -d); S=bg-orphan-$$
trap 'tmux -L $S kill-server 2>/dev/null || true; rm -rf "$D"' EXIT
printf 'version: 1\nservice: b\njobs:\n  - name: j\n    schedule: "* * * * *"\n' > "$D/m.batchguard.yaml"
printf '{"run_id":"r1","job":"j","scheduled_at":"2026-03-01T00:00:00Z","event":"start","at":"2026-03-01T00:00:01Z"}\n' > "$D/l.jsonl"
tmux -L $S -f /dev/null new-session -d -s w -x 120 -y 30 \
  "cd $D && trap '' HUP; sh -c 'echo \$\$ > pid; exec $B watch --ledger l.jsonl --manifest m.batchguard.yaml --interval 1h'; echo \$? > exit"
while [ ! -s "$D/pid" ]; do sleep 0.1; done
sleep 1
P=$(cat "$D/pid")
ticks() { awk '{print $14 + $15}' /proc/$P/stat; }
HZ=$(getconf CLK_TCK)
if [ "$MODE" = idle ]; then
  t0=$(ticks); sleep 5; t1=$(ticks)
  echo "idle on screen: CPU $((t1 - t0)) ticks in 5 s = $(( (t1 - t0) * 100 / (5 * HZ) ))%"
  tmux -L $S send-keys -t w q
  exit 0
fi
tmux -L $S kill-session -t w
t0=$(ticks 2>/dev/null || echo 0); sleep 5
if [ -d /proc/$P ]; then
  t1=$(ticks)
  echo "still running 5 s after its session was killed: CPU $(( (t1 - t0) * 100 / (5 * HZ) ))%"
  kill -9 "$P"
else
  echo "ended; exit $(cat "$D/exit" 2>/dev/null || echo '?')"
fi
