"""Captures for the rules beyond idle time (issue 11): one planted problem per scenario, and clean twins.

Uses diag.py's harness (same arguments, same outputs: <OUT>/h200_<name>.pt.trace.json.gz and
<OUT>/h200_<name>.kineto.truth.json). Every truth file records what was planted and figures measured
outside the profiler (torch's allocator statistics, perf_counter), so the tests compare tracehound's
output with something it did not compute itself.

usage: python3 rules.py OUTDIR [scenario,scenario,...] [--gpu N]
"""
import gc, os, sys, time

import diag  # parses the same argv; its scenarios only run under its own __main__
from diag import run, timed, dev, mlp, MEASURED, ONLY

import torch
import torch.nn as nn
import torch.nn.functional as F

EXTRA = {}  # scenario -> figures added to its truth file after the run


def finish(name):
    """Adds EXTRA[name] to the truth file diag.run wrote."""
    import json
    p = os.path.join(diag.OUT, f"h200_{name}.kineto.truth.json")
    if os.path.exists(p) and name in EXTRA:
        t = json.load(open(p))
        t.update(EXTRA[name])
        json.dump(t, open(p, "w"), indent=1)


def simple_train(model, opt, x, set_to_none=True):
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=set_to_none)
    loss.backward()
    opt.step()
    return loss


def fp32_no_tf32():
    """FP32 training with PyTorch's default matmul precision ("highest"): no tensor cores."""
    torch.set_float32_matmul_precision("highest")
    model = mlp(d=4096, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 4096, device=dev)
    run("fp32_no_tf32", {
        "planted": ["fp32_gemm_without_tensor_cores"],
        "expected_top_cause": {"rule": "tensor_cores"},
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "notes": "fp32 4096-wide MLP, batch 4096, TF32 off (the default): GEMMs on CUDA cores",
    }, lambda: simple_train(model, opt, x))


def fp32_tf32_clean():
    """The same FP32 model with TF32 allowed: GEMMs on tensor cores."""
    torch.set_float32_matmul_precision("high")
    model = mlp(d=4096, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 4096, device=dev)
    run("fp32_tf32_clean", {
        "planted": [],
        "expected_top_cause": None,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "notes": "clean negative for tensor_cores: fp32 model, set_float32_matmul_precision('high') (TF32)",
    }, lambda: simple_train(model, opt, x))


def bf16_odd_dims():
    """bf16 GEMMs whose dimensions are not multiples of 8."""
    model = nn.Sequential(nn.Linear(4091, 4093), nn.ReLU(), nn.Linear(4093, 4091)).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4097, 4091, device=dev, dtype=torch.bfloat16)
    run("bf16_odd_dims", {
        "planted": ["half_precision_gemm_dims_not_multiple_of_8"],
        "expected_top_cause": {"rule": "tensor_cores"},
        "notes": "bf16 Linear(4091->4093->4091), batch 4097: every GEMM dimension odd",
    }, lambda: simple_train(model, opt, x))


def softmax_few_rows():
    """Softmax and layer norm over very wide rows, few rows: one block per row, most SMs idle."""
    w = torch.randn(1024, 1024, device=dev)
    x = torch.randn(8, 8 * 1024 * 1024, device=dev)
    y = torch.randn(4, 8 * 1024 * 1024, device=dev)

    def step():
        for _ in range(4):
            p = F.softmax(x, dim=-1)
            q = F.layer_norm(y, (y.shape[-1],))
        r = w @ w
        return p, q, r
    run("softmax_few_rows", {
        "planted": ["kernels_with_fewer_blocks_than_sms"],
        "expected_top_cause": {"rule": "underfilled_kernels", "kernel_any": ["softmax", "layer_norm", "LayerNorm"]},
        "sm_count": torch.cuda.get_device_properties(dev).multi_processor_count,
        "notes": "softmax over [8, 8M] and layer_norm over [4, 8M], 4 times a step: grids of 8 and 4 blocks",
    }, step)


def small_mlp_launch_bound():
    """A deep, narrow MLP at batch 32: kernels of a few microseconds, launched one by one."""
    model = nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(256, 256), nn.ReLU())]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 256, device=dev)
    run("small_mlp_launch_bound", {
        "planted": ["launch_bound_small_kernels"],
        "expected_top_cause": {"rule": "launch_bound"},
        "notes": "16x Linear(256,256)+ReLU, batch 32, SGD: ~200 kernels a step of a few us each, no syncs",
    }, lambda: simple_train(model, opt, x), steps=8)


def _many_params_model():
    return nn.Sequential(*[m for _ in range(48) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024))]).to(dev)


def adam_single_tensor():
    """Adam with foreach=False and zero_grad(set_to_none=False): a kernel storm per parameter."""
    model = _many_params_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(256, 1024, device=dev)
    n = sum(1 for _ in model.parameters())
    run("adam_single_tensor", {
        "planted": ["single_tensor_optimizer", "zero_grad_without_set_to_none"],
        "expected_top_cause": {"rule": "optimizer_overhead"},
        "parameters": n,
        "notes": "48x (Linear(1024) + LayerNorm): 192 parameters, Adam(foreach=False), zero_grad(set_to_none=False)",
    }, lambda: simple_train(model, opt, x, set_to_none=False))


def adam_fused_clean():
    """The same model with a fused Adam and set_to_none."""
    model = _many_params_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(256, 1024, device=dev)
    run("adam_fused_clean", {
        "planted": [],
        "expected_top_cause": None,
        "parameters": sum(1 for _ in model.parameters()),
        "notes": "clean negative for optimizer_overhead: same model, Adam(fused=True), set_to_none=True",
    }, lambda: simple_train(model, opt, x))


def leak_losses():
    """Losses kept with their graphs across steps: allocated memory grows every step."""
    model = mlp(d=4096, layers=4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)
    kept = []
    alloc = []

    def step():
        loss = model(x).square().mean()
        kept.append(loss)  # the bug: should be loss.item() or loss.detach()
        opt.zero_grad(set_to_none=True)
        (loss * 1.0).backward(retain_graph=True)
        opt.step()
        # a second forward whose graph is kept too (no backward): its activations stay alive
        kept.append(model(x).sum())
        torch.cuda.synchronize()
        alloc.append(torch.cuda.memory_allocated(dev))
    run("leak_losses", {
        "planted": ["tensors_kept_across_steps"],
        "expected_top_cause": {"rule": "memory_pressure"},
        "notes": "each step keeps two losses with their autograd graphs (activations) in a list",
    }, step, steps=8, memory=True)
    prof = alloc[-8:]
    EXTRA["leak_losses"] = {
        "allocated_after_step_bytes": prof,
        "growth_per_step_bytes": (prof[-1] - prof[0]) // (len(prof) - 1),
    }
    finish("leak_losses")


def near_oom():
    """Training with most of the GPU's memory already taken: peak allocated near capacity."""
    total = torch.cuda.get_device_properties(dev).total_memory
    model = mlp(d=4096, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 4096, device=dev)
    simple_train(model, opt, x)
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info(dev)
    ballast = torch.empty(int(free - 6 * 2**30), dtype=torch.uint8, device=dev)  # leave 6 GiB
    torch.cuda.reset_peak_memory_stats(dev)
    run("near_oom", {
        "planted": ["peak_allocated_near_capacity"],
        "expected_top_cause": {"rule": "memory_pressure"},
        "total_memory_bytes": total,
        "ballast_bytes": ballast.numel(),
        "notes": "a ballast tensor leaves 6 GiB free, then fp32 MLP training steps run",
    }, lambda: simple_train(model, opt, x), memory=True)
    EXTRA["near_oom"] = {
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(dev),
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(dev),
        "num_alloc_retries": torch.cuda.memory_stats(dev).get("num_alloc_retries", 0),
    }
    finish("near_oom")
    del ballast


def checkpoint_step():
    """Ten training steps; the seventh also saves a checkpoint and runs the garbage collector."""
    model = mlp(d=4096, layers=4).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    k = [0]

    def step():
        simple_train(model, opt, x)
        if k[0] == 8:  # 2 warm-up steps, then profiled step index 6
            with timed("checkpoint"):
                torch.save(model.state_dict(), "/tmp/rules_ckpt.pt")
                gc.collect()
        k[0] += 1
    run("checkpoint_step", {
        "planted": ["checkpoint_in_one_step"],
        "expected_top_cause": {"rule": "step_outliers", "step_index": 6},
        "notes": "bf16 MLP; profiled step index 6 (0-based, after 2 warm-up steps) saves a 256 MB state_dict and runs gc.collect()",
    }, step, steps=10, warmup=2)
    os.remove("/tmp/rules_ckpt.pt")


ALL = [fp32_no_tf32, fp32_tf32_clean, bf16_odd_dims, softmax_few_rows, small_mlp_launch_bound,
       adam_single_tensor, adam_fused_clean, leak_losses, near_oom, checkpoint_step]

if __name__ == "__main__":
    diag.main(ALL)
