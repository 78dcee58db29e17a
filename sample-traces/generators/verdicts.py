"""Captures for issue 40 (verdicts that hold on other machines and programs), each scenario in a
fresh process, with its twin timed in the same process outside the profiler:

- pageable_only: a training-like step whose input batch is copied from pageable host memory,
  with no pinned copy anywhere in the trace (the pageable rule must take its reference from the
  link, not from pinned copies it does not have). Twin: the same batch from pinned memory with
  non_blocking=True.
- copies_only: a host<->device bandwidth loop that launches no kernel (CUPTI records copies
  only): transfer-bound, not "kernels not recorded".
- late_first_call: a steady loop that, in its fourth profiled step, calls operators it has not
  called before (cuFFT's first plan, a first sort, a first cumsum): first calls in the middle
  of the window, library initialisation among them.
- warmup: the first calls of a program (cuBLAS and cuDNN initialisation, the allocator's first
  growth) inside record_function("warmup"), then ten steady iterations inside
  record_function("measure"), recorded whole (no schedule).

Usage: python3 verdicts.py OUTDIR SCENARIO. Writes OUTDIR/h200_v40_<scenario>.pt.trace.json and
OUTDIR/h200_v40_<scenario>.truth.json.
"""

import json
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

OUT, SCEN = sys.argv[1], sys.argv[2]
DEV = torch.device("cuda:0")
MB = 1 << 20


def timed_steps(step, n):
    """Wall time per step (ms), each step ended by a synchronize."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def export(prof, name):
    path = os.path.join(OUT, f"h200_v40_{name}.pt.trace.json")
    prof.export_chrome_trace(path)
    return path


def write_truth(name, truth):
    with open(os.path.join(OUT, f"h200_v40_{name}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


def pageable_only():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4096, 4096, device=DEV, dtype=torch.bfloat16) for _ in range(4)]
    batch = 8192
    # 8192 x 4096 float32 = 128 MiB per step, converted to bf16 on the GPU.
    host_pageable = torch.randn(batch, 4096)
    host_pinned = host_pageable.clone().pin_memory()

    def step_with(src, non_blocking):
        x = src.to(DEV, non_blocking=non_blocking).to(torch.bfloat16)
        for lin in layers:
            x = torch.relu(lin(x))
        return x.sum()

    def mistake():
        step_with(host_pageable, False)

    def twin():
        step_with(host_pinned, True)

    for _ in range(3):
        mistake()
        twin()
    m = timed_steps(mistake, 20)
    w = timed_steps(twin, 20)
    # The copy alone, each way, for the rates.
    def copy_rate(src):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            src.to(DEV, non_blocking=True)
        torch.cuda.synchronize()
        return 5 * src.numel() * 4 / (time.perf_counter() - t0) / 1e9

    rates = {"pageable_htod_gbps": copy_rate(host_pageable), "pinned_htod_gbps": copy_rate(host_pinned)}
    sched = schedule(wait=1, warmup=1, active=4)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 record_shapes=True, with_stack=True) as prof:
        for _ in range(6):
            mistake()
            torch.cuda.synchronize()
            prof.step()
    export(prof, "pageable_only")
    write_truth("pageable_only", {
        "scenario": "pageable_only",
        "planted": "input batch (128 MiB float32) copied from pageable host memory each step; no pinned copy in the trace",
        "twin": "the same batch from pinned memory with non_blocking=True",
        "mistake_step_ms": m, "twin_step_ms": w,
        "mistake_median_ms": statistics.median(m), "twin_median_ms": statistics.median(w),
        "saving_ms_per_step": statistics.median(m) - statistics.median(w),
        **rates,
    })


def copies_only():
    n = 256 * MB // 4
    h_in = torch.randn(n).pin_memory()
    h_out = torch.empty(n).pin_memory()
    d = torch.empty(n, device=DEV)

    def step():
        for _ in range(4):
            d.copy_(h_in, non_blocking=True)
            h_out.copy_(d, non_blocking=True)

    for _ in range(2):
        step()
    s = timed_steps(step, 10)
    sched = schedule(wait=1, warmup=1, active=4)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched) as prof:
        for _ in range(6):
            step()
            torch.cuda.synchronize()
            prof.step()
    export(prof, "copies_only")
    write_truth("copies_only", {
        "scenario": "copies_only",
        "planted": "a bandwidth loop: 4 x (256 MiB pinned HtoD + 256 MiB DtoH into pinned memory) per step, no kernel launched",
        "step_ms": s, "step_median_ms": statistics.median(s),
        "gbps_each_way": 2 * 4 * 256 * MB / (statistics.median(s) / 1e3) / 1e9 / 2,
    })


def warmup():
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 with_stack=True) as prof:
        with record_function("warmup"):
            conv = torch.nn.Conv2d(64, 64, 3, padding=1, device=DEV)
            lin = torch.nn.Linear(4096, 4096, device=DEV)
            x = torch.randn(32, 64, 56, 56, device=DEV)
            y = torch.randn(2048, 4096, device=DEV)
            t0 = time.perf_counter()
            conv(x).sum().item()
            lin(y).sum().item()
            first_ms = (time.perf_counter() - t0) * 1e3
        with record_function("measure"):
            t1 = time.perf_counter()
            for _ in range(10):
                conv(x)
                lin(y)
            torch.cuda.synchronize()
            steady_ms = (time.perf_counter() - t1) * 1e3 / 10
    export(prof, "warmup")
    write_truth("warmup", {
        "scenario": "warmup",
        "planted": "the program's first conv and linear (cuDNN/cuBLAS initialisation, first allocations) inside record_function('warmup'); ten steady iterations inside record_function('measure')",
        "first_calls_ms": first_ms, "steady_iteration_ms": steady_ms,
    })


def late_first_call():
    torch.manual_seed(0)
    w = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(1 << 20, device=DEV)

    def steady():
        y = x
        for _ in range(8):
            y = torch.relu(y @ w)
        return y

    for _ in range(3):
        steady()
    torch.cuda.synchronize()
    new_ms = None
    sched = schedule(wait=1, warmup=1, active=6)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 record_shapes=True, with_stack=True) as prof:
        for step in range(8):
            steady()
            if step == 5:  # the fourth active step
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                torch.fft.rfft(v)
                torch.sort(v)
                torch.cumsum(v, 0)
                torch.cuda.synchronize()
                new_ms = (time.perf_counter() - t0) * 1e3
            torch.cuda.synchronize()
            prof.step()
    # The same calls again, warm, for their steady cost.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.fft.rfft(v)
    torch.sort(v)
    torch.cumsum(v, 0)
    torch.cuda.synchronize()
    warm_ms = (time.perf_counter() - t0) * 1e3
    export(prof, "late_first_call")
    write_truth("late_first_call", {
        "scenario": "late_first_call",
        "planted": "in the fourth profiled step (ProfilerStep#5), the first calls of torch.fft.rfft (cuFFT plan and library start-up), torch.sort and torch.cumsum after a steady matmul loop",
        "first_calls_ms": new_ms, "same_calls_warm_ms": warm_ms,
    })


{"pageable_only": pageable_only, "copies_only": copies_only, "warmup": warmup,
 "late_first_call": late_first_call}[SCEN]()
print(SCEN, "done")
