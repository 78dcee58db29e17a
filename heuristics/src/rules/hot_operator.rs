//! The operator and line that hold the GPU's time, when they hold a large share of it badly:
//! far from their roof, growing call over call, or doing attention the slow way. No cause is
//! assumed; the finding names the operator, the user's Python frame, the share, how
//! efficiently it runs and what is usually behind that kind of operator being slow.
//!
//! Read from the cause-agnostic accounting ([`crate::accounting`]). A holder (outermost
//! operator under one Python frame) is reported when it holds at least [`HOT_SHARE`] of the
//! device's GPU time and
//! - its modelled work reaches under [`FAR_FROM_ROOF`] of the roof (memory-bound families:
//!   half the achievable 70%; matrix families are the roofline rule's), impact = its time
//!   beyond what 70% of the roof needs; or
//! - its cost per call grows over a step's calls by at least [`GROWTH`]: impact = the time
//!   beyond what every call would cost at the first quarter's rate, or the roof-based impact
//!   when that is larger.
//!
//! A frame that holds [`HOT_SHARE`] in attention written out (matmuls and a softmax) is
//! reported with the time beyond the same FLOPs in a fused kernel at the attention roof. A
//! fused attention given an explicit square mask tensor (`attn_mask`) is reported when it
//! holds [`HOT_SHARE`]: the kernels compute the masked half too, and a mask rules out the
//! flash kernels; impact = its time beyond half its FLOPs at the attention roof, what a causal
//! kernel would take (stated as such: the trace does not record the mask's values).
//! `F.unfold`/`F.fold` called by the program (outermost `aten::im2col`/`aten::col2im`) holding
//! [`HOT_SHARE`] is reported with its whole time: the column tensor it writes exists only for
//! a matmul that a convolution computes without it.
//! Convolutions whose cuDNN layout transforms (`nchwToNhwc`/`nhwcToNchw`) take at least
//! [`LAYOUT_SHARE`] of the GPU time are reported with those kernels' time, plus the time the
//! BatchNorm layers running their NCHW kernels take beyond 70% of their roof, as the impact:
//! channels_last fixes both, so those BatchNorm holders get no finding of their own.
//! In a program that is not PyTorch, the kernel that holds half the GPU time of a GPU-bound
//! run is named with no impact (a capture without counters cannot price it) and ranks first.
//! FFT operators whose time is mostly Bluestein kernels are left to `fft_lengths`, which
//! prices them against a fast length.

use super::Rule;
use crate::accounting::{DeviceAccounting, GROWTH, HOT_SHARE, Holder, OpFamily, shown_op as shown};
use crate::context::{Ctx, new_finding, per_step_note};
use crate::finding::{Confidence, Finding, Instance, Row, fmt_ns, metrics};
use crate::roofline::{ACHIEVABLE, ACHIEVABLE_ATTENTION};
use rustc_hash::FxHashMap;
use tracehound_parsers::{HostKind, NONE};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "hot_operator";

/// The rule.
pub struct HotOperator;


/// Memory-bound work below this share of the HBM roof is far from it: half of the 70% the
/// best kernels reach ([`ACHIEVABLE`]).
pub const FAR_FROM_ROOF: f64 = ACHIEVABLE / 2.0;


/// At most this many findings per device, largest first.
const MAX_PER_DEVICE: usize = 3;

impl Rule for HotOperator {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "the operator and Python line holding a large share of GPU time far from its roof, growing call over call, or computing attention the slow way"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for acct in cx.accounting() {
            let mut found: Vec<Finding> = Vec::new();
            let attention = unfused_attention(cx, acct);
            let nchw = nchw_layout(cx, acct);
            for h in acct.holders.iter().take(20) {
                if h.share < HOT_SHARE {
                    break;
                }
                // The operators of attention written out are that finding's rows; NCHW
                // BatchNorm beside NCHW convolutions is the layout finding's.
                if attention.as_ref().is_some_and(|(frame, _)| *frame == h.frame)
                    || (nchw.is_some() && nchw_batchnorm(h).is_some())
                {
                    continue;
                }
                if let Some(f) = holder_finding(cx, acct, h) {
                    found.push(f);
                }
            }
            found.extend(attention.map(|(_, f)| f));
            found.extend(nchw);
            found.extend(masked_attention(cx, acct));
            found.sort_by(|a, b| b.impact_ns.cmp(&a.impact_ns).then(a.title.cmp(&b.title)));
            found.truncate(MAX_PER_DEVICE);
            out.extend(found);
            // Kept whatever the others: copy_hotspots leaves the casts it prices to it.
            out.extend(onehot_product(cx, acct));
            out.extend(dominant_kernel(cx, acct));
        }
        out
    }
}

fn at(frame: &Option<String>) -> String {
    frame.as_deref().map(|f| format!(" at {f}")).unwrap_or_default()
}

fn holder_finding(cx: &Ctx, acct: &DeviceAccounting, h: &Holder) -> Option<Finding> {
    if matches!(h.op.as_str(), "aten::im2col" | "aten::col2im") {
        return Some(column_tensor(cx, acct, h));
    }
    if INVERSES.contains(&h.op.as_str()) {
        return inverse_then_product(cx, acct, h);
    }
    if h.op == "aten::_unique2"
        && let Some(f) = unique_counts(cx, acct, h)
    {
        return Some(f);
    }
    // Copies and casts are copy_hotspots', optimizers optimizer_overhead's, collectives
    // exposed_communication's, runtime copies pageable_memcpy's.
    if matches!(
        h.family,
        OpFamily::Copy | OpFamily::Optimizer | OpFamily::Communication | OpFamily::Memcpy
    ) {
        return None;
    }
    // FFTs the library computed with Bluestein's algorithm are priced against a fast length
    // by the FFT-length finding ([`crate::fft`]); the time beyond HBM speed here would be the
    // same time again.
    if h.family == OpFamily::Fft && 2 * h.bluestein_ns >= h.gpu_ns {
        return None;
    }
    // A top-k is already the cheap replacement for a sort; its select passes are not a fault.
    // A compiled region is many fused operators under one name: nothing to advise on as one.
    if h.op == "aten::topk" || h.op.contains("Compiled Region") || h.op.contains("CompiledFunction")
    {
        return None;
    }
    let far = !h.family.is_matrix()
        && !h.matrix_work
        && h.modelled >= 0.5
        && h.roof_share.is_some_and(|r| r < FAR_FROM_ROOF);
    // Attention over a growing KV cache costs more per token by design; the projections
    // around it must not.
    let grows = h
        .growth
        .filter(|&g| g >= GROWTH && !matches!(h.family, OpFamily::Attention));
    if !far && grows.is_none() {
        return None;
    }
    let roof_impact = match (far, h.ideal_ns) {
        (true, Some(ideal)) => (h.gpu_ns as f64 - ideal / ACHIEVABLE).max(0.0),
        _ => 0.0,
    };
    // Growing linearly from q1 to q4 over a step, calls cost on average (1 + g) / 2 times the
    // first quarter's: the time beyond the first quarter's rate.
    let growth_impact = grows.map_or(0.0, |g| h.gpu_ns as f64 * (1.0 - 2.0 / (1.0 + g)));
    let impact = roof_impact.max(growth_impact) as i64;
    let d = acct.device;
    let roof = h.roof_share.map(|r| {
        format!(
            " at {:.0}% of its {} roof",
            100.0 * r,
            if h.family.is_matrix() || h.matrix_work {
                "compute"
            } else {
                "HBM"
            }
        )
    });
    let grow_text = grows
        .map(|g| format!(", each call costlier than the last ({g:.2}× from the first to the last quarter of a step)"))
        .unwrap_or_default();
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "{}{} holds {:.0}% of GPU {d}'s time{}{grow_text}",
            shown(&h.op),
            at(&h.frame),
            100.0 * h.share,
            roof.clone().unwrap_or_default()
        ),
        impact,
        Confidence::Medium,
        format!(
            "{} in {} calls{} ({} kernels, most in {}); {}; impact: {}",
            fmt_ns(h.gpu_ns),
            h.calls,
            h.calls_per_step
                .map(|c| format!(", {c:.0} per step"))
                .unwrap_or_default(),
            h.kernels,
            crate::names::short_name(&h.top_kernel, 80),
            match (h.roof_share, h.ideal_ns) {
                (Some(r), Some(ideal)) => format!(
                    "its modelled work ({:.0}% of its time) needs {} at the roof, {:.0}% of what it took",
                    100.0 * h.modelled,
                    fmt_ns(ideal as i64),
                    100.0 * r
                ),
                _ => "no bytes or FLOPs model covers it".to_string(),
            },
            if roof_impact >= growth_impact {
                format!("time beyond what {:.0}% of the roof needs", 100.0 * ACHIEVABLE)
            } else {
                "time beyond what every call would cost at the first quarter's rate".to_string()
            }
        ),
    );
    f.subject = Some(format!("{}{}", shown(&h.op), at(&h.frame)));
    f.breakdown = same_frame_rows(cx, acct, h.frame.as_deref());
    f.advice = advice(h.family, grows.is_some(), &h.top_kernel, &h.op);
    f.metrics = metrics([
        ("gpu_ns", h.gpu_ns as f64),
        ("share", h.share),
        ("roof_share", h.roof_share.unwrap_or(f64::NAN)),
        ("growth", h.growth.unwrap_or(f64::NAN)),
        ("calls", h.calls as f64),
    ]);
    f.metrics.retain(|_, v| v.is_finite());
    Some(f)
}

/// `F.unfold` (im2col) or `F.fold` (col2im) called by the program itself, not under a
/// convolution: the column tensor, every k×k patch of the input written out, exists only for a
/// matmul to read it back, and a convolution computes the same product without it (an
/// implicit GEMM). Impact: the operator's whole time.
fn column_tensor(cx: &Ctx, acct: &DeviceAccounting, h: &Holder) -> Finding {
    let d = acct.device;
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "{}{} holds {:.0}% of GPU {d}'s time writing out a column tensor (F.unfold/F.fold) that a convolution never materialises",
            shown(&h.op),
            at(&h.frame),
            100.0 * h.share
        ),
        h.gpu_ns,
        Confidence::Medium,
        format!(
            "{} in {} calls ({} kernels, most in {}); im2col writes every patch of its input, kernel_size² times its size, for the matmul that follows to read back; impact: its whole time",
            fmt_ns(h.gpu_ns),
            h.calls,
            h.kernels,
            crate::names::short_name(&h.top_kernel, 80)
        ),
    );
    f.subject = Some(format!("{}{}", shown(&h.op), at(&h.frame)));
    f.breakdown = same_frame_rows(cx, acct, h.frame.as_deref());
    f.advice = vec!["A convolution written as F.unfold and a matmul: F.conv2d / nn.Conv2d (or F.conv1d, F.conv3d) computes the same product in cuDNN without writing the patches out; for non-overlapping patches (a patch embedding, stride equal to the kernel), a Conv2d with that stride, or a reshape and permute, needs no copy of each patch either.".into()];
    f.metrics = metrics([
        ("gpu_ns", h.gpu_ns as f64),
        ("share", h.share),
        ("calls", h.calls as f64),
    ]);
    f
}

/// `torch.unique(x, return_counts=True)` (without `return_inverse`, both read from the
/// recorded arguments): it radix-sorts the whole flattened input, one pass per key byte after
/// a histogram read, to learn how often each value occurs. Counting does the same in one pass
/// when the values lie in a known range (class labels, token ids). The count priced is the
/// one the advice names first, `torch.bincount`: it reads every key three times (a min and a
/// max, each copied back to the host, then its histogram pass), each read priced as one pass
/// of the sort. Impact: the calls' GPU time beyond those three passes (the sort kernels' time
/// over the sort's passes, times three). On blind set 14's recaptures with a `bincount` twin
/// (H200) this priced 130 µs a step against 117 measured (int32 class histogram) and 317
/// against 255 (token frequencies over a 50k vocabulary); one pass, as first written, priced
/// them +132% and +71%. Calls whose sort kernels cannot be told apart by name are left out:
/// no pass time to price the count with.
/// Reads of every key `torch.bincount` makes on CUDA: a min reduction (negative values are an
/// error), a max reduction (the bin count), both copied to the host, then the histogram.
const BINCOUNT_READS: f64 = 3.0;

fn unique_counts(cx: &Ctx, acct: &DeviceAccounting, h: &Holder) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let d = acct.device;
    let name = t.strings.lookup(&h.op)?;
    let sort_kernel = t
        .strings
        .matching(|n| n.to_ascii_lowercase().contains("sort"));
    // Per counting call, in span order: (GPU ns, sort kernels' ns).
    let mut per: std::collections::BTreeMap<u32, (i64, i64)> = Default::default();
    for (i, op) in w.kernels(t, d) {
        let outer = t.index.op_outer_cpu_op.get(i).copied().unwrap_or(NONE);
        if outer == NONE || t.host_spans[outer as usize].name != name {
            continue;
        }
        let e = per.entry(outer).or_default();
        e.0 += op.dur();
        if sort_kernel.get(op.name as usize).copied().unwrap_or(false) {
            e.1 += op.dur();
        }
    }
    let (mut saving, mut total, mut calls, mut keys) = (0.0f64, 0i64, 0u64, 0u64);
    let mut example: Option<(Vec<u64>, String, u8)> = None;
    for (&s, &(ns, sort_ns)) in &per {
        let args = t.concrete_inputs_of(s).unwrap_or_default();
        let flag = |k: usize| args.get(k).map(String::as_str);
        if flag(2) != Some("False") || flag(3) != Some("True") || sort_ns <= 0 {
            continue;
        }
        let dims = t.input_dims(s);
        let ty = t.input_types(s).first().cloned().unwrap_or_default();
        let (Some(first), Some(elem)) = (dims.first(), crate::membound::elem_size(&ty)) else {
            continue;
        };
        let passes = f64::from(elem) + 1.0;
        saving += (ns as f64 - BINCOUNT_READS * sort_ns as f64 / passes).max(0.0);
        total += ns;
        calls += 1;
        keys += first.iter().product::<u64>();
        example.get_or_insert_with(|| (first.clone(), ty, elem));
    }
    let (shape, ty, elem) = example?;
    // Below the holder's threshold the counting calls are not what holds the time.
    if (total as f64) < HOT_SHARE * acct.gpu_ns as f64 {
        return None;
    }
    let per_step = per_step_note(cx, saving);
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "torch.unique(return_counts=True){} holds {:.0}% of GPU {d}'s time sorting {} {} values a call to count them: counting over a known range of values takes no sort and saves {}{per_step}",
            at(&h.frame),
            100.0 * total as f64 / acct.gpu_ns.max(1) as f64,
            shape.iter().product::<u64>(),
            crate::membound::dtype_label(&ty),
            fmt_ns(saving.round() as i64)
        ),
        saving.round() as i64,
        Confidence::Medium,
        format!(
            "{calls} calls of {} with return_counts=True and return_inverse=False (recorded arguments) sort {} keys of {elem} bytes in all: a radix sort reads them for its digit histograms, then makes {elem} passes that each read and scatter every key, before counting runs of equal values; they took {} of GPU time. Impact: their time beyond three passes of their sort (the sort kernels' time × 3 / {}), what torch.bincount costs at the rate those passes ran: it reads every value three times (its min, its max, then the count), and waits for the host twice a call where unique waits once, a cost this price leaves out. It holds only when the values lie in a range known in advance; the trace does not record them",
            h.op,
            keys,
            fmt_ns(total),
            elem + 1
        ),
    );
    f.subject = Some(format!("{}{}", shown(&h.op), at(&h.frame)));
    f.breakdown = same_frame_rows(cx, acct, h.frame.as_deref());
    f.advice = vec![
        crate::accounting::UNIQUE_COUNT_ADVICE.to_string(),
        "torch.unique also waits for the GPU to size its result: where the values really are unknown, call it once per batch or epoch rather than per step.".to_string(),
    ];
    f.metrics = metrics([
        ("gpu_ns", total as f64),
        ("share", total as f64 / acct.gpu_ns.max(1) as f64),
        ("calls", calls as f64),
        ("keys", keys as f64),
        ("key_bytes", f64::from(elem)),
    ]);
    Some(f)
}

/// Operators that form an explicit matrix inverse.
const INVERSES: &[&str] = &["aten::linalg_inv", "aten::inverse", "aten::linalg_inv_ex"];

/// An explicit inverse whose next operator on its thread multiplies by it: `inv(A) @ B` with
/// A `[.., n, n]` and B `[.., n, k]` (or `B @ inv(A)`). `torch.linalg.solve(A, B)` does the
/// same LU factorisation and then solves for B's k columns where the inverse solves for n (the
/// identity's), with no product after: the inverse's time beyond its factorisation scales by
/// k / n, and the product goes. Impact: that difference, call by call. The pairing is read
/// from shapes and order (the trace records no tensor identities). Without such a product no
/// replacement is known, so no finding: the accounting table still names the operator.
fn inverse_then_product(cx: &Ctx, acct: &DeviceAccounting, h: &Holder) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let d = acct.device;
    let inv = t.strings.lookup(&h.op)?;
    let products: Vec<u32> = ["aten::matmul", "aten::bmm", "aten::mm", "aten::linalg_matmul"]
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    // (inverse span, product span, n, k) for each pair.
    let mut pairs: Vec<(u32, u32, u64, u64)> = Vec::new();
    for ops in w.outermost_ops(t) {
        let mut prev = NONE;
        for i in ops {
            let s = &t.host_spans[i as usize];
            if prev != NONE && products.contains(&s.name) {
                let a = t.input_dims(prev);
                let m = t.input_dims(i);
                if let (Some(a), Some(x), Some(y)) = (a.first(), m.first(), m.get(1))
                    && a.len() >= 2
                    && a[a.len() - 1] == a[a.len() - 2]
                {
                    let n = a[a.len() - 1];
                    // inv(A) @ B: B's columns; B @ inv(A): B's rows.
                    let k = if x == a && y.len() >= 2 && y[y.len() - 2] == n {
                        Some(y[y.len() - 1])
                    } else if y == a && x.len() >= 2 && x[x.len() - 1] == n {
                        Some(x[x.len() - 2])
                    } else {
                        None
                    };
                    if let Some(k) = k.filter(|&k| k < n) {
                        pairs.push((prev, i, n, k));
                    }
                }
            }
            prev = if s.name == inv { i } else { NONE };
        }
    }
    if pairs.is_empty() {
        return None;
    }
    // GPU time of each paired span, and of the factorisation inside each inverse.
    let wanted: rustc_hash::FxHashSet<u32> = pairs.iter().flat_map(|p| [p.0, p.1]).collect();
    let factor = t.strings.matching(|n| n.contains("lu_factor") || n.contains("getrf"));
    let mut time: FxHashMap<u32, (i64, i64)> = FxHashMap::default();
    for (i, op) in w.kernels(t, d) {
        let outer = t.index.op_outer_cpu_op.get(i).copied().unwrap_or(NONE);
        if !wanted.contains(&outer) {
            continue;
        }
        let e = time.entry(outer).or_default();
        e.0 += op.dur();
        let inner = t.index.op_cpu_op.get(i).copied().unwrap_or(NONE);
        let in_factor = std::iter::once(inner)
            .chain(t.ancestors(inner))
            .take_while(|&a| a != NONE)
            .any(|a| {
                factor
                    .get(t.host_spans[a as usize].name as usize)
                    .copied()
                    .unwrap_or(false)
            });
        if in_factor {
            e.1 += op.dur();
        }
    }
    let (mut saving, mut inv_ns, mut product_ns) = (0.0f64, 0i64, 0i64);
    for &(a, b, n, k) in &pairs {
        let (total, fact) = time.get(&a).copied().unwrap_or_default();
        let prod = time.get(&b).map_or(0, |x| x.0);
        saving += (total - fact) as f64 * (1.0 - k as f64 / n as f64) + prod as f64;
        inv_ns += total;
        product_ns += prod;
    }
    let (a0, b0, n, k) = pairs[0];
    let shape = |i: u32| {
        t.input_dims(i)
            .first()
            .map(|x| format!("{x:?}"))
            .unwrap_or_default()
    };
    let other = t
        .input_dims(b0)
        .into_iter()
        .find(|x| x.len() >= 2 && !(x[x.len() - 1] == n && x[x.len() - 2] == n))
        .map(|x| format!("{x:?}"))
        .unwrap_or_default();
    let dtype = t.input_types(a0).first().cloned().unwrap_or_default();
    let per_step = per_step_note(cx, saving);
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "{}{} holds {:.0}% of GPU {d}'s time forming explicit inverses of {} {dtype} matrices, each then multiplied by {other}: solving for those {k} right-hand sides instead of the identity's {n} saves {}{per_step}",
            shown(&h.op),
            at(&h.frame),
            100.0 * h.share,
            shape(a0),
            fmt_ns(saving.round() as i64)
        ),
        saving.round() as i64,
        Confidence::Medium,
        format!(
            "{} inverses followed on their thread by a product with a [.., {n}, {n}] operand and a [.., {n}, {k}] (or [.., {k}, {n}]) one: the inverses took {}, their LU factorisation a part of it, and the products {}; torch.linalg.solve does the same factorisation, then solves for {k} right-hand sides instead of {n}, with no product after. Impact: the inverses' time beyond their factorisation × (1 − {k}/{n}), plus the products (read from shapes and order: the trace records no tensor identities)",
            pairs.len(),
            fmt_ns(inv_ns),
            fmt_ns(product_ns)
        ),
    );
    f.subject = Some(format!("{}{}", shown(&h.op), at(&h.frame)));
    f.breakdown = same_frame_rows(cx, acct, h.frame.as_deref());
    f.advice = vec![
        format!("Solve instead of inverting: torch.linalg.solve(A, B) for inv(A) @ B (torch.linalg.solve(A, B, left=False) for B @ inv(A)); where the same A is solved against many right-hand sides over time, factor it once (torch.linalg.lu_factor, or torch.linalg.cholesky for symmetric positive-definite A) and call torch.linalg.lu_solve / torch.cholesky_solve per use. The PyTorch documentation prefers solve to inv as faster and more stable."),
        "The checked linear-algebra functions read an error flag back to the host each call (a synchronisation): the _ex variants (torch.linalg.solve_ex, torch.linalg.inv_ex) return it as a tensor instead.".to_string(),
    ];
    f.metrics = metrics([
        ("gpu_ns", h.gpu_ns as f64),
        ("share", h.share),
        ("calls", h.calls as f64),
        ("inverse_ns", inv_ns as f64),
        ("product_ns", product_ns as f64),
        ("rows", n as f64),
        ("right_hand_sides", k as f64),
    ]);
    Some(f)
}

/// The holders under one frame, as breakdown rows.
fn same_frame_rows(cx: &Ctx, acct: &DeviceAccounting, frame: Option<&str>) -> Vec<Row> {
    acct.holders
        .iter()
        .filter(|o| o.frame.as_deref() == frame)
        .take(cx.config.max_rows)
        .map(|o| Row {
            label: format!(
                "{}{}",
                shown(&o.op),
                o.roof_share
                    .map(|r| format!(" ({:.0}% of roof)", 100.0 * r))
                    .unwrap_or_default()
            ),
            count: o.calls,
            time_ns: o.gpu_ns,
            bytes: None,
            python_frame: o.frame.clone(),
            cause: None,
            share: Some(o.share),
        })
        .collect()
}

/// The finding for attention written out under one frame, with that frame.
fn unfused_attention(cx: &Ctx, acct: &DeviceAccounting) -> Option<(Option<String>, Finding)> {
    let fr = acct
        .frames
        .iter()
        .find(|f| f.family == OpFamily::UnfusedAttention && f.share >= HOT_SHARE)?;
    let frame = (fr.frame != crate::accounting::NO_FRAME).then(|| fr.frame.clone());
    let hs: Vec<&Holder> = acct.holders.iter().filter(|h| h.frame == frame).collect();
    // Autograd runs the backward pass outside the user's frames: when this frame is the only
    // one writing attention out, the backward work over score matrices is its gradient.
    let only = acct
        .frames
        .iter()
        .filter(|f| f.family == OpFamily::UnfusedAttention && f.share >= HOT_SHARE)
        .count()
        == 1;
    let backward: Vec<&Holder> = if only && frame.is_some() {
        acct.holders
            .iter()
            .filter(|h| h.frame.is_none() && h.scores_ns > 0 && crate::phases::is_backward(&h.op))
            .collect()
    } else {
        Vec::new()
    };
    let scores_ns: i64 = hs.iter().chain(&backward).map(|h| h.scores_ns).sum();
    let (fused, attention_ns) = if scores_ns > 0 {
        // The work over score matrices (their products, softmax, masking, scaling, copies),
        // against the score products' FLOPs in a fused kernel at the attention roof; the
        // projections around them stay as they are.
        let flops: f64 = hs.iter().chain(&backward).map(|h| h.score_flops_ns).sum();
        (flops / ACHIEVABLE_ATTENTION, scores_ns)
    } else {
        // Without recorded shapes: the frame's matmuls at the attention roof.
        let fused = hs
            .iter()
            .filter(|h| h.family == OpFamily::Matmul)
            .filter_map(|h| h.ideal_ns)
            .sum::<f64>()
            / ACHIEVABLE_ATTENTION;
        let ns = hs
            .iter()
            .filter(|h| {
                matches!(
                    h.family,
                    OpFamily::Matmul | OpFamily::Softmax | OpFamily::Elementwise | OpFamily::Index
                )
            })
            .map(|h| h.gpu_ns)
            .sum();
        (fused, ns)
    };
    let impact = (attention_ns as f64 - fused).max(0.0) as i64;
    // The attention's own share: a frame also runs the projections around it, and without
    // Python stacks every operator is under the one frame.
    let share = if scores_ns > 0 {
        attention_ns as f64 / acct.gpu_ns.max(1) as f64
    } else {
        fr.share
    };
    let d = acct.device;
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "attention written out{} holds {:.0}% of GPU {d}'s time: matmuls, softmax and elementwise passes over the score matrix in HBM",
            at(&frame),
            100.0 * share
        ),
        impact,
        Confidence::Medium,
        if scores_ns > 0 {
            format!(
                "{} in operators over [.., T, T] score matrices under this frame{}; the score products' FLOPs need {} in a fused attention kernel at {:.0}% of the roof; impact: the difference",
                fmt_ns(attention_ns),
                if backward.is_empty() {
                    ""
                } else {
                    " and in their backward"
                },
                fmt_ns(fused as i64),
                100.0 * ACHIEVABLE_ATTENTION
            )
        } else {
            format!(
                "{} under this frame in matmul, softmax and elementwise operators; the matmuls' FLOPs need {} in a fused attention kernel at {:.0}% of the roof; impact: the difference",
                fmt_ns(attention_ns),
                fmt_ns(fused as i64),
                100.0 * ACHIEVABLE_ATTENTION
            )
        },
    );
    f.subject = Some(format!("unfused attention{}", at(&frame)));
    f.breakdown = same_frame_rows(cx, acct, frame.as_deref());
    f.advice = advice(OpFamily::UnfusedAttention, false, "", "");
    // nn.MultiheadAttention writes attention out itself when asked for its weights.
    if cx
        .trace
        .strings
        .matching(|n| n.contains("multi_head_attention_forward"))
        .contains(&true)
    {
        f.advice.insert(0, "nn.MultiheadAttention (multi_head_attention_forward in the Python stacks) computes its attention this way when it returns the attention weights, and need_weights=True is its default: call it with need_weights=False (with is_causal=True beside a causal attn_mask) so it runs F.scaled_dot_product_attention.".into());
    }
    f.metrics = metrics([
        ("gpu_ns", attention_ns as f64),
        ("share", share),
        ("fused_estimate_ns", fused),
    ]);
    Some((frame, f))
}

fn masked_attention(cx: &Ctx, acct: &DeviceAccounting) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let sdpa = t.strings.lookup("aten::scaled_dot_product_attention")?;
    let h = acct
        .holders
        .iter()
        .find(|h| h.op == "aten::scaled_dot_product_attention" && h.share >= HOT_SHARE)?;
    // Calls in the window with a square mask tensor as their fourth input.
    let (mut masked, mut all) = (0u64, 0u64);
    let mut shape = String::new();
    for (i, s) in t.host_spans.iter().enumerate() {
        if s.kind != HostKind::CpuOp || s.name != sdpa || s.start < w.start || s.start >= w.end {
            continue;
        }
        all += 1;
        let dims = t.input_dims(i as u32);
        let (Some(q), Some(m)) = (dims.first(), dims.get(3)) else {
            continue;
        };
        let square = m.len() >= 2 && m[m.len() - 1] == m[m.len() - 2];
        let seq = q.len() >= 2 && m.last() == q.get(q.len() - 2);
        if square && seq {
            masked += 1;
            if shape.is_empty() {
                shape = format!("{m:?}");
            }
        }
    }
    if masked == 0 || masked * 2 < all {
        return None;
    }
    let d = acct.device;
    // A causal kernel computes half the scores, at the attention roof; without FLOPs, half
    // the time.
    let causal_ns = h
        .ideal_ns
        .map_or(h.gpu_ns as f64 / 2.0, |ideal| ideal / 2.0 / ACHIEVABLE_ATTENTION);
    let impact = (h.gpu_ns as f64 - causal_ns).max(0.0) as i64;
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "scaled_dot_product_attention{} holds {:.0}% of GPU {d}'s time with an explicit {shape} mask tensor: the kernels compute the masked scores too, and a mask rules out flash attention",
            at(&h.frame),
            100.0 * h.share
        ),
        impact,
        Confidence::Medium,
        format!(
            "{masked} of {all} calls pass a square attn_mask as long as the sequence; {} in {} calls; a causal kernel computes half the scores, {} at {:.0}% of the roof; impact: the difference, if the mask is the causal one (the trace does not record the mask's values)",
            fmt_ns(h.gpu_ns),
            h.calls,
            fmt_ns(causal_ns as i64),
            100.0 * ACHIEVABLE_ATTENTION
        ),
    );
    f.subject = Some(format!("masked sdpa{}", at(&h.frame)));
    f.breakdown = same_frame_rows(cx, acct, h.frame.as_deref());
    f.advice = vec![
        "If the mask is causal, pass is_causal=True and no attn_mask: the flash and cuDNN kernels then skip the masked half and run their fastest path.".into(),
        "For padding masks, pack the sequences (nested/jagged tensors, or varlen flash attention with cumulative lengths) instead of a dense [T, T] mask.".into(),
    ];
    f.metrics = metrics([
        ("gpu_ns", h.gpu_ns as f64),
        ("share", h.share),
        ("masked_calls", masked as f64),
    ]);
    Some(f)
}

/// Layout transforms from this share of the GPU time up are worth a finding: they are pure
/// overhead (channels_last removes them), so the bar is lower than for a holder.
pub const LAYOUT_SHARE: f64 = 0.05;

/// A BatchNorm holder running its NCHW (not channels_last) kernels: its time beyond what 70%
/// of the HBM roof needs, `None` for any other holder or without a bytes model.
fn nchw_batchnorm(h: &Holder) -> Option<i64> {
    let op = h.op.to_ascii_lowercase();
    if h.family != OpFamily::Norm
        || !(op.contains("batchnorm") || op.contains("batch_norm"))
        || h.top_kernel.to_ascii_lowercase().contains("channels_last")
    {
        return None;
    }
    let ideal = h.ideal_ns?;
    Some((h.gpu_ns as f64 - ideal / ACHIEVABLE).max(0.0) as i64)
}

/// Convolutions run on NCHW tensors: cuDNN's tensor-core kernels work in NHWC, so it
/// transposes the inputs and outputs around each call, and the BatchNorm layers between them
/// run their strided NCHW kernels. One fix (channels_last) removes both, so one finding holds
/// both. Impact: the transforms' time plus the NCHW BatchNorm's time beyond what 70% of the
/// HBM roof needs.
fn nchw_layout(cx: &Ctx, acct: &DeviceAccounting) -> Option<Finding> {
    let convs: Vec<&Holder> = acct
        .holders
        .iter()
        .filter(|h| h.family == OpFamily::Convolution && h.layout_ns > 0)
        .collect();
    let layout: i64 = convs.iter().map(|h| h.layout_ns).sum();
    let share = layout as f64 / acct.gpu_ns.max(1) as f64;
    if share < LAYOUT_SHARE {
        return None;
    }
    // Named after the forward convolutions' frame when there is one (backward runs on the
    // autograd thread, without the user's frames).
    let top = convs
        .iter()
        .filter(|h| h.frame.is_some())
        .max_by_key(|h| h.layout_ns)
        .or_else(|| convs.iter().max_by_key(|h| h.layout_ns))?;
    let d = acct.device;
    let conv_ns: i64 = convs.iter().map(|h| h.gpu_ns).sum();
    let norms: Vec<(&Holder, i64)> = acct
        .holders
        .iter()
        .filter_map(|h| nchw_batchnorm(h).map(|x| (h, x)))
        .filter(|&(_, x)| x > 0)
        .collect();
    let norm_excess: i64 = norms.iter().map(|&(_, x)| x).sum();
    let norm_ns: i64 = norms.iter().map(|(h, _)| h.gpu_ns).sum();
    let norm_text = if norms.is_empty() {
        String::new()
    } else {
        format!(
            ", and BatchNorm runs its NCHW kernels: {} beyond what {:.0}% of the HBM roof needs",
            fmt_ns(norm_excess),
            100.0 * ACHIEVABLE
        )
    };
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "convolutions{} run on NCHW tensors: cuDNN transposes to NHWC and back around them, {} in layout kernels ({:.0}% of GPU {d}'s time){norm_text}",
            at(&top.frame),
            fmt_ns(layout),
            100.0 * share
        ),
        layout + norm_excess,
        Confidence::High,
        format!(
            "{} convolution operators ({} of GPU time) launch nchwToNhwc/nhwcToNchw kernels; {}impact: the transforms' time, which channels_last removes{}",
            convs.len(),
            fmt_ns(conv_ns),
            if norms.is_empty() {
                String::new()
            } else {
                format!(
                    "{} BatchNorm operators ({} of GPU time) run their NCHW kernels; ",
                    norms.len(),
                    fmt_ns(norm_ns)
                )
            },
            if norms.is_empty() {
                ""
            } else {
                ", plus the BatchNorm time beyond 70% of the roof (channels_last runs their NHWC kernels; how close those come to the roof the trace cannot tell)"
            }
        ),
    );
    f.subject = Some(format!("nchw convolutions{}", at(&top.frame)));
    let row = |h: &Holder, label: String| Row {
        label,
        count: h.calls,
        time_ns: h.gpu_ns,
        bytes: None,
        python_frame: h.frame.clone(),
        cause: None,
        share: Some(h.share),
    };
    let conv_rows = convs.iter().map(|h| {
        row(
            h,
            format!("{} (layout transforms {})", shown(&h.op), fmt_ns(h.layout_ns)),
        )
    });
    let norm_rows = norms.iter().map(|&(h, x)| {
        row(
            h,
            format!(
                "{} ({:.0}% of the HBM roof, {} beyond 70%)",
                shown(&h.op),
                100.0 * h.roof_share.unwrap_or(0.0),
                fmt_ns(x)
            ),
        )
    });
    let mut rows: Vec<Row> = conv_rows.chain(norm_rows).collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    f.breakdown = rows;
    f.advice = vec![
        "Put the model and its inputs in channels_last: model.to(memory_format=torch.channels_last) and x.to(memory_format=torch.channels_last); cuDNN then runs its NHWC kernels directly, and BatchNorm its NHWC kernels.".into(),
    ];
    f.metrics = metrics([
        ("layout_ns", layout as f64),
        ("share", share),
        ("batchnorm_excess_ns", norm_excess as f64),
    ]);
    Some(f)
}

/// A matrix product over a one-hot matrix (`F.one_hot(ids, V).to(dtype) @ W`): the one-hot
/// tensor is written (int64), cast, and multiplied through, V times the rows it selects, where
/// a lookup (`F.embedding(ids, W)`) reads the selected rows only. Found per `aten::one_hot`
/// call in the window: the next cast on its thread of an int64 tensor shaped like its output
/// (its input's dims and a last dim V), and the next matrix product after that whose first
/// input has V columns and as many elements. Impact: the three calls' GPU time less what the
/// lookup needs at 70% of the HBM roof (the index and the rows read and written); reported from
/// [`HOT_SHARE`] of the device's GPU time.
fn onehot_product(cx: &Ctx, acct: &DeviceAccounting) -> Option<Finding> {
    let groups = cx.onehot_products();
    let t = cx.trace;
    let d = acct.device;
    let p = cx.onehot_priced(d)?;
    let (total, share, lookup_ns) = (p.total, p.share, p.lookup_ns);
    let impact = (total as f64 - lookup_ns).max(0.0) as i64;
    let frame = t.user_frame(groups[0].onehot).map(str::to_string);
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "a one-hot matrix product{} holds {:.0}% of GPU {d}'s time: F.one_hot, its cast and a matmul over every class to select {} rows",
            at(&frame),
            100.0 * share,
            groups[0].rows as u64
        ),
        impact,
        Confidence::High,
        format!(
            "{} one_hot calls write the one-hot tensor ({}), cast it ({}) and multiply it through ({}): {} in all; a lookup of the same rows needs {} at 70% of the HBM roof; impact: the difference",
            groups.len(),
            fmt_ns(p.onehot_ns),
            fmt_ns(p.cast_ns),
            fmt_ns(p.product_ns),
            fmt_ns(total),
            fmt_ns(lookup_ns as i64)
        ),
    );
    f.subject = Some(format!("one-hot product{}", at(&frame)));
    let row = |s: u32, ns: i64| Row {
        label: format!(
            "{} {}",
            t.str(t.host_spans[s as usize].name),
            t.input_shapes(s).first().cloned().unwrap_or_default()
        ),
        count: groups.len() as u64,
        time_ns: ns,
        bytes: None,
        python_frame: t.user_frame(s).map(str::to_string),
        cause: None,
        share: Some(ns as f64 / acct.gpu_ns.max(1) as f64),
    };
    let g = groups[0];
    f.breakdown = vec![
        row(g.onehot, p.onehot_ns),
        row(g.cast, p.cast_ns),
        row(g.product, p.product_ns),
    ];
    f.breakdown.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    f.advice = vec!["A one-hot matrix times a table selects rows: F.embedding(ids, W) (or W[ids], nn.Embedding) reads only the selected rows, with no one-hot tensor, no cast and no matmul over every class; its backward sums the gradients of repeated ids. For a loss over one-hot targets, F.cross_entropy takes the class indices.".into()];
    f.metrics = metrics([
        ("gpu_ns", total as f64),
        ("share", share),
        ("lookup_ns", lookup_ns),
        ("calls", groups.len() as f64),
    ]);
    Some(f)
}

/// What usually makes this family slow in PyTorch, and what replaces it.
fn advice(family: OpFamily, grows: bool, top_kernel: &str, op: &str) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    if grows {
        a.push(match family {
            OpFamily::Cat => "A tensor grown with torch.cat in a loop is copied whole at every call, so the cost grows with its length (quadratic over the loop): allocate it once at full size and write each new piece into a slice (buf[:, :, t] = x, index_copy_), or collect the pieces in a list and cat once. For a KV cache, use a static cache (transformers' StaticCache).".into(),
            _ => "Its cost grows call over call within a step, so its inputs grow with the loop: recomputing what earlier calls already computed (a whole sequence re-run for every new token without a KV cache) or extending a buffer every iteration. Keep the earlier results (past_key_values / use_cache=True) and run only the new part.".into(),
        });
    }
    let k = top_kernel.to_ascii_lowercase();
    a.push(match family {
        // Whatever operator holds it (cross_entropy, log_softmax, its backward).
        _ if crate::names::is_spatial_softmax(top_kernel) => {
            crate::names::SPATIAL_SOFTMAX_ADVICE.into()
        }
        OpFamily::Cat => "torch.cat and torch.stack copy every input into a new tensor: have the producers write into slices of one preallocated output, or let the consumer take the pieces separately.".into(),
        OpFamily::Sort => "A full sort to keep only the first entries: torch.topk(x, k) selects without sorting the rest (top-k sampling: topk, then softmax over the k values); argsort + slice is topk(...).indices.".into(),
        OpFamily::Index => "Gathers, scatters and boolean-mask indexing run far from HBM speed on random or repeated indices: use F.embedding instead of weight[ids] (its backward sums repeated rows in one pass), integer indices or torch.where instead of boolean masks, sort indices before index_select/index_add_, and compute losses with F.cross_entropy instead of F.one_hot products.".into(),
        OpFamily::Norm
            if (op.to_ascii_lowercase().contains("batchnorm") || op.contains("batch_norm"))
                && !k.contains("channels_last") => "BatchNorm on NCHW tensors runs its slow strided kernels (and cuDNN transposes around the convolutions next to it): put the model and inputs in channels_last (model.to(memory_format=torch.channels_last)), where BatchNorm and the convolutions use their NHWC kernels.".into(),
        OpFamily::Norm
            if op.to_ascii_lowercase().contains("batchnorm") || op.contains("batch_norm") => "BatchNorm in training reads its input twice (statistics, then normalisation) and its kernels rarely reach the HBM roof even in channels_last: torch.compile fuses it with the activation after it; for inference, fold it into the convolution's weights.".into(),
        OpFamily::Norm => "Use the fused norm kernels (F.layer_norm, F.rms_norm, F.group_norm) rather than norms written from mean/var/rsqrt, and channels_last for BatchNorm after convolutions; torch.compile fuses the rest.".into(),
        OpFamily::Softmax => "A softmax over a large last dimension written to HBM and read back: fuse it with its consumer (F.cross_entropy fuses log_softmax and the loss; F.scaled_dot_product_attention fuses attention's).".into(),
        OpFamily::UnfusedAttention => "Use F.scaled_dot_product_attention (is_causal=True for a causal mask, not a mask tensor): the flash/cuDNN kernels never write the [B, H, T, T] scores to HBM. Attention written as q @ k.transpose, masked_fill, softmax, @ v moves the score matrix through HBM several times.".into(),
        OpFamily::Convolution if k.contains("nchwtonhwc") || k.contains("nhwctonchw") => "cuDNN transposes NCHW tensors to NHWC and back around its tensor-core kernels: put the model and its inputs in channels_last (model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)).".into(),
        OpFamily::Convolution => "Convolutions in half precision run fastest in channels_last with cudnn.benchmark=True; depthwise and grouped convolutions rarely reach the roof.".into(),
        OpFamily::Matmul | OpFamily::Attention => "Matrix work: see the roofline rule's figures for these shapes.".into(),
        OpFamily::Fft => "An FFT far from HBM speed: transform the last, contiguous dim (a transform over another dim adds strided passes), run many small transforms as one batched call, and choose lengths whose prime factors are 2, 3, 5 and 7 (cuFFT's fast kernels).".into(),
        _ => "Memory-bound work far from HBM speed usually reads strided (transposed, broadcast, sliced) inputs or runs on small tensors: make the input contiguous once where it is made, batch small calls, or fuse the chain with torch.compile.".into(),
    });
    a
}

/// One kernel holds most of a GPU-bound run of a program that is not PyTorch (CUDA C, CuPy,
/// Julia) and the capture records no hardware counters: how close it runs to its limits,
/// so what it could save, is not in the trace. The finding names it with its launch geometry and
/// the Nsight Compute command that measures it, carries no impact ([`UNPRICED`]) and ranks
/// first: whatever else the trace can price is a small part beside it (Luminara's `render`,
/// 98% of the window, had led with 23 ms of two single-thread kernels).
fn dominant_kernel(cx: &Ctx, acct: &DeviceAccounting) -> Option<Finding> {
    // In a PyTorch trace whose kernels no operator launched (a CUDA graph's replay), the rules
    // on matrix and memory-bound work price them by name.
    if cx.pytorch() {
        return None;
    }
    let d = acct.device;
    let (k, first) = crate::accounting::dominant_kernel(cx, acct)?;
    // A collective waits on other ranks as much as it runs: not a kernel to tune alone.
    if crate::collectives::is_collective_kernel(&k.name) {
        return None;
    }
    let busy = cx.idle().iter().find(|i| i.device == d)?.busy_ns;
    if cx.window.share(busy) < crate::window::BUSY_SHARE {
        return None;
    }
    let t = cx.trace;
    let name = crate::names::short_name(&k.name, 80);
    // The function's own name (`render`), as other findings write it before `(…)`.
    let function = crate::names::ncu_function_name(&k.name)
        .unwrap_or_else(|| name.trim_end_matches("(…)").to_string());
    // The first call's launch, where the trace recorded it.
    let geometry = first
        .kernel
        .filter(|g| g.geometry)
        .map(|g| {
            let blocks: u64 = g.grid.iter().map(|&x| u64::from(x.max(1))).product();
            let threads: u64 = g.block.iter().map(|&x| u64::from(x.max(1))).product();
            let sms = t
                .meta
                .gpu(d)
                .and_then(|x| x.sm_count)
                .map(|n| format!(" on {n} SMs"))
                .unwrap_or_default();
            format!(
                "its first launch runs {blocks} blocks of {threads} threads{sms}, {} registers a thread, {} B of shared memory a block; ",
                g.registers, g.shared_mem
            )
        })
        .unwrap_or_default();
    let share = cx.window.share(k.gpu_ns);
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "{name} holds {:.0}% of GPU {d}'s time ({} in {}): its speed decides the run, and the capture cannot tell how close it runs to its limits",
            100.0 * k.share,
            fmt_ns(k.gpu_ns),
            crate::accounting::calls_text(k)
        ),
        0,
        Confidence::High,
        format!(
            "{geometry}the capture has no per-kernel counters (memory and compute throughput, occupancy, warp stalls), so whether memory, compute or latency limits it, and what a faster kernel would save, is not in it"
        ),
    );
    f.subject = Some(format!("kernel {function}"));
    f.advice = vec![format!(
        "Profile it with Nsight Compute{} and `--set full`: its throughput against the GPU's memory and compute peaks, its occupancy and its warp stall reasons say which limit it meets and what to change; its speed decides the run.",
        crate::names::ncu_command(&k.name)
    )];
    f.metrics = metrics([
        (crate::finding::UNPRICED, share),
        ("kernel_ns", k.gpu_ns as f64),
        ("calls", k.calls as f64),
    ]);
    // Its longest calls, so that a timeline (the overlay, the TUI) shows where it runs.
    let mut calls: Vec<&tracehound_parsers::GpuOp> = cx
        .window
        .kernels(t, d)
        .filter(|(_, op)| t.str(op.name) == k.name)
        .map(|(_, op)| op)
        .collect();
    calls.sort_by(|a, b| b.dur().cmp(&a.dur()).then(a.start.cmp(&b.start)));
    f.instances = calls
        .into_iter()
        .take(cx.config.max_instances)
        .map(|op| Instance {
            start_ns: op.start,
            dur_ns: op.dur(),
            offset_ms: cx.window.offset_ms(op.start),
            what: format!("{function} ran {}", fmt_ns(op.dur())),
            cpu_op: None,
            python_frame: None,
        })
        .collect();
    Some(f)
}
