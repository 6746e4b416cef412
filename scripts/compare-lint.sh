#!/usr/bin/env bash
# Proof that a change to lint (or to what it shares) changed nothing users see: runs two
# batchguard binaries over every fixture tree and diffs every output byte for byte.
#
#   scripts/compare-lint.sh OLD_BINARY NEW_BINARY
#
# Inputs: every rule fixture (bad and good), the corpus, the graph and demo trees, the
# schedule-rule fixtures; each linted in every format (json, sarif, github, pretty), with
# --list-files, and drawn by `graph` (dot, mermaid); then `rules`, `explain` of every code,
# `schema` of every format and a few `slots` windows. Exit codes are compared too.
# WORK (default /tmp/compare-lint) keeps both sides' outputs.
# Prints `identical` and exits 0, or prints the diff and exits 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
old="$(realpath "${1:?usage: compare-lint.sh OLD NEW}")"
new="$(realpath "${2:?usage: compare-lint.sh OLD NEW}")"
work="${WORK:-/tmp/compare-lint}"
now="2026-03-01T00:00:00Z"
rm -rf "$work"
mkdir -p "$work/old" "$work/new"
cd "$root"

trees=()
for d in fixtures/rules/*/; do
  for w in bad good; do
    if [ -d "$d$w" ]; then trees+=("$d$w"); fi
    if [ -f "$d$w.batchguard.yaml" ]; then trees+=("$d$w.batchguard.yaml"); fi
  done
done
for d in fixtures/corpus/*/ fixtures/graph fixtures/demo; do trees+=("${d%/}"); done

# One command line per case: `name|args…` (args split on spaces; no case needs quoting).
cases=()
for t in "${trees[@]}"; do
  n="${t//\//_}"
  for f in json sarif github pretty; do cases+=("lint-$f-$n|lint --now $now --format $f $t"); done
  cases+=("list-$n|lint --now $now --list-files $t")
  for f in dot mermaid; do cases+=("graph-$f-$n|graph --now $now --format $f $t"); done
done
cases+=("rules-text|rules" "rules-md|rules --format markdown")
for f in manifest config ledger; do cases+=("schema-$f|schema $f"); done
while read -r code; do cases+=("explain-$code|explain $code"); done < <("$old" rules | awk '{print $1}')
cases+=("slots-k8s|slots --schedule 30_1_*_*_* --dialect kubernetes --timezone America/New_York --from 2026-10-31T00:00:00-04:00 --to 2026-11-03T00:00:00-05:00 --annotate")
cases+=("slots-pm2|slots --schedule 0_*_*_*_* --dialect pm2 --timezone Europe/Berlin --from 2026-10-24T00:00:00Z --to 2026-10-26T00:00:00Z")

for c in "${cases[@]}"; do
  name="${c%%|*}"
  args="${c#*|}"
  for side in old new; do
    bin="$old"; [ "$side" = new ] && bin="$new"
    read -r -a argv <<<"$args"
    # In `slots` cases, `_` stands for a space inside one argument (a cron expression).
    if [[ "$name" == slots-* ]]; then
      for i in "${!argv[@]}"; do argv[$i]="${argv[$i]//_/ }"; done
    fi
    set +e
    NO_COLOR=1 "$bin" "${argv[@]}" >"$work/$side/$name.out" 2>"$work/$side/$name.err"
    echo "exit $?" >>"$work/$side/$name.out"
    set -e
  done
done

if diff -r "$work/old" "$work/new" >"$work/diff.txt"; then
  echo "identical (${#cases[@]} cases)"
else
  cat "$work/diff.txt"
  exit 1
fi
