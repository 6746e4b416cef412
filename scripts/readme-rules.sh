#!/usr/bin/env bash
# Rewrites the rule table of docs/rules.md from the registry (tests/readme.rs checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
table=$(cargo run -q -- rules --format markdown)
python3 - "$table" <<'PY'
import sys
table = sys.argv[1] + "\n"
s = open("docs/rules.md").read()
a = s.index("<!-- rules:start -->") + len("<!-- rules:start -->\n")
b = s.index("<!-- rules:end -->")
open("docs/rules.md", "w").write(s[:a] + table + s[b:])
PY
