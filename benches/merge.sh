#!/usr/bin/env bash
# The reduce of a job analysis at scale: `tracehound merge` over N rank summaries (default
# 1,000). The summaries are the real ones of the shared 8-rank DLRM job (or a shipped 2-rank
# job without ../shared), repeated with fresh rank numbers and sources, so each carries a real
# collective table and real findings.
#   benches/merge.sh [N]        (needs a release build: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
BIN="${CARGO_TARGET_DIR:-target}/release/tracehound"
JOB=../shared/sample-traces/kineto-jobs/dlrm_v100_8ranks
[ -d "$JOB" ] || JOB=sample-traces/kineto-jobs/h200_ddp_straggler
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/real" "$WORK/job"
k=0
for t in "$JOB"/*; do
  "$BIN" analyze "$t" --rank-summary "$WORK/real/$k.json" > /dev/null
  k=$((k + 1))
done
python3 - "$WORK" "$N" <<'PY'
import json, os, sys
work, n = sys.argv[1], int(sys.argv[2])
real = [json.load(open(os.path.join(work, "real", f))) for f in sorted(os.listdir(os.path.join(work, "real")))]
for r in range(n):
    doc = real[r % len(real)]
    doc["summary"]["rank"] = r
    doc["summary"]["source"] = f"/job/rank{r}.pt.trace.json.gz"
    with open(os.path.join(work, "job", f"rank{r:05}.json"), "w") as f:
        json.dump(doc, f)
PY
du -sh "$WORK/job" | awk -v n="$N" '{print n " summaries, " $1}'
for i in 1 2 3 4 5; do
  /usr/bin/time -f "%e s, %M KB" "$BIN" merge "$WORK/job" --format json > /dev/null
done 2>&1 | sort -g | awk 'NR == 3 { print "merge (median of 5): " $0 }'
