#!/usr/bin/env bash
# The Python package against the CLI on the same trace: `tracehound.load` (read + analyse, in
# process) against `tracehound analyze --format json` (read + analyse + print, a new process),
# median of RUNS each; then the map throughput of tracehound.ray.analyze_job with 1 and 2 Ray
# workers on a 64-rank job from the scale generator.
#   PYTHON=.venv/bin/python benches/python.sh [TRACE]
# Needs a release CLI and developer tool (cargo build --release: both are default members) and
# the package built with --release.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
BIN="${CARGO_TARGET_DIR:-target}/release/tracehound"
DEV="${CARGO_TARGET_DIR:-target}/release/tracehound-dev"
TRACE="${1:-../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz}"
RUNS="${RUNS:-5}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" - "$BIN" "$TRACE" "$RUNS" "$WORK" <<'PY'
import gzip, os, shutil, statistics, subprocess, sys, time
import tracehound
bin_, trace, runs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
plain = os.path.join(work, "plain.pt.trace.json")
with gzip.open(trace) as src, open(plain, "wb") as dst:
    shutil.copyfileobj(src, dst)
for path in [trace, plain]:
    cli, py = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([bin_, "analyze", "--format", "json", path], check=True, stdout=subprocess.DEVNULL)
        cli.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tracehound.load(path)
        py.append(time.perf_counter() - t0)
    c, p = statistics.median(cli), statistics.median(py)
    print(f"{os.path.basename(path)} ({os.path.getsize(path) / 1e6:.0f} MB on disk): CLI analyze {c:.3f} s, tracehound.load {p:.3f} s ({100 * (p / c - 1):+.0f}%)")
PY
"$DEV" scale sample-traces/kineto-jobs/h200_ddp_exposed/rank0.pt.trace.json.gz "$WORK/job64" --size-mb 3 --ranks 64 --gzip > /dev/null
for cpus in 1 2; do
  "$PY" - "$WORK/job64" "$cpus" <<'PY'
import sys, time, ray, tracehound.ray
job, cpus = sys.argv[1], int(sys.argv[2])
ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
tracehound.ray.analyze_job(job)  # warm the workers
t0 = time.perf_counter()
tracehound.ray.analyze_job(job)
dt = time.perf_counter() - t0
mb = sum(__import__("os").path.getsize(f"{job}/{f}") for f in __import__("os").listdir(job)) / 1e6
print(f"ray, {cpus} worker(s): 64 ranks ({mb:.0f} MB gzip) in {dt:.2f} s: {64 / dt:.1f} ranks/s")
ray.shutdown()
PY
done
