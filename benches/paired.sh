#!/usr/bin/env bash
# This tree against an earlier build on one trace, in interleaved runs (base, head, base,
# head, …) so that a machine whose speed drifts treats both alike: median wall time, CPU time
# (user + sys) and peak RSS of each, and, for a gzip file, `gzip -dc` of it.
#
#   benches/paired.sh BASE_REV [TRACE] [PAIRS] [COMMAND]
#
# TRACE defaults to the 1 GB scaled trace at /tmp/tracehound-bench/t1g.json (made by
# benches/scale.sh), PAIRS to 5, COMMAND to analyze. Needs /usr/bin/time (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/base_build.sh
BASE_BIN="$(base_build "${1:?usage: benches/paired.sh BASE_REV [TRACE] [PAIRS] [COMMAND]}")"
TRACE="${2:-/tmp/tracehound-bench/t1g.json}"
PAIRS="${3:-5}"
CMD="${4:-analyze}"
[ -f "$TRACE" ] || { echo "no such trace: $TRACE" >&2; exit 2; }
cargo build --release -q
HEAD_BIN="${CARGO_TARGET_DIR:-target}/release/tracehound"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
for _ in $(seq "$PAIRS"); do
    for side in base head; do
        bin="$BASE_BIN"
        [ "$side" = head ] && bin="$HEAD_BIN"
        # Into the page cache before every run, for both alike: a machine that reclaims
        # cold pages while idle (the development machine's DAMON does, some thousand pages
        # a minute) otherwise has each run wait for a different share of the file's reads.
        cat "$TRACE" > /dev/null
        /usr/bin/time -f "%e %U %S %M" -o "$OUT/t" "$bin" "$CMD" "$TRACE" > /dev/null 2>&1
        tail -1 "$OUT/t" >> "$OUT/$side"
    done
done
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
row() { # side
    local wall cpu rss
    wall=$(awk '{print $1}' "$OUT/$1" | median)
    cpu=$(awk '{print $2 + $3}' "$OUT/$1" | median)
    rss=$(awk '{print $4}' "$OUT/$1" | median)
    printf "%-5s %9.2f s %9.2f s %9.0f MB\n" "$1" "$wall" "$cpu" "$(echo "$rss / 1024" | bc -l)"
}
printf "%-5s %11s %11s %12s\n" "" "wall" "CPU" "peak RSS"
row base
row head
if [[ "$TRACE" == *.gz ]]; then
    /usr/bin/time -f "%e" -o "$OUT/g" gzip -dc "$TRACE" > /dev/null
    echo "gzip -dc: $(tail -1 "$OUT/g") s"
fi
echo "($CMD $(basename "$TRACE"), $PAIRS interleaved pairs, medians; base $(git rev-parse --short "$1"); $(nproc) cores)"
