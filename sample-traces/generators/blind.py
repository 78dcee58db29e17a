"""Blind set for issue 39: PyTorch mistakes that no tracehound rule was written for, each with a twin.

Each scenario has a step with the mistake and a twin step that does the same work without it. Both are
timed in this process with CUDA events around whole steps (each step synchronised, 2 warm-up + 8 timed,
mistake, twin, mistake again), outside the profiler, so the planted cost per step is measured:
median(mistake) - median(twin). Then both are profiled (Kineto, shapes and Python stacks).

  <OUT>/h200_blind_<name>.pt.trace.json.gz        the mistake
  <OUT>/h200_blind_<name>.kineto.truth.json       what was planted, where (lines of this file marked
                                                  "# PLANTED <name>"), the operators that hold it, its cost
  <OUT>/h200_blind_<name>_twin.pt.trace.json.gz   the twin (a negative: nothing planted)

Uses diag.py's harness. usage: python3 blind.py OUTDIR scenario[,scenario] [--gpu N]
"""
import copy, json, math, os, statistics, sys, time

import diag
from diag import run, dev

import torch
import torch.nn as nn
import torch.nn.functional as F

ONLY = diag.ONLY
diag.ONLY = None  # the twins run under their own names
BF16 = torch.bfloat16
SRC = open(__file__).read().splitlines()


def planted_lines(tag):
    return [i + 1 for i, line in enumerate(SRC) if line.rstrip().endswith(f"# PLANTED {PLANTED_AS.get(tag, tag)}")]


def step_times(fn, n=8, warm=2):
    """CUDA-event time of each of n whole steps (each synchronised), in ms, after warm steps."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(round(a.elapsed_time(b), 4))
    return out


def add_truth(name, extra):
    p = os.path.join(diag.OUT, f"h200_{name}.kineto.truth.json")
    if os.path.exists(p):
        t = json.load(open(p))
        t.update(extra)
        json.dump(t, open(p, "w"), indent=1)


def blind(name, meta, mistake, twin, steps=4):
    if ONLY and name not in ONLY:
        return
    t0 = time.time()
    m1 = step_times(mistake)
    tw = step_times(twin)
    m2 = step_times(mistake, warm=1)
    m = m1 + m2
    cost = {
        "mistake_step_ms": m, "twin_step_ms": tw,
        "mistake_median_ms": round(statistics.median(m), 4), "twin_median_ms": round(statistics.median(tw), 4),
    }
    cost["planted_ms_per_step"] = round(cost["mistake_median_ms"] - cost["twin_median_ms"], 4)
    cost["planted_share_of_mistake_step"] = round(cost["planted_ms_per_step"] / cost["mistake_median_ms"], 4)
    lines = planted_lines(name)
    truth = {"issue": 39, "blind_set": True, "planted": [name], **meta,
             "planted_source": {"file": "blind.py", "lines": lines, "text": [SRC[i - 1].strip() for i in lines]},
             "cost": cost,
             "cost_how": "CUDA events around whole synchronised steps outside the profiler: 8 mistake, 8 twin, "
                         "8 mistake; planted = median(mistake) - median(twin)"}
    print(f"{name}: mistake {cost['mistake_median_ms']} ms, twin {cost['twin_median_ms']} ms, "
          f"planted {cost['planted_ms_per_step']} ms/step ({time.time() - t0:.1f}s)", flush=True)
    for sfx, stack in MODES:  # MODES, twin_truth_of: below the first set (its captures name these lines)
        run(f"blind_{name}{sfx}", {**truth, "with_stack": stack}, mistake, steps=steps, warmup=1, stack=stack)
        run(f"blind_{name}{sfx}_twin", twin_truth_of(name, sfx, stack, meta, cost), twin, steps=steps, warmup=1,
            stack=stack)


# ---------------------------------------------------------------- scenarios

def cat_kv_cache():
    """Hand-written decode loop that grows its KV cache with torch.cat every token."""
    B, H, D, P, N = 16, 32, 128, 512, 256
    d = H * D
    w_qkv = torch.randn(d, 3 * d, device=dev, dtype=BF16) * 0.02
    w_o = torch.randn(d, d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(B, 1, d, device=dev, dtype=BF16)
    pk = torch.randn(B, H, P, D, device=dev, dtype=BF16)
    pv = torch.randn(B, H, P, D, device=dev, dtype=BF16)
    kc = torch.empty(B, H, P + N, D, device=dev, dtype=BF16)
    vc = torch.empty(B, H, P + N, D, device=dev, dtype=BF16)

    def qkv(x):
        return (x @ w_qkv).view(B, 1, 3, H, D).permute(2, 0, 3, 1, 4)

    def mistake():
        K, V, x = pk, pv, x0
        for _ in range(N):
            q, k, v = qkv(x)
            K = torch.cat([K, k], dim=2)  # PLANTED cat_kv_cache
            V = torch.cat([V, v], dim=2)  # PLANTED cat_kv_cache
            x = F.scaled_dot_product_attention(q, K, V).transpose(1, 2).reshape(B, 1, d) @ w_o
        return x

    def twin():
        kc[:, :, :P] = pk
        vc[:, :, :P] = pv
        x = x0
        for t in range(P, P + N):
            q, k, v = qkv(x)
            kc[:, :, t:t + 1] = k
            vc[:, :, t:t + 1] = v
            x = F.scaled_dot_product_attention(q, kc[:, :, :t + 1], vc[:, :, :t + 1]).transpose(1, 2).reshape(B, 1, d) @ w_o
        return x

    with torch.no_grad():
        blind("cat_kv_cache", {
            "expected": {"family": "cat", "ops_any": ["aten::cat"], "grows_call_over_call": True},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
            "notes": f"bf16 decode of {N} tokens after a {P}-token prompt, batch {B}, {H} heads of {D}: QKV GEMM, "
                     "K and V grown with torch.cat (a full copy of the cache per token: quadratic in length), SDPA, "
                     "output GEMM",
            "twin": "the same decode writing K and V into preallocated caches (slice assignment) and attending over a view",
        }, mistake, twin, steps=3)


def naive_attention():
    """Attention written as matmul, masked_fill, softmax, matmul instead of scaled_dot_product_attention."""
    B, H, T, D, L = 4, 16, 4096, 64, 4
    d = H * D
    w_qkv = torch.randn(L, d, 3 * d, device=dev, dtype=BF16) * 0.02
    w_o = torch.randn(L, d, d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)
    causal = torch.ones(T, T, dtype=torch.bool, device=dev).tril()

    def attend_naive(q, k, v):
        s = (q @ k.transpose(-2, -1)) * D ** -0.5  # PLANTED naive_attention
        s = s.masked_fill(~causal, float("-inf"))  # PLANTED naive_attention
        return s.softmax(-1) @ v  # PLANTED naive_attention

    def attend_sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward(attend):
        x = x0
        for li in range(L):
            q, k, v = (x @ w_qkv[li]).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            x = x + attend(q, k, v).transpose(1, 2).reshape(B, T, d) @ w_o[li]
        return x

    with torch.no_grad():
        blind("naive_attention", {
            "expected": {"family": "attention (unfused: bmm, masked_fill, softmax, bmm)",
                         "ops_any": ["aten::softmax", "aten::_softmax", "aten::masked_fill", "aten::bmm", "aten::matmul"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "fuse elementwise passes (a generic fusion "
                             "advice without naming attention)"],
            "notes": f"bf16 causal self-attention forward, {L} layers, batch {B}, {T} tokens, {H} heads of {D}: the "
                     f"[{B},{H},{T},{T}] score matrix is written, scaled, masked, softmaxed and read back in HBM",
            "twin": "F.scaled_dot_product_attention(is_causal=True) (flash attention)",
        }, lambda: forward(attend_naive), lambda: forward(attend_sdpa))


def moe_mask_sync():
    """Mixture-of-experts dispatch with boolean masks: every x[mask] and out[mask] = y waits for the GPU."""
    E, N, d, h, L = 8, 32768, 2048, 4096, 4
    wr = torch.randn(L, d, E, device=dev, dtype=BF16) * 0.02
    w1 = torch.randn(L, E, d, h, device=dev, dtype=BF16) * 0.02
    w2 = torch.randn(L, E, h, d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(N, d, device=dev, dtype=BF16)

    def layer_masked(x, li):
        top = (x @ wr[li]).argmax(-1)
        out = torch.zeros_like(x)
        for e in range(E):
            sel = top == e
            out[sel] = F.gelu(x[sel] @ w1[li, e]) @ w2[li, e]  # PLANTED moe_mask_sync
        return x + out

    def layer_sorted(x, li):
        top = (x @ wr[li]).argmax(-1)
        order = top.argsort()
        counts = torch.bincount(top, minlength=E).tolist()  # one wait per layer
        parts = x[order].split(counts)
        y = torch.cat([F.gelu(p @ w1[li, e]) @ w2[li, e] for e, p in enumerate(parts)])
        out = torch.empty_like(x)
        out[order] = y
        return x + out

    def forward(layer):
        x = x0
        for li in range(L):
            x = layer(x, li)
        return x

    with torch.no_grad():
        blind("moe_mask_sync", {
            "expected": {"family": "synchronising boolean-mask indexing", "sync": True,
                         "ops_any": ["aten::nonzero", "aten::index", "aten::index_put_", "aten::_index_put_impl_"]},
            "wrong_causes": ["launch-bound / CUDA graphs (graphs cannot capture a host synchronisation)",
                             "small shapes", "compute-bound"],
            "notes": f"bf16 MoE forward, {L} layers, {E} experts, {N} tokens, d={d}, hidden {h}: per expert "
                     "x[top == e] and out[top == e] = y, each a nonzero() whose size the host must read "
                     f"({2 * E} waits per layer)",
            "twin": "tokens sorted by expert once per layer (argsort, one bincount().tolist()), split, concatenated, "
                    "scattered back with an integer index: one wait per layer",
        }, lambda: forward(layer_masked), lambda: forward(layer_sorted))


def conv_nchw():
    """bf16 convolution training in the default NCHW layout instead of channels_last."""
    torch.backends.cudnn.benchmark = True

    def net():
        layers, c = [], 64
        for cout, s in [(128, 1), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
            layers += [nn.Conv2d(c, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            c = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)]
        return nn.Sequential(*layers).to(dev)

    nchw = net()
    nhwc = copy.deepcopy(nchw).to(memory_format=torch.channels_last)
    opt_a = torch.optim.SGD(nchw.parameters(), lr=1e-3, momentum=0.9)
    opt_b = torch.optim.SGD(nhwc.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(128, 64, 56, 56, device=dev)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device=dev)

    def step(model, opt, xx):
        with torch.autocast("cuda", BF16):
            loss = F.cross_entropy(model(xx), y)  # PLANTED conv_nchw
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("conv_nchw", {
        "expected": {"family": "convolution (NCHW layout transforms)",
                     "ops_any": ["aten::cudnn_convolution", "aten::convolution", "aten::convolution_backward"],
                     "kernels_any": ["nchwToNhwc", "nhwcToNchw"]},
        "planted_source_note": "the mistake is a missing .to(memory_format=torch.channels_last) on the model and "
                               "input; the time is held by the convolutions of step()'s forward and backward",
        "wrong_causes": ["launch-bound", "small shapes", "compute-bound without naming the layout"],
        "notes": "6 conv3x3+BN+ReLU layers (64..512 channels, 56x56 input, batch 128), autocast bf16, SGD, "
                 "cudnn.benchmark on, NCHW model and input",
        "twin": "the same model and input in torch.channels_last",
    }, lambda: step(nchw, opt_a, x), lambda: step(nhwc, opt_b, x_cl))


def index_backward_dupes():
    """Embedding lookup written as weight[ids] (index backward: index_put_ with accumulate) instead of F.embedding."""
    torch.set_float32_matmul_precision("high")
    V, d, N = 1000, 1024, 262144
    w = torch.randn(V, d, device=dev, requires_grad=True)
    ids = torch.randint(0, V, (N,), device=dev)
    head = torch.randn(d, 256, device=dev) * 0.02

    def mistake():
        w.grad = None
        h = w[ids]  # PLANTED index_backward_dupes
        (h @ head).square().mean().backward()

    def twin():
        w.grad = None
        h = F.embedding(ids, w)
        (h @ head).square().mean().backward()

    blind("index_backward_dupes", {
        "expected": {"family": "index / index_put_ (accumulate)",
                     "ops_any": ["aten::index", "aten::index_put_", "aten::_index_put_impl_", "IndexBackward0"]},
        "wrong_causes": ["launch-bound", "compute-bound"],
        "notes": f"{N} lookups into {V} rows of {d} fp32 (about {N // V} duplicates per row), TF32 head, backward: "
                 "weight[ids]'s gradient is index_put_(accumulate=True) (sort, then a serial sum per duplicate run)",
        "twin": "F.embedding(ids, weight): embedding_dense_backward",
    }, mistake, twin)


def no_kv_cache():
    """Generation that runs the whole sequence through the model for every new token."""
    L, d, H, B, P, N = 4, 1024, 16, 8, 256, 96
    D = d // H
    w_qkv = torch.randn(L, d, 3 * d, device=dev, dtype=BF16) * 0.02
    w_o = torch.randn(L, d, d, device=dev, dtype=BF16) * 0.02
    w_1 = torch.randn(L, d, 4 * d, device=dev, dtype=BF16) * 0.02
    w_2 = torch.randn(L, 4 * d, d, device=dev, dtype=BF16) * 0.02
    prompt = torch.randn(B, P, d, device=dev, dtype=BF16)
    caches = [(torch.empty(B, H, P + N, D, device=dev, dtype=BF16), torch.empty(B, H, P + N, D, device=dev, dtype=BF16))
              for _ in range(L)]

    def block(x, li, t0=None):
        b, t, _ = x.shape
        q, k, v = (x @ w_qkv[li]).view(b, t, 3, H, D).permute(2, 0, 3, 1, 4)
        if t0 is not None:
            kc, vc = caches[li]
            kc[:, :, t0:t0 + t] = k
            vc[:, :, t0:t0 + t] = v
            k, v = kc[:, :, :t0 + t], vc[:, :, :t0 + t]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + a.transpose(1, 2).reshape(b, t, d) @ w_o[li]
        return x + F.gelu(x @ w_1[li]) @ w_2[li]

    def mistake():
        seq = prompt
        for _ in range(N):
            h = seq
            for li in range(L):
                h = block(h, li)  # PLANTED no_kv_cache
            seq = torch.cat([seq, h[:, -1:]], dim=1)
        return seq

    def twin():
        h = prompt
        for li in range(L):
            h = block(h, li, 0)
        x = h[:, -1:]
        for t in range(P, P + N - 1):
            for li in range(L):
                x = block(x, li, t)
        return x

    with torch.no_grad():
        blind("no_kv_cache", {
            "expected": {"family": "matmul (the whole model, growing)", "grows_call_over_call": True,
                         "ops_any": ["aten::mm", "aten::matmul", "aten::linear", "aten::scaled_dot_product_attention"]},
            "wrong_causes": ["compute-bound as the cause (the GEMMs are efficient; there are too many of them)",
                             "small shapes", "launch-bound"],
            "notes": f"bf16 4-layer decoder (d={d}), batch {B}, {P}-token prompt, {N} new tokens, each produced by "
                     "running the whole sequence through all layers again (no KV cache): per-token cost grows with length",
            "twin": "prefill once into preallocated KV caches, then one token per layer call",
        }, mistake, twin, steps=3)


def sort_for_topk():
    """Top-k sampling that sorts the whole vocabulary every token instead of torch.topk."""
    Bs, V, dh, K, N = 64, 128256, 4096, 50, 32
    head = torch.randn(dh, V, device=dev, dtype=BF16) * 0.02
    emb = torch.randn(V, dh, device=dev, dtype=BF16)
    h0 = torch.randn(Bs, dh, device=dev, dtype=BF16)
    g = torch.Generator(device=dev)

    def sample_sort(logits):
        vals, idx = torch.sort(logits, dim=-1, descending=True)  # PLANTED sort_for_topk
        p = vals[:, :K].float().softmax(-1)
        return idx.gather(-1, torch.multinomial(p, 1, generator=g))

    def sample_topk(logits):
        vals, idx = torch.topk(logits, K, dim=-1)
        p = vals.float().softmax(-1)
        return idx.gather(-1, torch.multinomial(p, 1, generator=g))

    def decode(sample):
        g.manual_seed(0)
        h = h0
        for _ in range(N):
            tok = sample(h @ head)
            h = emb[tok.squeeze(1)]
        return h

    with torch.no_grad():
        blind("sort_for_topk", {
            "expected": {"family": "sort", "ops_any": ["aten::sort"], "kernels_any": ["radixSort", "RadixSort", "sort"]},
            "wrong_causes": ["memory-bound GEMM as the cause", "launch-bound", "small shapes"],
            "notes": f"decode of {N} tokens, batch {Bs}, bf16 LM head {dh}x{V}; top-{K} sampling by a full descending "
                     "sort of the vocabulary per token",
            "twin": f"torch.topk(logits, {K})",
        }, lambda: decode(sample_sort), lambda: decode(sample_topk))


def onehot_ce():
    """Cross-entropy written with F.one_hot and log_softmax instead of F.cross_entropy."""
    N, V, d = 8192, 32000, 1024
    w = (torch.randn(d, V, device=dev, dtype=BF16) * 0.02).requires_grad_()
    x = torch.randn(N, d, device=dev, dtype=BF16)
    t = torch.randint(0, V, (N,), device=dev)

    def mistake():
        w.grad = None
        logits = (x @ w).float()
        loss = -(F.one_hot(t, V) * F.log_softmax(logits, -1)).sum(-1).mean()  # PLANTED onehot_ce
        loss.backward()

    def twin():
        w.grad = None
        logits = (x @ w).float()
        F.cross_entropy(logits, t).backward()

    blind("onehot_ce", {
        "expected": {"family": "elementwise / one_hot (materialised one-hot targets)",
                     "ops_any": ["aten::one_hot", "aten::mul", "aten::sum", "MulBackward0"]},
        "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
        "notes": f"{N} tokens, vocabulary {V}, bf16 head GEMM, fp32 logits: loss = -(one_hot(t) * log_softmax).sum(-1)"
                 ".mean(): an int64 [N, V] one-hot tensor written, multiplied (promoted to fp32) and summed, and the "
                 "same in backward",
        "twin": "F.cross_entropy(logits, t)",
    }, mistake, twin)


def sdpa_mask_fallback():
    """A causal mask passed to scaled_dot_product_attention as attn_mask: no flash kernel, no causal skipping."""
    B, H, T, D, L = 8, 16, 2048, 128, 4
    d = H * D
    w_qkv = torch.randn(L, d, 3 * d, device=dev, dtype=BF16) * 0.02
    w_o = torch.randn(L, d, d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)
    mask = torch.ones(T, T, dtype=torch.bool, device=dev).tril()

    def forward(masked):
        x = x0
        for li in range(L):
            q, k, v = (x @ w_qkv[li]).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            if masked:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # PLANTED sdpa_mask_fallback
            else:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(1, 2).reshape(B, T, d) @ w_o[li]
        return x

    with torch.no_grad():
        blind("sdpa_mask_fallback", {
            "expected": {"family": "attention (fused, slower backend: memory-efficient with a mask)",
                         "ops_any": ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_efficient_attention"],
                         "kernels_any": ["fmha", "efficient_attention", "cutlass"]},
            "wrong_causes": ["compute-bound as the cause", "launch-bound", "small shapes"],
            "notes": f"bf16 causal attention forward, {L} layers, batch {B}, {T} tokens, {H} heads of {D}, the causal "
                     "mask given as a boolean attn_mask tensor: SDPA cannot use flash attention and computes the "
                     "masked half too",
            "twin": "is_causal=True (flash attention)",
        }, lambda: forward(True), lambda: forward(False))


# --nostack: profile without Python stacks (shapes kept), names ending in _nostack; --both: with and
# without. The stack tracer slows host code about 2x, so host-side costs read from a with_stack capture
# are the profiled program's, not the unprofiled one's; a capture without it lets both be compared.
MODES = ([("", True), ("_nostack", False)] if "--both" in sys.argv else
         [("_nostack", False)] if "--nostack" in sys.argv else [("", True)])
twin_truth_of = lambda name, sfx, stack, meta, cost: {  # noqa: E731 (one line fewer keeps the lines below)
    "issue": 39, "blind_set": True, "planted": [], "twin_of": f"blind_{name}{sfx}", "expected_top_cause": None,
    "notes": meta.get("twin", ""), "cost": cost, "with_stack": stack}
# ---------------------------------------------------------------- second set
# Captured after the rules of the first set were built (2026-12-05), so that the rules meet mistakes
# they were not written against.

def pairwise_broadcast():
    """Pairwise distances by broadcasting, (x[:, None] - c[None]).norm(dim=-1), instead of torch.cdist."""
    N, M, D, IT = 8192, 1024, 64, 4
    x = torch.randn(N, D, device=dev)
    c0 = x[torch.randperm(N, device=dev)[:M]].clone()

    def kmeans(dist):
        c = c0
        for _ in range(IT):
            a = dist(x, c).argmin(1)
            n = torch.bincount(a, minlength=M).clamp(min=1).unsqueeze(1)
            c = torch.zeros_like(c).index_add_(0, a, x) / n
        return c

    def dist_broadcast(a, b):
        return (a[:, None] - b[None]).norm(dim=-1)  # PLANTED pairwise_broadcast

    with torch.no_grad():
        blind("pairwise_broadcast", {
            "set": 2,
            "expected": {"family": "broadcast elementwise + reduction (materialised [N, M, D] difference)",
                         "ops_any": ["aten::sub", "aten::linalg_vector_norm", "aten::norm"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"k-means, {IT} iterations a step over {N} points and {M} centroids of {D} fp32: distances as "
                     f"(x[:, None] - c[None]).norm(dim=-1), a [{N}, {M}, {D}] fp32 difference (2 GiB) written and read",
            "twin": "torch.cdist(x, c) (matrix-multiply form)",
        }, lambda: kmeans(dist_broadcast), lambda: kmeans(torch.cdist))


def mha_need_weights():
    """nn.MultiheadAttention with its default need_weights=True: scores materialised, no flash attention."""
    B, T, E, H, L = 8, 1024, 1024, 16, 4
    layers = nn.ModuleList([nn.MultiheadAttention(E, H, batch_first=True, device=dev, dtype=BF16)
                            for _ in range(L)]).train()
    x0 = torch.randn(B, T, E, device=dev, dtype=BF16, requires_grad=True)
    causal = nn.Transformer.generate_square_subsequent_mask(T, device=dev, dtype=BF16)

    def step(need):
        x = x0
        for m in layers:
            a, _ = m(x, x, x, attn_mask=causal, is_causal=True, need_weights=need)  # PLANTED mha_need_weights
            x = x + a
        x.float().square().mean().backward()

    blind("mha_need_weights", {
        "set": 2,
        "expected": {"family": "attention (unfused, inside nn.MultiheadAttention)",
                     "ops_any": ["aten::baddbmm", "aten::bmm", "aten::softmax", "aten::_softmax", "aten::matmul"]},
        "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
        "notes": f"{L} nn.MultiheadAttention layers in training (bf16, batch {B}, {T} tokens, {H} heads of {E // H}), "
                 "forward and backward, called with the default need_weights=True: the [B, H, T, T] weights are "
                 "materialised (baddbmm, softmax, bmm) and averaged over heads",
        "twin": "need_weights=False, so the is_causal hint reaches scaled_dot_product_attention (flash)",
    }, lambda: step(True), lambda: step(False))


def gqa_repeat_kv():
    """Grouped-query decode that repeats K and V per query head (repeat_interleave) before attention."""
    B, Hq, Hkv, T, D, L, N = 8, 32, 8, 8192, 128, 4, 16
    r = Hq // Hkv
    wq = torch.randn(L, Hq * D, Hq * D, device=dev, dtype=BF16) * 0.02
    kc = [torch.randn(B, Hkv, T, D, device=dev, dtype=BF16) for _ in range(L)]
    vc = [torch.randn(B, Hkv, T, D, device=dev, dtype=BF16) for _ in range(L)]
    x0 = torch.randn(B, 1, Hq * D, device=dev, dtype=BF16)

    def attend_repeat(q, k, v):
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)  # PLANTED gqa_repeat_kv
        return F.scaled_dot_product_attention(q, k, v)

    def attend_gqa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    def decode(attend):
        x = x0
        for _ in range(N):
            for li in range(L):
                q = (x @ wq[li]).view(B, 1, Hq, D).transpose(1, 2)
                x = x + attend(q, kc[li], vc[li]).transpose(1, 2).reshape(B, 1, Hq * D)
        return x

    with torch.no_grad():
        blind("gqa_repeat_kv", {
            "set": 2,
            "expected": {"family": "copy (repeat_interleave of the KV cache)",
                         "ops_any": ["aten::repeat_interleave", "aten::index_select", "aten::copy_", "aten::repeat"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"bf16 decode of {N} tokens over a {T}-token cache, batch {B}, {Hq} query heads sharing {Hkv} KV "
                     f"heads, {L} layers: K and V repeated {r}x per query head every call, then attended",
            "twin": "scaled_dot_product_attention(..., enable_gqa=True) on the unrepeated cache",
        }, lambda: decode(attend_repeat), lambda: decode(attend_gqa), steps=3)


def categorical_validate():
    """Sampling through torch.distributions.Categorical: its argument check reads a GPU value every token."""
    Bs, dh, V, N = 256, 4096, 128256, 32
    head = torch.randn(dh, V, device=dev, dtype=BF16) * 0.02
    emb = torch.randn(V, dh, device=dev, dtype=BF16)
    w1 = torch.randn(dh, dh, device=dev, dtype=BF16) * 0.02
    h0 = torch.randn(Bs, dh, device=dev, dtype=BF16)

    def decode(validate):
        torch.manual_seed(0)
        h = h0
        for _ in range(N):
            logits = (h @ head).float()
            tok = torch.distributions.Categorical(logits=logits, validate_args=validate).sample()  # PLANTED categorical_validate
            h = F.gelu(emb[tok] @ w1)
        return h

    with torch.no_grad():
        blind("categorical_validate", {
            "set": 2,
            "expected": {"family": "host synchronisation (argument validation)", "sync": True,
                         "ops_any": ["aten::is_nonzero", "aten::item", "aten::_local_scalar_dense", "aten::all"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"decode of {N} tokens, batch {Bs}, bf16 LM head {dh}x{V}: each token sampled with "
                     "torch.distributions.Categorical(logits=...), whose default argument validation evaluates "
                     "a GPU tensor in Python (a host wait every token)",
            "twin": "Categorical(logits=..., validate_args=False)",
        }, lambda: decode(None), lambda: decode(False))


# ---------------------------------------------------------------- third set
# Captured after the changes the second set led to (2026-12-05), to score the rules on mistakes
# they have not met, before any change is made for them.

def float64_numpy():
    """Weights and inputs built from NumPy arrays (float64 by default): the GPU math runs in FP64."""
    import numpy as np
    torch.backends.cuda.matmul.allow_tf32 = True
    N, d, L = 8192, 2048, 4
    rng = np.random.default_rng(0)
    w64 = [torch.from_numpy(rng.standard_normal((d, d)) * 0.02).to(dev) for _ in range(L)]
    x64 = torch.from_numpy(rng.standard_normal((N, d))).to(dev)
    w32, x32 = [w.float() for w in w64], x64.float()

    def forward(x, ws):
        for w in ws:
            x = torch.tanh(x @ w)  # PLANTED float64_numpy
        return x

    with torch.no_grad():
        blind("float64_numpy", {
            "set": 3,
            "expected": {"family": "FP64 matrix math (NumPy's default dtype)",
                         "ops_any": ["aten::matmul", "aten::mm"], "dtype": "double"},
            "planted_source_note": "the mistake is the float64 dtype of tensors made with torch.from_numpy; the "
                                   "time is held by the matmuls of forward()",
            "wrong_causes": ["compute-bound without naming FP64", "launch-bound", "small shapes"],
            "notes": f"{L} layers of tanh(x @ w), x [{N}, {d}], w [{d}, {d}], all float64 because they were made "
                     "from NumPy arrays; TF32 allowed",
            "twin": "the same tensors as float32 (.float()), TF32 allowed",
        }, lambda: forward(x64, w64), lambda: forward(x32, w32))


def unfold_conv():
    """A 3x3 convolution written as F.unfold (im2col) and a matmul instead of F.conv2d."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    B, C, H, W, L = 64, 128, 56, 56, 4
    ws = [torch.randn(C, C, 3, 3, device=dev) * 0.02 for _ in range(L)]
    x0 = torch.randn(B, C, H, W, device=dev)

    def conv_unfold(x, w):
        cols = F.unfold(x, 3, padding=1)  # PLANTED unfold_conv
        return (w.view(C, -1) @ cols).view(B, C, H, W)  # PLANTED unfold_conv

    def net(conv):
        x = x0
        for w in ws:
            x = F.relu(conv(x, w))
        return x

    with torch.no_grad():
        blind("unfold_conv", {
            "set": 3,
            "expected": {"family": "im2col copy and a batched matmul in place of a convolution",
                         "ops_any": ["aten::im2col", "aten::unfold", "aten::matmul", "aten::bmm"]},
            "wrong_causes": ["launch-bound", "small shapes"],
            "notes": f"{L} 3x3 convolutions, {C} channels, batch {B}, {H}x{W}, fp32 with TF32: each an F.unfold "
                     f"writing a [{B}, {C * 9}, {H * W}] column tensor and a matmul over it",
            "twin": "F.conv2d(x, w, padding=1) (cuDNN)",
        }, lambda: net(conv_unfold), lambda: net(lambda x, w: F.conv2d(x, w, padding=1)))


def per_sample_loop():
    """A per-sample Python loop, torch.stack([f(x[i]) for i in range(B)]), instead of one batched call."""
    B, d = 256, 1024
    w1 = torch.randn(d, d, device=dev) * 0.02
    w2 = torch.randn(d, d, device=dev) * 0.02
    x = torch.randn(B, d, device=dev)

    def f(v):
        return torch.tanh(v @ w1) @ w2

    def mistake():
        return torch.stack([f(x[i]) for i in range(B)])  # PLANTED per_sample_loop

    with torch.no_grad():
        blind("per_sample_loop", {
            "set": 3,
            "expected": {"family": "launch-bound per-sample loop", "ops_any": ["aten::matmul", "aten::tanh", "aten::stack"]},
            "wrong_causes": ["compute-bound", "memory-bound"],
            "notes": f"batch {B}: a two-layer map ({d}x{d} fp32) applied sample by sample in a Python loop and stacked",
            "twin": "f(x) on the whole batch",
        }, mistake, lambda: f(x))


def unique_counts():
    """Label counts with torch.unique(return_counts=True): a sort and a host wait per call."""
    N, C, IT, d = 1 << 22, 1000, 8, 4096
    labels = torch.randint(0, C, (IT, N), device=dev)
    w = torch.randn(d, d, device=dev, dtype=BF16) * 0.02
    h0 = torch.randn(2048, d, device=dev, dtype=BF16)

    def mistake():
        h, out = h0, []
        for i in range(IT):
            h = torch.tanh(h @ w)
            _, counts = torch.unique(labels[i], return_counts=True)  # PLANTED unique_counts
            out.append(counts.float().mean())
        return torch.stack(out), h

    def twin():
        h, out = h0, []
        for i in range(IT):
            h = torch.tanh(h @ w)
            c = torch.bincount(labels[i], minlength=C)
            out.append(c.sum() / (c > 0).sum())
        return torch.stack(out), h

    with torch.no_grad():
        blind("unique_counts", {
            "set": 3,
            "expected": {"family": "sort + host synchronisation (torch.unique)", "sync": True,
                         "ops_any": ["aten::unique", "aten::_unique2", "aten::unique_dim", "aten::sort"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound"],
            "notes": f"{IT} times a step: a bf16 [2048, {d}] x [{d}, {d}] matmul and the mean count of {N} labels "
                     f"over {C} classes by torch.unique(return_counts=True), which sorts and must tell the host "
                     "how many values it found",
            "twin": "torch.bincount(labels, minlength=C): no sort, no host wait",
        }, mistake, twin)


# ---------------------------------------------------------------- fourth set
# Captured after the third set's changes (2026-12-05) and scored as they stand: mistakes close to
# the families the rules now know (a broadcast reduced, attention by einsum, a loop over heads,
# a broadcast made contiguous), to see whether what was built generalises.

def broadcast_dot():
    """Similarities as (a[:, None] * b[None]).sum(-1) instead of a @ b.T."""
    torch.backends.cuda.matmul.allow_tf32 = True
    N, M, D, IT = 2048, 2048, 128, 4
    a0 = torch.randn(N, D, device=dev)
    b = torch.randn(M, D, device=dev)

    def sim_broadcast(x, y):
        return (x[:, None] * y[None]).sum(-1)  # PLANTED broadcast_dot

    def step(sim):
        a = a0
        for _ in range(IT):
            a = a + 0.01 * sim(a, b).softmax(-1) @ b
        return a

    with torch.no_grad():
        blind("broadcast_dot", {
            "set": 4,
            "expected": {"family": "broadcast elementwise + reduction (materialised [N, M, D] product)",
                         "ops_any": ["aten::mul", "aten::sum"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"{IT} iterations a step of similarities between {N} and {M} fp32 vectors of {D}, as "
                     f"(a[:, None] * b[None]).sum(-1): a [{N}, {M}, {D}] product (2 GiB) written and summed",
            "twin": "a @ b.T (TF32 allowed)",
        }, lambda: step(sim_broadcast), lambda: step(lambda x, y: x @ y.T))


def einsum_attention():
    """Attention written with torch.einsum and a softmax instead of scaled_dot_product_attention."""
    B, H, T, D, L = 4, 16, 2048, 64, 4
    d = H * D
    w_qkv = torch.randn(L, d, 3 * d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)

    def attend_einsum(q, k, v):
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) * D ** -0.5  # PLANTED einsum_attention
        return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v)  # PLANTED einsum_attention

    def forward(attend):
        x = x0
        for li in range(L):
            q, k, v = (x @ w_qkv[li]).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            x = x + attend(q, k, v).transpose(1, 2).reshape(B, T, d)
        return x

    with torch.no_grad():
        blind("einsum_attention", {
            "set": 4,
            "expected": {"family": "attention (unfused, by einsum)",
                         "ops_any": ["aten::einsum", "aten::bmm", "aten::softmax", "aten::_softmax"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"bf16 self-attention forward, {L} layers, batch {B}, {T} tokens, {H} heads of {D}, scores and "
                     "output by torch.einsum around a softmax",
            "twin": "F.scaled_dot_product_attention(q, k, v)",
        }, lambda: forward(attend_einsum), lambda: forward(F.scaled_dot_product_attention))


def per_head_loop():
    """Per-head projections as a Python loop over nn.Linear modules instead of one Linear."""
    B, T, d, H, L = 16, 256, 1024, 16, 6
    hd = d // H
    heads = [nn.ModuleList([nn.Linear(d, hd) for _ in range(H)]).to(dev, BF16) for _ in range(L)]
    fused = []
    for hs in heads:
        lin = nn.Linear(d, d).to(dev, BF16)
        with torch.no_grad():
            lin.weight.copy_(torch.cat([h.weight for h in hs]))
            lin.bias.copy_(torch.cat([h.bias for h in hs]))
        fused.append(lin)
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)

    def loop(x, hs):
        return torch.cat([h(x) for h in hs], -1)  # PLANTED per_head_loop

    def forward(layer):
        x = x0
        for li in range(L):
            x = torch.tanh(layer(x, li))
        return x

    with torch.no_grad():
        blind("per_head_loop", {
            "set": 4,
            "expected": {"family": "launch-bound loop over independent heads", "ops_any": ["aten::linear", "aten::addmm", "aten::cat"]},
            "wrong_causes": ["compute-bound", "memory-bound"],
            "notes": f"{L} layers, each {H} per-head nn.Linear({d}, {hd}) called in a Python loop and concatenated, "
                     f"bf16, {B}x{T} tokens",
            "twin": f"one nn.Linear({d}, {d}) per layer holding the same weights",
        }, lambda: forward(lambda x, li: loop(x, heads[li])), lambda: forward(lambda x, li: fused[li](x)))


def expand_contiguous_mask():
    """An attention bias expanded to [B, H, T, T] and made contiguous every call instead of broadcast."""
    B, H, T, D, L = 8, 16, 1024, 64, 4
    d = H * D
    w_qkv = torch.randn(L, d, 3 * d, device=dev, dtype=BF16) * 0.02
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)
    bias = torch.randn(T, T, device=dev, dtype=BF16)

    def forward(full):
        x = x0
        for li in range(L):
            q, k, v = (x @ w_qkv[li]).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            m = bias.expand(B, H, T, T).contiguous() if full else bias  # PLANTED expand_contiguous_mask
            x = x + F.scaled_dot_product_attention(q, k, v, attn_mask=m).transpose(1, 2).reshape(B, T, d)
        return x

    with torch.no_grad():
        blind("expand_contiguous_mask", {
            "set": 4,
            "expected": {"family": "copy (a broadcast made contiguous)",
                         "ops_any": ["aten::contiguous", "aten::clone", "aten::copy_"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"bf16 attention with an additive [{T}, {T}] bias, {L} layers, batch {B}, {H} heads: the bias "
                     f"expanded to [{B}, {H}, {T}, {T}] and made contiguous (256 MiB) every call",
            "twin": "the [T, T] bias passed as is (SDPA broadcasts it)",
        }, lambda: forward(True), lambda: forward(False))


# ---------------------------------------------------------------- fifth set
# Captured after the fourth set's baseline and the host-check change of sync_stalls
# (2026-12-05), scored before any change for them: a Python assert on a GPU tensor (the
# host-check pricing meets a check it was not written against), RMSNorm written out, FP32
# matmuls without TF32, and a DataLoader building batches in the training process.

def isfinite_assert():
    """A finiteness assert in Python after every layer: its kernels and a host wait per layer."""
    N, d, L = 16384, 2048, 8
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.02 for _ in range(L)]
    x0 = torch.randn(N, d, device=dev, dtype=BF16)

    def forward(check):
        x = x0
        for w in ws:
            x = F.gelu(x @ w)
            if check:
                assert torch.isfinite(x).all(), "non-finite activation"  # PLANTED isfinite_assert
        return x

    with torch.no_grad():
        blind("isfinite_assert", {
            "set": 5,
            "expected": {"family": "host check (a Python assert on a GPU tensor)", "sync": True,
                         "ops_any": ["aten::isfinite", "aten::all", "aten::is_nonzero"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"{L} layers of gelu(x @ w), x [{N}, {d}] bf16, each followed by "
                     "assert torch.isfinite(x).all(): the check's kernels and a host wait per layer",
            "twin": "the same forward without the assert",
        }, lambda: forward(True), lambda: forward(False))


def rmsnorm_manual():
    """RMSNorm written out in Python (upcast, pow, mean, rsqrt, multiply, downcast) instead of F.rms_norm."""
    N, d, L, eps = 8192, 4096, 8, 1e-6
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.02 for _ in range(L)]
    g = torch.ones(d, device=dev, dtype=BF16)
    x0 = torch.randn(N, d, device=dev, dtype=BF16)

    def rms_manual(x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)  # PLANTED rmsnorm_manual
        return g * h.to(x.dtype)  # PLANTED rmsnorm_manual

    def forward(norm):
        x = x0
        for w in ws:
            x = x + norm(x) @ w
        return x

    with torch.no_grad():
        blind("rmsnorm_manual", {
            "set": 5,
            "expected": {"family": "norm written out (unfused elementwise and a reduction)",
                         "ops_any": ["aten::to", "aten::pow", "aten::mean", "aten::rsqrt", "aten::mul"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"{L} pre-norm residual layers x + rms(x) @ w, x [{N}, {d}] bf16, RMSNorm as in many "
                     "model files: upcast to fp32, pow, mean, rsqrt, multiply, downcast, weight",
            "twin": "F.rms_norm(x, (d,), g, eps)",
        }, lambda: forward(rms_manual), lambda: forward(lambda x: F.rms_norm(x, (d,), g, eps)))


def fp32_no_tf32():
    """An fp32 model trained with TF32 off (PyTorch's default for matmuls): FP32 GEMMs without tensor cores."""
    d, B, L = 4096, 4096, 4
    model = nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(L)]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(B, d, device=dev)

    def step(tf32):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        loss = model(x).pow(2).mean()  # PLANTED fp32_no_tf32
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    blind("fp32_no_tf32", {
        "set": 5,
        "expected": {"family": "FP32 matrix math without tensor cores (TF32 off)",
                     "ops_any": ["aten::linear", "aten::addmm", "aten::mm", "AddmmBackward0"]},
        "planted_source_note": "the mistake is the missing torch.backends.cuda.matmul.allow_tf32 = True (or "
                               "torch.set_float32_matmul_precision('high')); the time is held by the matmuls of "
                               "step()'s forward and backward",
        "wrong_causes": ["compute-bound without naming FP32/TF32", "launch-bound", "small shapes"],
        "notes": f"SGD training of {L} fp32 Linear({d}, {d}) + GELU layers, batch {B}, TF32 off for matmuls",
        "twin": "the same step with torch.backends.cuda.matmul.allow_tf32 = True",
    }, lambda: step(False), lambda: step(True))


def loader_in_process():
    """A DataLoader with num_workers=0 builds every batch in the training process while the GPU waits."""

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            img = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(i))
            img = (img - 0.5) / 0.25
            return img.flip(-1) if i % 2 else img, i % 100

    loader = torch.utils.data.DataLoader(Images(), batch_size=256, num_workers=0)
    batches = iter(loader)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, 1, 1), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(),
        nn.Conv2d(128, 256, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xg = torch.randn(256, 3, 64, 64, device=dev)
    yg = torch.randint(0, 100, (256,), device=dev)

    def step(load):
        if load:
            x, y = next(batches)  # PLANTED loader_in_process
            x, y = x.to(dev), y.to(dev)
        else:
            x, y = xg, yg
        with torch.autocast("cuda", BF16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    blind("loader_in_process", {
        "set": 5,
        "expected": {"family": "input pipeline on the training thread (DataLoader, num_workers=0)",
                     "ops_any": ["enumerate(DataLoader)", "_SingleProcessDataLoaderIter", "__next__"]},
        "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
        "notes": "a small bf16 convnet trained on 256 3x64x64 images a step, each batch made by a DataLoader with "
                 "num_workers=0 whose dataset builds every image with torch ops on the CPU",
        "twin": "the same step on a batch already on the GPU",
    }, lambda: step(True), lambda: step(False))


# ---------------------------------------------------------------- sixth set
# Captured after the fifth set's changes (2026-12-05) and scored before any change for them:
# per-parameter optimizer kernels, dropout written as a mask multiply, an embedding as a
# one-hot matmul, and an LSTM stepped in Python.

def adam_foreach_off():
    """Adam with foreach=False: a few small kernels per parameter instead of one fused update."""
    L, d, B = 24, 512, 512

    def net():
        return nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU()) for _ in range(L)]).to(dev)

    ma = net()
    mb = copy.deepcopy(ma)
    opt_a = torch.optim.Adam(ma.parameters(), lr=1e-4, foreach=False)
    opt_b = torch.optim.Adam(mb.parameters(), lr=1e-4, fused=True)
    x = torch.randn(B, d, device=dev)

    def step(model, opt):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()  # PLANTED adam_foreach_off
        opt.zero_grad(set_to_none=True)

    blind("adam_foreach_off", {
        "set": 6,
        "expected": {"family": "optimizer: per-parameter kernels (foreach=False)",
                     "ops_any": ["Optimizer.step#Adam.step", "aten::add_", "aten::mul_", "aten::addcdiv_",
                                 "aten::lerp_", "aten::sqrt"]},
        "planted_source_note": "the mistake is foreach=False where the optimizer is built; the time is held by "
                               "opt.step() in step()",
        "wrong_causes": ["compute-bound", "small shapes"],
        "notes": f"fp32 training of {L} Linear({d}, {d}) + LayerNorm + GELU layers, batch {B}; "
                 f"Adam(foreach=False) over {4 * L} parameters",
        "twin": "Adam(fused=True) on a copy of the model",
    }, lambda: step(ma, opt_a), lambda: step(mb, opt_b))


def dropout_manual():
    """Dropout written as a mask multiply (rand_like, compare, multiply, divide) instead of F.dropout."""
    N, d, L, p = 8192, 4096, 6, 0.1
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.02 for _ in range(L)]
    x0 = torch.randn(N, d, device=dev, dtype=BF16)

    def drop_manual(x):
        return x * (torch.rand_like(x) > p) / (1 - p)  # PLANTED dropout_manual

    def forward(drop):
        x = x0
        for w in ws:
            x = drop(F.gelu(x @ w))
        return x

    with torch.no_grad():
        blind("dropout_manual", {
            "set": 6,
            "expected": {"family": "elementwise chain written out (dropout)",
                         "ops_any": ["aten::rand_like", "aten::uniform_", "aten::gt", "aten::mul", "aten::div"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"{L} layers of dropout(gelu(x @ w)), x [{N}, {d}] bf16, dropout as "
                     "x * (torch.rand_like(x) > p) / (1 - p)",
            "twin": "F.dropout(x, p, training=True)",
        }, lambda: forward(drop_manual), lambda: forward(lambda x: F.dropout(x, p, training=True)))


def onehot_embedding():
    """Token embeddings as one_hot(ids) @ W instead of an embedding lookup."""
    V, d, B, T = 32000, 1024, 8, 1024
    W = torch.randn(V, d, device=dev, dtype=BF16) * 0.02
    ids = torch.randint(0, V, (B, T), device=dev)
    w1 = torch.randn(d, d, device=dev, dtype=BF16) * 0.02

    def embed_onehot(i):
        return F.one_hot(i, V).to(BF16) @ W  # PLANTED onehot_embedding

    def forward(embed):
        return torch.tanh(embed(ids) @ w1)

    with torch.no_grad():
        blind("onehot_embedding", {
            "set": 6,
            "expected": {"family": "one-hot matrix product in place of a lookup",
                         "ops_any": ["aten::one_hot", "aten::to", "aten::_to_copy", "aten::matmul", "aten::mm"]},
            "wrong_causes": ["compute-bound", "launch-bound", "small shapes"],
            "notes": f"embeddings of {B}x{T} token ids from a [{V}, {d}] bf16 table as F.one_hot(ids, V).to(bf16) @ W "
                     "(a 2 GiB int64 one-hot, its bf16 copy, and a matmul over the vocabulary), then a layer",
            "twin": "F.embedding(ids, W)",
        }, lambda: forward(embed_onehot), lambda: forward(lambda i: F.embedding(i, W)))


def lstm_cell_loop():
    """An LSTM stepped in Python with nn.LSTMCell instead of nn.LSTM (one cuDNN call)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    B, T, d = 64, 256, 512
    cell = nn.LSTMCell(d, d).to(dev)
    lstm = nn.LSTM(d, d, batch_first=True).to(dev)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(cell.weight_ih)
        lstm.weight_hh_l0.copy_(cell.weight_hh)
        lstm.bias_ih_l0.copy_(cell.bias_ih)
        lstm.bias_hh_l0.copy_(cell.bias_hh)
    x = torch.randn(B, T, d, device=dev)

    def loop():
        h = c = torch.zeros(B, d, device=dev)
        outs = []
        for t in range(T):
            h, c = cell(x[:, t], (h, c))  # PLANTED lstm_cell_loop
            outs.append(h)
        return torch.stack(outs, 1)

    with torch.no_grad():
        blind("lstm_cell_loop", {
            "set": 6,
            "expected": {"family": "launch-bound loop over dependent steps (recurrence)",
                         "ops_any": ["aten::lstm_cell", "aten::_thnn_fused_lstm_cell", "aten::linear", "aten::addmm",
                                     "aten::mm"]},
            "wrong_causes": ["compute-bound", "memory-bound"],
            "notes": f"an fp32 LSTM over {T} steps, batch {B}, {d} units, stepped with nn.LSTMCell in a Python loop "
                     "(TF32 allowed)",
            "twin": "nn.LSTM with the same weights (cuDNN)",
        }, loop, lambda: lstm(x)[0])


# ---------------------------------------------------------------- seventh set
# Captured 2026-12-05 (third session of the day), after every change the earlier sets led to: mistakes
# users report that no rule was written for, to score the rules on problems they have not seen.

def grad_norm_item():
    """The gradient norm summed in Python with one .item() per parameter (a sync each)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    model = nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    params = list(model.parameters())
    x = torch.randn(2048, 1024, device=dev)

    def train(norm):
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm()
        opt.step()

    def item_norm():
        total = 0.0
        for p in params:
            total += p.grad.norm().item() ** 2  # PLANTED grad_norm_item
        return total ** 0.5

    def total_norm():
        if hasattr(torch.nn.utils, "get_total_norm"):
            return torch.nn.utils.get_total_norm([p.grad for p in params])
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in params])))

    blind("grad_norm_item", {
        "set": 7,
        "expected": {"family": "host-device sync per parameter (.item() in a Python loop)",
                     "ops_any": ["aten::item", "aten::_local_scalar_dense", "aten::linalg_vector_norm", "aten::norm"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound"],
        "notes": f"fp32 training (TF32 allowed) of 16 Linear(1024) + LayerNorm + GELU layers, batch 2048; before "
                 f"the SGD step the gradient norm is summed in Python, p.grad.norm().item() ** 2 for each of the "
                 f"{len(params)} parameters",
        "twin": "torch.nn.utils.get_total_norm over the gradients (foreach, no sync)",
    }, lambda: train(item_norm), lambda: train(total_norm))


def deterministic_index_add():
    """torch.use_deterministic_algorithms(True) around a GNN's index_add_ aggregation: index_add_ becomes a sorted index_put_."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS, or Linear raises
    N, E, d, L = 200_000, 2_000_000, 128, 3
    src = torch.randint(0, N, (E,), device=dev)
    dst = torch.randint(0, N, (E,), device=dev)
    lins = [nn.Linear(d, d).to(dev) for _ in range(L)]
    x = torch.randn(N, d, device=dev)

    def gnn():
        h = x
        for lin in lins:
            m = lin(h)[src]
            h = torch.zeros_like(h).index_add_(0, dst, m).relu()  # PLANTED deterministic_index_add
        return h

    def mistake():
        torch.use_deterministic_algorithms(True)
        try:
            return gnn()
        finally:
            torch.use_deterministic_algorithms(False)

    with torch.no_grad():
        blind("deterministic_index_add", {
            "set": 7,
            "expected": {"family": "index/scatter (deterministic mode: index_add_ as a sorted index_put_)",
                         "ops_any": ["aten::index_add_", "aten::index_put_", "aten::_index_put_impl_", "aten::sort"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
            "notes": f"GNN inference, {L} layers of Linear({d}) then message passing over {E} random edges of {N} "
                     "nodes: gather by source, index_add_ by destination; torch.use_deterministic_algorithms(True) "
                     "for the whole forward (reproducibility), which turns index_add_ into index_put_ with "
                     "accumulate (a sort of the destination indices) and fills every new tensor",
            "twin": "the same forward with deterministic algorithms off (atomic index_add_)",
        }, mistake, gnn)


def ce_mask_select():
    """The loss over non-padding tokens by boolean indexing, logits[labels != -100], instead of ignore_index."""
    N, V, d = 8192, 32000, 1024
    head = nn.Linear(d, V, bias=False).to(dev, BF16)
    h = torch.randn(N, d, device=dev, dtype=BF16)
    labels = torch.randint(0, V, (N,), device=dev)
    labels[torch.rand(N, device=dev) < 0.3] = -100

    def mistake():
        logits = head(h)
        keep = labels != -100
        loss = F.cross_entropy(logits[keep].float(), labels[keep])  # PLANTED ce_mask_select
        loss.backward()

    def twin():
        logits = head(h)
        loss = F.cross_entropy(logits.float(), labels, ignore_index=-100)
        loss.backward()

    blind("ce_mask_select", {
        "set": 7,
        "expected": {"family": "boolean-mask indexing (nonzero sync, gather, sorted index_put_ in backward)",
                     "ops_any": ["aten::index", "aten::nonzero", "aten::index_put_", "aten::_index_put_impl_"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"bf16 LM head ({d} -> {V}) over {N} tokens, 30% of them padding (-100); the loss keeps the "
                 "real tokens with logits[labels != -100] (a nonzero sync, a gather of the kept rows, and in "
                 "backward an index_put_ with accumulate into a zero tensor of all logits)",
        "twin": "F.cross_entropy(logits, labels, ignore_index=-100)",
    }, mistake, twin)


def empty_cache_step():
    """torch.cuda.empty_cache() after every training step: the allocator returns its blocks and cudaMallocs them again."""
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(4096, 4096), nn.GELU())]).to(dev, BF16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(8192, 4096, device=dev, dtype=BF16)

    def train():
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def mistake():
        train()
        torch.cuda.empty_cache()  # PLANTED empty_cache_step

    blind("empty_cache_step", {
        "set": 7,
        "expected": {"family": "allocator: blocks released and allocated again every step (cudaFree/cudaMalloc)",
                     "ops_any": ["cudaMalloc", "cudaFree", "empty_cache"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound"],
        "notes": "bf16 training of 8 Linear(4096) + GELU layers, batch 8192, fused AdamW, gradients set to None; "
                 "torch.cuda.empty_cache() after each step, so the next step's activations and gradients are "
                 "cudaMalloc'd again",
        "twin": "the same step without empty_cache()",
    }, mistake, train)


def cudnn_benchmark_varying():
    """cudnn.benchmark = True on inputs whose size changes every step: cuDNN times every algorithm for each new shape."""
    net = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
        nn.Conv2d(128, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10)).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    sizes = {"mistake": 160, "twin": 164}  # each call a size neither has seen: 8 pixels apart, interleaved

    def train(which, bench):
        torch.backends.cudnn.benchmark = bench
        sizes[which] += 8
        s = sizes[which]
        x = torch.randn(16, 3, s, s, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (16,), device=dev)
        with torch.autocast("cuda", dtype=BF16):
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def mistake():
        train("mistake", True)  # PLANTED cudnn_benchmark_varying

    blind("cudnn_benchmark_varying", {
        "set": 7,
        "expected": {"family": "cuDNN autotuning (benchmark mode) on a new input shape every step",
                     "ops_any": ["aten::cudnn_convolution", "aten::convolution_backward", "aten::_convolution",
                                 "aten::conv2d"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes", "compute-bound"],
        "notes": "a 4-conv CNN (channels_last, autocast bf16, batch 16) trained on images whose side grows by 8 "
                 "pixels every step, with torch.backends.cudnn.benchmark = True: cuDNN times its algorithms for "
                 "every convolution, forward and backward, at each new shape",
        "twin": "the same steps with cudnn.benchmark = False (heuristic algorithm choice), also a new size each step",
    }, mistake, lambda: train("twin", False))


def checkpoint_all():
    """Activation checkpointing on every block of a model whose activations fit: each forward runs twice."""
    from torch.utils.checkpoint import checkpoint
    blocks = nn.ModuleList([nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
                            for _ in range(8)]).to(dev, BF16)
    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-4, fused=True)
    x = torch.randn(16, 1024, 1024, device=dev, dtype=BF16)

    def train(ckpt):
        h = x
        for b in blocks:
            if ckpt:
                h = checkpoint(b, h, use_reentrant=False)  # PLANTED checkpoint_all
            else:
                h = b(h)
        loss = h.float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("checkpoint_all", {
        "set": 7,
        "expected": {"family": "recomputation (activation checkpointing) where memory does not need it",
                     "ops_any": ["aten::linear", "aten::addmm", "aten::mm", "aten::scaled_dot_product_attention",
                                 "aten::_scaled_dot_product_flash_attention", "aten::layer_norm"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
        "notes": "bf16 training of 8 TransformerEncoderLayer(1024, 16 heads, 4096) blocks, batch 16 x 1024 "
                 "tokens, fused AdamW; every block wrapped in torch.utils.checkpoint (use_reentrant=False), so "
                 "backward runs each block's forward again; the activations of all 8 blocks fit without it",
        "twin": "the same training without checkpointing",
    }, lambda: train(True), lambda: train(False))


def mask_built_on_cpu():
    """A causal mask built on the CPU in every attention call and copied to the GPU."""
    B, H, T, D, L = 8, 16, 2048, 64, 8
    d = H * D
    ws = [(torch.randn(d, 3 * d, device=dev, dtype=BF16) * 0.02, torch.randn(d, d, device=dev, dtype=BF16) * 0.02)
          for _ in range(L)]
    x0 = torch.randn(B, T, d, device=dev, dtype=BF16)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=dev))

    def layer(x, w, mask):
        q, k, v = (x @ w[0]).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
        return x + F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(B, T, d) @ w[1]

    def mistake():
        x = x0
        for w in ws:
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).to(dev)  # PLANTED mask_built_on_cpu
            x = layer(x, w, mask)
        return x

    def twin():
        x = x0
        for w in ws:
            x = layer(x, w, causal)
        return x

    with torch.no_grad():
        blind("mask_built_on_cpu", {
            "set": 7,
            "expected": {"family": "CPU tensor work and a pageable copy on the step's path",
                         "ops_any": ["aten::tril", "aten::ones", "aten::to", "aten::_to_copy", "aten::copy_"]},
            "wrong_causes": ["compute-bound", "small shapes", "memory-bound"],
            "notes": f"bf16 attention inference, {L} layers, batch {B}, {H} heads of {D}, {T} tokens; each layer "
                     f"builds its causal mask as torch.tril(torch.ones({T}, {T}, dtype=bool)) on the CPU and "
                     "copies it to the GPU (pageable), then SDPA with that mask",
            "twin": "one causal mask made on the GPU once (a buffer) and passed to every layer",
        }, mistake, twin)


def repeat_interleave_sync():
    """torch.repeat_interleave with tensor repeats and no output_size: a device-to-host sync per call."""
    G, d, L = 512, 1024, 32
    counts = torch.randint(1, 64, (G,), device=dev)
    total = int(counts.sum())
    lins = [nn.Linear(d, d).to(dev, BF16) for _ in range(L)]
    feats = torch.randn(G, d, device=dev, dtype=BF16)
    tok0 = torch.randn(total, d, device=dev, dtype=BF16)

    def mistake():
        t = tok0
        for lin in lins:
            t = t + lin(feats).repeat_interleave(counts, dim=0)  # PLANTED repeat_interleave_sync
            t = t @ lin.weight
        return t

    def twin():
        t = tok0
        for lin in lins:
            t = t + lin(feats).repeat_interleave(counts, dim=0, output_size=total)
            t = t @ lin.weight
        return t

    with torch.no_grad():
        blind("repeat_interleave_sync", {
            "set": 7,
            "expected": {"family": "host-device sync inside an operator (output size read on the host)",
                         "ops_any": ["aten::repeat_interleave", "aten::item", "aten::_local_scalar_dense"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound"],
            "notes": f"{L} layers over {G} segments of 1-63 tokens ({total} tokens, bf16, width {d}): each layer "
                     "projects the segment features, expands them to tokens with repeat_interleave(counts) "
                     "(the output length read on the host: a sync), adds and multiplies",
            "twin": "repeat_interleave(counts, output_size=total) with the total known on the host",
        }, mistake, twin)


def ema_param_loop():
    """An EMA of the weights updated parameter by parameter in Python (two kernels each) instead of one foreach call."""
    model = nn.Sequential(*[m for _ in range(48) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024))]).to(dev, BF16)
    ema = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    params, ema_params = list(model.parameters()), list(ema.parameters())
    x = torch.randn(1024, 1024, device=dev, dtype=BF16)

    def train(update):
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            update()

    def loop():
        for e, p in zip(ema_params, params):
            e.mul_(0.999).add_(p, alpha=0.001)  # PLANTED ema_param_loop

    blind("ema_param_loop", {
        "set": 7,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::mul_", "aten::add_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"bf16 training of 48 Linear(1024) + LayerNorm layers, batch 1024, fused AdamW; after each step "
                 f"an EMA copy of the {len(params)} parameters is updated in a Python loop, "
                 "e.mul_(0.999).add_(p, alpha=0.001) for each",
        "twin": "torch._foreach_lerp_(ema_params, params, 0.001)",
    }, lambda: train(loop), lambda: train(lambda: torch._foreach_lerp_(ema_params, params, 0.001)))


# ---------------------------------------------------------------- eighth set
# Captured after the seventh set's changes (2026-12-05, fourth session) and scored before any change
# for them: mistakes users report, two of them (reentrant checkpointing, a host read after each
# class's mask) close to what the seventh set's new rules were written for, so that those rules meet
# traces they were not written against.

def checkpoint_reentrant():
    """Gradient checkpointing the Hugging Face way (use_reentrant=True) on every block of a model whose activations fit."""
    from torch.utils.checkpoint import checkpoint
    V, d, L = 32000, 768, 12
    emb = nn.Embedding(V, d).to(dev)
    blocks = nn.ModuleList([nn.TransformerEncoderLayer(d, 12, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
                            for _ in range(L)]).to(dev)
    head = nn.Linear(d, V, bias=False).to(dev)
    opt = torch.optim.AdamW([*emb.parameters(), *blocks.parameters(), *head.parameters()], lr=1e-4, fused=True)
    ids = torch.randint(0, V, (8, 1024), device=dev)

    def train(ckpt):
        with torch.autocast("cuda", dtype=BF16):
            h = emb(ids)
            for b in blocks:
                if ckpt:
                    h = checkpoint(b, h, use_reentrant=True)  # PLANTED checkpoint_reentrant
                else:
                    h = b(h)
            loss = F.cross_entropy(head(h).view(-1, V).float(), ids.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("checkpoint_reentrant", {
        "set": 8,
        "expected": {"family": "recomputation (reentrant activation checkpointing) where memory does not need it",
                     "ops_any": ["aten::linear", "aten::addmm", "aten::mm", "aten::scaled_dot_product_attention",
                                 "aten::_scaled_dot_product_flash_attention",
                                 "aten::_scaled_dot_product_efficient_attention", "aten::layer_norm"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
        "notes": f"fp32 weights under bf16 autocast: embedding, {L} pre-norm TransformerEncoderLayer({d}, 12 heads, "
                 f"{4 * d}) blocks and an LM head over {V} words, batch 8 x 1024 tokens, fused AdamW; every block "
                 "wrapped in torch.utils.checkpoint(use_reentrant=True), as Hugging Face's "
                 "gradient_checkpointing_enable() did by default; the activations fit without it",
        "twin": "the same training without checkpointing",
    }, lambda: train(True), lambda: train(False))


def class_mean_loop():
    """Class prototypes as a Python loop of boolean-mask means (a host wait per class) instead of one index_add_."""
    N, din, d, C = 16384, 512, 256, 64
    enc = nn.Sequential(nn.Linear(din, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, d)).to(dev)
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-4, fused=True)
    x = torch.randn(N, din, device=dev)
    labels = torch.randperm(N, device=dev) % C

    def loop_protos(f):
        return torch.stack([f[labels == c].mean(0) for c in range(C)])  # PLANTED class_mean_loop

    def sum_protos(f):
        counts = torch.bincount(labels, minlength=C).clamp_min(1).to(f.dtype)
        return torch.zeros(C, d, device=dev, dtype=f.dtype).index_add_(0, labels, f) / counts[:, None]

    def train(protos_of):
        f = F.normalize(enc(x), dim=-1)
        loss = F.cross_entropy(f @ protos_of(f).t() / 0.1, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("class_mean_loop", {
        "set": 8,
        "expected": {"family": "host-device sync per class (boolean-mask indexing: nonzero reads its count)",
                     "ops_any": ["aten::index", "aten::nonzero", "aten::mean", "aten::eq", "aten::item",
                                 "aten::_local_scalar_dense"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"fp32 training of a 3-layer MLP encoder on {N} rows; prototype-classifier loss whose {C} class "
                 "prototypes are the means of each class's features, computed as "
                 "torch.stack([f[labels == c].mean(0) for c in range(C)])",
        "twin": "prototypes as zeros(C, d).index_add_(0, labels, f) / bincount(labels)",
    }, lambda: train(loop_protos), lambda: train(sum_protos))


def cpu_metric_numpy():
    """Training accuracy computed in NumPy every step: the logits copied to the host (pageable) and argmax'd there."""
    V, d, T = 8000, 1024, 4096
    model = nn.Sequential(nn.Embedding(V, d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.LayerNorm(d),
                          nn.Linear(d, V)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, V, (T,), device=dev)
    labels = torch.randint(0, V, (T,), device=dev)
    labels_np = labels.cpu().numpy()
    accs = []

    def numpy_acc(logits):
        return (logits.detach().float().cpu().numpy().argmax(-1) == labels_np).mean()  # PLANTED cpu_metric_numpy

    def torch_acc(logits):
        return (logits.detach().argmax(-1) == labels).float().mean()

    def train(metric):
        with torch.autocast("cuda", dtype=BF16):
            logits = model(ids)
            loss = F.cross_entropy(logits.float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        accs.append(metric(logits))
        del accs[:-4]

    blind("cpu_metric_numpy", {
        "set": 8,
        "expected": {"family": "device-to-host copy and CPU work for a metric on the step's path",
                     "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::numpy"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound", "small shapes"],
        "notes": f"fp32 weights under bf16 autocast: embedding, MLP and a head over {V} classes for {T} tokens, fused "
                 "AdamW; after each step the training accuracy is computed as "
                 "(logits.detach().float().cpu().numpy().argmax(-1) == labels_np).mean()",
        "twin": "the accuracy kept on the GPU: (logits.argmax(-1) == labels).float().mean(), not read",
    }, lambda: train(numpy_acc), lambda: train(torch_acc))


def tensor_from_ndarray_list():
    """A batch built with torch.tensor(list of NumPy rows) every step, which PyTorch's own warning calls extremely slow."""
    import numpy as np
    B, din = 128, 1024
    rng = np.random.default_rng(7)
    rows = [rng.random(din, dtype=np.float32) for _ in range(B)]
    model = nn.Sequential(nn.Linear(din, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    y = torch.randint(0, 10, (B,), device=dev)

    def train(batch_of):
        loss = F.cross_entropy(model(batch_of()), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def from_list():
        return torch.tensor(rows, device=dev)  # PLANTED tensor_from_ndarray_list

    def from_stack():
        return torch.from_numpy(np.stack(rows)).to(dev)

    blind("tensor_from_ndarray_list", {
        "set": 8,
        "expected": {"family": "host-side batch construction (element-by-element conversion) on the step's path",
                     "ops_any": ["aten::tensor", "aten::lift_fresh", "aten::to", "aten::_to_copy", "aten::copy_"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound", "small shapes"],
        "notes": f"fp32 training of a 3-layer MLP (width 4096) on batches of {B} rows of {din} features; each step "
                 "builds its batch as torch.tensor(rows, device=dev) from a Python list of NumPy arrays",
        "twin": "torch.from_numpy(np.stack(rows)).to(dev)",
    }, lambda: train(from_list), lambda: train(from_stack))


def vocab_unaligned():
    """An LM head over GPT-2's 50257 words in bf16, not a multiple of 64: nanoGPT pads the vocabulary to 50304."""
    d, T = 1024, 8192
    body = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(d, d), nn.GELU())]).to(dev, BF16)
    heads = {50257: nn.Linear(d, 50257, bias=False).to(dev, BF16),
             50304: nn.Linear(d, 50304, bias=False).to(dev, BF16)}
    params = [*body.parameters(), *(p for h in heads.values() for p in h.parameters())]
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    x = torch.randn(T, d, device=dev, dtype=BF16)
    tgt = torch.randint(0, 50257, (T,), device=dev)

    def train(V):
        logits = heads[V](body(x))  # PLANTED vocab_unaligned
        loss = F.cross_entropy(logits, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("vocab_unaligned", {
        "set": 8,
        "expected": {"family": "GEMM with a leading dimension not a multiple of 8 (unaligned tensor-core kernels)",
                     "ops_any": ["aten::linear", "aten::mm", "aten::matmul"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
        "notes": f"bf16 training of a 4-layer MLP body (width {d}) and an LM head over 50257 words (GPT-2's "
                 f"vocabulary), {T} tokens, fused AdamW",
        "twin": "the same head over 50304 words (the vocabulary padded to a multiple of 64, as nanoGPT does)",
    }, lambda: train(50257), lambda: train(50304))


def embedding_dense_adam():
    """A large embedding table trained with dense gradients and AdamW: the whole table is rewritten every step."""
    V, d, B, K = 8_000_000, 64, 4096, 16
    tables = {s: nn.EmbeddingBag(V, d, mode="mean", sparse=s).to(dev) for s in (False, True)}
    with torch.no_grad():
        tables[True].weight.copy_(tables[False].weight)
    top = nn.Sequential(nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 1)).to(dev)
    opts = {False: [torch.optim.AdamW([*tables[False].parameters(), *top.parameters()], lr=1e-3, fused=True)],
            True: [torch.optim.SparseAdam(list(tables[True].parameters()), lr=1e-3),
                   torch.optim.AdamW(top.parameters(), lr=1e-3, fused=True)]}
    ids = torch.randint(0, V, (B, K), device=dev)
    y = torch.rand(B, 1, device=dev)

    def train(sparse):
        loss = F.mse_loss(top(tables[sparse](ids)), y)  # PLANTED embedding_dense_adam
        for o in opts[sparse]:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts[sparse]:
            o.step()

    blind("embedding_dense_adam", {
        "set": 8,
        "expected": {"family": "optimizer step over a whole embedding table with dense gradients (memory-bound)",
                     "ops_any": ["aten::_fused_adamw_", "aten::embedding_bag", "aten::_embedding_bag_backward",
                                 "aten::_embedding_bag_dense_backward", "Optimizer.step#AdamW.step"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"a recommender-style model: EmbeddingBag({V:,}, {d}, mean) over {K} ids per row, batch {B}, and a "
                 "2-layer MLP; the table has dense gradients (sparse=False) and fused AdamW updates all of it "
                 "every step though a step touches at most 65,536 rows",
        "twin": "EmbeddingBag(sparse=True) with SparseAdam for the table (fused AdamW for the MLP)",
    }, lambda: train(False), lambda: train(True))


def sync_for_timing():
    """Per-layer timing left in a forward: torch.cuda.synchronize() before and after every layer."""
    layers = nn.ModuleList([nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
                            for _ in range(16)]).to(dev, BF16).eval()
    x = torch.randn(16, 256, 1024, device=dev, dtype=BF16)
    times = []

    def forward(timed):
        h = x
        for layer in layers:
            if timed:
                torch.cuda.synchronize()  # PLANTED sync_for_timing
                t = time.perf_counter()
            h = layer(h)
            if timed:
                torch.cuda.synchronize()  # PLANTED sync_for_timing
                times.append(time.perf_counter() - t)
        del times[:-64]
        return h

    with torch.no_grad():
        blind("sync_for_timing", {
            "set": 8,
            "expected": {"family": "explicit device synchronisation around every layer",
                         "ops_any": ["cudaDeviceSynchronize", "torch.cuda.synchronize"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": "bf16 inference through 16 TransformerEncoderLayer(1024, 16 heads, 4096) layers (eval, "
                     "no_grad: the fused fast path), batch 16 x 256 tokens; each layer timed with "
                     "torch.cuda.synchronize() and time.perf_counter() before and after it",
            "twin": "the same forward without the timing",
        }, lambda: forward(True), lambda: forward(False))


def state_dict_to_cpu():
    """A copy of the model's weights taken to the CPU after every step (a best-model snapshot): pageable copies."""
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(2048, 2048), nn.GELU())]).to(dev, BF16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(2048, 2048, device=dev, dtype=BF16)
    best = {}

    def train(snapshot):
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if snapshot:
            best.update({k: v.detach().cpu() for k, v in model.state_dict().items()})  # PLANTED state_dict_to_cpu

    blind("state_dict_to_cpu", {
        "set": 8,
        "expected": {"family": "device-to-host copies into pageable memory on the step's path",
                     "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": "bf16 training of 24 Linear(2048) + GELU layers (100 M parameters, 201 MB), batch 2048, fused "
                 "AdamW; after each step every tensor of model.state_dict() is copied to the CPU with "
                 ".detach().cpu() (a best-model snapshot)",
        "twin": "the same training without the snapshot",
    }, lambda: train(True), lambda: train(False))


# ---------------------------------------------------------------- ninth set
# Captured after the eighth set's changes and the dense_embedding_grad rule (2026-12-05, fifth
# session), scored before any change for them: mistakes users report, one of them (a dense
# nn.Embedding under Adagrad) the kind dense_embedding_grad was written for in another form
# (EmbeddingBag under fused AdamW), so that the rule meets a trace it was not written against.

def embedding_dense_adagrad():
    """A large nn.Embedding with dense gradients under Adagrad: the whole table and its state rewritten every step."""
    V, d, B, K = 4_000_000, 128, 2048, 32
    embs = {s: nn.Embedding(V, d, sparse=s).to(dev) for s in (False, True)}
    with torch.no_grad():
        embs[True].weight.copy_(embs[False].weight)
    head = nn.Sequential(nn.Linear(d, 512), nn.GELU(), nn.Linear(512, 2)).to(dev)
    opts = {False: [torch.optim.Adagrad([*embs[False].parameters(), *head.parameters()], lr=1e-2)],
            True: [torch.optim.Adagrad(list(embs[True].parameters()), lr=1e-2),
                   torch.optim.Adagrad(head.parameters(), lr=1e-2)]}
    ids = torch.randint(0, V, (B, K), device=dev)
    y = torch.randint(0, 2, (B,), device=dev)

    def train(sparse):
        logits = head(embs[sparse](ids).mean(1))  # PLANTED embedding_dense_adagrad
        loss = F.cross_entropy(logits, y)
        for o in opts[sparse]:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts[sparse]:
            o.step()

    blind("embedding_dense_adagrad", {
        "set": 9,
        "expected": {"family": "optimizer step over a whole embedding table with dense gradients (memory-bound)",
                     "ops_any": ["aten::embedding", "aten::embedding_dense_backward", "aten::_foreach_addcmul_",
                                 "aten::_foreach_addcdiv_", "aten::_foreach_sqrt", "Optimizer.step#Adagrad.step"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"a click-through-style model: nn.Embedding({V:,}, {d}) over {K} ids per row, batch {B}, mean-pooled, "
                 "and a 2-layer MLP; dense gradients (sparse=False) under Adagrad (foreach), which reads and writes the "
                 "whole table and its squared-gradient sum every step though a step touches at most 65,536 rows",
        "twin": "nn.Embedding(sparse=True) with its own Adagrad (sparse updates), a second Adagrad for the MLP",
    }, lambda: train(False), lambda: train(True))


def grad_clip_manual():
    """Gradient clipping written by hand: a norm per parameter, stacked, then a multiply per parameter."""
    model = nn.Sequential(*[m for _ in range(32) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())]
                          ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    params = list(model.parameters())
    x = torch.randn(1024, 1024, device=dev)

    def train(manual):
        with torch.autocast("cuda", BF16):
            loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if manual:
            total = torch.norm(torch.stack([p.grad.norm(2) for p in params]), 2)  # PLANTED grad_clip_manual
            coef = (1.0 / (total + 1e-6)).clamp(max=1.0)
            for p in params:
                p.grad.mul_(coef)  # PLANTED grad_clip_manual
        else:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    blind("grad_clip_manual", {
        "set": 9,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::linalg_vector_norm", "aten::norm", "aten::mul_", "aten::stack"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"fp32 parameters under bf16 autocast: 32 Linear(1024) + LayerNorm + GELU layers, batch 1024, fused "
                 f"AdamW; the gradients are clipped by hand, a norm per parameter ({len(params)}), stacked and "
                 "normed, then p.grad.mul_(coef) for each (what clip_grad_norm_ did before its foreach path)",
        "twin": "torch.nn.utils.clip_grad_norm_(params, 1.0) (foreach norms and multiply)",
    }, lambda: train(True), lambda: train(False))


def randperm_cpu_index():
    """A shuffle made on the CPU every step (torch.randperm without device=) and used to index a GPU tensor."""
    N, d = 2_000_000, 64
    x = torch.randn(N, d, device=dev, dtype=BF16)
    w = torch.randn(d, d, device=dev, dtype=BF16)

    def step(cpu):
        perm = torch.randperm(N) if cpu else torch.randperm(N, device=dev)  # PLANTED randperm_cpu_index
        return (x[perm] @ w).float().sum()

    with torch.no_grad():
        blind("randperm_cpu_index", {
            "set": 9,
            "expected": {"family": "host-side work (a CPU permutation) and its copy to the GPU on the step's path",
                         "ops_any": ["aten::randperm", "aten::index", "aten::to", "aten::_to_copy", "aten::copy_"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes", "launch-bound / CUDA graphs"],
            "notes": f"each step shuffles {N:,} rows of a [{N:,}, {d}] bf16 tensor with x[torch.randperm(N)] (the "
                     "permutation made on the CPU, then copied to the GPU by the indexing) and multiplies them",
            "twin": "torch.randperm(N, device='cuda')",
        }, lambda: step(True), lambda: step(False))


def cumsum_loop():
    """A running sum over time written as a Python loop (one add and one slice write per step) instead of cumsum."""
    B, T, d = 64, 512, 256
    x = torch.randn(B, T, d, device=dev)

    def step(loop):
        if loop:
            out = torch.empty_like(x)
            acc = torch.zeros(B, d, device=dev)
            for t in range(T):
                acc = acc + x[:, t]  # PLANTED cumsum_loop
                out[:, t] = acc  # PLANTED cumsum_loop
        else:
            out = torch.cumsum(x, 1)
        return out.square().mean()

    with torch.no_grad():
        blind("cumsum_loop", {
            "set": 9,
            "expected": {"family": "a Python loop over time steps of small kernels that one scan operator replaces",
                         "ops_any": ["aten::add", "aten::copy_", "aten::select", "aten::slice"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"a running sum over T={T} steps of a [{B}, {T}, {d}] fp32 tensor written as acc = acc + x[:, t]; "
                     "out[:, t] = acc in a Python loop",
            "twin": "torch.cumsum(x, 1)",
        }, lambda: step(True), lambda: step(False))


def bmm_tiny_matrices():
    """Millions of 3x3 transforms as a batched matrix product: cuBLAS batched GEMM on tiny matrices."""
    N, L = 1_000_000, 8
    R = torch.randn(N, 3, 3, device=dev)
    p = torch.randn(N, 3, 1, device=dev)

    def step(bmm):
        h = p
        for _ in range(L):
            if bmm:
                h = torch.bmm(R, h)  # PLANTED bmm_tiny_matrices
            else:
                h = (R * h.transpose(1, 2)).sum(-1, keepdim=True)
        return h.sum()

    with torch.no_grad():
        blind("bmm_tiny_matrices", {
            "set": 9,
            "expected": {"family": "batched GEMM over tiny matrices (3x3), far below the roof",
                         "ops_any": ["aten::bmm"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound"],
            "notes": f"{L} chained transforms of {N:,} 3-vectors by their own 3x3 fp32 matrices with torch.bmm "
                     "([N, 3, 3] x [N, 3, 1]), as point-cloud and pose code does",
            "twin": "the same products as a broadcast multiply and a sum over the last dim",
        }, lambda: step(True), lambda: step(False))


def print_loss():
    """The loss printed every step: formatting a CUDA tensor reads it on the host and waits for the GPU."""
    model = nn.Sequential(*[m for _ in range(12) for m in (nn.Linear(2048, 2048), nn.GELU())]).to(dev, BF16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, 2048, device=dev, dtype=BF16)
    sink = open(os.devnull, "w")

    def train(show):
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if show:
            print(f"loss {loss}", file=sink)  # PLANTED print_loss

    blind("print_loss", {
        "set": 9,
        "expected": {"family": "a host read of the loss every step (printing a CUDA tensor)",
                     "ops_any": ["aten::item", "aten::_local_scalar_dense", "aten::to", "aten::_to_copy",
                                 "aten::copy_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes", "launch-bound / CUDA graphs"],
        "notes": "bf16 training of 12 Linear(2048) + GELU layers, batch 4096, fused AdamW; after each step "
                 "print(f'loss {loss}') formats the CUDA loss tensor (to /dev/null)",
        "twin": "the same training without the print",
    }, lambda: train(True), lambda: train(False))


# ---------------------------------------------------------------- tenth set
# Captured after the ninth set's changes (the tensor_loop rule, FP32 and tiny batched products in
# roofline), scored before any change for them: four probes of this session's rules in forms they
# were not written against (per-parameter loops of div_ and of clamp_/add_, 4x4 transforms through
# torch.matmul, an EmbeddingBag under plain SGD) and two new mistakes.

def grad_accum_div_loop():
    """Gradient accumulation scaled after the fact: p.grad.div_(accum) for every parameter before each optimizer step."""
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())]
                          ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    params = list(model.parameters())
    x = torch.randn(512, 1024, device=dev)
    accum = 4

    def train(loop):
        opt.zero_grad(set_to_none=True)
        for _ in range(accum):
            with torch.autocast("cuda", BF16):
                loss = model(x).float().square().mean()
            (loss if loop else loss / accum).backward()
        if loop:
            with torch.no_grad():
                for p in params:
                    p.grad.div_(accum)  # PLANTED grad_accum_div_loop
        opt.step()

    blind("grad_accum_div_loop", {
        "set": 10,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::div_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"FP32 parameters under bf16 autocast: 24 Linear(1024) + LayerNorm + GELU layers, batch 512, 4 "
                 f"micro-batches accumulated, fused AdamW; the accumulated gradients are divided by 4 parameter by "
                 f"parameter ({len(params)} p.grad.div_ calls) before each optimizer step",
        "twin": "the loss divided by 4 before each backward",
    }, lambda: train(True), lambda: train(False))


def clip_value_sgd_loop():
    """A hand-written SGD step with gradient value clipping: p.grad.clamp_(-c, c) then p.add_(p.grad, alpha=-lr) per parameter."""
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())]
                          ).to(dev, BF16)
    params = list(model.parameters())
    x = torch.randn(1024, 1024, device=dev, dtype=BF16)
    lr, c = 1e-3, 1.0

    def train(loop):
        loss = model(x).float().square().mean()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            if loop:
                for p in params:
                    p.grad.clamp_(-c, c)  # PLANTED clip_value_sgd_loop
                    p.add_(p.grad, alpha=-lr)  # PLANTED clip_value_sgd_loop
            else:
                grads = [p.grad for p in params]
                torch._foreach_clamp_min_(grads, -c)
                torch._foreach_clamp_max_(grads, c)
                torch._foreach_add_(params, grads, alpha=-lr)

    blind("clip_value_sgd_loop", {
        "set": 10,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::clamp_", "aten::add_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"bf16 training of 24 Linear(1024) + LayerNorm + GELU layers, batch 1024, with a hand-written SGD "
                 f"step: for each of the {len(params)} parameters p.grad.clamp_(-1, 1) then p.add_(p.grad, alpha=-lr)",
        "twin": "torch._foreach_clamp_min_ / _foreach_clamp_max_ / _foreach_add_ over the lists",
    }, lambda: train(True), lambda: train(False))


def matmul_4x4_transforms():
    """Homogeneous 4x4 transforms of a million points through torch.matmul (a batched GEMM of tiny matrices)."""
    N, L = 1_000_000, 8
    T = torch.randn(N, 4, 4, device=dev)
    p = torch.randn(N, 4, 1, device=dev)

    def step(mm):
        h = p
        for _ in range(L):
            if mm:
                h = torch.matmul(T, h)  # PLANTED matmul_4x4_transforms
            else:
                h = (T * h.transpose(1, 2)).sum(-1, keepdim=True)
        return h.sum()

    with torch.no_grad():
        blind("matmul_4x4_transforms", {
            "set": 10,
            "expected": {"family": "batched GEMM over tiny matrices (4x4), far below the roof",
                         "ops_any": ["aten::matmul", "aten::bmm"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound"],
            "notes": f"{L} chained transforms of {N:,} homogeneous points by their own 4x4 FP32 matrices with "
                     "torch.matmul ([N, 4, 4] x [N, 4, 1])",
            "twin": "the same products as a broadcast multiply and a sum over the last dim",
        }, lambda: step(True), lambda: step(False))


def embedding_bag_dense_sgd():
    """An EmbeddingBag(sum) of 10M rows with dense gradients under plain SGD: the whole table zeroed and updated every step."""
    V, d, B, K = 10_000_000, 32, 4096, 8
    tables = {s: nn.EmbeddingBag(V, d, mode="sum", sparse=s).to(dev) for s in (False, True)}
    with torch.no_grad():
        tables[True].weight.copy_(tables[False].weight)
    top = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 1)).to(dev)
    opts = {s: torch.optim.SGD([*tables[s].parameters(), *top.parameters()], lr=1e-2) for s in (False, True)}
    ids = torch.randint(0, V, (B, K), device=dev)
    y = torch.rand(B, 1, device=dev)

    def train(sparse):
        loss = F.mse_loss(top(tables[sparse](ids)), y)  # PLANTED embedding_bag_dense_sgd
        opts[sparse].zero_grad(set_to_none=True)
        loss.backward()
        opts[sparse].step()

    blind("embedding_bag_dense_sgd", {
        "set": 10,
        "expected": {"family": "optimizer step over a whole embedding table with dense gradients (memory-bound)",
                     "ops_any": ["aten::embedding_bag", "aten::_embedding_bag_dense_backward", "aten::_foreach_add_",
                                 "Optimizer.step#SGD.step"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"EmbeddingBag({V:,}, {d}, sum) over {K} ids per row, batch {B} (32,768 ids a step), and a 2-layer MLP, "
                 "trained with plain SGD (no momentum); dense gradients make every step zero and update the whole table",
        "twin": "EmbeddingBag(sparse=True) under the same SGD",
    }, lambda: train(False), lambda: train(True))


def gelu_erf_manual():
    """GELU written out with erf in every layer of an MLP (older BERT code) instead of F.gelu."""
    ws = [torch.randn(2048, 8192, device=dev, dtype=BF16, requires_grad=True) * 0.02 for _ in range(4)]
    ws = [w.detach().requires_grad_() for w in ws]
    vs = [(torch.randn(8192, 2048, device=dev, dtype=BF16) * 0.02).requires_grad_() for _ in range(4)]
    x = torch.randn(4096, 2048, device=dev, dtype=BF16)

    def act(h, manual):
        if manual:
            return 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))  # PLANTED gelu_erf_manual
        return F.gelu(h)

    def train(manual):
        h = x
        for w, v in zip(ws, vs):
            h = act(h @ w, manual) @ v
        h.float().square().mean().backward()

    blind("gelu_erf_manual", {
        "set": 10,
        "expected": {"family": "unfused elementwise chain (a hand-written activation), memory-bound",
                     "ops_any": ["aten::erf", "aten::mul", "aten::add", "aten::div"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": "bf16 MLP of 4 blocks ([4096, 2048] @ [2048, 8192], activation, @ [8192, 2048]), forward and "
                 "backward, with GELU written as 0.5 * h * (1 + erf(h / sqrt(2)))",
        "twin": "F.gelu",
    }, lambda: train(True), lambda: train(False))


def stack_row_loop():
    """Rows gathered with a Python loop, torch.stack([x[i] for i in idx]), instead of one index."""
    N, d, B = 1_000_000, 256, 4096
    x = torch.randn(N, d, device=dev, dtype=BF16)
    w = torch.randn(d, d, device=dev, dtype=BF16)
    idx = torch.randint(0, N, (B,)).tolist()
    idx_t = torch.tensor(idx, device=dev)

    def step(loop):
        rows = torch.stack([x[i] for i in idx]) if loop else x[idx_t]  # PLANTED stack_row_loop
        return (rows @ w).float().sum()

    with torch.no_grad():
        blind("stack_row_loop", {
            "set": 10,
            "expected": {"family": "host-side Python loop of tensor views (no GPU work) before one stack",
                         "ops_any": ["aten::select", "aten::stack", "aten::cat"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes", "launch-bound / CUDA graphs"],
            "notes": f"each step gathers {B} rows of a [{N:,}, {d}] bf16 table with torch.stack([x[i] for i in idx]) "
                     "(a Python int index per row: one select view each, then one stack) and multiplies them",
            "twin": "x[idx] with the indices as one CUDA tensor",
        }, lambda: step(True), lambda: step(False))



# ---------------------------------------------------------------- eleventh set (issue 39): variants of
# the problems the ninth and tenth sets' rules were built for, written differently, to test the rules
# on code they were not written against.

def embedding_dense_adam_foreach():
    """A two-tower model whose nn.Embedding tables have dense gradients under foreach (not fused) Adam."""
    V, d, B = 4_000_000, 64, 8192
    towers = {s: nn.ModuleList([nn.Embedding(V, d, sparse=s) for _ in range(2)]).to(dev) for s in (False, True)}
    with torch.no_grad():
        for a, b in zip(towers[True], towers[False]):
            a.weight.copy_(b.weight)
    heads = nn.ModuleList([nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 64)) for _ in range(2)]).to(dev)
    opts = {False: [torch.optim.Adam([*towers[False].parameters(), *heads.parameters()], lr=1e-3, foreach=True)],
            True: [torch.optim.SparseAdam(list(towers[True].parameters()), lr=1e-3),
                   torch.optim.Adam(heads.parameters(), lr=1e-3, foreach=True)]}
    users = torch.randint(0, V, (B,), device=dev)
    items = torch.randint(0, V, (B,), device=dev)
    y = torch.rand(B, device=dev)

    def train(sparse):
        u, i = towers[sparse]
        score = (heads[0](u(users)) * heads[1](i(items))).sum(-1)  # PLANTED embedding_dense_adam_foreach
        loss = F.binary_cross_entropy_with_logits(score, y)
        for o in opts[sparse]:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts[sparse]:
            o.step()

    blind("embedding_dense_adam_foreach", {
        "set": 11,
        "expected": {"family": "optimizer step over whole embedding tables with dense gradients (memory-bound)",
                     "ops_any": ["aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_addcmul_",
                                 "aten::_foreach_lerp_", "aten::_foreach_sqrt", "aten::_foreach_addcdiv_",
                                 "aten::_foreach_div_", "aten::embedding", "aten::embedding_dense_backward",
                                 "aten::embedding_backward", "Optimizer.step#Adam.step"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"a two-tower retrieval model: two nn.Embedding({V:,}, {d}) tables (users, items), batch {B}, "
                 "an MLP head per tower and a dot-product logit; the tables have dense gradients and foreach Adam "
                 "(not fused) updates all 8M rows every step though a step touches at most 16,384",
        "twin": "nn.Embedding(sparse=True) with SparseAdam for the tables (foreach Adam for the heads)",
    }, lambda: train(False), lambda: train(True))


def weight_decay_loop():
    """Decoupled weight decay by hand, p.mul_(1 - lr * wd) for each parameter, before a plain SGD step."""
    model = nn.Sequential(*[m for _ in range(32) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.SiLU())]
                          ).to(dev, BF16)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-3, foreach=True)
    x = torch.randn(1024, 1024, device=dev, dtype=BF16)
    lr, wd = 1e-3, 0.1

    def train(loop):
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            if loop:
                for p in params:
                    p.mul_(1 - lr * wd)  # PLANTED weight_decay_loop
            else:
                torch._foreach_mul_(params, 1 - lr * wd)
        opt.step()

    blind("weight_decay_loop", {
        "set": 11,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::mul_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"bf16 training of 32 Linear(1024) + LayerNorm + SiLU layers, batch 1024, foreach SGD; weight decay "
                 f"applied by hand before the step, p.mul_(1 - lr * wd) for each of the {len(params)} parameters",
        "twin": "torch._foreach_mul_(params, 1 - lr * wd)",
    }, lambda: train(True), lambda: train(False))


def zero_grad_loop():
    """Gradients zeroed parameter by parameter, p.grad.zero_(), instead of optimizer.zero_grad(set_to_none=True)."""
    model = nn.Sequential(*[m for _ in range(32) for m in (nn.Linear(768, 768), nn.LayerNorm(768), nn.GELU())]
                          ).to(dev, BF16)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    x = torch.randn(2048, 768, device=dev, dtype=BF16)
    model(x).float().square().mean().backward()  # gradients exist from the start, as after a first step

    def train(loop):
        if loop:
            for p in params:
                if p.grad is not None:
                    p.grad.zero_()  # PLANTED zero_grad_loop
        else:
            opt.zero_grad(set_to_none=True)
        loss = model(x).float().square().mean()
        loss.backward()
        opt.step()

    blind("zero_grad_loop", {
        "set": 11,
        "expected": {"family": "per-parameter Python loop of small kernels (launch overhead)",
                     "ops_any": ["aten::zero_", "aten::fill_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"bf16 training of 32 Linear(768) + LayerNorm + GELU layers, batch 2048, fused AdamW; each step "
                 f"starts by zeroing the {len(params)} gradients one by one with p.grad.zero_()",
        "twin": "optimizer.zero_grad(set_to_none=True): no kernels, the next backward writes fresh gradients",
    }, lambda: train(True), lambda: train(False))


def bmm_3x3_compose():
    """Skeletal-animation style: per-joint 3x3 rotations composed with torch.bmm (a batched GEMM of tiny matrices)."""
    N, L = 2_000_000, 8
    R = torch.randn(L, N, 3, 3, device=dev)
    acc0 = torch.eye(3, device=dev).expand(N, 3, 3).contiguous()

    def step(mm):
        acc = acc0
        for j in range(L):
            if mm:
                acc = torch.bmm(acc, R[j])  # PLANTED bmm_3x3_compose
            else:
                acc = (acc.unsqueeze(-1) * R[j].unsqueeze(-3)).sum(-2)
        return acc.sum()

    with torch.no_grad():
        blind("bmm_3x3_compose", {
            "set": 11,
            "expected": {"family": "batched GEMM over tiny matrices (3x3), far below the roof",
                         "ops_any": ["aten::bmm"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound"],
            "notes": f"{L} chained compositions of {N:,} FP32 3x3 rotations with torch.bmm ([N, 3, 3] x [N, 3, 3]), "
                     "as a forward-kinematics pass composes joint rotations",
            "twin": "the same products as a broadcast multiply and a sum over the shared dim",
        }, lambda: step(True), lambda: step(False))


def swiglu_width_unaligned():
    """A LLaMA-style SwiGLU MLP whose hidden width int(8 * d / 3) = 2730 is not a multiple of 8 (LLaMA rounds it up)."""
    d, T, L = 1024, 8192, 8
    def mlp(h):
        return nn.ModuleDict({"w1": nn.Linear(d, h, bias=False), "w3": nn.Linear(d, h, bias=False),
                              "w2": nn.Linear(h, d, bias=False)})
    nets = {a: nn.ModuleList([mlp(h) for _ in range(L)]).to(dev, BF16) for a, h in (("odd", int(8 * d / 3)),
                                                                                    ("round", 2816))}
    opts = {a: torch.optim.AdamW(n.parameters(), lr=1e-4, fused=True) for a, n in nets.items()}
    x = torch.randn(T, d, device=dev, dtype=BF16)

    def train(a):
        h = x
        for m in nets[a]:
            h = h + m["w2"](F.silu(m["w1"](h)) * m["w3"](h))  # PLANTED swiglu_width_unaligned
        loss = h.float().square().mean()
        opts[a].zero_grad(set_to_none=True)
        loss.backward()
        opts[a].step()

    blind("swiglu_width_unaligned", {
        "set": 11,
        "expected": {"family": "matrix products with a leading dimension not a multiple of 8 (tensor cores underused)",
                     "ops_any": ["aten::linear", "aten::mm", "aten::matmul"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes", "memory-bound"],
        "notes": f"{L} residual SwiGLU MLP blocks, d={d}, hidden int(8 * d / 3) = {int(8 * d / 3)}, bf16, {T} tokens, "
                 "fused AdamW; LLaMA's reference code rounds the hidden width up to a multiple of 256 (multiple_of)",
        "twin": "hidden width 2816 (2730 rounded up to a multiple of 256): 3% more FLOPs",
    }, lambda: train("odd"), lambda: train("round"))


def ragged_pad_loop():
    """A ragged batch padded with a Python loop, padded[i, :n] = flat[s:s + n], instead of one indexed write."""
    B, d, Lmax = 512, 1024, 256
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(32, Lmax + 1, (B,), generator=g).tolist()
    starts = [0]
    for n in lens[:-1]:
        starts.append(starts[-1] + n)
    flat = torch.randn(sum(lens), d, device=dev, dtype=BF16)
    padded = torch.zeros(B, Lmax, d, device=dev, dtype=BF16)
    dest = torch.cat([torch.arange(n) + i * Lmax for i, n in enumerate(lens)]).to(dev)
    w = torch.randn(d, d, device=dev, dtype=BF16) * 0.02

    def step(loop):
        padded.zero_()
        if loop:
            for i, (s, n) in enumerate(zip(starts, lens)):
                padded[i, :n] = flat[s:s + n]  # PLANTED ragged_pad_loop
        else:
            padded.view(B * Lmax, d)[dest] = flat
        return (padded @ w).float().sum()

    with torch.no_grad():
        blind("ragged_pad_loop", {
            "set": 11,
            "expected": {"family": "a Python loop of slice copies (one small kernel per sequence) instead of one index",
                         "ops_any": ["aten::copy_", "aten::slice", "aten::select"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"{B} sequences of 32-{Lmax} tokens (d={d}, bf16) copied from a flat buffer into a padded "
                     "[B, Lmax, d] batch with padded[i, :n] = flat[s:s + n] per sequence, then one matmul",
            "twin": "one indexed write, padded.view(B * Lmax, d)[dest] = flat, with the destination rows computed once",
        }, lambda: step(True), lambda: step(False))



# ---------------------------------------------------------------- twelfth set (issue 39): mistakes no
# rule was written for (linear algebra, a renormalised embedding, device constants built per call,
# a quantile by full sort, parameter snapshots by clone, a channels-first LayerNorm written out).

def linalg_inv_solve():
    """Batched linear systems solved as torch.linalg.inv(A) @ b instead of torch.linalg.solve(A, b)."""
    B, n = 16384, 64
    A = torch.randn(B, n, n, device=dev) + n * torch.eye(n, device=dev)
    b = torch.randn(B, n, 8, device=dev)

    def step(inv):
        if inv:
            return torch.linalg.inv(A) @ b  # PLANTED linalg_inv_solve
        return torch.linalg.solve(A, b)

    with torch.no_grad():
        blind("linalg_inv_solve", {
            "set": 12,
            "expected": {"family": "an explicit matrix inverse where a solve is needed (linear algebra)",
                         "ops_any": ["aten::linalg_inv", "aten::linalg_inv_ex", "aten::linalg_solve_ex",
                                     "aten::linalg_lu_factor_ex", "aten::matmul", "aten::bmm"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
            "notes": f"{B:,} FP32 systems of {n}x{n} with 8 right-hand sides each, solved by inverting A and "
                     "multiplying (the PyTorch docs advise linalg.solve: faster and more stable)",
            "twin": "torch.linalg.solve(A, b)",
        }, lambda: step(True), lambda: step(False))


def embedding_max_norm():
    """nn.Embedding(max_norm=1.0): every forward renormalises the looked-up rows of the weight in place."""
    V, d, B, T = 1_000_000, 256, 64, 512
    embs = {m: nn.Embedding(V, d, max_norm=m).to(dev) for m in (1.0, None)}
    with torch.no_grad():
        embs[None].weight.copy_(embs[1.0].weight)
    proj = nn.Linear(d, d).to(dev)
    opt = torch.optim.AdamW([*embs[1.0].parameters(), *embs[None].parameters(), *proj.parameters()],
                            lr=1e-4, fused=True)
    ids = torch.randint(0, V, (B, T), device=dev)

    def train(renorm):
        if renorm:
            e = embs[1.0](ids)  # PLANTED embedding_max_norm
        else:
            e = embs[None](ids)
            e = e * (1.0 / e.norm(dim=-1, keepdim=True).clamp(min=1.0))
        loss = proj(e).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("embedding_max_norm", {
        "set": 12,
        "expected": {"family": "embedding rows renormalised in place every forward (a sort of the indices)",
                     "ops_any": ["aten::embedding_renorm_", "aten::embedding"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
        "notes": f"nn.Embedding({V:,}, {d}, max_norm=1.0) over {B}x{T} ids a step, a linear head, fused AdamW: "
                 "each forward calls embedding_renorm_, which sorts the ids, finds the unique rows and rescales "
                 "those above the norm in the weight",
        "twin": "no max_norm; the looked-up vectors scaled to norm at most 1 (e / max(|e|, 1)), the weight untouched",
    }, lambda: train(True), lambda: train(False))


def tensor_scalar_per_step():
    """Device constants built from Python numbers every call: torch.tensor(x, device="cuda") in the forward."""
    L, N, d = 48, 4096, 1024
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.02 for _ in range(L)]
    x0 = torch.randn(N, d, device=dev, dtype=BF16)
    scale = [0.5 + 0.01 * i for i in range(L)]

    def forward(const):
        x = x0
        for w, c in zip(ws, scale):
            if const:
                x = x + torch.tensor(c, device=dev, dtype=BF16) * (x @ w)  # PLANTED tensor_scalar_per_step
            else:
                x = x + c * (x @ w)
        return x

    with torch.no_grad():
        blind("tensor_scalar_per_step", {
            "set": 12,
            "expected": {"family": "a host-to-device copy per call for a constant (torch.tensor on the device)",
                         "ops_any": ["aten::tensor", "aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"{L} residual layers x + c * (x @ w), x [{N}, {d}] bf16, each c made a device tensor with "
                     "torch.tensor(c, device='cuda') every call: a pageable 2-byte copy to the GPU each time",
            "twin": "the Python float c multiplied directly (a scalar argument, no copy)",
        }, lambda: forward(True), lambda: forward(False))


def quantile_sort():
    """A per-step 99th percentile with torch.quantile (a full sort) instead of torch.kthvalue (a selection)."""
    n = 8_000_000
    x = torch.randn(n, device=dev)
    w = torch.randn(2048, 2048, device=dev, dtype=BF16)
    h = torch.randn(4096, 2048, device=dev, dtype=BF16)
    k = int(0.99 * (n - 1)) + 1

    def step(q):
        y = (h @ w).float()
        if q:
            t = torch.quantile(x, 0.99, interpolation="lower")  # PLANTED quantile_sort
        else:
            t = torch.kthvalue(x, k).values
        return y.clamp(max=t).sum()

    with torch.no_grad():
        blind("quantile_sort", {
            "set": 12,
            "expected": {"family": "a full sort for one order statistic (quantile instead of kthvalue)",
                         "ops_any": ["aten::quantile", "aten::sort"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes"],
            "notes": f"a bf16 [4096, 2048] x [2048, 2048] product clipped at the 99th percentile of {n:,} FP32 "
                     "values computed each step with torch.quantile(x, 0.99, interpolation='lower'), which sorts "
                     "them all",
            "twin": f"torch.kthvalue(x, {k}).values: the same value by selection",
        }, lambda: step(True), lambda: step(False))


def clone_params_loop():
    """A snapshot of every parameter each step with [p.detach().clone() for p in params] (lookahead, rollback)."""
    model = nn.Sequential(*[m for _ in range(32) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())]
                          ).to(dev, BF16)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    snap = [torch.empty_like(p) for p in params]
    x = torch.randn(2048, 1024, device=dev, dtype=BF16)

    def train(clone):
        if clone:
            prev = [p.detach().clone() for p in params]  # PLANTED clone_params_loop
        else:
            torch._foreach_copy_(snap, params)
            prev = snap
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return prev

    blind("clone_params_loop", {
        "set": 12,
        "expected": {"family": "per-parameter Python loop of small copies (launch overhead)",
                     "ops_any": ["aten::clone", "aten::copy_", "aten::empty_like"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"bf16 training of 32 Linear(1024) + LayerNorm + GELU layers, batch 2048, fused AdamW; each step "
                 f"keeps a copy of the {len(params)} parameters with p.detach().clone() in a list comprehension",
        "twin": "torch._foreach_copy_ into buffers allocated once",
    }, lambda: train(True), lambda: train(False))


def convnext_ln_channels_first():
    """ConvNeXt's channels-first LayerNorm written out (mean, sub, pow, mean, add, sqrt, div, scale, shift) on NCHW."""
    B, C, H, W, L = 64, 256, 56, 56, 6
    x0 = torch.randn(B, C, H, W, device=dev, dtype=BF16)
    dws = nn.ModuleList([nn.Conv2d(C, C, 7, padding=3, groups=C) for _ in range(L)]).to(dev, BF16)
    wt = torch.ones(C, device=dev, dtype=BF16)
    bs = torch.zeros(C, device=dev, dtype=BF16)

    def ln_manual(x):
        u = x.mean(1, keepdim=True)  # PLANTED convnext_ln_channels_first
        s = (x - u).pow(2).mean(1, keepdim=True)  # PLANTED convnext_ln_channels_first
        x = (x - u) / torch.sqrt(s + 1e-6)  # PLANTED convnext_ln_channels_first
        return wt[:, None, None] * x + bs[:, None, None]  # PLANTED convnext_ln_channels_first

    def ln_fused(x):
        return F.layer_norm(x.permute(0, 2, 3, 1), (C,), wt, bs, 1e-6).permute(0, 3, 1, 2)

    def forward(ln):
        x = x0
        for conv in dws:
            x = x + ln(conv(x))
        return x

    with torch.no_grad():
        blind("convnext_ln_channels_first", {
            "set": 12,
            "expected": {"family": "a norm written out as separate elementwise and reduction kernels",
                         "ops_any": ["aten::mean", "aten::sub", "aten::pow", "aten::div", "aten::sqrt", "aten::add",
                                     "aten::mul"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"{L} depthwise 7x7 conv blocks on [{B}, {C}, {H}, {W}] bf16 with ConvNeXt's reference "
                     "LayerNorm for channels_first data: mean, subtract, square, mean, add, sqrt, divide, scale, shift",
            "twin": "F.layer_norm over the channels of a permuted view (one fused kernel, the permute a view)",
        }, lambda: forward(ln_manual), lambda: forward(ln_fused))



# ---------------------------------------------------------------- thirteenth set (issue 39): the
# twelfth set's findings written differently, to test this session's changes on code they were not
# written against.

def inverse_right_multiply():
    """Whitening by an explicit inverse on the right, x @ torch.inverse(C), instead of a solve with left=False."""
    B, n, m = 4096, 128, 32
    C = torch.randn(B, n, n, device=dev) * 0.1 + n ** 0.5 * torch.eye(n, device=dev)
    x = torch.randn(B, m, n, device=dev)

    def step(inv):
        if inv:
            return x @ torch.inverse(C)  # PLANTED inverse_right_multiply
        return torch.linalg.solve(C, x, left=False)

    with torch.no_grad():
        blind("inverse_right_multiply", {
            "set": 13,
            "expected": {"family": "an explicit matrix inverse where a solve is needed (linear algebra)",
                         "ops_any": ["aten::inverse", "aten::linalg_inv_ex", "aten::linalg_solve_ex",
                                     "aten::linalg_lu_factor_ex", "aten::matmul", "aten::bmm"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
            "notes": f"{B:,} FP32 [{m}, {n}] blocks multiplied on the right by the inverse of their own {n}x{n} "
                     "matrix with torch.inverse, as a whitening or a change of basis does",
            "twin": "torch.linalg.solve(C, x, left=False)",
        }, lambda: step(True), lambda: step(False))


def median_large_vector():
    """A per-step median of 8M values with torch.median (one order statistic of one long vector)."""
    n = 8_000_000
    x = torch.randn(n, device=dev)
    w = torch.randn(2048, 2048, device=dev, dtype=BF16)
    h = torch.randn(4096, 2048, device=dev, dtype=BF16)

    def step(med):
        y = (h @ w).float()
        if med:
            m = torch.median(x)  # PLANTED median_large_vector
        else:
            m = torch.sort(x).values[(n - 1) // 2]
        return (y - m).abs().sum()

    with torch.no_grad():
        blind("median_large_vector", {
            "set": 13,
            "expected": {"family": "one order statistic of one long vector (a selection on few SMs)",
                         "ops_any": ["aten::median"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes", "memory-bound"],
            "notes": f"a bf16 [4096, 2048] x [2048, 2048] product centred on the median of {n:,} FP32 values, "
                     "computed each step with torch.median(x)",
            "twin": "torch.sort(x).values[(n - 1) // 2]: the same value from a device-wide sort",
        }, lambda: step(True), lambda: step(False))


def kthvalue_few_rows():
    """The 99th percentile of each of 4 long rows with torch.kthvalue along dim 1 (one block per row)."""
    r, n = 4, 2_000_000
    x = torch.randn(r, n, device=dev)
    k = int(0.99 * n)
    h = torch.randn(4096, 2048, device=dev, dtype=BF16)
    w = torch.randn(2048, 2048, device=dev, dtype=BF16)

    def step(kth):
        y = (h @ w).float()
        if kth:
            t = torch.kthvalue(x, k, dim=1).values  # PLANTED kthvalue_few_rows
        else:
            t = torch.topk(x, n - k + 1, dim=1).values[:, -1]
        return y.sum() + t.sum()

    with torch.no_grad():
        blind("kthvalue_few_rows", {
            "set": 13,
            "expected": {"family": "an order statistic over few long rows (one block per row)",
                         "ops_any": ["aten::kthvalue"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "small shapes", "memory-bound"],
            "notes": f"the 99th percentile of each row of a [{r}, {n:,}] FP32 tensor with torch.kthvalue(x, k, dim=1) "
                     "each step, beside a bf16 matmul",
            "twin": "torch.topk(x, n - k + 1, dim=1).values[:, -1]: the same values by a selection across the GPU",
        }, lambda: step(True), lambda: step(False))


def aux_loss_weights_cuda():
    """32 auxiliary losses each weighted by torch.tensor(w).cuda() every step instead of a Python float."""
    L, N, d = 32, 2048, 1024
    heads = nn.ModuleList([nn.Linear(d, 16) for _ in range(L)]).to(dev)
    trunk = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d)).to(dev)
    opt = torch.optim.AdamW([*heads.parameters(), *trunk.parameters()], lr=1e-4, fused=True)
    x = torch.randn(N, d, device=dev)
    ws = [1.0 / (i + 1) for i in range(L)]

    def train(cuda):
        h = trunk(x)
        loss = 0.0
        for head, wgt in zip(heads, ws):
            term = head(h).square().mean()
            if cuda:
                loss = loss + torch.tensor(wgt).cuda() * term  # PLANTED aux_loss_weights_cuda
            else:
                loss = loss + wgt * term
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    torch.backends.cuda.matmul.allow_tf32 = True
    blind("aux_loss_weights_cuda", {
        "set": 13,
        "expected": {"family": "a host-to-device copy per call for a constant (a Python number made a CUDA tensor)",
                     "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"a trunk and {L} auxiliary heads (TF32 allowed), fused AdamW; each head's loss weighted by "
                 "torch.tensor(w).cuda() every step: a 4-byte pageable copy to the GPU and a stream wait each",
        "twin": "the Python float w",
    }, lambda: train(True), lambda: train(False))


def ragged_unpad_loop():
    """A padded batch packed back into a flat buffer with a Python loop, flat[s:s + n] = padded[i, :n]."""
    B, d, Lmax = 384, 2048, 192
    g = torch.Generator().manual_seed(1)
    lens = torch.randint(16, Lmax + 1, (B,), generator=g).tolist()
    starts = [0]
    for n in lens[:-1]:
        starts.append(starts[-1] + n)
    padded = torch.randn(B, Lmax, d, device=dev, dtype=BF16)
    flat = torch.empty(sum(lens), d, device=dev, dtype=BF16)
    src = torch.cat([torch.arange(n) + i * Lmax for i, n in enumerate(lens)]).to(dev)

    def step(loop):
        if loop:
            for i, (s, n) in enumerate(zip(starts, lens)):
                flat[s:s + n] = padded[i, :n]  # PLANTED ragged_unpad_loop
        else:
            torch.index_select(padded.view(B * Lmax, d), 0, src, out=flat)
        return flat.float().sum()

    with torch.no_grad():
        blind("ragged_unpad_loop", {
            "set": 13,
            "expected": {"family": "a Python loop of slice copies (one small kernel per sequence) instead of one index",
                         "ops_any": ["aten::copy_", "aten::slice", "aten::select"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"{B} sequences of 16-{Lmax} tokens (d={d}, bf16) packed from a padded [B, Lmax, d] batch into "
                     "a flat buffer with flat[s:s + n] = padded[i, :n] per sequence",
            "twin": "one torch.index_select of the rows, computed once, into the flat buffer",
        }, lambda: step(True), lambda: step(False))



# ---------------------------------------------------------------- fourteenth set (issue 39), written
# 2026-12-05 with no device lent, for the next session that has one: the torch.unique counting
# finding (hot_operator) on code it was not written against, and a use of unique it must leave
# alone (deduplication with return_inverse is not a count).

def token_frequency_unique(name="token_frequency_unique", bincount=False):
    """A repetition penalty whose token counts come from torch.unique(return_counts=True) each decode step."""
    B, T, V, d, steps = 64, 2048, 50257, 2048, 8
    tokens = torch.randint(0, V, (B, T), device=dev)
    w = torch.randn(d, d, device=dev, dtype=BF16) * 0.02
    h0 = torch.randn(B, d, device=dev, dtype=BF16)
    logits0 = torch.randn(B, V, device=dev)

    def step(uniq):
        h, logits = h0, logits0.clone()
        for _ in range(steps):
            h = torch.tanh(h @ w)
            if uniq:
                ids, counts = torch.unique(tokens, return_counts=True)  # PLANTED token_frequency_unique
                freq = torch.zeros(V, device=dev).index_put_((ids,), counts.float())
            else:
                freq = (torch.bincount(tokens.flatten(), minlength=V).float() if bincount else torch.zeros(
                    V, device=dev).index_add_(0, tokens.flatten(), torch.ones(tokens.numel(), device=dev)))
            logits = logits - 0.1 * freq
        return logits, h

    with torch.no_grad():
        blind(name, {
            "set": 14,
            "expected": {"family": "sort used to count (torch.unique with return_counts)", "sync": True,
                         "ops_any": ["aten::unique", "aten::_unique2", "aten::sort"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound"],
            "notes": f"{steps} decode steps, each counting the {B}x{T} context's token ids over a {V:,}-token "
                     "vocabulary with torch.unique(return_counts=True) for a frequency penalty",
            "twin": TWIN_BINCOUNT["token_frequency_unique"] if bincount else "torch.zeros(V).index_add_(0, tokens.flatten(), ones): the counts in one scatter pass",
        }, lambda: step(True), lambda: step(False))


def class_hist_unique_int32(name="class_hist_unique_int32", bincount=False):
    """Per-head class histograms of int32 predictions with torch.unique(return_counts=True)."""
    heads, n, C, d = 4, 1 << 21, 100, 4096
    preds = [torch.randint(0, C, (n,), device=dev, dtype=torch.int32) for _ in range(heads)]
    w = torch.randn(d, d, device=dev, dtype=BF16) * 0.02
    h0 = torch.randn(2048, d, device=dev, dtype=BF16)

    def step(uniq):
        h, out = h0, []
        for p in preds:
            h = torch.relu(h @ w)
            if uniq:
                _, c = torch.unique(p, return_counts=True)  # PLANTED class_hist_unique_int32
            else:
                c = torch.bincount(p, minlength=C) if bincount else torch.zeros(C, dtype=torch.long, device=dev).index_add_(0, p.long(), torch.ones(n, dtype=torch.long, device=dev))
            out.append(c.max())
        return torch.stack(out), h

    with torch.no_grad():
        blind(name, {
            "set": 14,
            "expected": {"family": "sort used to count (torch.unique with return_counts)", "sync": True,
                         "ops_any": ["aten::unique", "aten::_unique2", "aten::sort"]},
            "wrong_causes": ["launch-bound / CUDA graphs", "compute-bound", "memory-bound"],
            "notes": f"{heads} heads' int32 predictions ({n:,} each, {C} classes) counted per step with "
                     "torch.unique(return_counts=True), between bf16 products",
            "twin": TWIN_BINCOUNT["class_hist_unique_int32"] if bincount else "torch.zeros(C).index_add_ over the predictions (one scatter pass, no sort, no sync)",
        }, lambda: step(True), lambda: step(False))


def unique_dedupe_lookup():
    """Embedding lookups deduplicated with torch.unique(return_inverse=True): a sort that is not a count."""
    n, V, d = 1 << 20, 1 << 22, 64
    ids = torch.randint(0, V, (n,), device=dev)
    table = torch.randn(V, d, device=dev, dtype=BF16)

    def step(dedupe):
        if dedupe:
            u, inv = torch.unique(ids, return_inverse=True)  # PLANTED unique_dedupe_lookup
            return table[u][inv].float().sum()
        return table[ids].float().sum()

    with torch.no_grad():
        blind("unique_dedupe_lookup", {
            "set": 14,
            "expected": {"family": "none: a deduplication whose inverse map is used is not a count; the "
                                   "counting advice must not be given",
                         "ops_any": ["aten::_unique2"]},
            "wrong_causes": ["counting (index_add_/bincount) advice", "launch-bound / CUDA graphs",
                             "compute-bound"],
            "notes": f"{n:,} int64 ids over a {V:,}-row bf16 table deduplicated with "
                     "torch.unique(return_inverse=True) before the lookup, then expanded back",
            "twin": "table[ids]: the lookup of every id, duplicates included",
        }, lambda: step(True), lambda: step(False))

# Set 14's class histogram measured its index_add_ twin slower than the sort: 2M increments onto
# 100 bins contend on the same few addresses. These two time torch.bincount (per-block histograms,
# after reading the min and the max on the host: two waits a call, the capture shows) as the twin instead, on the same mistakes: the same code and
# planted line (PLANTED_AS).

TWIN_BINCOUNT = {
    "token_frequency_unique": "torch.bincount(tokens.flatten(), minlength=V): one counting pass (after reading the min and max on the host: two waits, where unique has one)",
    "class_hist_unique_int32": "torch.bincount(p, minlength=C): one counting pass with per-block histograms (after reading the min and max on the host: two waits, where unique has one)",
}
PLANTED_AS = {"class_hist_unique_bincount": "class_hist_unique_int32",
              "token_frequency_unique_bincount": "token_frequency_unique"}


def class_hist_unique_bincount():
    """class_hist_unique_int32's mistake against a torch.bincount twin."""
    class_hist_unique_int32("class_hist_unique_bincount", bincount=True)


def token_frequency_unique_bincount():
    """token_frequency_unique's mistake against a torch.bincount twin."""
    token_frequency_unique("token_frequency_unique_bincount", bincount=True)


# Set 15 (2026-12-06): Python numbers made device tensors in three more places users report, for
# the constant_uploads finding, which was written against aux_loss_weights_cuda and
# tensor_scalar_per_step only: a masked fill with a device zero, a decode loop's temperature, and a
# GPU-bound stack of large products whose per-layer constant drains the queue.

def where_zero_tensor():
    """torch.where(h > 0, h, torch.tensor(0.0, device="cuda")) in each layer of an MLP."""
    L, N, d = 32, 1024, 1024
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.03 for _ in range(L)]
    x0 = torch.randn(N, d, device=dev, dtype=BF16)

    def forward(const):
        h = x0
        for w in ws:
            h = h @ w
            if const:
                h = torch.where(h > 0, h, torch.tensor(0.0, device=dev, dtype=BF16))  # PLANTED where_zero_tensor
            else:
                h = torch.where(h > 0, h, 0.0)
        return h

    with torch.no_grad():
        blind("where_zero_tensor", {
            "set": 15,
            "expected": {"family": "a host-to-device copy per call for a constant (torch.tensor on the device)",
                         "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"{L} layers h = relu-by-hand(h @ w), h [{N}, {d}] bf16, the zero made a device tensor with "
                     "torch.tensor(0.0, device='cuda') every layer: a pageable 2-byte copy and a stream wait each",
            "twin": "torch.where(h > 0, h, 0.0): the Python number as the third argument",
        }, lambda: forward(True), lambda: forward(False))


def temperature_decode():
    """A decode loop dividing the logits by torch.tensor(temperature, device="cuda") every token."""
    B, d, V, T = 16, 2048, 32000, 64
    emb = torch.randn(V, d, device=dev, dtype=BF16) * 0.02
    w1 = torch.randn(d, d, device=dev, dtype=BF16) * 0.02
    head = torch.randn(d, V, device=dev, dtype=BF16) * 0.02
    tok0 = torch.randint(0, V, (B,), device=dev)
    temperature = 0.7

    def generate(const):
        tok = tok0
        for _ in range(T):
            h = torch.tanh(emb[tok] @ w1)
            logits = (h @ head).float()
            if const:
                logits = logits / torch.tensor(temperature, device=dev)  # PLANTED temperature_decode
            else:
                logits = logits / temperature
            tok = torch.argmax(torch.softmax(logits, dim=-1), dim=-1)
        return tok

    with torch.no_grad():
        blind("temperature_decode", {
            "set": 15,
            "expected": {"family": "a host-to-device copy per call for a constant (torch.tensor on the device)",
                         "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"greedy decode of {T} tokens, batch {B}, width {d}, vocabulary {V} (bf16, logits in fp32); "
                     "each token divides the logits by torch.tensor(temperature, device='cuda'): a pageable 4-byte "
                     "copy and a stream wait per token",
            "twin": "logits / temperature with the Python float",
        }, lambda: generate(True), lambda: generate(False))


def scale_tensor_gpu_bound():
    """Large bf16 products each scaled by torch.tensor(c, device="cuda"): the GPU is the bound."""
    L, N, d = 16, 8192, 4096
    ws = [torch.randn(d, d, device=dev, dtype=BF16) * 0.01 for _ in range(L)]
    x0 = torch.randn(N, d, device=dev, dtype=BF16)
    scale = [1.0 - 0.01 * i for i in range(L)]

    def forward(const):
        x = x0
        for w, c in zip(ws, scale):
            if const:
                x = (x @ w) * torch.tensor(c, device=dev, dtype=BF16)  # PLANTED scale_tensor_gpu_bound
            else:
                x = (x @ w) * c
        return x

    with torch.no_grad():
        blind("scale_tensor_gpu_bound", {
            "set": 15,
            "expected": {"family": "a host-to-device copy per call for a constant (torch.tensor on the device)",
                         "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
            "wrong_causes": ["launch-bound", "memory-bound", "small shapes"],
            "notes": f"{L} products [{N}, {d}] x [{d}, {d}] bf16 (the GPU is the bound), each result scaled by "
                     "torch.tensor(c, device='cuda'): every copy waits for the stream, draining the queue",
            "twin": "the Python float c",
        }, lambda: forward(True), lambda: forward(False))


def clamp_bounds_cuda():
    """Activations clamped between torch.tensor(-c).cuda() and torch.tensor(c).cuda() in training."""
    L, N, d = 24, 2048, 1024
    layers = nn.ModuleList([nn.Linear(d, d) for _ in range(L)]).to(dev)
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4, fused=True)
    x = torch.randn(N, d, device=dev)
    c = 3.0

    def train(cuda):
        h = x
        for layer in layers:
            h = layer(h)
            if cuda:
                h = torch.clamp(h, torch.tensor(-c).cuda(), torch.tensor(c).cuda())  # PLANTED clamp_bounds_cuda
            else:
                h = torch.clamp(h, -c, c)
        loss = h.square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    torch.backends.cuda.matmul.allow_tf32 = True
    blind("clamp_bounds_cuda", {
        "set": 16,
        "expected": {"family": "a host-to-device copy per call for a constant (a Python number made a CUDA tensor)",
                     "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"fp32 training (TF32 allowed) of {L} Linear({d}) layers, batch {N}, fused AdamW; each activation "
                 "clamped between torch.tensor(-c).cuda() and torch.tensor(c).cuda(): two 4-byte pageable copies "
                 "to the GPU and two stream waits a layer",
        "twin": "torch.clamp(h, -c, c) with Python floats",
    }, lambda: train(True), lambda: train(False))


def loss_scale_once():
    """One Python number a step made a device tensor (a loss scale): too few to be a pattern."""
    L, N, d = 24, 2048, 1024
    layers = nn.Sequential(*[nn.Linear(d, d) for _ in range(L)]).to(dev)
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4, fused=True)
    x = torch.randn(N, d, device=dev)
    scale = 1024.0

    def train(cuda):
        loss = layers(x).square().mean()
        if cuda:
            loss = loss * torch.tensor(scale, device=dev)  # PLANTED loss_scale_once
        else:
            loss = loss * scale
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    torch.backends.cuda.matmul.allow_tf32 = True
    blind("loss_scale_once", {
        "set": 16,
        "expected": {"family": "none: one 4-byte copy a step, below the constant_uploads finding's 8 a step",
                     "ops_any": ["aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
        "notes": f"fp32 training (TF32 allowed) of {L} Linear({d}) layers, batch {N}, fused AdamW; the loss scaled "
                 "by torch.tensor(scale, device='cuda') once a step: one 4-byte pageable copy and one stream wait",
        "twin": "loss * scale with the Python float",
    }, lambda: train(True), lambda: train(False))


# ---------------------------------------------------------------- seventeenth set (issue 39): captured
# before any change for them, to test what tracehound says on code no rule was written against: a
# sampling call that reads its input's validity on the host, an FFT sized with a large prime factor,
# and a pad copied out before every convolution that could pad by itself.

def multinomial_decode():
    """Sampling each token with torch.multinomial, whose validity check reads a reduction on the host."""
    B, d, V, L, N = 128, 4096, 32000, 8, 32
    layers = [torch.randn(d, d, device=dev, dtype=BF16) * 0.02 for _ in range(L)]
    head = torch.randn(d, V, device=dev, dtype=BF16) * 0.02
    emb = torch.randn(V, d, device=dev, dtype=BF16) * 0.02
    tok0 = torch.randint(0, V, (B,), device=dev)

    def decode(sync):
        tok = tok0
        for _ in range(N):
            h = emb[tok]
            for w in layers:
                h = F.gelu(h @ w)
            probs = torch.softmax((h @ head).float(), dim=-1)
            if sync:
                tok = torch.multinomial(probs, 1).squeeze(1)  # PLANTED multinomial_decode
            else:
                q = torch.empty_like(probs).exponential_(1)
                tok = (probs / q).argmax(dim=-1)
        return tok

    with torch.no_grad():
        blind("multinomial_decode", {
            "set": 17,
            "expected": {"family": "an operator's own validation: eleven small kernels launched every call",
                         "ops_any": ["aten::multinomial", "aten::_assert_async", "aten::item"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"sampling decode of {N} tokens a step, batch {B}: {L} bf16 [{d}, {d}] layers and a "
                     f"[{d}, {V}] head, then torch.multinomial(probs, 1), which validates probs every call "
                     "(PyTorch 2.11: min, max, sum, compares, two _assert_async; before, an .item() sync)",
            "twin": "the same draw without the check: probs / exponential noise, argmax (gpt-fast's "
                    "multinomial_sample_one_no_sync)",
        }, lambda: decode(True), lambda: decode(False))


def fft_prime_length():
    """FFT convolution at the exact output length, whose factor 503 sends cuFFT to Bluestein's algorithm."""
    B, L, K = 8192, 12000, 4097
    x = torch.randn(B, L, device=dev)
    k = torch.randn(B, K, device=dev)

    def mistake():
        n = L + K - 1  # 16096 = 2^5 * 503
        y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)  # PLANTED fft_prime_length
        return y[:, :L + K - 1]

    def twin():
        n = 16384
        y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)
        return y[:, :L + K - 1]

    with torch.no_grad():
        blind("fft_prime_length", {
            "set": 17,
            "expected": {"family": "FFT at a length with a large prime factor (cuFFT's Bluestein path)",
                         "ops_any": ["aten::_fft_r2c", "aten::_fft_c2r", "aten::fft_rfft", "aten::fft_irfft"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"FFT convolution of {B} fp32 signals of {L} samples with {K}-tap filters: rfft, multiply, "
                     f"irfft at n = {L + K - 1} = 2^5 * 503 (the exact linear-convolution length)",
            "twin": "the same at n = 16384 (the next power of two; the result truncated to the same length)",
        }, mistake, twin)


def pad_then_conv():
    """F.pad before each 3x3 convolution instead of the convolution's own padding=1, in training."""
    Bn, C, S, L = 64, 64, 128, 8
    convs = nn.ModuleList([nn.Conv2d(C, C, 3) for _ in range(L)]).to(dev, dtype=BF16,
                                                                     memory_format=torch.channels_last)
    opt = torch.optim.SGD(convs.parameters(), lr=1e-4)
    x = torch.randn(Bn, C, S, S, device=dev, dtype=BF16).to(memory_format=torch.channels_last)

    def train(pad):
        h = x
        for conv in convs:
            if pad:
                h = F.relu(F.conv2d(F.pad(h, (1, 1, 1, 1)), conv.weight, conv.bias))  # PLANTED pad_then_conv
            else:
                h = F.relu(F.conv2d(h, conv.weight, conv.bias, padding=1))
        loss = h.float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("pad_then_conv", {
        "set": 17,
        "expected": {"family": "a padded copy of every activation before a convolution that can pad itself",
                     "ops_any": ["aten::pad", "aten::constant_pad_nd", "ConstantPadNdBackward0"]},
        "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
        "notes": f"bf16 channels_last training of {L} 3x3 convolutions of {C} channels on [{Bn}, {C}, {S}, {S}], "
                 "each input zero-padded with F.pad(h, (1, 1, 1, 1)) and convolved with padding=0",
        "twin": "the convolutions' own padding=1 on the unpadded input",
    }, lambda: train(True), lambda: train(False))


# ---------------------------------------------------------------- eighteenth set (issue 39): FFT
# lengths in forms the fft_lengths rule was not written against (a 2-D real transform, a complex
# one), and a negative: a length of 2s, 3s, 5s and 7s that cuFFT computes without Bluestein.

def fft2_odd_images():
    """A frequency-domain filter over images of 1021 x 1021 pixels (a prime side), rfft2/irfft2."""
    B, C, S = 32, 3, 1021
    img = torch.randn(B, C, S, S, device=dev)
    h_odd = torch.randn(S, S // 2 + 1, device=dev, dtype=torch.complex64)
    h_pow2 = torch.randn(1024, 513, device=dev, dtype=torch.complex64)

    def mistake():
        return torch.fft.irfft2(torch.fft.rfft2(img) * h_odd, s=(S, S))  # PLANTED fft2_odd_images

    def twin():
        return torch.fft.irfft2(torch.fft.rfft2(img, s=(1024, 1024)) * h_pow2, s=(1024, 1024))[..., :S, :S]

    with torch.no_grad():
        blind("fft2_odd_images", {
            "set": 18,
            "expected": {"family": "FFT at a length with a large prime factor (cuFFT's Bluestein path), 2-D",
                         "ops_any": ["aten::_fft_r2c", "aten::_fft_c2r", "aten::fft_rfft2", "aten::fft_irfft2"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"a frequency-domain filter over {B}x{C} fp32 images of {S}x{S} pixels (1021 is prime): "
                     "rfft2, a multiply, irfft2 at the images' own size",
            "twin": "the same filter at s=(1024, 1024), cropped back to 1021 x 1021",
        }, mistake, twin)


def fft_c2c_prime():
    """A complex FFT filter over signals of 3001 samples (a prime length): fft, multiply, ifft."""
    B, N = 16384, 3001
    x = torch.randn(B, N, device=dev, dtype=torch.complex64)
    h_odd = torch.randn(N, device=dev, dtype=torch.complex64)
    h_pow2 = torch.randn(4096, device=dev, dtype=torch.complex64)

    def mistake():
        return torch.fft.ifft(torch.fft.fft(x) * h_odd)  # PLANTED fft_c2c_prime

    def twin():
        return torch.fft.ifft(torch.fft.fft(x, n=4096) * h_pow2)[..., :N]

    with torch.no_grad():
        blind("fft_c2c_prime", {
            "set": 18,
            "expected": {"family": "FFT at a length with a large prime factor (cuFFT's Bluestein path), complex",
                         "ops_any": ["aten::_fft_c2c", "aten::fft_fft", "aten::fft_ifft"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"{B} complex64 signals of {N} samples (a prime): fft, a multiply, ifft",
            "twin": "the same at n=4096, cropped back to 3001 samples",
        }, mistake, twin)


def fft_smooth_length():
    """A negative: an FFT convolution at n = 15120 = 2^4 * 3^3 * 5 * 7, which cuFFT computes fast."""
    B, L, K = 8192, 11024, 4097
    x = torch.randn(B, L, device=dev)
    k = torch.randn(B, K, device=dev)

    def conv(n):
        y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)  # PLANTED fft_smooth_length
        return y[:, :L + K - 1]

    with torch.no_grad():
        blind("fft_smooth_length", {
            "set": 18,
            "expected": {"family": "none: a length of 2s, 3s, 5s and 7s needs no Bluestein kernels",
                         "ops_any": ["aten::_fft_r2c", "aten::_fft_c2r"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"FFT convolution of {B} fp32 signals of {L} samples with {K}-tap filters at the exact "
                     f"length n = {L + K - 1} = 2^4 * 3^3 * 5 * 7",
            "twin": "the same at n = 16384",
        }, lambda: conv(L + K - 1), lambda: conv(16384))


# ---------------------------------------------------------------- nineteenth set (issue 39): three
# mistakes users report, captured before any change for them: cross-entropy over logits turned to
# (N, C, T), diffusion noise drawn on the CPU and copied each step, and a ReLU written as a boolean
# mask assignment.

def ce_channels_middle():
    """F.cross_entropy(logits.transpose(1, 2), labels): the (N, C, T) form, where the softmax runs over a strided dim."""
    B, T, d, V = 8, 1024, 1024, 32000
    head = nn.Linear(d, V, bias=False).to(dev, BF16)
    opt = torch.optim.SGD(head.parameters(), lr=1e-4)
    h = torch.randn(B, T, d, device=dev, dtype=BF16)
    labels = torch.randint(0, V, (B, T), device=dev)

    def train(middle):
        logits = head(h).float()
        if middle:
            loss = F.cross_entropy(logits.transpose(1, 2), labels)  # PLANTED ce_channels_middle
        else:
            loss = F.cross_entropy(logits.view(-1, V), labels.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("ce_channels_middle", {
        "set": 19,
        "expected": {"family": "a softmax and NLL over a non-last (strided) class dim, and the copy to make it contiguous",
                     "ops_any": ["aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax",
                                 "aten::nll_loss2d", "aten::nll_loss2d_forward", "aten::contiguous", "aten::clone",
                                 "aten::copy_", "LogSoftmaxBackward0", "NllLoss2DBackward0"]},
        "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
        "notes": f"LM head {d} -> {V} in bf16 over [{B}, {T}] tokens, fp32 logits; the loss takes the logits as "
                 "(N, C, T) with logits.transpose(1, 2), the form cross_entropy documents for K-dimensional inputs",
        "twin": "F.cross_entropy(logits.view(-1, V), labels.view(-1)): the class dim last",
    }, lambda: train(True), lambda: train(False))


def noise_randn_cpu():
    """Diffusion-style training drawing its noise with torch.randn(x.shape).to(device): a CPU RNG and a pageable copy per step."""
    Bn, C, S, W, L = 64, 4, 64, 256, 6
    net = nn.Sequential(nn.Conv2d(C, W, 3, padding=1),
                        *[m for _ in range(L) for m in (nn.GELU(), nn.Conv2d(W, W, 3, padding=1))],
                        nn.GELU(), nn.Conv2d(W, C, 3, padding=1)).to(dev, BF16, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    x0 = torch.randn(Bn, C, S, S, device=dev, dtype=BF16).to(memory_format=torch.channels_last)

    def train(cpu):
        if cpu:
            noise = torch.randn(x0.shape).to(dev)  # PLANTED noise_randn_cpu
        else:
            noise = torch.randn(x0.shape, device=dev)
        xt = (0.8 * x0 + 0.6 * noise).to(BF16)
        loss = (net(xt).float() - noise).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("noise_randn_cpu", {
        "set": 19,
        "expected": {"family": "a host-side random draw and a pageable host-to-device copy every step",
                     "ops_any": ["aten::randn", "aten::normal_", "aten::to", "aten::_to_copy", "aten::copy_"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes", "launch-bound / CUDA graphs"],
        "notes": f"bf16 channels_last denoiser of {L + 2} 3x3 convolutions ({W} channels) on [{Bn}, {C}, {S}, {S}] "
                 "latents, fused AdamW; each step draws its noise with torch.randn(x.shape) on the CPU (fp32, "
                 f"{Bn * C * S * S:,} values) and copies it to the GPU with .to(device)",
        "twin": "torch.randn(x.shape, device='cuda'): the draw on the GPU",
    }, lambda: train(True), lambda: train(False))


def bool_mask_assign():
    """A ReLU by hand, h[h < 0] = 0, after each layer: index_put_ with a boolean mask, a nonzero and a sync each."""
    L, N, d = 16, 4096, 2048
    lins = nn.ModuleList([nn.Linear(d, d) for _ in range(L)]).to(dev, BF16)
    opt = torch.optim.AdamW(lins.parameters(), lr=1e-4, fused=True)
    x = torch.randn(N, d, device=dev, dtype=BF16)

    def train(mask):
        h = x
        for lin in lins:
            h = lin(h)
            if mask:
                h[h < 0] = 0  # PLANTED bool_mask_assign
            else:
                h = h.masked_fill(h < 0, 0)
        loss = h.float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    blind("bool_mask_assign", {
        "set": 19,
        "expected": {"family": "a boolean-mask assignment: nonzero reads the count on the host (a sync) every call",
                     "ops_any": ["aten::index_put_", "aten::_index_put_impl_", "aten::nonzero", "aten::index"]},
        "wrong_causes": ["compute-bound", "memory-bound", "small shapes", "launch-bound / CUDA graphs"],
        "notes": f"bf16 training of {L} Linear({d}) layers, batch {N}, fused AdamW; after each layer h[h < 0] = 0 "
                 "(index_put_ with a boolean mask: a nonzero, whose count the host reads, then a scatter)",
        "twin": "h.masked_fill(h < 0, 0): the same values, no nonzero and no sync",
    }, lambda: train(True), lambda: train(False))


# ---------------------------------------------------------------- twentieth set (issue 39): three
# more reported mistakes, captured before any change for them: cuDNN's deterministic mode under
# transposed 1-D convolutions, rotary tables rebuilt in every layer of a decode step, and logits
# computed for every prompt position when generation reads the last.

def cudnn_deterministic_convt():
    """torch.backends.cudnn.deterministic = True in the training of a transposed-convolution upsampler."""
    net = nn.Sequential(nn.ConvTranspose1d(256, 256, 33, stride=15), nn.ReLU(),
                        nn.Conv1d(256, 256, 3, padding=1)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    x = torch.randn(8, 256, 2000, device=dev)

    def train(det):
        torch.backends.cudnn.deterministic = det  # PLANTED cudnn_deterministic_convt
        loss = net(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.backends.cudnn.deterministic = False

    blind("cudnn_deterministic_convt", {
        "set": 20,
        "expected": {"family": "cuDNN restricted to deterministic algorithms: slower convolution kernels",
                     "ops_any": ["aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
                                 "aten::cudnn_convolution_transpose", "aten::convolution_backward",
                                 "aten::conv_transpose1d", "ConvolutionBackward0"]},
        "wrong_causes": ["launch-bound / CUDA graphs", "small shapes"],
        "notes": "fp32 training of ConvTranspose1d(256, 256, 33, stride=15) + ReLU + Conv1d(256, 256, 3) on "
                 "[8, 256, 2000] (an upsampler to 30018 samples), SGD; torch.backends.cudnn.deterministic = True "
                 "for the step",
        "twin": "the same step with cudnn.deterministic = False",
    }, lambda: train(True), lambda: train(False))


def rope_per_layer():
    """Decode that rebuilds the rotary cos/sin tables for every position in every layer, every token."""
    L, B, H, D, P, N = 16, 8, 16, 64, 1024, 32
    d, T = H * D, P + N
    ws = [(torch.randn(d, 3 * d, device=dev, dtype=BF16) * 0.02, torch.randn(d, d, device=dev, dtype=BF16) * 0.02)
          for _ in range(L)]
    kc = [torch.randn(B, H, T, D, device=dev, dtype=BF16) for _ in range(L)]
    vc = [torch.randn(B, H, T, D, device=dev, dtype=BF16) for _ in range(L)]
    x0 = torch.randn(B, 1, d, device=dev, dtype=BF16)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, device=dev).float() / D))

    def tables():
        f = torch.outer(torch.arange(T, device=dev, dtype=torch.float32), inv_freq)
        e = torch.cat((f, f), dim=-1)
        return e.cos().to(BF16), e.sin().to(BF16)

    def rot(x, c, s):
        x1, x2 = x.chunk(2, dim=-1)
        return x * c + torch.cat((-x2, x1), dim=-1) * s

    def decode(per_layer):
        x = x0
        cos, sin = tables()
        for i in range(N):
            pos = P + i
            for (wqkv, wo), k_cache, v_cache in zip(ws, kc, vc):
                if per_layer:
                    f = torch.outer(torch.arange(T, device=dev, dtype=torch.float32), inv_freq)  # PLANTED rope_per_layer
                    e = torch.cat((f, f), dim=-1)  # PLANTED rope_per_layer
                    cos, sin = e.cos().to(BF16), e.sin().to(BF16)  # PLANTED rope_per_layer
                q, k, v = (x @ wqkv).view(B, 1, 3, H, D).permute(2, 0, 3, 1, 4)
                q, k = rot(q, cos[pos], sin[pos]), rot(k, cos[pos], sin[pos])
                k_cache[:, :, pos:pos + 1] = k
                v_cache[:, :, pos:pos + 1] = v
                a = F.scaled_dot_product_attention(q, k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1])
                x = x + a.transpose(1, 2).reshape(B, 1, d) @ wo
        return x

    with torch.no_grad():
        blind("rope_per_layer", {
            "set": 20,
            "expected": {"family": "rotary tables rebuilt per layer and token: small kernels and their launches",
                         "ops_any": ["aten::outer", "aten::arange", "aten::cat", "aten::cos", "aten::sin",
                                     "aten::mul"]},
            "wrong_causes": ["compute-bound", "memory-bound", "small shapes"],
            "notes": f"greedy decode of {N} tokens after a {P}-token cache, batch {B}, {L} layers of width {d} "
                     f"({H} heads of {D}), bf16, SDPA over the cache; in every layer of every token the rotary "
                     f"cos/sin tables are rebuilt for all {T} positions (arange, outer, cat, cos, sin, casts)",
            "twin": "the tables built once per decode and indexed by position",
        }, lambda: decode(True), lambda: decode(False))


def logits_all_positions():
    """Prefill that computes the LM head for every prompt position and then reads only the last row."""
    B, T, d, V = 4, 2048, 2048, 128256
    head = torch.randn(V, d, device=dev, dtype=BF16) * 0.02
    h = torch.randn(B, T, d, device=dev, dtype=BF16)

    def prefill(all_rows):
        if all_rows:
            logits = (h @ head.T).float()  # PLANTED logits_all_positions
            return logits[:, -1].argmax(-1)
        return (h[:, -1] @ head.T).float().argmax(-1)

    with torch.no_grad():
        blind("logits_all_positions", {
            "set": 20,
            "expected": {"family": "a product over rows whose results are dropped (unneeded work at full speed)",
                         "ops_any": ["aten::matmul", "aten::mm", "aten::linear", "aten::to", "aten::_to_copy",
                                     "aten::copy_"]},
            "wrong_causes": ["compute-bound", "launch-bound / CUDA graphs", "small shapes"],
            "notes": f"the LM head ({d} -> {V}, bf16) over all {B} x {T} prompt positions, upcast to fp32, then the "
                     "last position's argmax",
            "twin": "the head over the last position only (transformers' logits_to_keep=1)",
        }, lambda: prefill(True), lambda: prefill(False))


SCENARIOS = [cat_kv_cache, naive_attention, moe_mask_sync, conv_nchw, index_backward_dupes, no_kv_cache,
             sort_for_topk, onehot_ce, sdpa_mask_fallback,
             pairwise_broadcast, mha_need_weights, gqa_repeat_kv, categorical_validate,
             float64_numpy, unfold_conv, per_sample_loop, unique_counts,
             broadcast_dot, einsum_attention, per_head_loop, expand_contiguous_mask,
             isfinite_assert, rmsnorm_manual, fp32_no_tf32, loader_in_process,
             adam_foreach_off, dropout_manual, onehot_embedding, lstm_cell_loop,
             grad_norm_item, deterministic_index_add, ce_mask_select, empty_cache_step,
             cudnn_benchmark_varying, checkpoint_all, mask_built_on_cpu, repeat_interleave_sync, ema_param_loop,
             checkpoint_reentrant, class_mean_loop, cpu_metric_numpy, tensor_from_ndarray_list, vocab_unaligned,
             embedding_dense_adam, sync_for_timing, state_dict_to_cpu,
             embedding_dense_adagrad, grad_clip_manual, randperm_cpu_index, cumsum_loop, bmm_tiny_matrices,
             print_loss, grad_accum_div_loop, clip_value_sgd_loop, matmul_4x4_transforms, embedding_bag_dense_sgd,
             gelu_erf_manual, stack_row_loop,
             embedding_dense_adam_foreach, weight_decay_loop, zero_grad_loop, bmm_3x3_compose,
             swiglu_width_unaligned, ragged_pad_loop,
             linalg_inv_solve, embedding_max_norm, tensor_scalar_per_step, quantile_sort, clone_params_loop,
             convnext_ln_channels_first,
             inverse_right_multiply, median_large_vector, kthvalue_few_rows, aux_loss_weights_cuda,
             ragged_unpad_loop,
             token_frequency_unique, class_hist_unique_int32, unique_dedupe_lookup,
             class_hist_unique_bincount, token_frequency_unique_bincount,
             where_zero_tensor, temperature_decode, scale_tensor_gpu_bound,
             clamp_bounds_cuda, loss_scale_once,
             multinomial_decode, fft_prime_length, pad_then_conv,
             fft2_odd_images, fft_c2c_prime, fft_smooth_length,
             ce_channels_middle, noise_randn_cpu, bool_mask_assign,
             cudnn_deterministic_convt, rope_per_layer, logits_all_positions]

# Public reports of each mistake (found after the capture with the search tool, and added to the
# truth files then): what users hit, or the framework's own account of the slow path.
REPORTS = {
    "cat_kv_cache": [
        "https://github.com/huggingface/transformers/pull/24115",
        "https://github.com/foundation-model-stack/foundation-model-stack/pull/84"
    ],
    "naive_attention": [
        "https://github.com/pytorch/pytorch/issues/98505",
        "https://PyTorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"
    ],
    "moe_mask_sync": [
        "https://github.com/jingyaogong/minimind/issues/835",
        "https://github.com/pytorch/pytorch/issues/12461"
    ],
    "conv_nchw": [
        "https://docs.mosaicml.com/projects/composer/en/v0.3.0/method_cards/channels_last.html",
        "https://docs.pytorch.org/tutorials/intermediate/memory_format_tutorial.html"
    ],
    "index_backward_dupes": [
        "https://github.com/pytorch/pytorch/issues/15245",
        "https://github.com/pytorch/pytorch/issues/41162"
    ],
    "no_kv_cache": [
        "https://discuss.huggingface.co/t/what-is-the-purpose-of-use-cache-in-decoder/958/2",
        "https://github.com/huggingface/transformers/issues/1390"
    ],
    "sort_for_topk": [
        "https://github.com/vllm-project/vllm/pull/32234",
        "https://github.com/vllm-project/vllm/pull/5698"
    ],
    "onehot_ce": [
        "https://github.com/keras-team/keras/pull/22169",
        "https://discuss.pytorch.org/t/does-nn-crossentropyloss-internally-build-a-one-hot-encoding-of-the-target/159010"
    ],
    "sdpa_mask_fallback": [
        "https://github.com/keras-team/keras/pull/22910",
        "https://github.com/Dao-AILab/flash-attention/issues/1321"
    ],
    "pairwise_broadcast": [
        "https://discuss.pytorch.org/t/efficient-distance-matrix-computation/9065",
        "https://github.com/pytorch/pytorch/issues/9406"
    ],
    "mha_need_weights": [
        "https://github.com/pytorch/pytorch/issues/100347",
        "https://discuss.pytorch.org/t/causal-masking-hint/222699"
    ],
    "gqa_repeat_kv": [
        "https://github.com/karpathy/nanochat/pull/127",
        "https://github.com/huggingface/transformers/pull/36218"
    ],
    "categorical_validate": [
        "https://github.com/pytorch/pytorch/issues/66800",
        "https://github.com/pytorch/pytorch/pull/48743"
    ],
    "float64_numpy": [
        "https://github.com/dingo-gw/dingo/pull/55",
        "https://openillumi.com/en/en-pytorch-double-expected-float-fix"
    ],
    "unfold_conv": [
        "https://discuss.pytorch.org/t/make-custom-conv2d-layer-efficient-wrt-speed-and-memory/70175",
        "https://github.com/AlexeyAB/darknet/issues/2775"
    ],
    "per_sample_loop": [
        "https://docs.pytorch.org/tutorials/intermediate/per_sample_grads.html",
        "https://github.com/kornia/kornia/pull/3823"
    ],
    "unique_counts": [
        "https://github.com/pytorch/pytorch/issues/107132",
        "https://docs.pytorch.org/docs/stable/generated/torch.unique.html"
    ],
    "broadcast_dot": [
        "https://github.com/torch/torch7/issues/1174",
        "https://github.com/pytorch/pytorch/issues/9406"
    ],
    "einsum_attention": [
        "https://github.com/lucidrains/muse-maskgit-pytorch/issues/35",
        "https://github.com/lucidrains/x-transformers/issues/136"
    ],
    "per_head_loop": [
        "https://github.com/karpathy/nanoGPT/issues/536",
        "https://github.com/eubinean/the-clean-transformer/issues/13"
    ],
    "expand_contiguous_mask": [
        "https://github.com/ByteDance-Seed/Depth-Anything-3/pull/268",
        "https://github.com/pytorch/pytorch/issues/116472"
    ],
    "isfinite_assert": [
        "https://github.com/huggingface/transformers/issues/33693",
        "https://github.com/pytorch/pytorch/issues/36853"
    ],
    "rmsnorm_manual": [
        "https://github.com/pytorch/pytorch/issues/72643",
        "https://github.com/vllm-project/vllm/pull/16"
    ],
    "fp32_no_tf32": [
        "https://github.com/tensorpix/benchmarking-cv-models/issues/8",
        "https://github.com/mittagessen/kraken/issues/505"
    ],
    "loader_in_process": [
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide",
        "https://github.com/NVIDIA-NeMo/Speech/issues/1204"
    ],
    "adam_foreach_off": [
        "https://github.com/pytorch/pytorch/pull/92306",
        "https://github.com/pytorch/pytorch/pull/43507"
    ],
    "dropout_manual": [
        "https://github.com/pytorch/pytorch/pull/18375",
        "https://github.com/pytorch/pytorch/pull/9666"
    ],
    "onehot_embedding": [
        "https://github.com/bytedance/PXDesign/pull/17",
        "https://github.com/andportnoy/nanograd"
    ],
    "lstm_cell_loop": [
        "https://gist.github.com/MilesQLi/22d116118fd762b20608a19b36c32fc0"
    ],
    # The seventh set's, found before its capture.
    "grad_norm_item": [
        "https://github.com/deepspeedai/DeepSpeed/pull/4436",
        "https://github.com/pytorch/pytorch/pull/38615"
    ],
    "deterministic_index_add": [
        "https://github.com/pytorch/pytorch/pull/171381",
        "https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"
    ],
    "ce_mask_select": [
        "https://github.com/pytorch/pytorch/issues/12461",
        "https://github.com/pytorch/pytorch/issues/31245"
    ],
    "empty_cache_step": [
        "https://github.com/huggingface/transformers/issues/31372",
        "https://discuss.pytorch.org/t/about-torch-cuda-empty-cache/34232/2"
    ],
    "cudnn_benchmark_varying": [
        "https://github.com/pytorch/pytorch/issues/2759",
        "https://github.com/pytorch/vision/pull/5985"
    ],
    "checkpoint_all": [
        "https://github.com/QwenLM/Qwen-Image/issues/69",
        "https://huggingface.co/docs/transformers/en/grad_checkpointing"
    ],
    "mask_built_on_cpu": [
        "https://github.com/huggingface/transformers/issues/31294",
        "https://github.com/deepspeedai/Megatron-DeepSpeed/pull/411"
    ],
    "repeat_interleave_sync": [
        "https://docs.pytorch.org/docs/stable/generated/torch.repeat_interleave.html",
        "https://github.com/pytorch/torchtitan/pull/3274"
    ],
    "ema_param_loop": [
        "https://github.com/huggingface/diffusers/pull/7685",
        "https://github.com/ultralytics/ultralytics/pull/25315"
    ],
    "checkpoint_reentrant": [
        "https://huggingface.co/docs/transformers/en/grad_checkpointing",
        "https://github.com/Nerogar/OneTrainer/issues/40"
    ],
    "class_mean_loop": [
        "https://github.com/HarryVolek/PyTorch_Speaker_Verification/pull/33",
        "https://github.com/pytorch/pytorch/issues/12461"
    ],
    "cpu_metric_numpy": [
        "https://github.com/Lightning-AI/pytorch-lightning/issues/3050",
        "https://github.com/pytorch/ignite/issues/240"
    ],
    "tensor_from_ndarray_list": [
        "https://github.com/pytorch/pytorch/issues/57467",
        "https://github.com/facebook/Ax/pull/4798"
    ],
    "vocab_unaligned": [
        "https://github.com/rasbt/LLMs-from-scratch/pull/582",
        "https://github.com/RobertRiachi/nanoPALM/pull/6"
    ],
    "embedding_dense_adam": [
        "https://github.com/pytorch/pytorch/issues/5309",
        "https://github.com/neubig/nn4nlp-code/pull/26"
    ],
    "sync_for_timing": [
        "https://github.com/HuguesTHOMAS/KPConv-PyTorch/issues/22",
        "https://github.com/NVIDIA/apex/issues/316"
    ],
    "state_dict_to_cpu": [
        "https://github.com/ecmwf/WeatherGenerator/issues/2520",
        "https://github.com/asappresearch/flambe/pull/168"
    ],
    "embedding_dense_adagrad": [
        "https://discuss.pytorch.org/t/sparse-embedding-failing-with-adam-torch-cuda-sparse-floattensor-has-no-attribute-addcmul/5589",
        "https://github.com/pytorch/pytorch/issues/18404"
    ],
    "grad_clip_manual": [
        "https://github.com/pytorch/pytorch/issues/31474",
        "https://github.com/pytorch/pytorch/pull/91846"
    ],
    "randperm_cpu_index": [
        "https://github.com/lightly-ai/lightly/issues/323",
        "https://github.com/pytorch/pytorch/pull/186484"
    ],
    "cumsum_loop": [
        "https://github.com/NVIDIA-NeMo/labs-molt/pull/29",
        "https://github.com/johnma2006/mamba-minimal/issues/18"
    ],
    "bmm_tiny_matrices": [
        "https://github.com/pytorch/pytorch/issues/113743",
        "https://github.com/pytorch/pytorch/pull/48184"
    ],
    "print_loss": [
        "https://github.com/pytorch/pytorch/pull/126829",
        "https://github.com/meta-pytorch/torchtune/pull/522"
    ],
    "grad_accum_div_loop": [
        "https://github.com/NVIDIA/DeepLearningExamples/issues/625",
        "https://discuss.pytorch.org/t/how-to-implement-accumulated-gradient/3822/8"
    ],
    "clip_value_sgd_loop": [
        "https://github.com/pytorch/pytorch/pull/43724",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_value_.html"
    ],
    "matmul_4x4_transforms": [
        "https://discuss.pytorch.org/t/multiplying-large-batches-of-small-matrices-fast/201181",
        "https://github.com/kornia/kornia/pull/687"
    ],
    "embedding_bag_dense_sgd": [
        "https://github.com/facebookresearch/dlrm/issues/15",
        "https://github.com/pytorch/pytorch/issues/109282"
    ],
    "gelu_erf_manual": [
        "https://github.com/pytorch/pytorch/pull/20665",
        "https://github.com/huggingface/transformers/issues/1347"
    ],
    "stack_row_loop": [
        "https://github.com/kornia/kornia/pull/3823",
        "https://github.com/pytorch/pytorch/issues/22462"
    ],
    "embedding_dense_adam_foreach": [
        "https://github.com/pytorch/pytorch/issues/5309",
        "https://discuss.pytorch.org/t/sparse-embedding-failing-with-adam-torch-cuda-sparse-floattensor-has-no-attribute-addcmul/5589"
    ],
    "weight_decay_loop": [
        "https://github.com/pytorch/pytorch/pull/70484",
        "https://github.com/pytorch/pytorch/pull/45408"
    ],
    "zero_grad_loop": [
        "https://github.com/pytorch/pytorch/pull/92731",
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html"
    ],
    "bmm_3x3_compose": [
        "https://github.com/pytorch/pytorch/issues/113743",
        "https://discuss.pytorch.org/t/multiplying-large-batches-of-small-matrices-fast/201181"
    ],
    "swiglu_width_unaligned": [
        "https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html",
        "https://github.com/meta-llama/llama/issues/1019"
    ],
    "ragged_pad_loop": [
        "https://github.com/pytorch/pytorch/issues/94167",
        "https://github.com/huggingface/sentence-transformers/pull/3942"
    ],
    "linalg_inv_solve": [
        "https://docs.pytorch.org/docs/stable/generated/torch.linalg.inv.html",
        "https://github.com/pytorch/pytorch/issues/42265"
    ],
    "embedding_max_norm": [
        "https://github.com/pytorch/pytorch/issues/1278",
        "https://github.com/pytorch/pytorch/issues/26596"
    ],
    "tensor_scalar_per_step": [
        "https://github.com/pytorch/pytorch/issues/120996",
        "https://github.com/sgl-project/sglang/pull/32575"
    ],
    "quantile_sort": [
        "https://github.com/pytorch/pytorch/issues/75599",
        "https://github.com/pytorch/pytorch/issues/64947"
    ],
    "clone_params_loop": [
        "https://github.com/pytorch/pytorch/issues/107162",
        "https://github.com/pytorch/pytorch/pull/94820"
    ],
    "convnext_ln_channels_first": [
        "https://github.com/pytorch/pytorch/issues/71465",
        "https://github.com/open-mmlab/mmpretrain/issues/931"
    ],
    "inverse_right_multiply": [
        "https://docs.pytorch.org/docs/stable/generated/torch.linalg.inv.html",
        "https://github.com/pytorch/pytorch/issues/42265"
    ],
    "median_large_vector": [
        "https://github.com/pytorch/pytorch/issues/75599",
        "https://github.com/pytorch/pytorch/issues/64947"
    ],
    "kthvalue_few_rows": [
        "https://github.com/pytorch/pytorch/issues/75599",
        "https://github.com/pytorch/pytorch/issues/64947"
    ],
    "aux_loss_weights_cuda": [
        "https://github.com/pytorch/pytorch/issues/120996",
        "https://github.com/sgl-project/sglang/pull/32575"
    ],
    "ragged_unpad_loop": [
        "https://github.com/pytorch/pytorch/issues/94167",
        "https://github.com/huggingface/sentence-transformers/pull/3942"
    ],
    "token_frequency_unique": [
        "https://github.com/pytorch/pytorch/pull/31144",
        "https://github.com/pytorch/pytorch/issues/53194"
    ],
    "class_hist_unique_int32": [
        "https://github.com/pytorch/pytorch/issues/53194",
        "https://github.com/pytorch/pytorch/issues/96626"
    ],
    "unique_dedupe_lookup": [
        "https://github.com/pytorch/pytorch/issues/15804",
        "https://github.com/pytorch/pytorch/pull/31144"
    ],
    "where_zero_tensor": [
        "https://github.com/pytorch/pytorch/pull/40336",
        "https://github.com/NVIDIA/TransformerEngine/pull/1941"
    ],
    "temperature_decode": [
        "https://github.com/pytorch/pytorch/issues/190217",
        "https://github.com/pytorch/pytorch/issues/120996"
    ],
    "scale_tensor_gpu_bound": [
        "https://github.com/pytorch/pytorch/issues/190217",
        "https://github.com/NVIDIA/TransformerEngine/pull/1941"
    ],
    "clamp_bounds_cuda": [
        "https://github.com/RobotLocomotion/pytorch-dense-correspondence/issues/78",
        "https://github.com/pytorch/pytorch/issues/120996"
    ],
    "loss_scale_once": [
        "https://github.com/pytorch/pytorch/issues/190217",
        "https://github.com/pytorch/pytorch/issues/120996"
    ],
    "multinomial_decode": [
        "https://github.com/pytorch-labs/gpt-fast/blob/main/generate.py",
        "https://github.com/rasbt/reasoning-from-scratch/pull/178"
    ],
    "fft_prime_length": [
        "https://github.com/mnicely/cufft_examples/issues/6",
        "https://github.com/numpy/numpy/issues/8639"
    ],
    "pad_then_conv": [
        "https://github.com/keras-team/keras/pull/18713",
        "https://github.com/TRI-ML/packnet-sfm/issues/247"
    ],
    "fft2_odd_images": [
        "https://github.com/mnicely/cufft_examples/issues/6",
        "https://github.com/gnudatalanguage/gdl/issues/1892"
    ],
    "fft_c2c_prime": [
        "https://github.com/PX4/flight_review/pull/114",
        "https://github.com/scipy/scipy/issues/2629"
    ],
    "fft_smooth_length": [
        "https://github.com/cupy/cupy/pull/3571",
        "https://github.com/arrayfire/arrayfire/issues/1003"
    ],
    "ce_channels_middle": [
        "https://github.com/pytorch/pytorch/issues/4893",
        "https://github.com/huggingface/candle/pull/1057"
    ],
    "noise_randn_cpu": [
        "https://github.com/nianticlabs/monodepth2/pull/413",
        "https://github.com/atong01/conditional-flow-matching/issues/102"
    ],
    # bool_mask_assign, captured 2026-12-06 on torch 2.11: h[h < 0] = 0 runs as masked_fill_, with no
    # nonzero and no sync (the truth files' truth_corrected).
    "bool_mask_assign": [
        "https://github.com/pytorch/pytorch/issues/57515",
        "https://github.com/pytorch/pytorch/issues/12461"
    ],
    "cudnn_deterministic_convt": [
        "https://github.com/espnet/espnet/issues/3041",
        "https://github.com/pytorch/pytorch/issues/28777"
    ],
    "rope_per_layer": [
        "https://github.com/NVIDIA/Megatron-LM/issues/1646",
        "https://github.com/huggingface/transformers/pull/19991"
    ],
    "logits_all_positions": [
        "https://github.com/huggingface/transformers/pull/31292",
        "https://github.com/huggingface/transformers/issues/30860"
    ]
}


if __name__ == "__main__":
    for s in SCENARIOS:
        if not ONLY or s.__name__ in ONLY:
            s()
            for sfx, _ in MODES:
                add_truth(f"blind_{s.__name__}{sfx}", {"reports": REPORTS.get(s.__name__, [])})
