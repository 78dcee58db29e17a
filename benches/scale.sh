#!/usr/bin/env bash
# Speed and memory at scale: generates traces of 0.1 .. 4 GB (and optionally 10 GB) from the
# real h200_gpt_train_big capture, a 1 GB gzip one, an 8-rank job and a 700 MB Nsight Systems
# export (benches/nsys_scale.py, from the h200_gpt_decode_launch_bound capture), and reports
# the median wall time (of RUNS) and peak RSS of `tracehound analyze` on each.
#
#   benches/scale.sh [--with-10gb]      (inputs under ${BENCH_DIR:-/tmp/tracehound-bench})
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz
[ -f "$SRC" ] || { echo "skipping: $SRC is absent"; exit 0; }
D="${BENCH_DIR:-/tmp/tracehound-bench}"; mkdir -p "$D"
RUNS="${RUNS:-3}"
cargo build --release -q -p tracehound -p tracehound-dev
TH="${CARGO_TARGET_DIR:-target}/release/tracehound"
DEV="${CARGO_TARGET_DIR:-target}/release/tracehound-dev"
gen() { [ -e "$D/$1" ] || "$DEV" scale "$SRC" "$D/$1" "${@:2}" > /dev/null; }
for gb in 0.1 0.5 1 2 4; do gen "t${gb}g.json" --size-mb "$(awk -v g=$gb 'BEGIN{print g*1000}')"; done
gen t1g.json.gz --size-mb 1000 --gzip
gen job8 --size-mb 125 --ranks 8 --slow-rank 5 --gzip
NSYS_SRC=../shared/sample-traces/nsys/h200_gpt_decode_launch_bound.sqlite
if [ -f "$NSYS_SRC" ] && [ ! -e "$D/nsys_big.sqlite" ]; then
  python3 benches/nsys_scale.py "$NSYS_SRC" "$D/nsys_big.sqlite" --size-mb 700 > /dev/null
fi
if [ "${1:-}" = "--with-10gb" ]; then gen t10g.json --size-mb 10000; fi
measure() {
  local w=() m=()
  for _ in $(seq "$RUNS"); do
    # Into the page cache before every run, as benches/paired.sh does: a machine that
    # reclaims cold pages while idle (this one's DAMON does) otherwise has a run read a
    # different share of its input from disk, and a freshly generated input is read cold.
    if [ -d "$1" ]; then cat "$1"/* > /dev/null; else cat "$1" > /dev/null; fi
    /usr/bin/time -f "%e %M" -o /tmp/th-scale.$$ "$TH" analyze "$1" > /dev/null
    read -r s k < /tmp/th-scale.$$; w+=("$s"); m+=("$k")
  done
  IFS=$'\n' ws=($(sort -g <<<"${w[*]}")); ms=($(sort -g <<<"${m[*]}")); unset IFS
  echo "${ws[$((RUNS / 2))]} ${ms[$((RUNS / 2))]}"
}
# input_MB: the JSON's size (decompressed, all ranks of a job), or the SQLite file's.
printf "%-24s %10s %10s %10s %10s\n" input "input_MB" "wall_s" "peak_MB" "MB/s"
for f in "$SRC" "$D"/t0.1g.json "$D"/t0.5g.json "$D"/t1g.json "$D"/t2g.json "$D"/t4g.json "$D"/t1g.json.gz "$D"/t10g.json "$D"/job8 "$D"/nsys_big.sqlite; do
  [ -e "$f" ] || continue
  if [ -d "$f" ]; then size=$(for r in "$f"/*; do gzip -dc "$r" | wc -c; done | awk '{s+=$1} END {print s}')
  elif [[ "$f" == *.gz ]]; then size=$(gzip -dc "$f" | wc -c)
  else size=$(stat -c %s "$f"); fi
  read -r s k < <(measure "$f")
  awk -v n="$(basename "$f")" -v b="$size" -v s="$s" -v k="$k" 'BEGIN {
    printf "%-24s %10.0f %10.2f %10.0f %10.0f\n", n, b/1e6, s, k/1024, b/1e6/s }'
done
echo "($(nproc) cores, median of $RUNS runs)"
