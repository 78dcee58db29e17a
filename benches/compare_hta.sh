#!/usr/bin/env bash
# Side by side with HolisticTraceAnalysis: wall time and peak RSS of both tools on the same
# traces, in one run, and their ratios.
#
#   benches/compare_hta.sh [TRACE...]
#
# Installs HTA (PyPI HolisticTraceAnalysis) into a virtual environment under
# ${HTA_VENV:-$HOME/.cache/tracehound-hta-venv} on first use. Default traces: the H200 captures
# of ../shared/sample-traces. Needs /usr/bin/time (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HTA_VENV:-$HOME/.cache/tracehound-hta-venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q HolisticTraceAnalysis
fi
cargo build --release -q
TH="${CARGO_TARGET_DIR:-target}/release/tracehound"
S=../shared/sample-traces/kineto
if [ $# -eq 0 ]; then
  set -- "$S/h200_resnet_unpinned_sync.pt.trace.json.gz" "$S/h200_gpt_train_gpu_bound_clean.pt.trace.json.gz" "$S/h200_gpt_train_big.pt.trace.json.gz"
fi
measure() { # prints "wall_s peak_kb" of a command, or "failed failed"
  /usr/bin/time -f "%e %M" -o /tmp/th-time.$$ "$@" > /dev/null 2>&1 || true
  if grep -q "non-zero status" /tmp/th-time.$$; then echo "failed failed"; else tail -1 /tmp/th-time.$$; fi
}
printf "%-44s %12s %12s %12s %12s %8s %8s\n" trace "hta_s" "hta_MB" "th_s" "th_MB" "x_time" "x_mem"
for t in "$@"; do
  read -r hs hk < <(measure "$VENV/bin/python" benches/hta_run.py "$t")
  # tracehound: median of 3
  ts=(); tk=()
  for _ in 1 2 3; do read -r s k < <(measure "$TH" analyze "$t"); ts+=("$s"); tk+=("$k"); done
  IFS=$'\n' s_sorted=($(sort -g <<<"${ts[*]}")); k_sorted=($(sort -g <<<"${tk[*]}")); unset IFS
  s=${s_sorted[1]}; k=${k_sorted[1]}
  if [ "$hs" = failed ]; then
    awk -v n="$(basename "$t")" -v s="$s" -v k="$k" 'BEGIN {
      printf "%-44s %12s %12s %12.2f %12.0f %8s %8s\n", n, "failed", "-", s, k/1024, "-", "-" }'
  else
    awk -v n="$(basename "$t")" -v hs="$hs" -v hk="$hk" -v s="$s" -v k="$k" 'BEGIN {
      printf "%-44s %12.2f %12.0f %12.2f %12.0f %7.0fx %7.1fx\n", n, hs, hk/1024, s, k/1024, hs/s, hk/k }'
  fi
done
echo "($(nproc) cores; tracehound: median of 3 runs; HTA: one run of load + temporal and idle-time breakdowns)"
