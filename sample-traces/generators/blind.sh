#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): blind.py's captures (issue 39), each scenario in a
# fresh process, under one deadline; results packed into $OUT as blind.tgz.partNN. MODE=--nostack or
# --both adds captures without Python stacks (blind.py).
set -u
G=$(cd "$(dirname "$0")" && pwd)
O=${O:-/tmp/blind}; mkdir -p $O/k
DEADLINE=${DEADLINE:-$(( $(date +%s) + 540 ))}
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
left() { echo $(( DEADLINE - $(date +%s) )); }
for s in ${@:-cat_kv_cache naive_attention moe_mask_sync conv_nchw sort_for_topk onehot_ce sdpa_mask_fallback no_kv_cache index_backward_dupes}; do
  t=110; l=$(left); [ $l -lt $t ] && t=$l
  if [ $t -lt 30 ]; then echo "$s: SKIPPED (deadline, ${l}s left)"; continue; fi
  echo "$s: start $(date +%T), timeout ${t}s"
  PYTHONUNBUFFERED=1 timeout $t python3 "$G/blind.py" $O/k "$s" --gpu 0 ${MODE:-} > $O/k/$s.log 2>&1; echo "$s: rc=$? end $(date +%T)"
  grep -v -i warn $O/k/$s.log | tail -4
done
ls -la $O/k
( cd $O && tar czf - . | split -b 15000000 -d - $OUT/blind.tgz.part ); ls -la $OUT
