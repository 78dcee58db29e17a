#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): phases.py's captures (issue 21), each scenario in a
# fresh process, plus the Nsight Systems twin of gil_thread (`gil_thread_nsys`: -t cuda,nvtx,osrt, no
# sampling, exported to SQLite, gzipped). Arguments: scenarios (default: all). Environment: O (work dir,
# default /tmp/cap2), DEADLINE (epoch seconds no scenario may run past), NOPACK=1 to leave packing to the
# caller (captures2.sh); otherwise results are packed into $OUT as phases.tgz.partNN. The nsys twin needs
# libdw1 and libelf1 .deb files in $G/libs or <repo>/.libs (see the shared generators/README.md).
set -u
G=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$G/../.." 2>/dev/null && pwd)
O=${O:-/tmp/cap2}; mkdir -p $O/k $O/ns /tmp/dw
DEADLINE=${DEADLINE:-$(( $(date +%s) + 540 ))}
left() { echo $(( DEADLINE - $(date +%s) )); }
one() {  # one SCENARIO TIMEOUT
  local t=$2 l; l=$(left); [ $l -lt $t ] && t=$l
  if [ $t -lt 25 ]; then echo "$1: SKIPPED (deadline, ${l}s left)"; return; fi
  echo "$1: start $(date +%T), timeout ${t}s"
  PYTHONUNBUFFERED=1 timeout $t python3 "$G/phases.py" $O/k "$1" --gpu 0 > $O/k/$1.log 2>&1; echo "$1: rc=$? end $(date +%T)"
  grep -v -i warn $O/k/$1.log | tail -4
}
nsys_gil() {
  for f in "$G"/libs/*.deb "$R"/.libs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/dw; done
  local DW=/tmp/dw/usr/lib/x86_64-linux-gnu s=gil_thread tag=osrt b=/tmp/gil_thread.osrt t
  local NSYS; NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
  [ -z "$NSYS" ] && { echo "gil_thread_nsys: SKIPPED (no nsys)"; return; }
  local QI; QI=$(find "$(dirname "$(dirname "$NSYS")")" -name QdstrmImporter -type f 2>/dev/null | head -1)
  "$NSYS" --version; t=$(( $(left) - 150 )); [ $t -gt 170 ] && t=170
  [ $t -lt 60 ] && { echo "gil_thread_nsys: SKIPPED (deadline)"; return; }
  echo "gil_thread_nsys: start $(date +%T) ($NSYS, importer $QI)"
  ( cd /tmp && CAPTURE_TAG=$tag NO_PROFILER=1 PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$DW timeout $t "$NSYS" profile \
      -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -o $b -f true python3 "$G/phases.py" $O/ns $s --gpu 0 ) > $O/ns/$s.$tag.log 2>&1
  echo "gil_thread_nsys: profile rc=$? $(date +%T)"; ls -la $b.* 2>&1
  [ -f $b.nsys-rep ] || LD_LIBRARY_PATH=$DW timeout 120 "$QI" -i $b.qdstrm >> $O/ns/$s.$tag.log 2>&1
  LD_LIBRARY_PATH=$DW timeout 100 "$NSYS" export --type sqlite -f true -o $b.sqlite $b.nsys-rep >> $O/ns/$s.$tag.log 2>&1
  echo "gil_thread_nsys: export rc=$? $(date +%T)"; ls -la $b.* 2>&1
  [ -f $b.sqlite ] && gzip -6c $b.sqlite > $O/ns/h200_${s}_$tag.sqlite.gz
  local z=$O/ns/h200_${s}_$tag.sqlite.gz
  if [ -f $z ] && [ $(stat -c %s $z) -gt 40000000 ]; then echo "gil_thread_nsys: export too big to bring back: $(stat -c %s $z) bytes gz"; rm -f $z; fi
  rm -f $b.qdstrm $b.nsys-rep $b.sqlite
  tail -5 $O/ns/$s.$tag.log
}
for s in ${@:-compile_recompile gil_thread autograd_backward_heavy gc_heavy autograd_backward_heavy_compiled gil_thread_nsys}; do
  case $s in
    gil_thread_nsys) nsys_gil ;;
    compile_recompile|autograd_backward_heavy_compiled) one $s 150 ;;
    *) one $s 75 ;;
  esac
done
if [ -z "${NOPACK:-}" ]; then ( cd $O && tar czf - . | split -b 15000000 -d - $OUT/phases.tgz.part ); ls -la $OUT; fi
