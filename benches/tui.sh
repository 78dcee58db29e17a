#!/usr/bin/env bash
# The TUI at scale: on the 1 GB scaled trace (made from the real h200_gpt_train_big capture as
# benches/scale.sh makes it), the time from the end of analysis to the first frame (every
# view computed), the redraw time per key over a scripted session (zooms, pans, screen
# switches, a search) on a 200x50 off-screen terminal, and peak memory against `analyze`.
#
#   benches/tui.sh      (inputs under ${BENCH_DIR:-/tmp/tracehound-bench})
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz
[ -f "$SRC" ] || { echo "skipping: $SRC is absent"; exit 0; }
D="${BENCH_DIR:-/tmp/tracehound-bench}"; mkdir -p "$D"
cargo build --release -q -p tracehound -p tracehound-dev
TH="${CARGO_TARGET_DIR:-target}/release/tracehound"
DEV="${CARGO_TARGET_DIR:-target}/release/tracehound-dev"
[ -e "$D/t1g.json" ] || "$DEV" scale "$SRC" "$D/t1g.json" --size-mb 1000 > /dev/null
for f in sample-traces/kineto/h200_resnet_unpinned_sync.pt.trace.json.gz "$D/t1g.json"; do
  echo "== $f"
  /usr/bin/time -f "analyze: %e s, peak %M KB" "$TH" analyze "$f" > /dev/null
  /usr/bin/time -f "tui:     %e s, peak %M KB" "$DEV" tui-bench "$f"
done
