"""FP32 convolutions on CUDA cores, small and large, against the same network in FP16 (issue 39).

A field trace (a CIFAR-style ResNet at batch 32 on a T4) was told FP16 would save 88% of its FP32
convolution time, the datasheet ratio of the two peaks, while its convolutions ran at 10-24% of
the FP32 peak. This measures what the 16-bit path actually saves on such convolutions, and on
large ones, so the tensor_cores rule's estimate can be scored against a twin.

Usage: python3 fp32_small_conv.py OUTDIR [--gpu N]
Writes, for each size (small: batch 32 at 32x32; large: batch 256 at 56x56):
  h200_fp32conv_<size>.pt.trace.json.gz       FP32, TF32 off (cuDNN picks CUDA-core kernels)
  h200_fp32conv_<size>_twin.pt.trace.json.gz  the same network under autocast FP16
  h200_fp32conv_<size>.truth.json              GPU time of the convolution kernels in each,
                                               measured outside the profiler too (CUDA events
                                               around the forward, median of 20)
"""
import gzip
import json
import os
import shutil
import statistics
import sys

import torch
import torch.nn as nn

OUT = sys.argv[1]
GPU = int(sys.argv[sys.argv.index("--gpu") + 1]) if "--gpu" in sys.argv else 0
dev = torch.device("cuda", GPU)
os.makedirs(OUT, exist_ok=True)


def block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def net():
    return nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         block(64, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)).to(dev).eval()


def run(size, half):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    n, hw = (32, 32) if size == "small" else (256, 56)
    m = net()
    x = torch.randn(n, 3, hw, hw, device=dev)

    def fwd():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=half):
            return m(x)

    for _ in range(5):
        fwd()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fwd()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    name = f"h200_fp32conv_{size}{'_twin' if half else ''}"
    tmp = os.path.join(OUT, name + ".pt.trace.json")
    # With a schedule the trace is handed to on_trace_ready when the active steps end; an
    # export after the context has nothing left to write.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                record_shapes=True,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=3),
                                on_trace_ready=lambda prof: prof.export_chrome_trace(tmp)) as p:
        for _ in range(4):
            fwd()
            torch.cuda.synchronize()
            p.step()
    with open(tmp, "rb") as f, gzip.open(tmp + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(tmp)
    ev = json.load(gzip.open(tmp + ".gz"))["traceEvents"]
    conv_corr = set()
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::cudnn_convolution"),
                 key=lambda e: e["ts"])
    rt = [e for e in ev if e.get("cat") == "cuda_runtime"]
    for o in ops:
        for r in rt:
            if r["tid"] == o["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]:
                conv_corr.add(r["args"].get("correlation"))
    conv_us = sum(e["dur"] for e in ev if e.get("cat") == "kernel" and e["args"].get("correlation") in conv_corr)
    # One CPU-side annotation per step (the GPU-side copies of it are more than one a step).
    steps = sum(1 for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    return {"forward_ms_median": statistics.median(times), "conv_kernel_us_per_step": conv_us / max(1, steps),
            "conv_calls": len(ops), "steps": steps, "batch": n, "hw": hw}


for size in ("small", "large"):
    fp32 = run(size, False)
    fp16 = run(size, True)
    truth = {
        "issue": 39,
        "what": "FP32 convolutions (TF32 off) against the same network under autocast FP16",
        "size": size,
        "gpu": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "fp32": fp32,
        "fp16_twin": fp16,
        "conv_saving_us_per_step": fp32["conv_kernel_us_per_step"] - fp16["conv_kernel_us_per_step"],
        "forward_saving_ms": fp32["forward_ms_median"] - fp16["forward_ms_median"],
    }
    json.dump(truth, open(os.path.join(OUT, f"h200_fp32conv_{size}.truth.json"), "w"), indent=1)
    print(size, json.dumps(truth)[:400])
