#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200-x2): ddp.py's straggler job under Nsight
# Systems, one report per rank (torchrun starts each rank under its own `nsys profile`),
# exported to SQLite. Results into $OUT as ddp_nsys.tgz.partNN. Needs .libs/ as diag.sh does.
set -u
G=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$G/../.." && pwd)
O=/tmp/ddpn; mkdir -p $O /tmp/dw
for f in "$R"/.libs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/dw; done
export DW=/tmp/dw/usr/lib/x86_64-linux-gnu
export NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
QI=$(find "$(dirname "$(dirname "$NSYS")")" -name QdstrmImporter -type f 2>/dev/null | head -1)
cat > /tmp/rank.sh <<EOF
#!/bin/bash
exec env NO_PROFILER=1 LD_LIBRARY_PATH=$DW timeout 200 $NSYS profile -t cuda,nvtx,osrt --pytorch=autograd-nvtx \
  --sample=none --cpuctxsw=none -o /tmp/ddp_straggler_rank\$RANK -f true python3 $G/ddp.py $O straggler
EOF
chmod +x /tmp/rank.sh
( cd /tmp && PYTHONUNBUFFERED=1 timeout 300 torchrun --nproc_per_node=2 --no-python /tmp/rank.sh ) > $O/torchrun.log 2>&1
for r in 0 1; do
  b=/tmp/ddp_straggler_rank$r
  [ -f $b.nsys-rep ] || LD_LIBRARY_PATH=$DW timeout 200 "$QI" -i $b.qdstrm >> $O/torchrun.log 2>&1
  LD_LIBRARY_PATH=$DW timeout 150 "$NSYS" export --type sqlite -f true -o $b.sqlite $b.nsys-rep >> $O/torchrun.log 2>&1
  ls -la $b.* >> $O/torchrun.log 2>&1
  [ -f $b.sqlite ] && cp $b.sqlite $O/rank$r.sqlite
done
tail -20 $O/torchrun.log
( cd $O && tar czf - . | split -b 15000000 -d - $OUT/ddp_nsys.tgz.part )
ls -la $OUT
