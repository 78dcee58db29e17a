#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): membound.py's captures (issue 22), each scenario in a
# fresh process. Arguments: scenarios (default: all). Environment as phases.sh (O, DEADLINE, NOPACK);
# otherwise results are packed into $OUT as membound.tgz.partNN.
set -u
G=$(cd "$(dirname "$0")" && pwd)
O=${O:-/tmp/cap2}; mkdir -p $O/k
DEADLINE=${DEADLINE:-$(( $(date +%s) + 540 ))}
left() { echo $(( DEADLINE - $(date +%s) )); }
one() {  # one SCENARIO TIMEOUT
  local t=$2 l; l=$(left); [ $l -lt $t ] && t=$l
  if [ $t -lt 25 ]; then echo "$1: SKIPPED (deadline, ${l}s left)"; return; fi
  echo "$1: start $(date +%T), timeout ${t}s"
  PYTHONUNBUFFERED=1 timeout $t python3 "$G/membound.py" $O/k "$1" --gpu 0 > $O/k/$1.log 2>&1; echo "$1: rc=$? end $(date +%T)"
  grep -v -i warn $O/k/$1.log | tail -4
}
for s in ${@:-stream_roof unfused_norm_gelu fused_norm_gelu gemm_bound_clean compiled_fused_clean}; do
  case $s in
    compiled_fused_clean) one $s 150 ;;
    *) one $s 75 ;;
  esac
done
if [ -z "${NOPACK:-}" ]; then ( cd $O && tar czf - . | split -b 15000000 -d - $OUT/membound.tgz.part ); ls -la $OUT; fi
