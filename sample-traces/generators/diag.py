"""Captures for diagnosis accuracy: one planted cause of GPU idle time per scenario (tracehound's own generator).

Self-contained: runs on a CUDA machine that has only the checkout. Each scenario runs a small
training or inference loop whose GPU work per step is known to be short, plants exactly one host
problem (or none, for the clean negatives), profiles a few steps with torch.profiler (CPU + CUDA,
shapes, stacks) and writes

  <OUT>/h200_<name>.pt.trace.json.gz   the Kineto trace
  <OUT>/h200_<name>.truth.json         what was planted, the cause tracehound must name first,
                                       and host time measured with perf_counter around the
                                       planted code (independent of the profiler)

Under Nsight Systems (NO_PROFILER=1) the same loop runs with NVTX `ProfilerStep#N` ranges only.

usage: python3 diag.py OUTDIR [scenario,scenario,...] [--gpu N]
"""
import gc, gzip, json, logging, os, random, shutil, sys, time

OUT = sys.argv[1]
ONLY = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else None
GPU = int(sys.argv[sys.argv.index("--gpu") + 1]) if "--gpu" in sys.argv else 0
NSYS = bool(os.environ.get("NO_PROFILER"))
os.makedirs(OUT, exist_ok=True)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity, record_function

random.seed(7)
torch.manual_seed(7)
dev = torch.device(f"cuda:{GPU}")
torch.cuda.set_device(dev)
torch.set_num_threads(4)  # a training process's share of a shared host
log = logging.getLogger("train")
logging.basicConfig(filename=os.path.join(OUT, "train.log"), level=logging.INFO)

MEASURED = {}  # name -> list of seconds, filled by the planted code while profiling


def timed(key):
    """Context manager adding the wall time of a block to MEASURED[key]."""
    class T:
        def __enter__(self):
            self.t = time.perf_counter()

        def __exit__(self, *a):
            MEASURED.setdefault(key, []).append(time.perf_counter() - self.t)
    return T()


def mlp(d=4096, layers=4):
    return nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(d, d), nn.ReLU())]).to(dev)


def train_step(model, opt, x):
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def run(name, truth, step_fn, steps=5, warmup=2, memory=False, stack=True):
    if ONLY and name not in ONLY:
        return
    t0 = time.time()
    for _ in range(warmup):
        step_fn()
    torch.cuda.synchronize()
    MEASURED.clear()
    step_wall = []
    if NSYS:
        for i in range(steps):
            s = time.perf_counter()
            torch.cuda.nvtx.range_push(f"ProfilerStep#{i}")
            step_fn()
            torch.cuda.nvtx.range_pop()
            step_wall.append(time.perf_counter() - s)
        torch.cuda.synchronize()
    else:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     record_shapes=True, profile_memory=memory, with_stack=stack) as prof:
            for i in range(steps):
                s = time.perf_counter()
                with record_function(f"ProfilerStep#{i}"):
                    step_fn()
                step_wall.append(time.perf_counter() - s)
                prof.step()
            torch.cuda.synchronize()
        raw = os.path.join(OUT, f"h200_{name}.pt.trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        os.remove(raw)
    truth = dict(truth)
    truth.update({
        "scenario": name,
        "capture": "nsys" if NSYS else "kineto",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(dev),
        "profiled_steps": steps,
        "warmup_steps": warmup,
        "step_wall_ms": [round(x * 1e3, 2) for x in step_wall],
        "measured_host_ms": {k: [round(x * 1e3, 2) for x in v] for k, v in MEASURED.items()},
        "wall_s": round(time.time() - t0, 2),
    })
    suffix = "nsys-" + os.environ.get("CAPTURE_TAG", "") if NSYS else "kineto"
    with open(os.path.join(OUT, f"h200_{name}.{suffix}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print(f"{name}: {time.time() - t0:.1f}s", flush=True)


# ---------------------------------------------------------------- scenarios

def cpu_preprocess():
    """Images made and resized on CPU tensors every step, then copied to the GPU."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        with timed("cpu_preprocess"):
            img = torch.rand(16, 3, 256, 256)
            img = F.interpolate(img, size=(512, 512), mode="bilinear", align_corners=False)
        x = img.reshape(-1)[: 1024 * 4096].view(1024, 4096).to(dev)
        train_step(model, opt, x)
    run("cpu_preprocess", {
        "planted": ["cpu_tensor_ops_on_training_thread"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "cpu_op", "leaf_any": ["aten::upsample_bilinear2d", "aten::rand", "aten::uniform_"]},
        "notes": "torch.rand + F.interpolate on CPU tensors in the loop (4 intra-op threads), then a blocking .to(dev); GPU work ~8 ms a step",
    }, step)


def build_batch(n=400_000):
    vals = [i * 0.001 for i in range(n)]  # pure bytecode: no builtin calls for the tracer to record
    return torch.tensor(vals)


def python_list_input():
    """Inputs built from Python lists each micro-step."""
    model = mlp(d=1024, layers=2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        for _ in range(4):
            with timed("build_batch"):
                t = build_batch()
            x = t[: 256 * 1024].view(256, 1024).to(dev)
            train_step(model, opt, x)
    run("python_list_input", {
        "planted": ["inputs_built_from_python_lists"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "python", "leaf_any": ["build_batch", "torch.tensor", "tensor"]},
        "notes": "4 micro-steps a step; each builds a 400k-element Python list and torch.tensor()s it, then a blocking .to(dev)",
    }, step)


def sleep_log():
    """time.sleep and logging in the loop."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)

    def step():
        train_step(model, opt, x)
        with timed("sleep"):
            time.sleep(0.025)
        log.info("step done")
    run("sleep_log", {
        "planted": ["time_sleep_per_step"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "python", "leaf_any": ["sleep"]},
        "notes": "time.sleep(0.025) and a logging call per step after launching ~8 ms of GPU work; no host sync",
    }, step)


def item_then_python():
    """.item() drains the queue, then Python bookkeeping keeps the GPU idle."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)
    hist = []

    def bookkeeping(v):
        acc = 0.0
        for i in range(300_000):
            acc += (i % 7) * v
        hist.append(acc)

    def step():
        loss = train_step(model, opt, x)
        v = loss.item()
        with timed("bookkeeping"):
            bookkeeping(v)
    run("item_then_python", {
        "planted": ["host_sync_item_per_step", "python_bookkeeping_after_sync"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "python", "leaf_any": ["bookkeeping"], "drained_by": "aten::item"},
        "notes": "loss.item() each step, then ~15-30 ms of pure-Python bookkeeping before the next step launches",
    }, step)


def cpu_sync_numpy():
    """.cpu() then NumPy post-processing on the host."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)

    def step():
        out = model(x)
        loss = out.square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        a = out.detach().cpu().numpy()
        with timed("numpy"):
            np.sort(a, axis=1)
    run("cpu_sync_numpy", {
        "planted": ["host_sync_cpu_per_step", "numpy_postprocessing"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "python", "leaf_any": ["sort", "numpy"], "drained_by": "aten::to"},
        "notes": "out.cpu().numpy() (DtoH copy, drains the queue) then np.sort on 4M floats on the host each step",
    }, step)


def cudnn_benchmark_shapes():
    """cudnn.benchmark=True with an input shape that changes every step."""
    torch.backends.cudnn.benchmark = True
    net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(128, 128, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    sizes = iter([64 + 8 * i for i in range(40)])

    def step():
        s = next(sizes)
        x = torch.randn(32, 3, s, s, device=dev)
        loss = net(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    run("cudnn_benchmark_shapes", {
        "planted": ["cudnn_benchmark_with_changing_shapes"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "cudnn_autotune", "leaf_any": ["aten::cudnn_convolution", "aten::convolution", "aten::conv2d"]},
        "notes": "torch.backends.cudnn.benchmark=True; input 32x3xSxS with S new every step (64+8i): cuDNN autotunes every convolution every step",
    }, step)


def lazy_loading():
    """First calls inside the profiled steps: lazy module loading, cuBLAS/cuDNN start-up."""
    model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.GELU(), nn.BatchNorm2d(32), nn.Flatten(), nn.LazyLinear(10)).to(dev)
    x = torch.randn(16, 3, 64, 64, device=dev)
    opt = None

    def step():
        nonlocal opt
        loss = model(x).logsumexp(-1).mean()
        if opt is None:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    run("lazy_loading", {
        "planted": ["first_calls_in_profiled_steps"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "module_loading_or_first_call"},
        "notes": "no warm-up: the first profiled step makes the first call of every kernel (CUDA_MODULE_LOADING=LAZY, the default), creates the cuBLAS/cuDNN handles and the optimizer",
    }, step, steps=4, warmup=0)


def empty_cache_per_step():
    """torch.cuda.empty_cache() every step: the allocator frees and re-mallocs its segments."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(1024, 4096, device=dev)

    def step():
        big = [torch.empty(512 << 20, dtype=torch.uint8, device=dev) for _ in range(8)]  # 4 GiB of scratch
        for b in big:
            b.fill_(1)
        train_step(model, opt, x)
        del big
        with timed("empty_cache"):
            torch.cuda.empty_cache()
    run("empty_cache_per_step", {
        "planted": ["empty_cache_in_loop"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "allocator", "leaf_any": ["cudaMalloc", "cudaFree"]},
        "notes": "8 x 512 MiB scratch tensors allocated every step and torch.cuda.empty_cache() at its end: cudaFree and cudaMalloc in every step",
    }, step, memory=True)


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.004)  # decoding / augmentation that is too slow for 2 workers
        return torch.randn(4096), 0


def dataloader_slow():
    """Two DataLoader workers cannot keep up: the training thread waits in __next__."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    dl = torch.utils.data.DataLoader(SlowDataset(), batch_size=16, num_workers=2, pin_memory=True,
                                     persistent_workers=True, prefetch_factor=2)
    it = iter(dl)
    big = torch.randn(1024, 4096, device=dev)

    def step():
        with timed("next_batch"):
            xb, _ = next(it)
        xb = xb.to(dev, non_blocking=True)
        x = torch.cat([xb.repeat(64, 1)[:1024 - 16], xb]) + 0 * big
        train_step(model, opt, x)
    run("dataloader_slow", {
        "planted": ["input_bound_dataloader"],
        "expected_top_cause": {"rule": "idle_gaps", "category": "data_loading"},
        "notes": "2 workers, batch 16, 4 ms per sample: ~32 ms per batch against ~8 ms of GPU work",
    }, step, steps=6, warmup=4)


def cuda_graph_clean():
    """A CUDA-graph replay of many small kernels: the GPU stays busy, nothing is launch-bound."""
    net = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(2048, 2048), nn.GELU())]).to(dev).eval()
    static_x = torch.randn(2048, 2048, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            net(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        static_y = net(static_x)

    def step():
        for _ in range(8):
            static_x.normal_()
            g.replay()
    run("cuda_graph_clean", {
        "planted": [],
        "expected_top_cause": None,
        "notes": "clean negative: 48 kernels a replay, 8 replays a step, no host syncs; must not read as launch-bound",
    }, step)


def matmul_clean():
    """GPU-bound bf16 training of a wide MLP, input already on the GPU."""
    model = mlp(d=8192, layers=4).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 8192, device=dev, dtype=torch.bfloat16)

    def step():
        train_step(model, opt, x)
    run("matmul_clean", {
        "planted": [],
        "expected_top_cause": None,
        "notes": "clean negative: bf16 8192-wide MLP, batch 4096, fused AdamW, no syncs: GPU-bound",
    }, step)


ALL = [cpu_preprocess, python_list_input, sleep_log, item_then_python, cpu_sync_numpy, cudnn_benchmark_shapes,
       lazy_loading, empty_cache_per_step, dataloader_slow, cuda_graph_clean, matmul_clean]

def main(scenarios):
    """Runs the selected scenarios, each on its own; one that fails does not cost the others."""
    for fn in scenarios:
        if ONLY and fn.__name__ not in ONLY:
            continue
        try:
            fn()
        except Exception as e:
            print(f"{fn.__name__}: FAILED {type(e).__name__}: {e}", flush=True)
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(ALL)
