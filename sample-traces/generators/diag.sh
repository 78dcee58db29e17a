#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200-x2): every diagnosis capture, results into $OUT.
#   - diag.py's single-GPU scenarios as Kineto traces, each in a fresh process (first-call costs
#     must not be paid by an earlier scenario), two lanes in parallel, one per GPU;
#   - ddp.py's two-rank jobs (torchrun, NCCL);
#   - a few scenarios under Nsight Systems, exported to SQLite, with and without host-side data.
# Needs .libs/ with libdw1 and libelf1 .deb files for the nsys importer (see the shared
# generators/README.md). Each group is packed into its own tgz as soon as it is done.
set -u
G=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$G/../.." && pwd)
O=/tmp/diag; mkdir -p $O/k0 $O/k1 $O/ddp $O/ns /tmp/dw
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'
for f in "$R"/.libs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/dw; done
DW=/tmp/dw/usr/lib/x86_64-linux-gnu
NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
H=$(dirname "$(dirname "$NSYS")")
QI=$(find "$H" -name QdstrmImporter -type f 2>/dev/null | head -1)
echo "nsys: $NSYS importer: $QI"

lane() {  # lane GPU DIR scenario...
  local gpu=$1 dir=$2; shift 2
  for s in "$@"; do
    PYTHONUNBUFFERED=1 timeout 120 python3 "$G/diag.py" "$dir" "$s" --gpu "$gpu" 2>&1 | grep -v Warning | tail -3
  done
}

nsys_one() {  # nsys_one GPU NAME TRACE EXTRA... : scenario NAME under nsys, exported to SQLite
  local gpu=$1 s=$2 tag=$3 tr=$4; shift 4
  ( cd /tmp && CAPTURE_TAG=$tag NO_PROFILER=1 LD_LIBRARY_PATH=$DW timeout 240 "$NSYS" profile -t "$tr" "$@" -o /tmp/$s.$tag -f true \
      python3 "$G/diag.py" $O/ns "$s" --gpu "$gpu" ) > $O/ns/$s.$tag.log 2>&1
  [ -f /tmp/$s.$tag.nsys-rep ] || LD_LIBRARY_PATH=$DW timeout 200 "$QI" -i /tmp/$s.$tag.qdstrm >> $O/ns/$s.$tag.log 2>&1
  LD_LIBRARY_PATH=$DW timeout 150 "$NSYS" export --type sqlite -f true -o /tmp/$s.$tag.sqlite /tmp/$s.$tag.nsys-rep >> $O/ns/$s.$tag.log 2>&1
  ls -la /tmp/$s.$tag.* >> $O/ns/$s.$tag.log 2>&1
  [ -f /tmp/$s.$tag.sqlite ] && gzip -6c /tmp/$s.$tag.sqlite > $O/ns/h200_${s}_$tag.sqlite.gz
  rm -f /tmp/$s.$tag.qdstrm /tmp/$s.$tag.nsys-rep /tmp/$s.$tag.sqlite
}

T0=$(date +%s)
lane 0 $O/k0 cpu_preprocess python_list_input sleep_log item_then_python cpu_sync_numpy cuda_graph_clean > $O/k0.log 2>&1 &
lane 1 $O/k1 cudnn_benchmark_shapes lazy_loading empty_cache_per_step dataloader_slow matmul_clean > $O/k1.log 2>&1 &
wait
echo "kineto done in $(( $(date +%s) - T0 )) s"; cat $O/k0.log $O/k1.log
( cd $O && tar czf - k0 k1 k0.log k1.log | split -b 15000000 -d - $OUT/kineto.tgz.part )

for s in straggler exposed; do
  PYTHONUNBUFFERED=1 timeout 150 torchrun --nproc_per_node=2 "$G/ddp.py" $O/ddp $s 2>&1 | grep -v Warning | tail -5
done
echo "ddp done in $(( $(date +%s) - T0 )) s"
( cd $O && tar czf - ddp | split -b 15000000 -d - $OUT/ddp.tgz.part )

# Nsight Systems: the CPU stall without any host-side data, and with OS runtime calls, autograd
# NVTX ranges and CPU sampling; sleep with OS runtime calls; first-call costs with CUDA only.
if [ -n "$NSYS" ]; then
  nsys_one 0 cpu_preprocess cuda cuda,nvtx --sample=none --cpuctxsw=none &
  nsys_one 1 cpu_preprocess host cuda,nvtx,osrt --pytorch=autograd-nvtx --sample=process-tree --backtrace=fp --cpuctxsw=process-tree &
  wait
  nsys_one 0 sleep_log osrt cuda,nvtx,osrt --pytorch=autograd-nvtx --sample=none --cpuctxsw=none &
  nsys_one 1 lazy_loading cuda cuda,nvtx --sample=none --cpuctxsw=none &
  wait
fi
echo "nsys done in $(( $(date +%s) - T0 )) s"
( cd $O && tar czf - ns | split -b 15000000 -d - $OUT/nsys.tgz.part )
ls -la $OUT
