//! Where the GPU time goes, whatever the cause: every kernel, copy and memset in the analysed
//! window is charged to the outermost framework operator that launched it (an autograd node
//! for backward work) and the user's Python frame around that operator, and summed per
//! operator and frame (a *holder*), per frame, and per kernel name.
//!
//! For each holder the accounting gives its share of the device's GPU time, calls per step,
//! and how efficiently it runs: the time its modelled work needs at 100% of the roof (FLOPs
//! against the compute roof for matrix work, [`crate::roofline`]; bytes against HBM for the
//! rest, [`crate::membound`], latency-bound calls left out, plus a sort model here) over the
//! GPU time of the modelled part.
//! It also gives how the cost of one call changes across the calls of one step: a cost that
//! grows call over call (a cache grown by `torch.cat`, a sequence re-run whole every token)
//! is an algorithmic problem, not an efficiency one, and no kernel tuning removes it.
//!
//! No cause is assumed: the hot_operator rule turns a large holder far from its roof, or a
//! growing one, into a finding; the summary prints the largest holders. Computed once per
//! analysis ([`crate::context::Ctx::accounting`]); O(GPU ops) with one walk up the span tree
//! per distinct outer operator run.

use crate::membound::Membound;
use crate::membound::peaks_of;
use crate::roofline::DeviceCalls;
use crate::scope::Scope;
use rustc_hash::FxHashMap;
use serde::Serialize;
use tracehound_parsers::{HostKind, NONE, Trace};

/// What kind of work a holder does, from its operator's name (and its kernels'). Serialized
/// in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpFamily {
    /// GEMMs: `mm`, `matmul`, `linear`, `addmm`, `bmm`, `einsum`.
    Matmul,
    /// Fused attention: `scaled_dot_product_attention` and its backends.
    Attention,
    /// Attention written out: matmuls and a softmax over square `[.., T, T]` scores in one frame.
    UnfusedAttention,
    /// Convolutions, forward and backward, with cuDNN's layout transforms.
    Convolution,
    /// `cat`, `stack`.
    Cat,
    /// Copies and casts: `copy_`, `to`, `contiguous`, `clone`.
    Copy,
    /// Indexing, gathers, scatters, embeddings, `nonzero`, masked ops, `one_hot`.
    Index,
    /// `sort`, `argsort`, `topk`, `unique`.
    Sort,
    /// Matrix factorisations and what is built on them: inverses, solves, Cholesky, LU, QR,
    /// SVD, eigendecompositions, determinants.
    LinearAlgebra,
    /// LayerNorm, RMSNorm, BatchNorm, GroupNorm.
    Norm,
    /// Softmax and log-softmax.
    Softmax,
    /// Sums, means and other reductions.
    Reduction,
    /// FFTs (`torch.fft.*`, `torch.stft`): cuFFT's plans under `aten::_fft_*`.
    Fft,
    /// Optimizer steps.
    Optimizer,
    /// Collectives.
    Communication,
    /// Host<->device and device copies by the runtime, memsets.
    Memcpy,
    /// Elementwise and everything else.
    Elementwise,
}

impl OpFamily {
    /// The snake-case name (`unfused_attention`).
    pub fn label(self) -> &'static str {
        match self {
            OpFamily::Matmul => "matmul",
            OpFamily::Attention => "attention",
            OpFamily::UnfusedAttention => "unfused_attention",
            OpFamily::Convolution => "convolution",
            OpFamily::Cat => "cat",
            OpFamily::Copy => "copy",
            OpFamily::Index => "index",
            OpFamily::Sort => "sort",
            OpFamily::LinearAlgebra => "linear_algebra",
            OpFamily::Norm => "norm",
            OpFamily::Softmax => "softmax",
            OpFamily::Reduction => "reduction",
            OpFamily::Fft => "fft",
            OpFamily::Optimizer => "optimizer",
            OpFamily::Communication => "communication",
            OpFamily::Memcpy => "memcpy",
            OpFamily::Elementwise => "elementwise",
        }
    }

    /// The family of an operator (or autograd node) name.
    pub fn of(name: &str) -> OpFamily {
        let n = name
            .trim_start_matches("autograd::engine::evaluate_function: ")
            .to_ascii_lowercase();
        let has = |s: &str| n.contains(s);
        if has("nccl") || has("c10d::") || has("all_reduce") || has("allreduce") {
            OpFamily::Communication
        } else if has("::fft_")
            || has("::_fft_")
            || has("::stft")
            || has("::istft")
            || n.starts_with("fft")
        {
            OpFamily::Fft
        } else if has("attention") || has("flash") || has("sdpa") {
            OpFamily::Attention
        } else if has("conv") && !has("convert") {
            OpFamily::Convolution
        } else if has("::mm")
            || has("scaled_mm")
            || has("matmul")
            || has("linear")
            || has("addmm")
            || has("bmm")
            || has("einsum")
            || n.starts_with("mmbackward")
            || n.starts_with("addmmbackward")
            || n.starts_with("bmmbackward")
        {
            OpFamily::Matmul
        } else if has("::cat")
            || has("::stack")
            || has("_cat")
            || n.starts_with("catbackward")
            || n.starts_with("stackbackward")
        {
            OpFamily::Cat
        } else if has("sort") || has("topk") || has("unique") {
            OpFamily::Sort
        } else if (has("linalg") && !has("norm") && !has("vecdot") && !has("cross"))
            || has("cholesky")
            || has("::inverse")
            || n.starts_with("inversebackward")
            || has("triangular_solve")
            || has("::lu_")
            || has("::svd")
            || has("::qr")
            || has("::slogdet")
            || has("::det")
            || has("::geqrf")
            || has("::ormqr")
            || has("::pinverse")
        {
            OpFamily::LinearAlgebra
        } else if has("norm") {
            OpFamily::Norm
        } else if has("softmax") {
            OpFamily::Softmax
        } else if has("index")
            || has("gather")
            || has("scatter")
            || has("embedding")
            || has("nonzero")
            || has("masked")
            || has("one_hot")
            || has("take")
        {
            OpFamily::Index
        } else if has("copy")
            || has("::to")
            || has("contiguous")
            || has("clone")
            || has("tobackward")
        {
            OpFamily::Copy
        } else if has("optimizer") || has("_foreach") || has("adam") || has("sgd") {
            OpFamily::Optimizer
        } else if has("::sum")
            || has("::mean")
            || has("::max")
            || has("::min")
            || has("::var")
            || has("::std")
            || has("::amax")
            || has("::prod")
            || has("::argmax")
        {
            OpFamily::Reduction
        } else if name.starts_with("Memcpy") || name.starts_with("Memset") {
            OpFamily::Memcpy
        } else {
            OpFamily::Elementwise
        }
    }

    /// Work whose roof is compute (matrix units), not HBM.
    pub fn is_matrix(self) -> bool {
        matches!(
            self,
            OpFamily::Matmul
                | OpFamily::Attention
                | OpFamily::UnfusedAttention
                | OpFamily::Convolution
        )
    }
}

/// One holder: an outermost operator under one user Python frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holder {
    /// The outermost operator (`aten::cat`), or the autograd node for backward work.
    pub op: String,
    /// The user's Python frame around it (`train.py(88): decode`), when the trace has stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    /// Its family.
    pub family: OpFamily,
    /// GPU time of its kernels, copies and memsets, ns.
    pub gpu_ns: i64,
    /// Its share of the device's GPU time (0..1).
    pub share: f64,
    /// Calls (outer operator spans).
    pub calls: u64,
    /// Calls per profiler step in the window, when the window has steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_step: Option<f64>,
    /// GPU operations.
    pub kernels: u64,
    /// The kernel holding most of its time.
    pub top_kernel: String,
    /// Share of the roof its modelled work reached (time at 100% of the roof over GPU time),
    /// when any of its work has a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roof_share: Option<f64>,
    /// Share of its GPU time that has a model (0..1).
    pub modelled: f64,
    /// Most of its modelled time is matrix work (GEMM, convolution, attention) against the
    /// compute roof, even when its operator's name says nothing (a fused encoder layer).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub matrix_work: bool,
    /// Time its modelled work needs at 100% of the roof, ns (scaled to all its time by
    /// `modelled`), when any has a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_ns: Option<f64>,
    /// How the cost of one call grows over the calls of a step: mean of the last quarter over
    /// the first, when it rises quarter over quarter in every step with at least
    /// [`GROWTH_CALLS`] calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growth: Option<f64>,
    /// A softmax over square `[.., T, T]` inputs with T ≥ [`SCORES_MIN`]: attention scores.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub square_scores: bool,
    /// GPU time of its operations over square `[.., T, T]` score matrices (T ≥
    /// [`SCORES_MIN`]): an operand of that shape, or a batched product that makes one. The
    /// part of attention written out that a fused kernel would not do, ns.
    #[serde(skip_serializing_if = "is_zero")]
    pub scores_ns: i64,
    /// Time the FLOPs of its batched products over score matrices need at the compute peak:
    /// what a fused attention kernel must still do, ns.
    #[serde(skip_serializing_if = "is_zero_f")]
    pub score_flops_ns: f64,
    /// GPU time of its layout-transform kernels (cuDNN's `nchwToNhwc`/`nhwcToNchw` around
    /// tensor-core convolutions on NCHW tensors), ns.
    #[serde(skip_serializing_if = "is_zero")]
    pub layout_ns: i64,
    /// GPU time of its FFTs that the library computed with Bluestein's algorithm (a length
    /// with a large prime factor, [`crate::fft`]), ns.
    #[serde(skip_serializing_if = "is_zero")]
    pub bluestein_ns: i64,
}

fn is_zero(x: &i64) -> bool {
    *x == 0
}

fn is_zero_f(x: &f64) -> bool {
    *x == 0.0
}

/// Whether an operator's recorded inputs hold a square `[.., T, T]` score matrix (T ≥
/// [`SCORES_MIN`]) or are a batched product that makes one (`[.., T, D] x [.., D, T]`).
fn over_scores(dims: &[Vec<u64>]) -> bool {
    let square = |x: &Vec<u64>| {
        x.len() >= 3 && x[x.len() - 1] == x[x.len() - 2] && x[x.len() - 1] >= SCORES_MIN
    };
    let product = dims.windows(2).any(|w| {
        let (a, b) = (&w[0], &w[1]);
        a.len() >= 3
            && b.len() >= 3
            && a[a.len() - 1] == b[b.len() - 2]
            && a[a.len() - 2] == b[b.len() - 1]
            && a[a.len() - 2] >= SCORES_MIN
    });
    dims.iter().take(3).any(square) || product
}

/// Whether a kernel name is a layout transform between NCHW and NHWC.
pub fn is_layout_transform(kernel: &str) -> bool {
    kernel.contains("nchwToNhwc") || kernel.contains("nhwcToNchw")
}

/// The frame name of work launched outside any user Python frame.
pub const NO_FRAME: &str = "(no Python frame)";

/// One user Python frame and the GPU time of everything launched under it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameTime {
    /// The frame (`train.py(88): decode`); `(no Python frame)` for work outside any.
    pub frame: String,
    /// GPU time, ns.
    pub gpu_ns: i64,
    /// Share of the device's GPU time.
    pub share: f64,
    /// The family: unfused attention when the frame computes one, else its largest holder's.
    pub family: OpFamily,
}

/// One kernel name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelTime {
    /// Kernel name.
    pub name: String,
    /// GPU time, ns.
    pub gpu_ns: i64,
    /// Calls.
    pub calls: u64,
    /// Share of the device's GPU time.
    pub share: f64,
}

/// Where one device's GPU time goes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceAccounting {
    /// Device index.
    pub device: i32,
    /// GPU time of all its kernels, copies and memsets in the window, ns.
    pub gpu_ns: i64,
    /// Of it, charged to an operator.
    pub attributed_ns: i64,
    /// Profiler steps in the window.
    pub steps: usize,
    /// Holders, most GPU time first (all of them: the report prints the top).
    pub holders: Vec<Holder>,
    /// Frames, most GPU time first.
    pub frames: Vec<FrameTime>,
    /// Kernel names, most GPU time first.
    pub kernels: Vec<KernelTime>,
}

/// A softmax over a square `[.., T, T]` input from this T up works on attention scores
/// (smaller square inputs are too cheap to matter).
pub const SCORES_MIN: u64 = 128;

/// Share of a device's GPU time from which one operator under one frame is worth naming on
/// its own: below it, no single change moves the step by much.
pub const HOT_SHARE: f64 = 0.15;

/// A cost per call that ends a step at this multiple of where it began grows with something
/// the loop extends (a cache, a sequence): not noise, which moves both ways.
pub const GROWTH: f64 = 1.2;

/// Calls of one holder in a step from which its growth is judged: fewer say nothing about a
/// trend.
pub const GROWTH_CALLS: usize = 16;

#[derive(Default)]
struct Acc {
    gpu_ns: i64,
    kernels: u64,
    /// Each call's start, GPU ns and outer operator span.
    calls: Vec<(i64, i64, u32)>,
    /// GPU time and operations per kernel name.
    by_kernel: FxHashMap<u32, (i64, u64)>,
    ideal_ns: f64,
    modelled_ns: i64,
    matrix_ns: i64,
    square_scores: bool,
    scores_ns: i64,
    score_flops_ns: f64,
    bluestein_ns: i64,
}

impl Acc {
    /// Adds a run of operations of one kernel name (name, ns, count; [`NONE`]: none).
    fn add_kernels(&mut self, run: (u32, i64, u64)) {
        if run.0 != NONE {
            let k = self.by_kernel.entry(run.0).or_default();
            k.0 += run.1;
            k.1 += run.2;
        }
    }
}

/// The accounting of every device that ran GPU work in the window, ascending by device.
pub(crate) fn accounting(
    cx: &Scope,
    membound: &Membound,
    matrix: &[(i32, DeviceCalls)],
    ffts: &[(i32, Vec<crate::fft::FftCall>)],
) -> Vec<DeviceAccounting> {
    let t = cx.trace;
    let w = &cx.window;
    // Calls are put in the step that launched them, by their operator's host start: the
    // steps are the host's ranges (one per step number, sorted by start).
    let steps: Vec<(i64, i64)> = w.steps_overlapping(t).map(|s| (s.start, s.end)).collect();
    let mut out = Vec::new();
    let softmax_names = t.strings.matching(|n| n.contains("softmax"));
    for d in t.devices() {
        // Holders in first-seen order, found by key through `index`.
        let mut index: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        let mut accs: Vec<Acc> = Vec::new();
        let mut keys: Vec<(u32, u32)> = Vec::new();
        // Kernel time per name of operations charged to no operator (the rest is summed from
        // the holders' own lists at the end).
        let mut loose: FxHashMap<u32, (i64, u64)> = FxHashMap::default();
        let (mut total, mut attributed) = (0i64, 0i64);
        // The outer span being summed: (span, holder, its host start, ns), and its current
        // kernel name's run (name, ns), flushed into the holder when either changes.
        let mut run: Option<(u32, u32, i64, i64)> = None;
        let mut krun: (u32, i64, u64) = (NONE, 0, 0);
        let mut frames = FrameCache::default();
        // The memory-bound model lists every GPU operation of the window in this order, with
        // its call: walked alongside, each call's bytes go to the holder of its first operation.
        let peaks = peaks_of(t, d);
        let model = membound.device(d).filter(|_| peaks.is_some());
        let mut item = 0usize;
        let mut counted = vec![false; model.map_or(0, |m| m.calls.len())];
        // The matrix and sort calls' work goes to the holder of their outer operator: each
        // such operator's holder is noted as the walk meets it (finding it again by name and
        // frame read the Python stack above each call a second time).
        let modelled_calls = peaks
            .as_ref()
            .map(|_| model_calls(cx, matrix, crate::fft::calls_of(ffts, d), d))
            .unwrap_or_default();
        let mut holder_of: FxHashMap<u32, u32> =
            modelled_calls.iter().map(|c| (c.0, NONE)).collect();
        // Whether an operator works on score matrices, by its recorded input dims (a handful
        // of distinct texts in a trace, each parsed once).
        let mut scores_of: FxHashMap<u32, bool> = FxHashMap::default();
        for &i in t.device_ops(d) {
            let op = &t.gpu_ops[i as usize];
            if op.start < w.start || op.start >= w.end || !op.is_work() {
                continue;
            }
            let call = model.map_or(NONE, |m| {
                while item < m.items.len() && m.items[item].op != i {
                    item += 1;
                }
                m.items.get(item).map_or(NONE, |x| x.call)
            });
            let dur = op.dur();
            total += dur;
            let outer = t
                .index
                .op_outer_cpu_op
                .get(i as usize)
                .copied()
                .unwrap_or(NONE);
            if outer == NONE {
                let k = loose.entry(op.name).or_default();
                k.0 += dur;
                k.1 += 1;
                continue;
            }
            attributed += dur;
            let h = match run {
                Some(r) if r.0 == outer => r.1,
                _ => {
                    let frame = frames.frame(t, outer);
                    let key = (t.host_spans[outer as usize].name, frame);
                    let h = *index.entry(key).or_insert_with(|| {
                        accs.push(Acc::default());
                        keys.push(key);
                        (accs.len() - 1) as u32
                    });
                    if let Some((span, prev, start, ns)) = run.take() {
                        let a = &mut accs[prev as usize];
                        a.calls.push((start, ns, span));
                        a.add_kernels(std::mem::replace(&mut krun, (NONE, 0, 0)));
                    }
                    if let Some(x) = holder_of.get_mut(&outer) {
                        *x = h;
                    }
                    run = Some((outer, h, t.host_spans[outer as usize].start, 0));
                    let a = &mut accs[h as usize];
                    if !a.square_scores
                        && softmax_names.get(key.0 as usize).copied().unwrap_or(false)
                    {
                        a.square_scores = t.input_dims(outer).first().is_some_and(|x| {
                            x.len() >= 3
                                && x[x.len() - 1] == x[x.len() - 2]
                                && x[x.len() - 1] >= SCORES_MIN
                        });
                    }
                    h
                }
            };
            if let Some(r) = &mut run {
                r.3 += dur;
            }
            let inner = t.index.op_cpu_op.get(i as usize).copied().unwrap_or(NONE);
            let scores = inner != NONE && {
                let sid = t.op_args(&t.host_spans[inner as usize]).input_dims;
                *scores_of
                    .entry(sid)
                    .or_insert_with(|| over_scores(&t.input_dims(inner)))
            };
            let a = &mut accs[h as usize];
            a.gpu_ns += dur;
            a.kernels += 1;
            if scores {
                a.scores_ns += dur;
            }
            if let (Some(m), Some(p)) = (model, &peaks)
                && call != NONE
                && !std::mem::replace(&mut counted[call as usize], true)
            {
                // A call too small to reach the roof (latency-bound) says nothing about how
                // close to it the operator runs: its fixed costs set its time.
                let c = &m.calls[call as usize];
                if c.class == crate::membound::MemClass::Memory {
                    a.ideal_ns += m.models[c.model as usize].bytes() / (p.mem_tbps * 1e3);
                    a.modelled_ns += c.ns;
                }
            }
            if krun.0 == op.name {
                krun.1 += dur;
                krun.2 += 1;
            } else {
                a.add_kernels(std::mem::replace(&mut krun, (op.name, dur, 1)));
            }
        }
        if let Some((span, h, start, ns)) = run.take() {
            let a = &mut accs[h as usize];
            a.calls.push((start, ns, span));
            a.add_kernels(krun);
        }
        // The matrix calls' FLOPs, the sorts' and the FFTs' bytes (the memory-bound calls' were
        // added above).
        if let Some(p) = &peaks {
            for &(outer, ns, work, matrix, score_flops, bluestein) in &modelled_calls {
                let h = holder_of.get(&outer).copied().unwrap_or(NONE);
                let Some(a) = accs.get_mut(h as usize) else {
                    continue;
                };
                if bluestein {
                    a.bluestein_ns += ns;
                }
                a.ideal_ns += match work {
                    Work::Flops(ideal) => ideal,
                    Work::Bytes(bytes) => bytes / (p.mem_tbps * 1e3),
                };
                a.modelled_ns += ns;
                if matrix {
                    a.matrix_ns += ns;
                }
                a.score_flops_ns += score_flops;
            }
        }
        let mut kernels = loose;
        for a in &accs {
            for (&name, &(ns, n)) in &a.by_kernel {
                let k = kernels.entry(name).or_default();
                k.0 += ns;
                k.1 += n;
            }
        }
        let holders: FxHashMap<(u32, u32), Acc> = keys.into_iter().zip(accs).collect();
        if total == 0 {
            continue;
        }
        let n_steps = steps.len();
        let mut list: Vec<Holder> = holders
            .into_iter()
            .map(|((name, frame), acc)| {
                let op = t.str(name).to_string();
                let top = acc
                    .by_kernel
                    .iter()
                    .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
                    .map(|(&k, _)| t.str(k).to_string())
                    .unwrap_or_default();
                let family = family_of(&op, &top);
                let modelled = acc.modelled_ns as f64 / acc.gpu_ns.max(1) as f64;
                let (roof_share, ideal_ns) = if acc.modelled_ns > 0 {
                    (
                        Some(acc.ideal_ns / acc.modelled_ns as f64),
                        Some(acc.ideal_ns / modelled.max(1e-9)),
                    )
                } else {
                    (None, None)
                };
                let calls = acc.calls.len() as u64;
                Holder {
                    frame: (frame != NONE).then(|| t.str(frame).to_string()),
                    family,
                    gpu_ns: acc.gpu_ns,
                    share: acc.gpu_ns as f64 / total as f64,
                    calls,
                    calls_per_step: (n_steps > 0).then(|| calls as f64 / n_steps as f64),
                    kernels: acc.kernels,
                    top_kernel: top,
                    roof_share,
                    modelled,
                    matrix_work: 2 * acc.matrix_ns > acc.modelled_ns,
                    ideal_ns,
                    // Backward work runs layer by layer in reverse: its cost per call follows
                    // the network's layer sizes, not a loop that extends something.
                    growth: if op.starts_with("autograd::engine") {
                        None
                    } else {
                        growth(t, &acc.calls, &steps)
                    },
                    square_scores: acc.square_scores,
                    scores_ns: acc.scores_ns,
                    score_flops_ns: acc.score_flops_ns,
                    bluestein_ns: acc.bluestein_ns,
                    layout_ns: acc
                        .by_kernel
                        .iter()
                        .filter(|(k, _)| is_layout_transform(t.str(**k)))
                        .map(|(_, v)| v.0)
                        .sum(),
                    op,
                }
            })
            .collect();
        list.sort_by(|a, b| {
            b.gpu_ns
                .cmp(&a.gpu_ns)
                .then(a.op.cmp(&b.op))
                .then(a.frame.cmp(&b.frame))
        });
        let frames = frames_of(&list, total);
        let mut ks: Vec<KernelTime> = kernels
            .into_iter()
            .map(|(name, (ns, calls))| KernelTime {
                name: t.str(name).to_string(),
                gpu_ns: ns,
                calls,
                share: ns as f64 / total as f64,
            })
            .collect();
        ks.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(a.name.cmp(&b.name)));
        out.push(DeviceAccounting {
            device: d,
            gpu_ns: total,
            attributed_ns: attributed,
            steps: n_steps,
            holders: list,
            frames,
            kernels: ks,
        });
    }
    out
}

/// Slots of [`FrameCache`]: 32 KB, kept in the core's cache.
const FRAME_SLOTS: usize = 4096;

/// The name of the innermost user Python frame around a span ([`NONE`]: none), remembered
/// for the ancestors each walk up passes through, in a small table indexed by span (a later
/// slot owner replaces an earlier one). Operators one after another sit under the same
/// module calls and loops, so a walk mostly stops at its first or second ancestor; a stack
/// with no user frame near the operator (an optimizer's, a library's) was walked to its root
/// for every operator. (A map of every span seen cost more, on a 1 GB trace, than the walks
/// it saved.)
struct FrameCache {
    /// (span, the frame at or above it) per slot; span [`NONE`]: empty.
    slots: Vec<(u32, u32)>,
    path: Vec<u32>,
}

impl Default for FrameCache {
    fn default() -> Self {
        FrameCache {
            slots: vec![(NONE, NONE); FRAME_SLOTS],
            path: Vec::new(),
        }
    }
}

impl FrameCache {
    /// The innermost user frame among the ancestors of span `i`.
    fn frame(&mut self, t: &Trace, i: u32) -> u32 {
        self.path.clear();
        let mut found = NONE;
        for a in t.ancestors(i) {
            let slot = self.slots[a as usize % FRAME_SLOTS];
            if slot.0 == a {
                found = slot.1;
                break;
            }
            self.path.push(a);
            let s = &t.host_spans[a as usize];
            if s.kind == HostKind::Python && t.is_user_frame_name(s.name) {
                found = s.name;
                break;
            }
        }
        for &a in &self.path {
            self.slots[a as usize % FRAME_SLOTS] = (a, found);
        }
        found
    }
}

/// An operator's name for people: an autograd node without the engine's prefix, marked as
/// backward (`CudnnBatchNormBackward0 (backward)`).
pub fn shown_op(op: &str) -> String {
    match op.strip_prefix("autograd::engine::evaluate_function: ") {
        Some(node) => format!("{node} (backward)"),
        None => op.to_string(),
    }
}

/// A holder's family: from its operator, or its top kernel when the operator says nothing.
fn family_of(op: &str, top_kernel: &str) -> OpFamily {
    let f = OpFamily::of(op);
    if f != OpFamily::Elementwise {
        return f;
    }
    let k = top_kernel.to_ascii_lowercase();
    if k.contains("sort") {
        OpFamily::Sort
    } else if k.starts_with("memcpy") || k.starts_with("memset") {
        OpFamily::Memcpy
    } else {
        f
    }
}

/// What a modelled call needs at 100% of the roof.
#[derive(Clone, Copy)]
enum Work {
    /// Matrix work: the time it needs there, ns.
    Flops(f64),
    /// A sort: the bytes it must move at least.
    Bytes(f64),
}

/// The matrix, sort and FFT calls of device `d` whose work is modelled: (outer operator, GPU
/// ns, work, whether it is matrix work, the time its FLOPs need at the compute peak when it is
/// a batched product over score matrices, else 0, whether it is an FFT computed with
/// Bluestein's algorithm).
fn model_calls(
    cx: &Scope,
    matrix: &[(i32, DeviceCalls)],
    ffts: &[crate::fft::FftCall],
    d: i32,
) -> Vec<(u32, i64, Work, bool, f64, bool)> {
    let t = cx.trace;
    let Some(peaks) = peaks_of(t, d) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &crate::roofline::calls_of(matrix, d).calls {
        if c.outer == NONE || c.ns <= 0 {
            continue;
        }
        let bytes = c.work.elems * c.math.elem_bytes();
        let compute = peaks.tflops(c.math);
        let roof = compute.min(c.work.flops / bytes.max(1.0) * peaks.mem_tbps);
        // Q·Kᵀ makes a [T, T] score matrix (M = N), P·V and the gradients read one (M = K);
        // one matrix alone (no batch) is a layer's weight, not attention.
        let scores = c.work.kind == "gemm"
            && c.work.mnk.is_some_and(|(m, n, k)| {
                let one = 2.0 * m as f64 * n as f64 * k as f64;
                m >= SCORES_MIN && (m == n || m == k) && c.work.flops > 1.5 * one
            });
        out.push((
            c.outer,
            c.ns,
            Work::Flops(c.work.flops / (roof * 1e3)),
            true,
            if scores {
                c.work.flops / (compute * 1e3)
            } else {
                0.0
            },
            false,
        ));
    }
    // Sorts: the bytes the sort PyTorch runs moves (`sort_bytes`); selections the bytes they
    // read and write.
    for (span, ns, bytes) in sort_calls(cx, d) {
        let outer = t.outermost_cpu_op(span);
        if outer != NONE && ns > 0 {
            out.push((outer, ns, Work::Bytes(bytes), false, 0.0, false));
        }
    }
    // FFTs: the bytes a transform moves at least, against the library's kernels' time.
    for c in ffts {
        if c.outer != NONE && c.lib_ns > 0 {
            out.push((
                c.outer,
                c.lib_ns,
                Work::Bytes(c.bytes()),
                false,
                0.0,
                c.bluestein,
            ));
        }
    }
    out
}

/// Sort calls with recorded shapes on device `d`: (span, GPU ns, modelled bytes: a sort's or a
/// selection's, `sort_bytes`).
fn sort_calls(cx: &Scope, d: i32) -> Vec<(u32, i64, f64)> {
    let t = cx.trace;
    let w = &cx.window;
    let names = t.strings.matching(|n| {
        matches!(
            n,
            "aten::sort" | "aten::argsort" | "aten::topk" | "aten::msort" | "aten::_unique2"
        )
    });
    if !names.contains(&true) {
        return Vec::new();
    }
    let mut per: FxHashMap<u32, i64> = FxHashMap::default();
    for (i, op) in w.kernels(t, d) {
        let mut s = t.index.op_cpu_op.get(i).copied().unwrap_or(NONE);
        for _ in 0..4 {
            if s == NONE {
                break;
            }
            if names
                .get(t.host_spans[s as usize].name as usize)
                .copied()
                .unwrap_or(false)
            {
                *per.entry(s).or_default() += op.dur();
                break;
            }
            s = t.enclosing(s, HostKind::CpuOp);
        }
    }
    let mut out: Vec<(u32, i64, f64)> = per
        .into_iter()
        .filter_map(|(s, ns)| {
            let dims = t.input_dims(s);
            let types = t.input_types(s);
            let first = dims.first()?;
            let elem = match types.first().map(String::as_str) {
                Some("c10::BFloat16" | "c10::Half") => 2.0,
                Some("float" | "int") => 4.0,
                Some("double" | "long int") => 8.0,
                Some("bool" | "unsigned char" | "signed char") => 1.0,
                _ => return None,
            };
            let n: f64 = first.iter().map(|&x| x as f64).product();
            let name = t.str(t.host_spans[s as usize].name);
            // Rows along the last dim (the default; the dim is not kept).
            let row = first.last().map_or(1.0, |&x| (x as f64).max(1.0));
            let bytes = if name == "aten::_unique2" {
                // torch.unique sorts its input flattened: with `return_inverse` (its third
                // argument) the keys with their int64 positions, else the keys alone.
                let inverse = t
                    .concrete_inputs_of(s)
                    .is_some_and(|c| c.get(2).is_some_and(|x| x == "True"));
                if inverse {
                    sort_bytes(n, n, elem)
                } else {
                    sort_keys_bytes(n, elem)
                }
            } else if name == "aten::topk" {
                // A selection: its input read (a radix select may read it more than once) and
                // k values and int64 indices written per row.
                let k: f64 = t
                    .concrete_inputs_of(s)
                    .and_then(|c| c.get(1)?.parse().ok())
                    .unwrap_or(0.0);
                n * elem + n / row * k * (elem + 8.0)
            } else {
                sort_bytes(n, row, elem)
            };
            Some((s, ns, bytes))
        })
        .collect();
    out.sort_unstable_by_key(|e| e.0);
    out
}

/// Rows up to this long are sorted in one pass: PyTorch sorts them in place, in shared
/// memory (a bitonic sort, `should_use_small_sort`).
const SMALL_SORT: f64 = 4096.0;

/// The bytes a sort of `n` keys of `elem` bytes, in rows of `row`, moves when it returns the
/// sorted keys and their int64 indices. Short rows: one read of the keys and one write of keys
/// and indices. Longer ones go to a least-significant-digit radix sort (CUB's onesweep, 8 bits
/// a pass, which PyTorch calls with int64 values: `radix_sort_pairs<scalar_t, int64_t>`): one
/// pass reads the keys for the digit histograms, then each of `elem` passes reads and writes
/// every key with its 8-byte value. Counting one read and one write, as if a long sort were a
/// copy, would hold it to a roof no sort reaches and put the passes every sort makes into its
/// excess.
fn sort_bytes(n: f64, row: f64, elem: f64) -> f64 {
    if row <= SMALL_SORT {
        n * (2.0 * elem + 8.0)
    } else {
        n * (elem + elem * 2.0 * (elem + 8.0))
    }
}

/// What replaces `torch.unique(x, return_counts=True)` where the values lie in a known range,
/// for every finding that names such a call. `torch.bincount` counts into per-block
/// histograms below a thousand bins (PyTorch's `CUDA_tensor_histogram`: in shared memory below
/// 100, per-block partial histograms below 1000), so few bins do not contend, but it first
/// copies the input's min and max to the host (two reductions and two waits a call in the
/// set-14 recaptures); an `index_add_` of ones is sync-free, but its increments go to global
/// memory: on a capture of 2M int32 labels over 100 classes (blind set 14,
/// `class_hist_unique_int32`) it took 1.3 ms a step longer than the sort it replaced, where
/// `bincount` took 0.12 ms a step less (H200 recapture).
pub(crate) const UNIQUE_COUNT_ADVICE: &str = "To count values in a known range [0, n) (class labels, token ids, bucket ids), count without sorting: torch.bincount(x.flatten(), minlength=n) counts in one pass with per-block histograms (after reading the smallest and largest values on the host: two waits, where unique has one); which values occur is counts.nonzero() or counts > 0. torch.zeros(n, dtype=torch.long, device=x.device).index_add_(0, x.flatten(), torch.ones_like(x.flatten())) avoids that wait, but its increments collide when many values share a few bins (2M labels over 100 classes ran slower than the sort): keep it for values spread over many bins, such as token ids over a vocabulary.";

/// The bytes a sort of `n` keys of `elem` bytes without values moves (torch.unique without
/// `return_inverse`: `radix_sort_keys`): short inputs one read and one write; longer ones a
/// read for the digit histograms, then `elem` passes that each read and write every key.
fn sort_keys_bytes(n: f64, elem: f64) -> f64 {
    if n <= SMALL_SORT {
        2.0 * n * elem
    } else {
        n * elem * (1.0 + 2.0 * elem)
    }
}

/// How the cost of one call grows over a step's calls: the last quarter's mean over the
/// first's, when it rises quarter over quarter in every step with enough calls and the calls'
/// recorded inputs grow with it (`None` when no step has enough calls, when one does not rise,
/// or when the inputs do not grow or were not recorded). A cost that rises over inputs that do
/// not grow is a network's layers getting wider (a ResNet's convolutions cost 28 µs in its
/// first stage and 180 µs in its last, on smaller activations), not a loop extending
/// something; without shapes the trace cannot tell the two apart.
fn growth(t: &Trace, calls: &[(i64, i64, u32)], steps: &[(i64, i64)]) -> Option<f64> {
    // Each call in the last step begun by its start (steps are sorted and do not overlap):
    // one binary search per call, where filtering every step's calls cost calls × steps.
    let mut groups: Vec<Vec<(i64, u32)>> = vec![Vec::new(); steps.len().max(1)];
    for &(start, ns, span) in calls {
        if steps.is_empty() {
            groups[0].push((ns, span));
            continue;
        }
        let k = steps.partition_point(|s| s.0 <= start);
        if let Some(&(a, b)) = k.checked_sub(1).and_then(|k| steps.get(k))
            && start >= a
            && start < b
        {
            groups[k - 1].push((ns, span));
        }
    }
    let mut ratios = Vec::new();
    for g in groups.iter().filter(|g| g.len() >= GROWTH_CALLS) {
        let q = g.len() / 4;
        let parts = [&g[..q], &g[q..2 * q], &g[2 * q..3 * q], &g[3 * q..]];
        let mean_ns =
            |s: &[(i64, u32)]| s.iter().map(|c| c.0).sum::<i64>() as f64 / s.len().max(1) as f64;
        let ns = parts.map(mean_ns);
        if !ns.windows(2).all(|p| p[1] > p[0]) || ns[0] <= 0.0 {
            return None;
        }
        // Read only where the cost rises (rare): elements over all recorded inputs of a call,
        // 0 where it recorded none.
        let mean_elems = |s: &[(i64, u32)]| {
            s.iter()
                .map(|c| {
                    t.input_dims(c.1)
                        .iter()
                        .map(|d| d.iter().product::<u64>() as f64)
                        .sum::<f64>()
                })
                .sum::<f64>()
                / s.len().max(1) as f64
        };
        let (first, last) = (mean_elems(parts[0]), mean_elems(parts[3]));
        if first <= 0.0 || last <= first {
            return None;
        }
        ratios.push(ns[3] / ns[0]);
    }
    ratios.into_iter().reduce(f64::min)
}

/// Frames by GPU time, each with its family: a frame where matmuls and a softmax over square
/// score matrices each hold over 1% of the GPU time is attention written out.
fn frames_of(holders: &[Holder], total: i64) -> Vec<FrameTime> {
    let mut by: std::collections::BTreeMap<String, (i64, Vec<&Holder>)> = Default::default();
    for h in holders {
        let k = h.frame.clone().unwrap_or_else(|| NO_FRAME.into());
        let e = by.entry(k).or_default();
        e.0 += h.gpu_ns;
        e.1.push(h);
    }
    let mut out: Vec<FrameTime> = by
        .into_iter()
        .map(|(frame, (ns, hs))| {
            let has = |f: OpFamily| hs.iter().any(|h| h.family == f && h.share > 0.01);
            let scores = hs.iter().any(|h| h.square_scores && h.share > 0.01);
            let family = if scores && has(OpFamily::Matmul) {
                OpFamily::UnfusedAttention
            } else {
                hs.first().map_or(OpFamily::Elementwise, |h| h.family)
            };
            FrameTime {
                frame,
                gpu_ns: ns,
                share: ns as f64 / total.max(1) as f64,
                family,
            }
        })
        .collect();
    out.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(a.frame.cmp(&b.frame)));
    out
}

/// A holder of at least this share of a device's GPU time is named in the GPU-bound verdict:
/// its speed alone decides most of the run.
pub const DOMINANT_SHARE: f64 = 0.5;

/// The kernel that holds at least [`DOMINANT_SHARE`] of the device's GPU time in a program
/// without framework operators (CUDA C, CuPy, Julia: kernels charged to no operator, so the
/// kernel is the unit), when the device did a millisecond of work or more; with its first call
/// in the window.
pub(crate) fn dominant_kernel<'a, 't>(
    cx: &Scope<'t>,
    a: &'a DeviceAccounting,
) -> Option<(&'a KernelTime, &'t tracehound_parsers::GpuOp)> {
    // Under a millisecond there is nothing to profile.
    if a.gpu_ns < 1_000_000 || 2 * a.attributed_ns >= a.gpu_ns {
        return None;
    }
    let k = a.kernels.first().filter(|k| k.share >= DOMINANT_SHARE)?;
    // The rows are GPU operations by name: a copy is not a kernel to profile.
    let t = cx.trace;
    cx.window
        .kernels(t, a.device)
        .find(|(_, op)| t.str(op.name) == k.name)
        .map(|(_, op)| (k, op))
}

/// "one call" or "26 calls, 58.9 ms each on average".
pub(crate) fn calls_text(k: &KernelTime) -> String {
    if k.calls == 1 {
        "one call".to_string()
    } else {
        format!(
            "{} calls, {} each on average",
            k.calls,
            crate::finding::fmt_ns(k.gpu_ns / k.calls.max(1) as i64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{OpFamily, sort_bytes};

    #[test]
    fn a_sort_moves_its_keys_once_a_byte_and_its_indices() {
        // A bf16 key in a 128256-long row: 2 bytes read for the histograms, two passes of
        // key + 8-byte value read and written (40). An fp32 key: four passes (4 + 96).
        assert_eq!(sort_bytes(1.0, 128256.0, 2.0), 42.0);
        assert_eq!(sort_bytes(1.0, 128256.0, 4.0), 100.0);
        // A 50-long row is sorted in shared memory: keys read, keys and indices written.
        assert_eq!(sort_bytes(1.0, 50.0, 2.0), 12.0);
    }

    #[test]
    fn scaled_matrix_products_are_matrix_work_and_fbgemm_is_not_by_its_name() {
        // vLLM's FP8 GEMMs (an RPD capture of AMD's raptor tests).
        assert!(matches!(OpFamily::of("aten::_scaled_mm"), OpFamily::Matmul));
        // fbgemm names a library, not a GEMM: its embedding and permute operators (DLRM
        // traces) are what their names say.
        assert!(!matches!(
            OpFamily::of("fbgemm::permute_2D_sparse_data"),
            OpFamily::Matmul
        ));
        assert!(matches!(
            OpFamily::of("fbgemm::split_embedding_codegen_lookup_sgd_function"),
            OpFamily::Index
        ));
    }
}
