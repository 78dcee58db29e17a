#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): every capture of phases.py and membound.py in one
# call of at most ~9 minutes. Two lanes: the Nsight Systems twin of gil_thread starts beside
# compile_recompile (its GPU part, ~30 s, overlaps that scenario's compilation; its import and export are
# CPU only), all Kineto scenarios run one after another in fresh processes. Results packed into $OUT as
# captures2.tgz.partNN, the log as $OUT/captures2.log.
set -u
G=$(cd "$(dirname "$0")" && pwd)
export O=/tmp/cap2 NOPACK=1 DEADLINE=$(( $(date +%s) + ${BUDGET_S:-510} ))
mkdir -p $O/k $O/ns
{
  date; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c 'import torch, triton, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "python", sys.version.split()[0])'
  nproc; uname -r
} > $O/machine.txt 2>&1
cat $O/machine.txt
bash "$G/phases.sh" gil_thread_nsys > $O/lane_nsys.log 2>&1 &
NS=$!
bash "$G/phases.sh" compile_recompile
bash "$G/membound.sh" stream_roof unfused_norm_gelu fused_norm_gelu gemm_bound_clean
bash "$G/phases.sh" gil_thread gc_heavy autograd_backward_heavy
bash "$G/membound.sh" compiled_fused_clean
bash "$G/phases.sh" autograd_backward_heavy_compiled
wait $NS; echo "== nsys lane"; cat $O/lane_nsys.log
ls -laR $O | grep -v '^total'
