"""Capture a real Kineto trace whose caching allocator fragments (tracehound's own generator).

Self-contained (runs on a CUDA machine that has only the checkout). Plants:
  * variable batch and sequence length every step (odd sizes, so blocks rarely fit again exactly),
  * a cache of odd-size tensors kept across steps and released in random order (holes in segments),
  * a per-process memory cap close to the working set, so the allocator must release cached
    segments (cudaFree, which synchronizes the device) and call cudaMalloc again in the steady state.
With `--expandable` the same workload runs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
the usual fix; that trace is the comparison case.

usage: python3 alloc_frag.py OUTDIR NAME [--expandable]
"""
import gzip, json, os, random, shutil, sys, time

OUT, NAME = sys.argv[1], sys.argv[2]
EXPANDABLE = "--expandable" in sys.argv
if EXPANDABLE:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity, record_function

random.seed(1234)
torch.manual_seed(1234)
dev = torch.device("cuda:0")
torch.cuda.set_device(0)


class TinyGPT(nn.Module):
    def __init__(self, vocab=8000, d=768, layers=6, heads=12, ctx=2048):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True, dropout=0.0)
            for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for l in self.layers:
            x = l(x)
        return self.head(self.ln(x))


model = TinyGPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
cache = []  # odd-size tensors that outlive a step, like a cache of activations or KV blocks
calls = [0]


def step(b=None, t=None):
    if b is None:  # alternate long and short batches, as bucketed variable-length data does
        calls[0] += 1
        big = calls[0] % 2 == 0
        b = random.choice(range(29, 40, 2) if big else range(3, 20, 2))
        t = random.choice(range(1201, 1600, 34) if big else range(65, 700, 34))
    x = torch.randint(0, 8000, (b, t + 1)).to(dev)
    logits = model(x[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    for _ in range(3):
        n = random.randint(1, 48) * 1_000_003 + random.randint(0, 4095)
        cache.append(torch.empty(n, dtype=torch.uint8, device=dev))
    while len(cache) > 18:
        cache.pop(random.randrange(len(cache)))


# warm-up with the largest shapes to learn the working set, then cap the process close to it
for _ in range(2):
    step(39, 1595)
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated()
total = torch.cuda.get_device_properties(0).total_memory
cap = int(peak * 1.0)
# give the warm-up's segments back: the steady state must grow again under the cap
cache.clear()
torch.cuda.empty_cache()
torch.cuda.set_per_process_memory_fraction(cap / total, 0)
step()
torch.cuda.synchronize()
before = torch.cuda.memory_stats()
ooms = 0
steps = 12
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             record_shapes=True, profile_memory=True, with_stack=True) as prof:
    for i in range(steps):
        with record_function(f"ProfilerStep#{i}"):
            try:
                step()
            except torch.cuda.OutOfMemoryError:
                ooms += 1
                torch.cuda.empty_cache()
        prof.step()
    torch.cuda.synchronize()
after = torch.cuda.memory_stats()
raw = os.path.join(OUT, f"{NAME}.pt.trace.json")
prof.export_chrome_trace(raw)
with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
    shutil.copyfileobj(f, g)
size = os.path.getsize(raw)
os.remove(raw)
keys = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
        "reserved_bytes.all.peak", "inactive_split_bytes.all.current", "inactive_split_bytes.all.peak",
        "num_alloc_retries", "num_ooms", "segment.all.current", "num_device_alloc", "num_device_free"]
truth = {
    "scenario": NAME,
    "planted": ["allocator_fragmentation", "variable_shapes", "odd_size_cached_tensors",
                "memory_cap_forces_cudaFree"] + (["expandable_segments_fix"] if EXPANDABLE else []),
    "notes": "variable batch (3..39) and sequence length (65..1597), long and short batches alternating, 3 odd-size cached tensors per step "
             "kept in an 18-entry cache released in random order, per-process cap at the max-shape warm-up peak, cache emptied before the steady state"
             + ("; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" if EXPANDABLE else ""),
    "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
    "profiled_steps": steps, "cap_bytes": cap, "warmup_peak_allocated": peak, "ooms_in_profile": ooms,
    "trace_bytes_uncompressed": size,
    "memory_stats_profile_start": {k: before.get(k) for k in keys},
    "memory_stats_end": {k: after.get(k) for k in keys},
    "device_allocs_during_profile": after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0),
    "device_frees_during_profile": after.get("num_device_free", 0) - before.get("num_device_free", 0),
    "alloc_retries_during_profile": after.get("num_alloc_retries", 0) - before.get("num_alloc_retries", 0),
}
with open(os.path.join(OUT, f"{NAME}.truth.json"), "w") as f:
    json.dump(truth, f, indent=1)
print(json.dumps(truth, indent=1))
