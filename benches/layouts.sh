#!/usr/bin/env bash
# The same events in every JSON layout, plain and gzip, beside torch's own (issue 42): a
# regression on any layout shows here. From one trace (default: the shared set's 121 MB
# h200_gpt_train_big), a script writes it as Kineto wrote it, as json.dump (one line),
# with separators=(',', ':'), with indent=1, and one event per line; each is analysed RUNS
# times (each run after reading the file into the page cache) and the medians of wall time,
# CPU time and peak RSS are printed with their ratio to torch's layout. The findings of
# every layout must be byte-identical to torch's layout's (the file name aside).
#
#   benches/layouts.sh [TRACE.json.gz]          RUNS=5 by default; WORK=/tmp/... for the files
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE="${1:-../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz}"
RUNS="${RUNS:-5}"
WORK="${WORK:-${TMPDIR:-/tmp}/tracehound-layouts}"
mkdir -p "$WORK"
cargo build --release -q
BIN="${CARGO_TARGET_DIR:-target}/release/tracehound"
python3 - "$TRACE" "$WORK" <<'PY'
import gzip, json, sys
src, work = sys.argv[1], sys.argv[2]
raw = gzip.open(src).read() if src.endswith(".gz") else open(src, "rb").read()
open(f"{work}/kineto.json", "wb").write(raw)
d = json.loads(raw)
json.dump(d, open(f"{work}/dump.json", "w"))
json.dump(d, open(f"{work}/compact.json", "w"), separators=(",", ":"))
json.dump(d, open(f"{work}/indent1.json", "w"), indent=1)
with open(f"{work}/perline.json", "w") as f:
    f.write('{"traceEvents": [\n')
    ev = d["traceEvents"]
    f.write(",\n".join(json.dumps(e) for e in ev))
    f.write("\n]")
    for k, v in d.items():
        if k != "traceEvents":
            f.write(f", {json.dumps(k)}: {json.dumps(v)}")
    f.write("}\n")
PY
for l in kineto dump compact indent1 perline; do gzip -6 -kf "$WORK/$l.json"; done
printf '%-16s %9s %9s %9s %7s %7s %7s %s\n' layout wall_s cpu_s rss_mb wall_x cpu_x rss_x findings
declare -A base
for gz in "" ".gz"; do
    for l in kineto dump compact indent1 perline; do
        f="$WORK/$l.json$gz"
        rows=()
        for _ in $(seq "$RUNS"); do
            cat "$f" > /dev/null
            /usr/bin/time -f "%e %U %S %M" "$BIN" analyze --format json "$f" > "$WORK/$l$gz.out" 2> "$WORK/$l$gz.time"
            rows+=("$(tail -1 "$WORK/$l$gz.time")")
        done
        read -r wall cpu rss < <(printf '%s\n' "${rows[@]}" | python3 -c '
import sys, statistics as st
r = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(st.median(x[0] for x in r), st.median(x[1] + x[2] for x in r), st.median(x[3] for x in r) / 1024)')
        if [ "$l" = kineto ]; then base[w$gz]=$wall; base[c$gz]=$cpu; base[r$gz]=$rss; fi
        same=$(cmp -s <(sed "s#$l.json$gz#X#g" "$WORK/$l$gz.out") <(sed "s#kineto.json$gz#X#g" "$WORK/kineto$gz.out") && echo same || echo DIFFER)
        python3 -c "
w,c,r,bw,bc,br='$wall','$cpu','$rss','${base[w$gz]}','${base[c$gz]}','${base[r$gz]}'
w,c,r,bw,bc,br=map(float,(w,c,r,bw,bc,br))
print('%-16s %9.3f %9.3f %9.1f %7.2f %7.2f %7.2f $same' % ('$l$gz', w, c, r, w/bw, c/bc, r/br))"
    done
done
