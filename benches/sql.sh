#!/usr/bin/env bash
# `tracehound sql` against `tracehound analyze` on the 1 GB scaled trace (made as
# benches/scale.sh makes it): the issue's query, median of RUNS runs each. Builds with the
# feature `sql` (polars); the first build takes long.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz
[ -f "$SRC" ] || { echo "skipping: $SRC is absent"; exit 0; }
D="${BENCH_DIR:-/tmp/tracehound-bench}"; mkdir -p "$D"
RUNS="${RUNS:-3}"
PROFILE="${PROFILE:-release}"
cargo build --profile "$PROFILE" --features tracehound/sql -q -p tracehound -p tracehound-dev
DIR=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
TH="${CARGO_TARGET_DIR:-target}/$DIR/tracehound"
[ -e "$D/t1g.json" ] || "${CARGO_TARGET_DIR:-target}/$DIR/tracehound-dev" scale "$SRC" "$D/t1g.json" --size-mb 1000 > /dev/null
Q="SELECT name, sum(dur) FROM kernels GROUP BY name"
for what in analyze sql; do
  for _ in $(seq "$RUNS"); do
    if [ "$what" = analyze ]; then
      /usr/bin/time -f "%e %M" -o /tmp/th-sql.$$ "$TH" analyze "$D/t1g.json" > /dev/null
    else
      /usr/bin/time -f "%e %M" -o /tmp/th-sql.$$ "$TH" sql "$D/t1g.json" "$Q" > /dev/null
    fi
    cat /tmp/th-sql.$$
  done | sort -g | awk -v w="$what" -v r="$RUNS" 'NR == int(r / 2) + 1 { printf "%-8s %6.2f s  %5.0f MB (median of %d)\n", w, $1, $2 / 1024, r }'
done
