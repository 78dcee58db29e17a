"""Captures for issue 22 (memory-bound kernels against the HBM roof, and fusion): planted cases and clean twins.

Uses diag.py's harness (same arguments, same outputs: <OUT>/h200_<name>.pt.trace.json.gz and
<OUT>/h200_<name>.kineto.truth.json). Step and kernel times in the truth files come from CUDA events
outside the profiler (and, where said, inside it), so the tests compare tracehound with figures it did
not compute.

  unfused_norm_gelu     2 transformer MLP blocks, fp32 + TF32 GEMMs, LayerNorm and tanh-GELU written as
                        chains of elementwise torch ops (training step)
  fused_norm_gelu       the same blocks with F.layer_norm / F.gelu(approximate="tanh")
  compiled_fused_clean  the unfused blocks under torch.compile: Triton fused kernels
  stream_roof           in-place elementwise ops streaming two 4 GiB fp32 tensors (at the HBM roof)
  gemm_bound_clean      bf16 8192^3 matmuls and nothing else

usage: python3 membound.py OUTDIR scenario [--gpu N]
"""
import json, os, statistics, sys, time

import diag
from diag import run, dev, MEASURED

import torch
import torch.nn as nn
import torch.nn.functional as F

PROPOSAL = "rule names are what issue 22 asks for; tracehound had no bytes model for non-matrix operators when this was captured"
H200_HBM_TBPS = 4.8  # NVIDIA's nominal figure for the H200 (HBM3e)


def add_truth(name, extra):
    p = os.path.join(diag.OUT, f"h200_{name}.kineto.truth.json")
    if os.path.exists(p):
        t = json.load(open(p))
        t.update(extra)
        json.dump(t, open(p, "w"), indent=1)


def event_times(fn, n=10, warm=3):
    """CUDA-event time of each of n calls of fn, in ms, after warm calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [round(a.elapsed_time(b), 4) for a, b in ev]


def summary(xs):
    return {"per_step_ms": xs, "median_ms": round(statistics.median(xs), 4), "min_ms": min(xs)}


# ---------------------------------------------------------------- the MLP block

class LayerNormUnfused(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d)), eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        xc = x - mu
        var = xc.pow(2).mean(-1, keepdim=True)
        rstd = torch.rsqrt(var + self.eps)
        return xc * rstd * self.weight + self.bias  # mean, sub, pow, mean, add, rsqrt, mul, mul, add


def gelu_tanh_unfused(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))


class MLPBlock(nn.Module):
    def __init__(self, d=1024, fused=False):
        super().__init__()
        self.fused = fused
        self.norm = nn.LayerNorm(d) if fused else LayerNormUnfused(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.fc1(self.norm(x))
        h = F.gelu(h, approximate="tanh") if self.fused else gelu_tanh_unfused(h)
        return x + self.fc2(h)


TOKENS, D, BLOCKS = 8192, 1024, 2


def block_model(fused):
    torch.manual_seed(0)
    return nn.Sequential(*[MLPBlock(D, fused) for _ in range(BLOCKS)]).to(dev)


def make_step(model, x):
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def measure_variants(names):
    """Both eager variants (and the compiled one when asked), timed with CUDA events in this process."""
    x = torch.randn(TOKENS, D, device=dev)
    out, steps = {}, {}
    for n in names:
        if n == "compiled":
            m = torch.compile(block_model(False))
            t = time.perf_counter()
            s = make_step(m, x)
            for _ in range(3):
                s()
            torch.cuda.synchronize()
            out["compile_s_warmup"] = round(time.perf_counter() - t, 2)
        else:
            s = make_step(block_model(n == "fused"), x)
        steps[n] = s
        out[n] = summary(event_times(s))
    if "unfused" in out and "fused" in out:
        out["fused_over_unfused"] = round(out["fused"]["median_ms"] / out["unfused"]["median_ms"], 3)
        out["saving_ms_per_step_by_fusion"] = round(out["unfused"]["median_ms"] - out["fused"]["median_ms"], 4)
    return out, steps


BLOCK_NOTES = ("2 blocks of x + fc2(gelu(fc1(norm(x)))), d=1024, hidden 4096, 8192 tokens, fp32 with "
               "set_float32_matmul_precision('high') (TF32 GEMMs), training step: forward, square().mean() loss, "
               "backward, SGD (foreach)")


def unfused_norm_gelu():
    torch.set_float32_matmul_precision("high")
    meas, steps = measure_variants(["unfused", "fused"])
    run("unfused_norm_gelu", {
        "planted": ["layernorm_and_gelu_as_elementwise_chains"],
        "issue": 22,
        "expected_top_cause": {"rule": "fusion_opportunities", "chains": ["LayerNormUnfused.forward", "gelu_tanh_unfused"],
                               "saving_ms_per_step_close_to": meas.get("saving_ms_per_step_by_fusion"), "proposal": PROPOSAL},
        "notes": BLOCK_NOTES + "; LayerNorm = mean, sub, pow, mean, add, rsqrt, mul, mul, add; GELU = tanh formula "
                 "(pow, mul, add, mul, tanh, add, mul, mul)",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }, steps["unfused"], steps=5, warmup=2, stack=True)
    add_truth("unfused_norm_gelu", {"step_time_cuda_events_unprofiled": meas,
                                    "what": "both variants measured in this process, 3 warm-up + 10 timed steps each"})


def fused_norm_gelu():
    torch.set_float32_matmul_precision("high")
    meas, steps = measure_variants(["unfused", "fused"])
    run("fused_norm_gelu", {
        "planted": [],
        "issue": 22,
        "expected_top_cause": None,
        "notes": "clean twin of unfused_norm_gelu: " + BLOCK_NOTES + "; nn.LayerNorm (F.layer_norm) and F.gelu(approximate='tanh')",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }, steps["fused"], steps=5, warmup=2, stack=True)
    add_truth("fused_norm_gelu", {"step_time_cuda_events_unprofiled": meas,
                                  "what": "both variants measured in this process, 3 warm-up + 10 timed steps each"})


def compiled_fused_clean():
    torch.set_float32_matmul_precision("high")
    meas, steps = measure_variants(["unfused", "fused", "compiled"])
    run("compiled_fused_clean", {
        "planted": [],
        "issue": 22,
        "expected_top_cause": None,
        "must_not_flag": "Triton fused kernels (triton_*) as unfused chains",
        "notes": "the unfused blocks of unfused_norm_gelu under torch.compile (default mode), compiled in 3 warm-up steps "
                 "outside the profiled window: inductor fuses the norm and GELU chains into Triton kernels, GEMMs stay cuBLAS. "
                 + BLOCK_NOTES,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }, steps["compiled"], steps=5, warmup=1, stack=True)
    add_truth("compiled_fused_clean", {"step_time_cuda_events_unprofiled": meas,
                                       "what": "unfused eager, fused eager and compiled measured in this process, 10 timed steps each"})


# ---------------------------------------------------------------- stream_roof

def stream_roof():
    n = 1 << 30  # 4 GiB of fp32 each
    x = torch.empty(n, device=dev).fill_(1.0)
    y = torch.empty(n, device=dev).fill_(0.5)
    nb = n * 4
    ops = {
        "x.mul_(1.0001)": (lambda: x.mul_(1.0001), 2 * nb),
        "x.add_(y)": (lambda: x.add_(y), 3 * nb),
        "y.mul_(0.9999)": (lambda: y.mul_(0.9999), 2 * nb),
        "y.add_(x, alpha=-1e-4)": (lambda: y.add_(x, alpha=-1e-4), 3 * nb),
    }
    per_op = {}
    for k, (f, b) in ops.items():
        t = event_times(f, n=10, warm=2)
        med = statistics.median(t)
        per_op[k] = {"bytes_moved": b, "bytes_read": b - nb, "bytes_written": nb, "ms": t, "median_ms": round(med, 4),
                     "achieved_TBps": round(b / (med * 1e-3) / 1e12, 3)}
    inside = {k: [] for k in ops}

    def step():
        for k, (f, b) in ops.items():
            a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            e.record()
            inside[k].append((a, e))
    whole = event_times(lambda: [f() for f, _ in ops.values()], n=5, warm=1)
    bytes_step = sum(b for _, b in ops.values())
    run("stream_roof", {
        "planted": [],
        "issue": 22,
        "expected_top_cause": None,
        "expected_verdict": {"bound": "memory", "achieved_TBps_within_10pct_of": "per_op achieved_TBps (CUDA events)",
                             "proposal": PROPOSAL},
        "notes": "two 2^30-element fp32 tensors (4 GiB each) on the GPU; a step is x.mul_(1.0001), x.add_(y), y.mul_(0.9999), "
                 "y.add_(x, alpha=-1e-4): 4 kernels, 40 GiB moved; nothing to fuse usefully across tensors the roof "
                 "already bounds, no host gaps (CUDA events recorded around each op inside the profiled steps too)",
        "hbm_nominal_TBps": H200_HBM_TBPS,
    }, step, steps=4, warmup=1, stack=True)
    torch.cuda.synchronize()
    ins = {}
    for k, pairs in inside.items():
        t = [round(a.elapsed_time(e), 4) for a, e in pairs[-4:]]
        med = statistics.median(t)
        ins[k] = {"ms": t, "median_ms": round(med, 4), "achieved_TBps": round(ops[k][1] / (med * 1e-3) / 1e12, 3)}
    wmed = statistics.median(whole)
    add_truth("stream_roof", {
        "elements_per_tensor": n, "bytes_per_tensor": nb,
        "per_op_unprofiled_cuda_events": per_op,
        "per_op_inside_profiler_cuda_events": ins,
        "step_unprofiled_cuda_events": {"ms": whole, "median_ms": round(wmed, 4), "bytes_moved": bytes_step,
                                        "achieved_TBps": round(bytes_step / (wmed * 1e-3) / 1e12, 3),
                                        "share_of_nominal_hbm": round(bytes_step / (wmed * 1e-3) / 1e12 / H200_HBM_TBPS, 3)},
        "bytes_counting": "bytes_read + bytes_written, each element read and written once (in-place)",
    })


# ---------------------------------------------------------------- gemm_bound_clean

def gemm_bound_clean():
    m = 8192
    a = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    w = [torch.randn(m, m, device=dev, dtype=torch.bfloat16) * (m ** -0.5) for _ in range(2)]
    c = torch.empty_like(a)
    d = torch.empty_like(a)

    def step():
        with torch.no_grad():
            for _ in range(4):
                torch.matmul(a, w[0], out=c)
                torch.matmul(c, w[1], out=d)
    t = event_times(step, n=5, warm=2)
    med = statistics.median(t)
    flops = 8 * 2 * m ** 3
    run("gemm_bound_clean", {
        "planted": [],
        "issue": 22,
        "expected_top_cause": None,
        "notes": "8 bf16 matmuls of 8192x8192x8192 a step into preallocated outputs (out=), no_grad: nothing but GEMM kernels",
    }, step, steps=5, warmup=1, stack=True)
    add_truth("gemm_bound_clean", {"step_unprofiled_cuda_events": {"ms": t, "median_ms": round(med, 4), "flops": flops,
                                                                   "achieved_TFLOPs": round(flops / (med * 1e-3) / 1e12, 1)}})


ALL = [unfused_norm_gelu, fused_norm_gelu, compiled_fused_clean, stream_roof, gemm_bound_clean]

if __name__ == "__main__":
    diag.main(ALL)
