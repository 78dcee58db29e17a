#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): issue 40's captures, results packed into
# $OUT as verdicts.tgz. verdicts.py's three PyTorch scenarios, each in a fresh process; the
# unified-memory CUDA C program (verdicts_um.cu) built with nvcc, timed against its twin, then
# run under Nsight Systems with unified-memory page-fault tracing and exported to SQLite.
# Needs .libs/ with libdw1 and libelf1 .deb files for the nsys importer (carry it). SCENARIOS="a b"
# runs only those PyTorch scenarios, without the nsys capture; LOOP=1 adds the allocate/copy/
# synchronise loop (verdicts_loop.cu) under nsys.
set -u
G=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$G/../.." && pwd)
O=/tmp/v40; mkdir -p $O /tmp/dw
nvidia-smi -L; nvidia-smi -q -x > $O/h200_v40_smi_q.xml; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'
for s in ${SCENARIOS:-pageable_only copies_only warmup late_first_call}; do
  PYTHONUNBUFFERED=1 timeout 150 python3 "$G/verdicts.py" $O $s 2>&1 | grep -v -i warn | tail -3
done
for f in "$R"/.libs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/dw; done
DW=/tmp/dw/usr/lib/x86_64-linux-gnu
NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
QI=$(find "$(dirname "$(dirname "$NSYS")")" -name QdstrmImporter -type f 2>/dev/null | head -1)
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
echo "nsys: $NSYS nvcc: $NVCC"
if [ -n "$NVCC" ] && [ -z "${SCENARIOS:-}" ]; then
  $NVCC -O2 -arch=sm_90 -o /tmp/um "$G/verdicts_um.cu" && timeout 120 /tmp/um both | tee $O/h200_v40_um_twin.json
  ( cd /tmp && LD_LIBRARY_PATH=$DW timeout 180 "$NSYS" profile -t cuda,osrt --cuda-um-cpu-page-faults=true \
      --cuda-um-gpu-page-faults=true --sample=none --cpuctxsw=none -o /tmp/um_managed -f true /tmp/um managed ) > $O/um_nsys.log 2>&1
  [ -f /tmp/um_managed.nsys-rep ] || LD_LIBRARY_PATH=$DW timeout 120 "$QI" -i /tmp/um_managed.qdstrm >> $O/um_nsys.log 2>&1
  LD_LIBRARY_PATH=$DW timeout 150 "$NSYS" export --type sqlite -f true -o $O/h200_v40_um_managed.sqlite /tmp/um_managed.nsys-rep >> $O/um_nsys.log 2>&1
  tail -5 $O/um_nsys.log
fi
# The per-iteration allocate/copy/synchronise loop (verdicts_loop.cu), with the same nsys.
if [ -n "$NVCC" ] && [ -n "${LOOP:-}" ]; then
  $NVCC -O2 -arch=sm_90 -o /tmp/loop "$G/verdicts_loop.cu" && timeout 120 /tmp/loop both | tee $O/h200_v40_alloc_copy_sync_twin.json
  ( cd /tmp && LD_LIBRARY_PATH=$DW timeout 180 "$NSYS" profile -t cuda,osrt --sample=none --cpuctxsw=none \
      -o /tmp/loop_naive -f true /tmp/loop naive ) > $O/loop_nsys.log 2>&1
  [ -f /tmp/loop_naive.nsys-rep ] || LD_LIBRARY_PATH=$DW timeout 120 "$QI" -i /tmp/loop_naive.qdstrm >> $O/loop_nsys.log 2>&1
  LD_LIBRARY_PATH=$DW timeout 150 "$NSYS" export --type sqlite -f true -o $O/h200_v40_alloc_copy_sync.sqlite /tmp/loop_naive.nsys-rep >> $O/loop_nsys.log 2>&1
  tail -3 $O/loop_nsys.log
fi
ls -la $O
( cd $O && for f in *.json; do case $f in *.pt.trace.json) gzip -9 $f;; esac; done; tar czf $OUT/verdicts.tgz . )
ls -la $OUT
