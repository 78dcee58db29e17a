#!/bin/bash
# On the GPU machine (device tool): both fragmentation captures, results into $OUT.
set -u
cd "$(dirname "$0")"
nvidia-smi -L
PYTHONUNBUFFERED=1 timeout 240 python3 alloc_frag.py "$OUT" h200_alloc_fragmentation
PYTHONUNBUFFERED=1 timeout 240 python3 alloc_frag.py "$OUT" h200_alloc_expandable_segments --expandable
ls -la "$OUT"
