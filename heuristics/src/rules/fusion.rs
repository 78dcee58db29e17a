//! Chains of unfused memory-bound kernels: what one fused kernel would save.
//!
//! Reads the membound model of [`crate::membound`]: every non-matrix operator call with its
//! bytes, kernels and origin. A chain is a run of consecutive kernels on one stream whose
//! operators all have a bytes model, come from one origin (one call of a user Python frame,
//! or autograd's backward pass on one thread, or one thread without Python frames), and touch
//! tensors of the same or broadcast-compatible shapes; any other GPU operation on the
//! stream, a kernel without a model (GEMMs, Triton kernels torch.compile already fused), a
//! change of origin or shape, or an event the host recorded or waited on between two launches
//! ends it. A chain needs two elementwise, reduction, index or optimizer operators (a norm or
//! softmax with one elementwise operator beside it is an epilogue no fused op replaces).
//!
//! One fused kernel would read the chain's inputs once and write its result once: the
//! tensors an operator reads that no earlier operator of the chain wrote (by shape and
//! element type: the trace records no tensor identities), the state it updates in place, and
//! the last operator's output. Its time is those bytes at the best bandwidth an operator of
//! the chain achieved (at most the HBM peak), plus the largest time one operator spends beyond
//! its traffic at that rate (fusing removes passes over memory, not a reduction's structure or
//! fixed costs), and at least the chain's shortest kernel. Where nine tenths or more of an
//! operator's traffic is a tensor the chain itself makes and consumes (a broadcast
//! `x[:, None] - y[None]` written only to be reduced), fusing removes that tensor: its excess
//! counts in the share of its traffic that stays, and it sets no floor. Impact: the chains'
//! time less that;
//! reported from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Instance, Row, fmt_ns, metrics};
use crate::membound::{DeviceModel, Family, MemClass, Origin, broadcastable, random_fill};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use tracehound_parsers::{HostKind, NONE, Trace};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "unfused_elementwise";

/// The rule.
pub struct Fusion;

/// Elementwise, reduction, index or optimizer operators a chain needs. One is not a fusion
/// opportunity, whatever its kernels; nor is a library-fused operator (a norm, softmax,
/// dropout) or a copy beside one elementwise operator (a residual add before
/// `F.layer_norm`): that epilogue only a compiler fuses, and no fused op replaces it.
const MIN_OPS: usize = 2;

/// An operator whose traffic is at least this share a tensor of the chain's own making moves
/// that tensor and little else: its slowness is that tensor's. Below it (a BatchNorm backward
/// reading a fused ReLU's gradient beside its own input), the excess is the operator's.
const INTERNAL: f64 = 0.9;

/// Below this time at the chain's best bandwidth, a tensor's traffic is lost in a kernel's
/// fixed costs (launch, tail): fusing it away leaves the kernel as slow, ns.
const LATENCY_NS: f64 = 10_000.0;

/// A broadcast whose output is this many times the bytes of its inputs is materialising a
/// product of them (pairwise differences, an outer sum), not an elementwise pass: 8× is far
/// past what a per-row scale or bias adds.
const EXPANSION: f64 = 8.0;

/// Whether an operator family counts toward [`MIN_OPS`].
fn counts(f: Family) -> bool {
    matches!(
        f,
        Family::Elementwise | Family::Reduction | Family::Index | Family::Optimizer
    )
}

/// Findings below this share of the window are left out.
const MIN_SHARE: f64 = 0.01;

/// Operators named in a row label before it is cut.
const LABEL_OPS: usize = 10;

/// One chain: the kernels (GPU op indices) and calls (indices into the device's calls).
struct Chain {
    kernels: Vec<u32>,
    calls: Vec<u32>,
    reference: u32,
    origin: Origin,
}

/// A chain with its times.
struct Priced {
    chain: Chain,
    ns: i64,
    fused_ns: i64,
    best_tbps: f64,
}

impl Priced {
    fn saving(&self) -> i64 {
        self.ns - self.fused_ns
    }
}

impl Rule for Fusion {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "chains of consecutive memory-bound kernels (hand-written norms, activations, per-parameter updates) that one fused kernel would replace"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mb = cx.membound();
        let mut out = Vec::new();
        for d in cx.trace.devices() {
            let Some(m) = mb.device(d) else { continue };
            if m.calls.is_empty() {
                continue;
            }
            let peak = mb.summary_of(d).and_then(|s| s.hbm_tbps);
            let priced: Vec<Priced> = chains(cx, m)
                .into_iter()
                .filter_map(|c| price(cx.trace, m, c, peak))
                .filter(|p| p.saving() > 0)
                .collect();
            if let Some(f) = finding(cx, m, &priced) {
                out.push(f);
            }
        }
        out
    }
}

/// The chains of one device, stream by stream, in start order.
fn chains(cx: &Ctx, m: &DeviceModel) -> Vec<Chain> {
    let t = cx.trace;
    let mb = cx.membound();
    let mut by_stream: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (k, it) in m.items.iter().enumerate() {
        by_stream
            .entry(t.gpu_ops[it.op as usize].stream)
            .or_default()
            .push(k);
    }
    let mut out = Vec::new();
    for items in by_stream.values() {
        let mut cur: Option<Chain> = None;
        let close = |c: Option<Chain>, out: &mut Vec<Chain>| {
            if let Some(c) = c
                && c.calls
                    .iter()
                    .filter(|&&k| counts(m.models[m.calls[k as usize].model as usize].family))
                    .count()
                    >= MIN_OPS
            {
                out.push(c);
            }
        };
        for &k in items {
            let it = m.items[k];
            if it.call == NONE {
                close(cur.take(), &mut out);
                continue;
            }
            let call = &m.calls[it.call as usize];
            let model = &m.models[call.model as usize];
            let joins = cur.as_ref().is_some_and(|c| {
                let last = *c.calls.last().unwrap_or(&NONE);
                let prev = *c.kernels.last().unwrap_or(&it.op);
                last == it.call
                    || (c.origin == call.origin
                        && broadcastable(
                            &m.shapes[model.full as usize],
                            &m.shapes[c.reference as usize],
                        )
                        && !mb.fenced(t, prev, it.op))
            });
            if !joins {
                close(cur.take(), &mut out);
                cur = Some(Chain {
                    kernels: Vec::new(),
                    calls: Vec::new(),
                    reference: model.full,
                    origin: call.origin,
                });
            }
            if let Some(c) = cur.as_mut() {
                c.kernels.push(it.op);
                if c.calls.last() != Some(&it.call) {
                    c.calls.push(it.call);
                }
                let numel = |s: u32| m.shapes[s as usize].numel();
                if numel(model.full) > numel(c.reference) {
                    c.reference = model.full;
                }
            }
        }
        close(cur.take(), &mut out);
    }
    out
}

/// The chain's time and the time one fused kernel would need.
fn price(t: &Trace, m: &DeviceModel, chain: Chain, peak_tbps: Option<f64>) -> Option<Priced> {
    let ns: i64 = chain
        .kernels
        .iter()
        .map(|&k| t.gpu_ops[k as usize].dur())
        .sum();
    let shortest = chain
        .kernels
        .iter()
        .map(|&k| t.gpu_ops[k as usize].dur())
        .min()?;
    // Bytes per ns (GB/s) of each call; the memory-bound ones, when any, set the rate.
    let rate = |want: Option<MemClass>| {
        chain
            .calls
            .iter()
            .map(|&c| &m.calls[c as usize])
            .filter(|c| want.is_none_or(|w| c.class == w) && c.ns > 0)
            .map(|c| m.models[c.model as usize].bytes() / c.ns as f64)
            .fold(0.0, f64::max)
    };
    let mut best = rate(Some(MemClass::Memory));
    if best <= 0.0 {
        best = rate(None);
    }
    if let Some(p) = peak_tbps {
        best = best.min(p * 1e3);
    }
    if best <= 0.0 {
        return None;
    }
    // The fused kernel's traffic. Tensors are told apart by shape and element type only, so
    // the count leans high (a smaller saving) where shapes repeat:
    // - a tensor updated in place is state the program keeps (a parameter, an optimizer
    //   moment): the fused kernel reads and writes it too, unless the operator just before
    //   created it (autograd accumulating into a fresh gradient, `t = x * y; t.add_(z)`);
    // - each other shape read from outside the chain counts once (as many of it as one
    //   operator reads), a shape an earlier operator wrote is read inside the kernel;
    // - the last operator's output is written (unless counted as state above).
    // An expanded input is read once, as the operators' own models count it.
    let bytes = |s: u32| m.shapes[s as usize].read_bytes();
    let mut produced: FxHashSet<u32> = FxHashSet::default();
    let mut outside: FxHashMap<u32, usize> = FxHashMap::default();
    let mut state = 0.0;
    let mut last_out = None;
    // The tensor the operator before made (out of place), which an in-place one after it
    // updates without it being state.
    let mut prev_made: Option<u32> = None;
    // Per call, the bytes of its traffic that stay inside the fused kernel: tensors an earlier
    // operator of the chain wrote, and its own output when a later one reads it.
    let mut internal: Vec<f64> = Vec::with_capacity(chain.calls.len());
    for (j, &c) in chain.calls.iter().enumerate() {
        let model = &m.models[m.calls[c as usize].model as usize];
        // A copy into a tensor its conversion just allocated (`x.to(torch.float32)`,
        // `.clone()`, `.contiguous()`), or a fill of one a factory just allocated
        // (`torch.rand_like`), writes a new tensor like an out-of-place operator: the fused
        // kernel keeps it in registers, not as state.
        let converts = model.in_place == Some(false) && into_new_tensor(t, m.calls[c as usize].span);
        let in_place = model.in_place.filter(|_| !converts);
        let mut inner: f64 = model
            .inputs
            .iter()
            .skip(usize::from(converts))
            .filter(|s| produced.contains(s))
            .map(|&s| bytes(s))
            .sum();
        if j + 1 < chain.calls.len() && in_place.is_none() {
            inner += model.output.map_or(0.0, bytes);
        }
        internal.push(inner);
        let mut inputs = model.inputs.get(usize::from(converts)..).unwrap_or_default();
        let mut counted = false;
        if let (Some(reads), Some(own)) = (in_place, model.output) {
            let fresh = prev_made.is_some_and(|p| p == own);
            if !fresh {
                state += bytes(own) * if reads { 2.0 } else { 1.0 };
            }
            counted = !fresh;
            inputs = inputs.get(1..).unwrap_or_default();
        }
        let mut here: FxHashMap<u32, usize> = FxHashMap::default();
        for &s in inputs {
            if !produced.contains(&s) {
                *here.entry(s).or_default() += 1;
            }
        }
        for (s, n) in here {
            let e = outside.entry(s).or_default();
            *e = (*e).max(n);
        }
        if let Some(o) = model.output {
            produced.insert(o);
        }
        last_out = model.output.filter(|_| !counted);
        prev_made = model.output.filter(|_| in_place.is_none());
    }
    let fused_bytes: f64 = state
        + outside
            .iter()
            .map(|(&s, &n)| n as f64 * bytes(s))
            .sum::<f64>()
        + last_out.map_or(0.0, bytes);
    // Fusing removes passes over memory, not what an operator spends beyond its traffic at
    // that rate (fixed costs, a reduction's structure, compute): the fused kernel pays the
    // largest such excess once (a BatchNorm backward stays as slow beside the ReLU backward
    // fused into it; a hand-written LayerNorm's broadcast multiplies leave a fused one at
    // its measured 30 µs, not the 16 µs its traffic needs).
    // Where most of an operator's traffic is a tensor the chain makes and consumes (a
    // broadcast `x[:, None] - y[None]` written only to be reduced), its slowness is that
    // tensor's, and fusing removes the tensor: its excess counts in the share of its traffic
    // that stays.
    // Per call: its modelled bytes, and whether most of them are what fusing removes (a
    // modelled call always has some bytes).
    // A random fill's time is its generator's arithmetic, which the fused kernel does too
    // (`F.dropout`'s kernel takes as long as `rand_like` alone): never what fusing removes.
    let absorbed: Vec<(f64, bool)> = chain
        .calls
        .iter()
        .zip(&internal)
        .map(|(&c, &inner)| {
            let b = m.models[m.calls[c as usize].model as usize].bytes();
            let random = random_fill(t.str(t.host_spans[m.calls[c as usize].span as usize].name));
            (b, !random && inner >= INTERNAL * b && inner / best >= LATENCY_NS)
        })
        .collect();
    let excess = chain
        .calls
        .iter()
        .zip(&internal)
        .zip(&absorbed)
        .map(|((&c, &inner), &(b, gone))| {
            let stays = if gone {
                ((b - inner) / b).clamp(0.0, 1.0)
            } else {
                1.0
            };
            // A mixed-type elementwise op's time beyond its traffic is TensorIterator's
            // casting path, which a fused kernel does not take.
            let md = &m.models[m.calls[c as usize].model as usize];
            let stays = if md.mixed { 0.0 } else { stays };
            (m.calls[c as usize].ns as f64 - b / best) * stays
        })
        .fold(0.0, f64::max);
    // A fused kernel is no faster than the shortest kernel of the chain, unless most of that
    // kernel's traffic is what fusing removes.
    let floor = if absorbed.iter().all(|&(_, gone)| !gone) {
        shortest
    } else {
        chain
            .calls
            .iter()
            .zip(&absorbed)
            .filter(|&(_, &(_, gone))| !gone)
            .map(|(&c, _)| m.calls[c as usize].ns)
            .min()
            .unwrap_or(0)
    };
    let fused_ns = ((fused_bytes / best + excess) as i64).max(floor);
    Some(Priced {
        chain,
        ns,
        fused_ns,
        best_tbps: best / 1e3,
    })
}

/// Whether copy or fill operator `span` fills a tensor its caller just allocated: the copy
/// inside a dtype or device conversion, a clone or a contiguous copy; the fill inside a
/// factory (`rand_like` is `empty_like` + `uniform_`, `zeros` is `empty` + `zero_`).
fn into_new_tensor(t: &Trace, span: u32) -> bool {
    let up = |i: u32| t.host_spans.get(i as usize).map_or(NONE, |s| s.parent);
    let mut parent = up(span);
    // `zeros` is `empty` + `zero_`, and `zero_` is a `fill_`: look through it.
    if t
        .host_spans
        .get(parent as usize)
        .is_some_and(|p| t.str(p.name) == "aten::zero_")
    {
        parent = up(parent);
    }
    t.host_spans.get(parent as usize).is_some_and(|p| {
        p.kind == HostKind::CpuOp
            && matches!(
                t.str(p.name),
                "aten::_to_copy"
                    | "aten::to"
                    | "aten::clone"
                    | "aten::contiguous"
                    | "aten::rand"
                    | "aten::rand_like"
                    | "aten::randn"
                    | "aten::randn_like"
                    | "aten::randint"
                    | "aten::randint_like"
                    | "aten::bernoulli"
                    | "aten::zeros"
                    | "aten::zeros_like"
                    | "aten::ones"
                    | "aten::ones_like"
                    | "aten::full"
                    | "aten::full_like"
                    | "aten::new_zeros"
                    | "aten::new_ones"
                    | "aten::new_full"
            )
    })
}

/// Consecutive equal names written once with their count (`aten::mul ×2`).
fn compress<'a>(names: impl Iterator<Item = &'a str>, max: usize) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for n in names {
        match runs.last_mut() {
            Some((last, k)) if *last == n => *k += 1,
            _ => runs.push((n, 1)),
        }
    }
    let more = runs.len() > max;
    let mut parts: Vec<String> = runs
        .iter()
        .take(max)
        .map(|&(n, k)| if k > 1 { format!("{n} ×{k}") } else { n.into() })
        .collect();
    if more {
        parts.push("…".into());
    }
    parts.join(" → ")
}

/// The class of a module frame: `nn.Module: LayerNormUnfused_0` is `LayerNormUnfused`.
fn module_class(name: &str) -> &str {
    let m = name.strip_prefix("nn.Module: ").unwrap_or(name);
    m.rsplit_once('_')
        .filter(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        .map_or(m, |(c, _)| c)
}

/// The user frame of a chain and the module whose `forward` it is, when the frame is one:
/// `LayerNormUnfused: membound.py(63): forward`.
fn frame_label(t: &Trace, frame: u32) -> String {
    let name = t.str(t.host_spans[frame as usize].name);
    for a in t.ancestors(frame) {
        let s = &t.host_spans[a as usize];
        if s.kind != HostKind::Python {
            continue;
        }
        let n = t.str(s.name);
        if n.starts_with("nn.Module: ") {
            return format!("{}: {name}", module_class(n));
        }
        if tracehound_parsers::is_user_frame(n) {
            break;
        }
    }
    name.to_string()
}

/// Where a chain comes from, in words, and its Python frame when it has one.
fn origin_label(t: &Trace, m: &DeviceModel, chain: &Chain) -> (String, Option<String>) {
    // Inside an optimizer's step, its range names the code better than the user's frame.
    let optimizer = chain
        .calls
        .iter()
        .map(|&c| m.calls[c as usize].optimizer)
        .find(|&o| o != NONE)
        .map(|o| {
            let n = t.str(t.host_spans[o as usize].name);
            n.strip_prefix("Optimizer.step#").unwrap_or(n).to_string()
        });
    // The modules the calls ran in below the frame, in order (library models record their
    // modules but no user frame of their own).
    let mut modules: Vec<u32> = chain
        .calls
        .iter()
        .map(|&c| m.calls[c as usize].module)
        .filter(|&s| s != NONE)
        .collect();
    modules.dedup();
    let modules = compress(
        modules.iter().map(|&s| module_class(t.str(t.host_spans[s as usize].name))),
        4,
    );
    match chain.origin {
        Origin::Frame(f) => {
            let frame = frame_label(t, f);
            let label = match (optimizer, modules.is_empty()) {
                (Some(o), _) => format!("{o} in {frame}"),
                (None, false) => format!("{modules} in {frame}"),
                (None, true) => frame,
            };
            (label, Some(t.str(t.host_spans[f as usize].name).to_string()))
        }
        Origin::Backward(..) => {
            let mut nodes: Vec<u32> = chain
                .calls
                .iter()
                .map(|&c| m.calls[c as usize].node)
                .filter(|&n| n != NONE)
                .collect();
            nodes.dedup();
            let names = nodes.iter().map(|&n| {
                let s = t.str(t.host_spans[n as usize].name);
                s.strip_prefix("autograd::engine::evaluate_function: ")
                    .unwrap_or(s)
            });
            (
                format!("backward ({})", compress(names, LABEL_OPS)),
                None,
            )
        }
        Origin::Thread(_, tid) => (
            match (optimizer, modules.is_empty()) {
                (Some(o), _) => format!("{o} on thread {tid}"),
                (None, false) => format!("{modules} on thread {tid}"),
                (None, true) => format!("thread {tid}, no Python frame recorded"),
            },
            None,
        ),
    }
}

/// What the chains are, for the advice.
#[derive(Default)]
struct Kinds {
    norm: bool,
    activation: bool,
    backward: bool,
    /// Saving in optimizer chains, ns.
    optimizer_ns: i64,
    /// Saving in chains that broadcast into a much larger tensor and reduce it, ns.
    expand_ns: i64,
    /// Saving in all chains, ns.
    saving_ns: i64,
    /// A chain draws a random tensor, compares it and multiplies by the result: dropout
    /// written out.
    dropout: bool,
    frames: Vec<String>,
}

fn finding(cx: &Ctx, m: &DeviceModel, priced: &[Priced]) -> Option<Finding> {
    let t = cx.trace;
    let saving: i64 = priced.iter().map(Priced::saving).sum();
    if priced.is_empty() || cx.window.share(saving) < MIN_SHARE {
        return None;
    }
    let chain_ns: i64 = priced.iter().map(|p| p.ns).sum();
    let fused_ns: i64 = priced.iter().map(|p| p.fused_ns).sum();
    let kernels: usize = priced.iter().map(|p| p.chain.kernels.len()).sum();
    let op_name = |c: u32| t.str(t.host_spans[m.calls[c as usize].span as usize].name);
    // Rows: chains of one origin, operator sequence and shape, summed.
    struct Group {
        count: u64,
        ns: i64,
        fused_ns: i64,
        saving: i64,
        kernels: usize,
        best: f64,
        frame: Option<String>,
    }
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut kinds = Kinds {
        saving_ns: saving,
        ..Kinds::default()
    };
    let mut by_origin: BTreeMap<String, i64> = BTreeMap::new();
    for p in priced {
        let c = &p.chain;
        let (origin, frame) = origin_label(t, m, c);
        let short = match c.origin {
            Origin::Backward(..) => "the backward pass".to_string(),
            _ => origin.clone(),
        };
        *by_origin.entry(short).or_default() += p.saving();
        let ops = compress(c.calls.iter().map(|&k| op_name(k)), LABEL_OPS);
        let shape = &m.shapes[c.reference as usize];
        // The element type of the call whose tensor is the chain's reference shape (not of
        // a 0-dim counter that broadcasts with anything).
        let dtype = c
            .calls
            .iter()
            .map(|&k| &m.models[m.calls[k as usize].model as usize])
            .find(|md| md.full == c.reference)
            .map_or("", |md| md.dtype);
        let shape_text = if shape.list {
            "tensor lists".to_string()
        } else {
            format!("{:?} {dtype}", shape.dims)
        };
        let label = format!("{origin}: {ops} over {shape_text}");
        let g = groups.entry(label).or_insert(Group {
            count: 0,
            ns: 0,
            fused_ns: 0,
            saving: 0,
            kernels: 0,
            best: 0.0,
            frame: frame.clone(),
        });
        g.count += 1;
        g.ns += p.ns;
        g.fused_ns += p.fused_ns;
        g.saving += p.saving();
        g.kernels += c.kernels.len();
        g.best = g.best.max(p.best_tbps);
        let names: Vec<&str> = c.calls.iter().map(|&k| op_name(k)).collect();
        let has = |ks: &[&str]| names.iter().any(|n| ks.iter().any(|k| n.contains(k)));
        let families: Vec<Family> = c
            .calls
            .iter()
            .map(|&k| m.models[m.calls[k as usize].model as usize].family)
            .collect();
        match c.origin {
            Origin::Backward(..) => kinds.backward = true,
            _ => {
                // A norm divides by a root of the variance: a reduction with a division
                // alone is a mean, a softmax's sum or a sampler's normalisation, not a norm.
                kinds.norm |= families.contains(&Family::Reduction)
                    && has(&["rsqrt", "sqrt", "var", "std"]);
                // An activation formula reduces nothing; exp beside a reduction is a softmax
                // or logsumexp (torch.logsumexp itself runs as such a chain).
                kinds.activation |= has(&["tanh", "erf", "sigmoid", "exp"])
                    && !families.contains(&Family::Reduction);
                // Exact names: `aten::ge` is a prefix of `aten::gelu`, `aten::le` of `aten::lerp`.
                let is = |ks: &[&str]| names.iter().any(|n| ks.contains(n));
                kinds.dropout |= is(&["aten::uniform_", "aten::bernoulli_"])
                    && is(&["aten::lt", "aten::gt", "aten::le", "aten::ge", "aten::bernoulli_"])
                    && is(&["aten::mul", "aten::mul_", "aten::where", "aten::masked_fill"]);
            }
        }
        // A broadcast that writes a tensor many times larger than what it reads, reduced
        // later in the same chain: the intermediate exists only to be shrunk again.
        let expands = c.calls.iter().enumerate().any(|(j, &k)| {
            let md = &m.models[m.calls[k as usize].model as usize];
            let read: f64 = md.inputs.iter().map(|&x| m.shapes[x as usize].read_bytes()).sum();
            md.output.is_some_and(|o| {
                m.shapes[o as usize].bytes() >= EXPANSION * read.max(1.0)
            }) && families[j + 1..].contains(&Family::Reduction)
        });
        if expands {
            kinds.expand_ns += p.saving();
        }
        if c.calls.iter().any(|&k| m.calls[k as usize].optimizer != NONE)
            || families.contains(&Family::Optimizer)
        {
            kinds.optimizer_ns += p.saving();
        }
        if let Some(f) = frame
            && !kinds.frames.contains(&f)
        {
            kinds.frames.push(f);
        }
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(label, g)| Row {
            label: format!(
                "{label}: {} kernels a chain, {} → {} fused at {:.1} TB/s",
                g.kernels / g.count.max(1) as usize,
                fmt_ns(g.ns / g.count.max(1) as i64),
                fmt_ns(g.fused_ns / g.count.max(1) as i64),
                g.best
            ),
            count: g.count,
            time_ns: g.saving,
            bytes: None,
            python_frame: g.frame,
            cause: None,
            share: Some(g.saving as f64 / saving.max(1) as f64),
        })
        .collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    let per_step = match cx.window.source {
        crate::window::WindowSource::Steps { count, .. } if count > 0 => Some(count as i64),
        _ => None,
    };
    let step_text = per_step
        .map(|n| format!(", {} per step", fmt_ns(saving / n)))
        .unwrap_or_default();
    // Where most of the saving is: the origin with the largest sum.
    let top = by_origin
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|o| o.0)
        .unwrap_or_default();
    let kernel_ns = cx
        .membound()
        .summary_of(m.device)
        .map_or(0, |s| s.kernel_ns);
    let mut f = new_finding(
        cx,
        ID,
        Some(m.device),
        format!(
            "Unfused memory-bound chains: {} chains of {kernels} kernels take {}, fused {} (saving {}{step_text}), most in {top}",
            priced.len(),
            fmt_ns(chain_ns),
            fmt_ns(fused_ns),
            fmt_ns(saving),
        ),
        saving,
        Confidence::Medium,
        format!(
            "{} chains of consecutive memory-bound kernels on one stream (same or broadcast-compatible shapes, one Python frame or autograd's backward each) take {} ({:.0}% of kernel time); one fused kernel per chain reads its inputs once and writes its result once at the best bandwidth the chain reached: {} (estimate; the trace records shapes, not tensor identities)",
            priced.len(),
            fmt_ns(chain_ns),
            100.0 * chain_ns as f64 / kernel_ns.max(1) as f64,
            fmt_ns(fused_ns)
        ),
    );
    f.breakdown = rows;
    let mut worst: Vec<&Priced> = priced.iter().collect();
    worst.sort_by(|a, b| {
        b.saving()
            .cmp(&a.saving())
            .then(a.chain.kernels.cmp(&b.chain.kernels))
    });
    f.instances = worst
        .iter()
        .take(cx.config.max_instances)
        .map(|p| {
            let c = &p.chain;
            let first = &t.gpu_ops[c.kernels[0] as usize];
            let last = c
                .kernels
                .iter()
                .map(|&k| t.gpu_ops[k as usize].end)
                .max()
                .unwrap_or(first.end);
            let (origin, frame) = origin_label(t, m, c);
            Instance {
                start_ns: first.start,
                dur_ns: last - first.start,
                offset_ms: cx.window.offset_ms(first.start),
                what: format!(
                    "{} kernels of {} ({}): {} of kernel time, fused {}",
                    c.kernels.len(),
                    origin,
                    compress(c.calls.iter().map(|&k| op_name(k)), LABEL_OPS),
                    fmt_ns(p.ns),
                    fmt_ns(p.fused_ns)
                ),
                cpu_op: Some(op_name(c.calls[0]).to_string()),
                python_frame: frame,
            }
        })
        .collect();
    // Already on the multi-tensor path (the default where every parameter is on the GPU):
    // foreach=True is no change, only fused=True is.
    let foreach = t
        .strings
        .matching(|n| n.starts_with("aten::_foreach_"))
        .contains(&true);
    f.advice = advice(&kinds, foreach);
    f.metrics = metrics([
        ("chains", priced.len() as f64),
        ("kernels", kernels as f64),
        ("chain_ns", chain_ns as f64),
        ("fused_ns", fused_ns as f64),
        ("saving_ns", saving as f64),
        (
            "saving_per_step_ns",
            per_step.map_or(saving as f64, |n| (saving / n) as f64),
        ),
    ]);
    Some(f)
}

fn advice(k: &Kinds, foreach: bool) -> Vec<String> {
    let mut out = Vec::new();
    let optimizer = if foreach {
        "Optimizer updates as chains of multi-tensor (foreach) kernels: construct the optimizer with fused=True (torch.optim.AdamW(params, fused=True), also Adam, SGD, Adagrad), so each parameter group updates in one fused kernel instead of one per arithmetic step."
    } else {
        "Per-parameter optimizer updates: construct the optimizer with fused=True (torch.optim.AdamW(params, fused=True), also Adam, SGD, Adagrad) or foreach=True, so all parameters update in a few multi-tensor kernels."
    };
    // The optimizer's advice leads when its chains hold most of the saving.
    if 2 * k.optimizer_ns >= k.saving_ns && k.optimizer_ns > 0 {
        out.push(optimizer.to_string());
    }
    if 2 * k.expand_ns >= k.saving_ns && k.expand_ns > 0 {
        out.push("A broadcast (x[:, None] - y[None] and the like) writes a tensor many times larger than its inputs only for a reduction to shrink it: compute the result without it, torch.cdist for distances, a matrix product for dot products and squared distances (|x|² + |y|² - 2·x·yᵀ), or torch.compile, which fuses the broadcast into the reduction.".to_string());
    }
    if k.norm {
        out.push("A hand-written norm (mean, subtract, variance, rsqrt, scale): use the fused op, nn.LayerNorm / F.layer_norm, nn.RMSNorm / F.rms_norm (PyTorch 2.4+) or F.group_norm: one kernel forward, one or two backward.".to_string());
    }
    if k.dropout {
        out.push("Dropout written out (a random tensor compared with p and multiplied in): F.dropout(x, p, training=self.training) / nn.Dropout draws the mask in registers and applies it in one kernel.".to_string());
    }
    if k.activation {
        out.push("A hand-written activation: use the fused one, F.gelu(x, approximate=\"tanh\") for the tanh formula, F.silu for x * sigmoid(x), F.mish, F.softplus: one kernel forward and one backward.".to_string());
    }
    let frames = if k.frames.is_empty() {
        String::new()
    } else {
        let mut f = k.frames.clone();
        f.truncate(3);
        format!(" ({})", f.join(", "))
    };
    out.push(format!(
        "{} the module that runs them{frames}: inductor generates one Triton kernel per chain, forward and backward.",
        if out.is_empty() { "torch.compile" } else { "Or torch.compile" }
    ));
    if k.backward {
        out.push("The backward chains are autograd's gradients of forward chains like these: the fused op or torch.compile fuses them too.".to_string());
    }
    if k.optimizer_ns > 0 && 2 * k.optimizer_ns < k.saving_ns {
        out.push(optimizer.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind;

    const BIG: &str = "[[8192, 4096], [8192, 4096]]";
    const ONE: &str = "[[8192, 4096]]";

    /// An operator at `at` µs on the host launching one kernel that runs `[start, end)` µs.
    fn op(tb: &mut TB, name: &str, dims: &str, at: i64, kernel: &str, start: i64, end: i64) {
        let types = if dims == BIG {
            r#"["float", "float"]"#
        } else {
            r#"["float"]"#
        };
        tb.span(HostKind::CpuOp, name, at * 1000, at * 1000 + 5_000);
        let args = tracehound_parsers::OpArgs {
            input_dims: tb.t.strings.intern(dims),
            input_types: tb.t.strings.intern(types),
            call_stack: 0,
        };
        let args = tb.t.args.intern(args);
        tb.t.host_spans.last_mut().unwrap().args = args;
        tb.op(
            GpuOpKind::Kernel,
            kernel,
            7,
            start * 1000,
            end * 1000,
            Some(at * 1000 + 1_000),
        );
    }

    const EW: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(int)";

    /// `x * sigmoid(x)` written out in `act`, with `between` launched between the two ops.
    fn silu(between: Option<&str>) -> Trace {
        let mut tb = TB::new();
        tb.span(HostKind::Python, "train.py(10): act", 0, 1_000_000);
        op(&mut tb, "aten::sigmoid", ONE, 10, EW, 200, 270);
        match between {
            Some("event") => {
                tb.span(HostKind::Runtime, "cudaEventRecord", 17_000, 18_000);
            }
            Some(kernel) => {
                tb.op(GpuOpKind::Kernel, kernel, 7, 270_000, 280_000, Some(17_000));
            }
            None => {}
        }
        op(&mut tb, "aten::mul", BIG, 20, EW, 280, 380);
        tb.build()
    }

    #[test]
    fn a_written_out_silu_is_one_chain_with_its_saving() {
        let f = crate::testutil::check(&Fusion, &silu(None));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        // 170 µs of kernels; fused: x read once and the result written once (268 MB) at the
        // mul's 4.03 GB/ms, plus the sigmoid's 3.4 µs beyond its traffic at that rate.
        let fused = (2.0 * 134_217_728.0 / (402_653_184.0 / 100_000.0) + 3_333.0) as i64;
        assert_eq!(f.metrics["chain_ns"], 170_000.0);
        assert!((f.metrics["fused_ns"] - fused as f64).abs() < 2.0, "{:?}", f.metrics);
        assert!(f.breakdown[0].label.starts_with("train.py(10): act: aten::sigmoid → aten::mul"));
        assert!(f.advice[0].contains("F.silu"), "{:?}", f.advice);
    }

    #[test]
    fn generated_kernels_gemms_and_events_end_a_chain() {
        for between in [
            "triton_poi_fused_mul_sigmoid_0",
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas",
            "event",
        ] {
            let f = crate::testutil::check(&Fusion, &silu(Some(between)));
            assert!(f.is_empty(), "{between}: {:?}", f.first().map(|f| &f.title));
        }
    }

    #[test]
    fn names_are_compressed_and_cut() {
        let n = ["aten::mul", "aten::mul", "aten::pow", "aten::add"];
        assert_eq!(
            compress(n.iter().copied(), 10),
            "aten::mul ×2 → aten::pow → aten::add"
        );
        assert_eq!(compress(n.iter().copied(), 2), "aten::mul ×2 → aten::pow → …");
    }
}
