"""Runs HolisticTraceAnalysis on one trace the way a user triaging it would: load the trace,
then the temporal breakdown and the idle-time breakdown (the analyses closest to tracehound's
idle-gap rule). Used by compare_hta.sh; prints HTA's idle share so both tools can be checked to
agree on the numbers they share."""
import os, shutil, sys, tempfile, time

from hta.trace_analysis import TraceAnalysis

trace = sys.argv[1]
# HTA reads a directory of rank traces.
d = tempfile.mkdtemp(prefix="hta-")
name = os.path.basename(trace)
if not name.endswith((".json", ".json.gz")):
    name += ".json.gz" if trace.endswith(".gz") else ".json"
os.symlink(os.path.abspath(trace), os.path.join(d, name))
t0 = time.time()
a = TraceAnalysis(trace_dir=d)
t1 = time.time()
tb = a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(visualize=False)
t2 = time.time()
print(f"hta load {t1 - t0:.2f} s, analyses {t2 - t1:.2f} s")
print(tb.to_string())
shutil.rmtree(d, ignore_errors=True)
