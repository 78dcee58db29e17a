"""Two-rank DDP captures with a planted communication problem (tracehound's own generator).

Run with `torchrun --nproc_per_node=2 ddp.py OUTDIR SCENARIO` on two GPUs (NCCL). Writes
OUTDIR/h200_ddp_<SCENARIO>/rank<R>.pt.trace.json.gz and truth.json (rank 0 writes it, with the
host time each rank measured around the planted code).

  straggler  DDP; rank 1 alone makes its input with CPU tensor ops every step (~30 ms), so
             rank 0 waits for it in the gradient all-reduce.
  exposed    no DDP: after backward each gradient is all-reduced one by one on the default
             stream, so no communication overlaps compute.
"""
import gzip, json, os, shutil, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity, record_function

OUT, SCEN = sys.argv[1], sys.argv[2]
NSYS = bool(os.environ.get("NO_PROFILER"))
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}")
torch.cuda.set_device(dev)
torch.set_num_threads(4)
torch.manual_seed(rank)
d = f"{OUT}/h200_ddp_{SCEN}"
os.makedirs(d, exist_ok=True)

model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(4096, 4096), nn.ReLU())]).to(dev)
if SCEN == "straggler":
    model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(1024, 4096, device=dev)
measured = []


def step():
    if SCEN == "straggler" and rank == 1:
        t = time.perf_counter()
        img = torch.rand(16, 3, 256, 256)
        img = F.interpolate(img, size=(448, 448), mode="bilinear", align_corners=False)
        inp = img.reshape(-1)[: 1024 * 4096].view(1024, 4096).to(dev)
        measured.append(time.perf_counter() - t)
    else:
        inp = x
    loss = model(inp).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if SCEN == "exposed":
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    opt.step()


for _ in range(3):
    step()
torch.cuda.synchronize()
dist.barrier()
measured.clear()
steps = 6
walls = []
if NSYS:
    for i in range(steps):
        s = time.perf_counter()
        torch.cuda.nvtx.range_push(f"ProfilerStep#{i}")
        step()
        torch.cuda.nvtx.range_pop()
        walls.append(time.perf_counter() - s)
    torch.cuda.synchronize()
else:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 with_stack=True) as prof:
        for i in range(steps):
            s = time.perf_counter()
            with record_function(f"ProfilerStep#{i}"):
                step()
            walls.append(time.perf_counter() - s)
            prof.step()
        torch.cuda.synchronize()
    raw = f"{d}/rank{rank}.pt.trace.json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)
mine = {"rank": rank, "step_wall_ms": [round(w * 1e3, 2) for w in walls],
        "planted_host_ms": [round(m * 1e3, 2) for m in measured]}
every = [None] * world
dist.all_gather_object(every, mine)
if rank == 0:
    truth = {
        "scenario": f"ddp_{SCEN}",
        "capture": "nsys" if NSYS else "kineto",
        "world_size": world,
        "gpu": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "planted": {"straggler": ["rank 1 does ~30 ms of CPU tensor preprocessing per step; rank 0 waits in the all-reduce"],
                    "exposed": ["each gradient all-reduced one by one after backward on the compute stream: no overlap"]}[SCEN],
        "expected": {"straggler": {"straggler_rank": 1, "waiting_rank": 0},
                     "exposed": {"exposed_communication": True}}[SCEN],
        "ranks": every,
    }
    with open(f"{d}/truth{'.nsys' if NSYS else ''}.json", "w") as f:
        json.dump(truth, f, indent=1)
dist.barrier()
dist.destroy_process_group()
