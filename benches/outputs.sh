#!/usr/bin/env bash
# Writes what a tracehound binary prints for every sample trace into a folder, so two builds
# can be compared byte for byte (a refactoring must not change output):
#
#   benches/outputs.sh BIN OUTDIR
#   benches/same_output.sh BASE_REV      # builds BASE_REV and this tree, runs this on both, diffs
#
# Each trace under sample-traces/ and ../shared/sample-traces/ (kineto, nsys, dmon, smi-xml,
# and every job folder under kineto-jobs/) is analysed in every format (json, table, md) and
# reported as HTML and JUnit; two pairs of captures and two jobs are diffed; stdout, stderr
# and the exit code are kept. Paths are relative to
# the repository root, so outputs of two checkouts compare.
set -uo pipefail
BIN="$(realpath "$1")"
OUT="$(realpath -m "$2")"
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
run() { # name, then the command's arguments
    local name="$1"
    shift
    "$BIN" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    echo $? > "$OUT/$name.rc"
}
for root in sample-traces ../shared/sample-traces; do
    [ -d "$root" ] || continue
    tag="$(echo "$root" | tr -c 'a-zA-Z0-9\n' '_')"
    for f in "$root"/kineto/* "$root"/nsys/* "$root"/dmon/* "$root"/smi-xml/* "$root"/kineto-jobs/*/*; do
        [ -f "$f" ] || continue
        n="$tag.$(basename "$(dirname "$f")").$(basename "$f")"
        for fmt in json table md; do run "$n.analyze.$fmt" analyze --format "$fmt" "$f"; done
        case "$f" in
        */kineto/* | */nsys/*)
            run "$n.report.html" report "$f" -o "$OUT/$n.html"
            run "$n.report.xml" report "$f" -o "$OUT/$n.xml"
            run "$n.report.mdfile" report "$f" -o "$OUT/$n.md"
            ;;
        esac
    done
    for d in "$root"/kineto-jobs/*/; do
        [ -d "$d" ] || continue
        n="$tag.job.$(basename "$d")"
        for fmt in json table md; do run "$n.analyze.$fmt" analyze --format "$fmt" "$d"; done
    done
done
# A trace with the nvidia-smi logs captured beside it.
s=../shared/sample-traces
if [ -f "$s/kineto/h200_gpt_train_gpu_bound_clean.pt.trace.json.gz" ]; then
    run attach.analyze.json analyze --format json "$s/kineto/h200_gpt_train_gpu_bound_clean.pt.trace.json.gz" \
        "$s/dmon/h200_dmon_s_pucvmet_o_DT_gpu_bound.log" sample-traces/smi-xml/h200_rules_machine.smi.xml
fi
# diff of two captures and of two jobs, in every format.
k=sample-traces/kineto
j=sample-traces/kineto-jobs
for fmt in table md json html; do
    run "diff.resnet.$fmt" diff --format "$fmt" "$k/h200_resnet_unpinned_sync.pt.trace.json.gz" "$k/h200_resnet_pinned_amp_clean.pt.trace.json.gz"
    run "diff.alloc.$fmt" diff --format "$fmt" "$k/h200_alloc_fragmentation.pt.trace.json.gz" "$k/h200_alloc_expandable_segments.pt.trace.json.gz"
    run "diff.jobs.$fmt" diff --format "$fmt" "$j/h200_ddp_straggler" "$j/h200_ddp_exposed"
done
# The report files name their own path; keep that out of the comparison.
sed -i "s#$OUT#OUT#g" "$OUT"/*.html "$OUT"/*.xml "$OUT"/*.md "$OUT"/*.out "$OUT"/*.err 2> /dev/null
echo "wrote $(ls "$OUT" | wc -l) files to $OUT"
