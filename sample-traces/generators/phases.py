"""Captures for issue 21 (host threads and framework phases): one planted cause per scenario, with its twin.

Uses diag.py's harness (same arguments, same outputs: <OUT>/h200_<name>.pt.trace.json.gz and
<OUT>/h200_<name>.kineto.truth.json; under Nsight Systems, NO_PROFILER=1, NVTX `ProfilerStep#N` ranges
and <OUT>/h200_<name>.nsys-<CAPTURE_TAG>.truth.json). Every truth file holds what was planted and the
twin measured in the same process without the problem, so the cost is measured, not assumed.

  compile_recompile                 torch.compile(dynamic=False) fed a new sequence length in 3 of 6 steps
  gil_thread                        a Python thread ("metrics-writer") runs json.dumps of a big dict in a loop
  autograd_backward_heavy           many small layers, eager: backward host work on pt_autograd_0
  autograd_backward_heavy_compiled  the same model under torch.compile (eager twin measured beside it)
  gc_heavy                          cyclic garbage and gc.collect() every step over 500k live objects

usage: python3 phases.py OUTDIR scenario [--gpu N]
"""
import gc, json, os, sys, threading, time

import diag  # parses the same argv; its scenarios only run under its own __main__
from diag import run, timed, dev, MEASURED, ONLY, NSYS

import torch
import torch.nn as nn
import torch.nn.functional as F


PROPOSAL = "category/phase names are what issue 21 asks for; tracehound had no such category when this was captured"


def add_truth(name, extra):
    """Adds extra figures to the truth file diag.run wrote (Kineto or nsys)."""
    suffix = "nsys-" + os.environ.get("CAPTURE_TAG", "") if NSYS else "kineto"
    p = os.path.join(diag.OUT, f"h200_{name}.{suffix}.truth.json")
    if os.path.exists(p):
        t = json.load(open(p))
        t.update(extra)
        json.dump(t, open(p, "w"), indent=1)


def ms(xs):
    return [round(x * 1e3, 3) for x in xs]


def host_steps(fn, n, sync_each=False):
    """perf_counter wall of n calls of fn (the way diag.run measures profiled steps: no sync per step)."""
    out = []
    for _ in range(n):
        s = time.perf_counter()
        fn()
        if sync_each:
            torch.cuda.synchronize()
        out.append(time.perf_counter() - s)
    torch.cuda.synchronize()
    return out


def gpu_ms(fn, n=5):
    """CUDA-event time of n calls of fn, per call (ms)."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return round(a.elapsed_time(b) / n, 3)


def train(model, opt, x):
    loss = model(x).float().square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


# ---------------------------------------------------------------- compile_recompile

class Block(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5), dim=-1) @ v
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def compile_recompile():
    """torch.compile(dynamic=False): every new sequence length recompiles forward and (lazily) backward."""
    import logging
    torch._logging.set_logs(recompiles=True)
    reasons = []

    class H(logging.Handler):
        def emit(self, r):
            if "recompile" in r.name:
                reasons.append(r.getMessage()[:600])
    # the artifact logger does not propagate to "torch": attach to it directly (the captured run attached to
    # "torch" and caught nothing; its truth file has the reasons from the stderr log instead)
    logging.getLogger("torch._dynamo.guards.__recompiles").addHandler(H())
    from torch._dynamo.utils import counters

    eager = nn.Sequential(Block(), Block()).to(dev)
    model = torch.compile(eager, dynamic=False)
    opt = torch.optim.AdamW(eager.parameters(), lr=1e-4, fused=True)
    batch, d = 16, 256
    warm_seq = [128, 128]
    prof_seq = [128, 192, 128, 256, 320, 256]  # new lengths at profiled steps 1, 3, 4
    inputs = {s: torch.randn(batch, s, d, device=dev) for s in set(warm_seq + prof_seq)}
    t = time.perf_counter()
    for s in warm_seq:  # first compile, outside the profiled window
        train(model, opt, inputs[s])
    torch.cuda.synchronize()
    first_compile_s = time.perf_counter() - t
    seqs = iter(prof_seq)
    per_step = []

    def snap():
        return {"frames": dict(counters["frames"]), "stats": dict(counters["stats"]),
                "aot_autograd": dict(counters["aot_autograd"]), "inductor": dict(counters["inductor"])}

    def step():
        s = next(seqs)
        before = snap()
        train(model, opt, inputs[s])
        after = snap()
        diff = {g: {k: v - before[g].get(k, 0) for k, v in after[g].items() if v != before[g].get(k, 0)} for g in after}
        per_step.append({"seq_len": s, "input_shape": [batch, s, d], "counter_deltas": diff})

    n_reasons0 = len(reasons)
    run("compile_recompile", {
        "planted": ["torch_compile_recompilation_on_new_shapes"],
        "issue": 21,
        "expected_top_cause": {"rule": "idle_gaps", "category": "torch_compile", "phase": "recompile", "steps": [1, 3, 4],
                               "also": {"rule": "step_outliers", "steps": [1, 3, 4]}, "proposal": PROPOSAL},
        "compile": {"dynamic": False, "mode": "default", "mark_dynamic": False},
        "profiler": {"record_shapes": True, "with_stack": False,
                     "why_no_stack": "the Python tracer over dynamo/inductor compilation records millions of frames: a trace of hundreds of MB; dynamo_timed spans are record_function ranges and need no stack"},
        "notes": "2 transformer-ish blocks (d=256, LayerNorm, qkv+softmax attention, GELU MLP), batch 16, AdamW fused (eager); "
                 "torch.compile(dynamic=False) compiled for seq 128 in 2 warm-up steps; profiled seq lengths 128,192,128,256,320,256: "
                 "steps 1, 3, 4 see a new length and recompile forward (dynamo+AOT+inductor) and backward (lazily, inside CompiledFunctionBackward)",
    }, step, steps=6, warmup=0, stack=False)
    prof_reasons = reasons[n_reasons0:]
    # twin: the same six shapes again, all compiled now (no recompilation)
    seqs = iter(prof_seq)
    twin_per = []

    def step2():
        s = next(seqs)
        train(model, opt, inputs[s])
    twin = host_steps(step2, 6)
    seqs = iter(prof_seq)
    twin_sync = host_steps(step2, 6, sync_each=True)
    recompiled = [i for i, p in enumerate(per_step) if p["counter_deltas"]["stats"].get("unique_graphs", 0) > 0
                  or p["counter_deltas"]["frames"].get("ok", 0) > 0]
    extra = {
        "first_compile_s": round(first_compile_s, 2),
        "per_step": per_step,
        "recompiled_step_indices": recompiled,
        "input_shapes": [p["input_shape"] for p in per_step],
        "recompile_reasons_logged": prof_reasons,
        "twin": {"what": "the same 6 steps, same shapes, after all shapes were compiled (same process, after the profiled window, no profiler)",
                 "step_wall_ms": ms(twin), "step_wall_synced_ms": ms(twin_sync)},
        "dynamo_counters_end": {g: dict(counters[g]) for g in ("frames", "stats", "aot_autograd", "inductor", "recompiles") if g in counters},
    }
    try:
        extra["compile_times"] = torch._dynamo.utils.compile_times(repr="str", aggregate=True)[:4000]
    except Exception as e:
        extra["compile_times"] = f"unavailable: {e}"
    add_truth("compile_recompile", extra)


# ---------------------------------------------------------------- gil_thread

def set_os_thread_name(name):
    """CPython 3.12 does not give threading.Thread names to the OS thread; profilers read the OS name."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


def gil_mlp():
    return nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.GELU())]).to(dev)


def gil_thread():
    """A metrics thread holds the GIL in json.dumps of a large dict while the training loop runs."""
    torch.set_float32_matmul_precision("highest")
    model = gil_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)
    step = lambda: train(model, opt, x)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    # twin: the same steps with no other thread (same process, before the thread starts)
    twin = host_steps(step, 6)
    twin_sync = host_steps(step, 6, sync_each=True)
    twin_gpu = gpu_ms(step)
    # size the payload so that one json.dumps takes about 10 ms on this host
    n = 2000
    while True:
        payload = {f"metric_{i}": {"step": i, "values": [i * 0.5] * 8, "tag": "x" * 20} for i in range(n)}
        t = time.perf_counter()
        json.dumps(payload)
        dt = time.perf_counter() - t
        if dt > 0.008 or n > 400_000:
            break
        n = int(n * min(8.0, 0.010 / max(dt, 1e-5)))
    stop = threading.Event()
    stats = {"dumps": 0, "dumps_s": 0.0, "chars": 0}

    def writer():
        set_os_thread_name("metrics-writer")
        vals = [0.1 * i for i in range(256)]
        with open("/tmp/metrics.jsonl", "w") as f:
            while not stop.is_set():
                t = time.perf_counter()
                s = json.dumps(payload)  # C encoder: holds the GIL for the whole call
                stats["dumps_s"] += time.perf_counter() - t
                stats["dumps"] += 1
                stats["chars"] += len(s)
                f.write(s[:4096] + "\n")
                stats["mean"] = torch.tensor(vals).mean().item()  # a small CPU torch op per record
    th = threading.Thread(target=writer, name="metrics-writer", daemon=True)
    th.start()
    time.sleep(0.05)
    with_thread_pre = host_steps(step, 2)
    t_run = time.perf_counter()
    d0 = dict(stats)
    run("gil_thread", {
        "planted": ["python_thread_holding_gil"],
        "issue": 21,
        "expected_top_cause": {"rule": "idle_gaps", "category": "gil_contention", "thread_name": "metrics-writer", "proposal": PROPOSAL},
        "thread": {"python_name": "metrics-writer", "os_name_set_with": "prctl(PR_SET_NAME)", "target": "writer",
                   "started": "before the profiler (the Python tracer registers threads that exist at start)"},
        "notes": "4x (Linear(4096,4096)+GELU) fp32 (TF32 off), batch 1024, SGD: ~8-9 ms of GPU a step; a daemon thread runs "
                 "json.dumps of a %d-entry dict in a loop (no sleep), writes 4 KB of it to a file and takes a mean of a "
                 "256-float CPU tensor per record" % n,
    }, step, steps=6, warmup=1, stack=True)
    run_s = time.perf_counter() - t_run
    d1 = dict(stats)
    stop.set()
    th.join(timeout=10)
    add_truth("gil_thread", {
        "payload_entries": n,
        "json_dumps_ms_alone": round(dt * 1e3, 2),
        "twin": {"what": "the same step, same process, before the thread was started",
                 "step_wall_ms": ms(twin), "step_wall_synced_ms": ms(twin_sync), "gpu_ms_per_step_cuda_events": twin_gpu},
        "with_thread_before_profiling_step_wall_ms": ms(with_thread_pre),
        "thread_during_run": {"dumps": d1["dumps"] - d0["dumps"], "dumps_s": round(d1["dumps_s"] - d0["dumps_s"], 3),
                              "run_wall_s": round(run_s, 3),
                              "dumps_ms_mean": round(1e3 * (d1["dumps_s"] - d0["dumps_s"]) / max(1, d1["dumps"] - d0["dumps"]), 2)},
        "switch_interval_s": sys.getswitchinterval(),
    })


# ---------------------------------------------------------------- autograd_backward_heavy

def small_layers(n=32, d=512):
    return nn.Sequential(*[m for _ in range(n) for m in (nn.Linear(d, d), nn.LayerNorm(d), nn.GELU())]).to(dev)


def split_step(model, opt, x):
    with timed("forward"):
        loss = model(x).float().square().mean()
    with timed("zero_grad"):
        opt.zero_grad(set_to_none=True)
    with timed("backward"):
        loss.backward()
    with timed("optimizer"):
        opt.step()


def _phase_means(prefix=""):
    return {prefix + k: round(1e3 * sum(v) / len(v), 3) for k, v in MEASURED.items() if v}


def autograd_backward_heavy():
    """Many small layers, eager: backward's host work runs on the autograd engine thread."""
    torch.set_float32_matmul_precision("high")
    model = small_layers()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(128, 512, device=dev)
    step = lambda: split_step(model, opt, x)
    run("autograd_backward_heavy", {
        "planted": ["backward_host_work_on_autograd_thread"],
        "issue": 21,
        "expected_top_cause": {"rule": "launch_bound", "thread": "pt_autograd_0", "phase": "backward",
                               "not": "Python: built-in method run_backward (the waiting frame)", "proposal": PROPOSAL},
        "notes": "32x (Linear(512,512) + LayerNorm(512) + GELU), batch 128, fp32 TF32, Adam foreach, eager: ~100 forward ops "
                 "and ~300 backward kernels of a few us each; loss.backward() on the main thread waits in run_backward while "
                 "the engine thread pt_autograd_0 runs every backward node",
    }, step, steps=6, warmup=3, stack=True)
    host = _phase_means("host_ms_mean_")
    MEASURED.clear()
    gpu = gpu_ms(lambda: train(model, opt, x), 10)
    add_truth("autograd_backward_heavy", {"phase_host_ms_mean_profiled": host, "gpu_ms_per_step_cuda_events_unprofiled": gpu,
                                          "unprofiled_step_wall_ms": ms(host_steps(lambda: train(model, opt, x), 6, sync_each=True))})


def autograd_backward_heavy_compiled():
    """The same model under torch.compile: one CompiledFunctionBackward node on pt_autograd_0."""
    torch.set_float32_matmul_precision("high")
    eager = small_layers()
    opt = torch.optim.Adam(eager.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(128, 512, device=dev)
    # eager twin first, same process
    for _ in range(3):
        split_step(eager, opt, x)
    torch.cuda.synchronize()
    MEASURED.clear()
    eager_wall = host_steps(lambda: split_step(eager, opt, x), 6, sync_each=True)
    eager_phase = _phase_means("host_ms_mean_")
    MEASURED.clear()
    eager_gpu = gpu_ms(lambda: train(eager, opt, x), 10)
    model = torch.compile(eager)
    t = time.perf_counter()
    for _ in range(3):
        split_step(model, opt, x)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t
    MEASURED.clear()
    step = lambda: split_step(model, opt, x)
    run("autograd_backward_heavy_compiled", {
        "planted": ["backward_host_work_on_autograd_thread_compiled"],
        "issue": 21,
        # captured first as a clean twin (expected None); on the H200 compile left it host-bound (see the truth file)
        "expected_top_cause": {"rule": "launch_bound", "thread": "pt_autograd_0", "phase": "backward", "proposal": PROPOSAL},
        "notes": "twin of autograd_backward_heavy: the same 32-layer model under torch.compile (default mode), "
                 "compiled in 3 warm-up steps outside the profiled window; backward is one CompiledFunctionBackward node "
                 "on pt_autograd_0; Adam foreach stays eager",
    }, step, steps=6, warmup=1, stack=True)
    host = _phase_means("host_ms_mean_")
    MEASURED.clear()
    add_truth("autograd_backward_heavy_compiled", {
        "compile_s_warmup": round(compile_s, 2),
        "phase_host_ms_mean_profiled": host,
        "compiled_unprofiled": {"step_wall_synced_ms": ms(host_steps(step, 6, sync_each=True)),
                                "gpu_ms_per_step_cuda_events": gpu_ms(lambda: train(model, opt, x), 10)},
        "eager_twin_unprofiled": {"step_wall_synced_ms": ms(eager_wall), "phase_host_ms_mean": eager_phase,
                                  "gpu_ms_per_step_cuda_events": eager_gpu},
    })


# ---------------------------------------------------------------- gc_heavy

GC_LOG = []


def _gc_cb(phase, info):
    if phase == "start":
        _gc_cb.t = time.perf_counter()
    else:
        GC_LOG.append((info["generation"], time.perf_counter() - _gc_cb.t, info.get("collected", 0)))


def make_cyclic_garbage(n=20_000):
    """A ring of n dicts (a linked structure with a back reference): garbage only the cycle collector frees.
    Built with a comprehension and item assignments, so the Python tracer records no call per object."""
    nodes = [{"i": i, "payload": [i]} for i in range(n)]
    for a, b in zip(nodes, nodes[1:]):
        a["next"] = b
    nodes[-1]["next"] = nodes[0]


def gc_heavy():
    """Cyclic garbage every step and gc.collect() each step over 500k long-lived objects."""
    torch.set_float32_matmul_precision("highest")
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.ReLU())]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)
    live = [{"id": i, "path": f"/data/{i}.bin", "label": [i % 10]} for i in range(500_000)]  # dataset index
    plain = lambda: train(model, opt, x)
    for _ in range(3):
        plain()
    torch.cuda.synchronize()
    gc.callbacks.append(_gc_cb)
    GC_LOG.clear()
    twin = host_steps(plain, 6)
    twin_sync = host_steps(plain, 6, sync_each=True)
    twin_gc = list(GC_LOG)

    marks = []  # len(GC_LOG) at the end of each step: the profile's export makes garbage too

    def step():
        train(model, opt, x)
        make_cyclic_garbage()
        with timed("gc_collect"):
            gc.collect()
        marks.append(len(GC_LOG))
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    GC_LOG.clear()
    MEASURED.clear()
    marks.clear()
    run("gc_heavy", {
        "planted": ["gc_collect_every_step_over_many_live_objects"],
        "issue": 21,
        "expected_top_cause": {"rule": "idle_gaps", "category": "garbage_collection", "leaf_any": ["collect", "gc"], "proposal": PROPOSAL},
        "notes": "4x (Linear(4096,4096)+ReLU) fp32, batch 1024, SGD (~8 ms GPU a step); 500k live dicts (a dataset index) "
                 "in the process; each step builds a 20k-dict ring (cyclic garbage) and calls gc.collect() (full collection). "
                 "A gc.callbacks hook (_gc_cb) times every collection, automatic ones too: its frames are in the trace",
    }, step, steps=6, warmup=0, stack=True)
    prof_gc = GC_LOG[:marks[-1]] if marks else []
    per_step_gc = [round(1e3 * sum(d for _, d, _ in GC_LOG[a:b]), 3) for a, b in zip([0] + marks[:-1], marks)]
    gc.callbacks.remove(_gc_cb)
    add_truth("gc_heavy", {
        "live_objects_tracked": len(gc.get_objects()),
        "gc_collections_profiled": [{"generation": g, "ms": round(d * 1e3, 3), "collected": c} for g, d, c in prof_gc],
        "gc_ms_total_profiled": round(1e3 * sum(d for _, d, _ in prof_gc), 2),
        "gc_ms_per_step_profiled": per_step_gc,
        "gc_ms_mean_per_step_profiled": round(1e3 * sum(d for _, d, _ in prof_gc) / 6, 2),
        "twin": {"what": "the same training step, same process, no garbage and no gc.collect (before planting)",
                 "step_wall_ms": ms(twin), "step_wall_synced_ms": ms(twin_sync),
                 "gc_collections": [{"generation": g, "ms": round(d * 1e3, 3)} for g, d, _ in twin_gc]},
    })


ALL = [compile_recompile, gil_thread, autograd_backward_heavy, autograd_backward_heavy_compiled, gc_heavy]

if __name__ == "__main__":
    diag.main(ALL)
