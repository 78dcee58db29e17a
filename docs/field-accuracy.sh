#!/usr/bin/env bash
# Rewrites the results block of docs/field-accuracy.md from the field test's own run
# (tests/field.rs prints the block between its markers; the test fails while the document
# disagrees with it). Needs ../shared beside the clone, so that no trace is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d ../shared ] || { echo "../shared is absent: the held traces would be skipped" >&2; exit 2; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo test -q --test field -- --nocapture > "$out" 2> /dev/null || true
python3 - "$out" docs/field-accuracy.md <<'PY'
import sys
start = "<!-- field results: written by docs/field-accuracy.sh from tests/field.rs; do not edit -->"
end = "<!-- end of field results -->"
run = open(sys.argv[1]).read()
a = run.index(start)
block = run[a:run.index(end, a) + len(end)]
doc = open(sys.argv[2]).read()
if start in doc:
    b = doc.index(start)
    doc = doc[:b] + block + doc[doc.index(end, b) + len(end):]
else:
    raise SystemExit("docs/field-accuracy.md has no results markers")
open(sys.argv[2], "w").write(doc)
print(block.splitlines()[-2])
PY
