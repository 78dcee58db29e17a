"""Scores tracehound on the blind set of issue 39 (blind.py's captures): for each planted mistake,
whether the first finding states a cause the truth file lists as wrong, whether a medium or high
finding names the planted operator and the Python function holding the planted lines, and its
impact per step against the cost the twin measured (CUDA events, outside the profiler) and against
the profiled twin's step time (the same profiler overhead as the capture).

usage: python3 blind_score.py TRACEHOUND_BINARY TRACE_DIR [TRUTH_DIR=TRACE_DIR]
(in this repository: sample-traces/kineto and sample-traces/reference)
Prints a Markdown table; exit status 0.
"""
import ast, gzip, json, os, subprocess, sys

BIN, DIR = sys.argv[1], sys.argv[2]
TRUTH = sys.argv[3] if len(sys.argv) > 3 else DIR
GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "blind.py")
tree = ast.parse(open(GEN).read())
funcs = [(n.lineno, max(getattr(c, "end_lineno", n.lineno) for c in ast.walk(n) if hasattr(c, "lineno")), n.name)
         for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def frame_of(line):
    """Kineto names a Python frame after its function's first line: the innermost function holding `line`."""
    inner = [f for f in funcs if f[0] <= line <= f[1]]
    a, _, name = max(inner, key=lambda f: f[0])
    return f"blind.py({a}): {name}"


def steps_of(path):
    """Profiled steps and their mean length in ms: the span of the steps' ranges on the GPU
    timeline (the host's run ahead of the GPU when it is the faster), else on the host."""
    ev = json.load(gzip.open(path))["traceEvents"]

    def ranges(cat):
        return {e["name"]: (e["ts"], e["dur"]) for e in ev if e.get("ph") == "X" and e.get("cat") == cat
                and e.get("name", "").startswith("ProfilerStep#")}
    host, gpu = ranges("user_annotation"), ranges("gpu_user_annotation")
    r = gpu if len(gpu) == len(host) else host
    return len(host), (max(a + d for a, d in r.values()) - min(a for a, _ in r.values())) / 1e3 / max(1, len(r))


rows = []
for f in sorted(os.listdir(TRUTH)):
    if not f.endswith(".kineto.truth.json") or "_twin" in f:
        continue
    truth = json.load(open(os.path.join(TRUTH, f)))
    if not truth.get("blind_set"):
        continue
    name = truth["scenario"]
    # The GPU's prefix (h200_, h100_) as the truth file has it.
    gpu = f.split("_blind_")[0]
    trace = os.path.join(DIR, f"{gpu}_{name}.pt.trace.json.gz")
    twin = os.path.join(DIR, f"{gpu}_{name}_twin.pt.trace.json.gz")
    doc = json.loads(subprocess.run([BIN, "analyze", "--format", "json", trace], capture_output=True, text=True).stdout)
    findings = doc["traces"][0]["findings"]
    n_steps, step_ms = steps_of(trace)
    _, twin_step_ms = steps_of(twin)
    frames = {frame_of(l) for l in truth["planted_source"]["lines"]}
    ops = truth["expected"].get("ops_any", []) + truth["expected"].get("kernels_any", [])
    planted = truth["cost"]["planted_ms_per_step"]
    profiled = step_ms - twin_step_ms

    # A capture without Python stacks (truth "with_stack": false) has no frame to name: the operator must do.
    stacks = truth.get("with_stack", True)

    def names_it(x):
        text = json.dumps(x)
        return (not stacks or any(fr in text for fr in frames)) and (any(o in text for o in ops) or "attention" in text)

    hit = next((x for x in findings if x["severity"] in ("medium", "high") and names_it(x)), None)
    first = findings[0] if findings else None
    wrong = [w for w in truth.get("wrong_causes", []) if first and (
        # Launch-bound is wrong where the truth says so and the finding prescribes CUDA graphs.
        (first["rule"] == "launch_bound" and w.startswith("launch-bound")
         and "Replay the step as a CUDA graph" in json.dumps(first["advice"])) or
        (first["rule"] == "roofline" and "small shapes" in json.dumps(first["advice"]) and w.startswith("small shapes")))]
    per_step = hit["impact_ns"] / 1e6 / n_steps if hit else None
    rows.append((name, first["rule"] if first else "-", "yes" if wrong else "no",
                 f"{hit['rule']} ({hit['severity']})" if hit else "none",
                 f"{per_step:.2f}" if per_step is not None else "-", f"{planted:.2f}",
                 f"{100 * (per_step / planted - 1):+.0f}%" if per_step is not None else "-",
                 f"{profiled:.2f}", f"{100 * (per_step / profiled - 1):+.0f}%" if per_step is not None and profiled > 0 else "-"))
print("| scenario | first finding | first states a wrong cause | medium/high finding naming op + frame | impact ms/step | twin-measured ms/step (unprofiled) | error | profiled twin difference ms/step | error |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
