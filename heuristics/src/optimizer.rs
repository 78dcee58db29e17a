//! The optimizer's calls in the window: PyTorch's `Optimizer.step#<Name>.step` and
//! `Optimizer.zero_grad#<Name>.zero_grad` ranges and the kernels their launch calls queued,
//! scanned once per analysis ([`crate::context::Ctx::optimizer_calls`]). The
//! optimizer_overhead rule judges them; launch_bound and the verdict leave the waits inside
//! the ranges it prices (a single-tensor optimizer's steps, a zeroing `zero_grad`) to it,
//! where it reports them.

use crate::scope::Scope;
use std::collections::BTreeMap;
use tracehound_parsers::{GpuOpKind, HostKind, Trace};

/// Kernels per optimizer step call from which a mostly per-tensor step is a kernel storm.
pub(crate) const STORM_KERNELS: usize = 50;

/// The share of the window the priced ranges' cost must reach for optimizer_overhead to
/// report it (and for the other readers to leave their waits to it).
const MIN_SHARE: f64 = 0.01;

/// One optimizer's calls in the window (its step or its zero_grad), added up.
#[derive(Default)]
pub(crate) struct Calls {
    /// Calls in the window.
    pub(crate) calls: u64,
    /// Kernels their launch calls queued.
    pub(crate) kernels: u64,
    /// Of them, `multi_tensor_apply` (foreach and fused) kernels.
    pub(crate) multi_tensor: u64,
    /// The kernels' time.
    pub(crate) kernel_ns: i64,
    /// Per call, first kernel start to last kernel end, added up.
    pub(crate) span_ns: i64,
    /// `_single_tensor_*` Python frames (stacks only).
    pub(crate) single_tensor_frames: u64,
    /// The user's line around the first call.
    pub(crate) frame: Option<String>,
    /// The range's name as recorded (`Optimizer.step#Adam.step`), for the rows: what to
    /// look for in the timeline.
    pub(crate) range: String,
}

/// The optimizer calls of the window, as scanned.
#[derive(Default)]
pub(crate) struct OptimizerCalls {
    /// The calls grouped by optimizer (`Adam.step`) and whether they are `zero_grad`.
    pub(crate) by_label: BTreeMap<(String, bool), Calls>,
    /// The ranges optimizer_overhead prices, where it reports them: the step ranges of
    /// single-tensor optimizers (storms) and the `zero_grad` ranges that launch zeroing
    /// kernels, as (thread, start, end), sorted. `launch_bound` leaves the waits for launches
    /// made inside them to `optimizer_overhead`, which names their cause (a multi-tensor
    /// step; `set_to_none=True`). Empty when the cost is under [`MIN_SHARE`].
    pub(crate) priced_ranges: Vec<((i64, i64), i64, i64)>,
}

impl OptimizerCalls {
    /// The window's optimizer steps: the most calls of one optimizer's `step` (0 without any),
    /// the iterations of a capture without step markers.
    pub(crate) fn steps(&self) -> usize {
        self.by_label
            .iter()
            .filter(|((_, zero_grad), _)| !zero_grad)
            .map(|(_, c)| c.calls as usize)
            .max()
            .unwrap_or(0)
    }
}

/// Scans the window's optimizer ranges and the kernels their launch calls queued.
pub(crate) fn scan(cx: &Scope) -> OptimizerCalls {
    let t = cx.trace;
    let w = &cx.window;
    // The optimizer ranges' names, found in the string table (far smaller than the spans).
    let names = t.strings.matching(|n| n.starts_with("Optimizer."));
    if !names.contains(&true) {
        return OptimizerCalls::default();
    }
    // Names are tested once each, by string id, not once per span or kernel.
    let multi_tensor = t.strings.matching(|n| n.contains("multi_tensor_apply"));
    let single_tensor = t.strings.matching(|n| n.contains(": _single_tensor_"));
    let has = |v: &[bool], id: u32| v.get(id as usize).copied().unwrap_or(false);
    // One pass over the spans (they are read from memory, not from cache): the ranges,
    // and the Python frames of the per-tensor implementations (when the trace has stacks).
    let mut ranges: Vec<u32> = Vec::new();
    let mut single_tensor_frames = 0u64;
    for (i, s) in t.host_spans.iter().enumerate() {
        if s.start < w.start || s.start >= w.end {
            continue;
        }
        match s.kind {
            HostKind::CpuOp | HostKind::Annotation if has(&names, s.name) => {
                ranges.push(i as u32);
            }
            HostKind::Python if has(&single_tensor, s.name) => single_tensor_frames += 1,
            _ => {}
        }
    }
    if ranges.is_empty() {
        return OptimizerCalls::default();
    }
    // Per optimizer call: kernels, multi-tensor kernels, kernel time, first start, last
    // end. The launch calls inside each call's range (on its thread) are collected first,
    // then each kernel looks its launch call up: no host span is read per kernel.
    let mut launch_call: rustc_hash::FxHashMap<u32, usize> = Default::default();
    for (k, &r) in ranges.iter().enumerate() {
        let s = &t.host_spans[r as usize];
        let spans = t.thread_spans((s.pid, s.tid));
        let first = spans.partition_point(|&i| t.host_spans[i as usize].start < s.start);
        for &i in &spans[first..] {
            let h = &t.host_spans[i as usize];
            if h.start >= s.end {
                break;
            }
            if matches!(h.kind, HostKind::Runtime | HostKind::Driver) {
                launch_call.insert(i, k);
            }
        }
    }
    let mut per_call = vec![(0u64, 0u64, 0i64, i64::MAX, i64::MIN); ranges.len()];
    for (i, op) in t.gpu_ops.iter().enumerate() {
        if op.kind != GpuOpKind::Kernel {
            continue;
        }
        let Some(&call) = launch_call.get(&t.index.op_launch[i]) else {
            continue;
        };
        let c = &mut per_call[call];
        c.0 += 1;
        if has(&multi_tensor, op.name) {
            c.1 += 1;
        }
        c.2 += op.dur();
        c.3 = c.3.min(op.start);
        c.4 = c.4.max(op.end);
    }
    // By optimizer, each range with its key.
    let mut by_label: BTreeMap<(String, bool), Calls> = BTreeMap::new();
    let mut keys: Vec<(String, bool)> = Vec::with_capacity(ranges.len());
    for (k, &r) in ranges.iter().enumerate() {
        let s = &t.host_spans[r as usize];
        let name = t.str(s.name);
        let zero = name.contains("zero_grad");
        let label = name.split('#').nth(1).unwrap_or(name).to_string();
        let (n, multi, ns, first, last) = per_call[k];
        keys.push((label.clone(), zero));
        let c = by_label.entry((label, zero)).or_default();
        if c.calls == 0 {
            c.frame = t.user_frame(r).map(str::to_string);
            c.range = name.to_string();
        }
        c.calls += 1;
        c.kernels += n;
        c.multi_tensor += multi;
        c.kernel_ns += ns;
        if n > 0 {
            c.span_ns += last - first;
        }
    }
    // The per-tensor frames go to the first optimizer step's row (not zero_grad's).
    if let Some(c) = by_label.iter_mut().find(|(k, _)| !k.1).map(|(_, c)| c) {
        c.single_tensor_frames += single_tensor_frames;
    }
    let total: i64 = by_label.iter().filter_map(|(k, c)| cost(c, k.1)).sum();
    let mut priced_ranges: Vec<((i64, i64), i64, i64)> = if w.share(total) < MIN_SHARE {
        Vec::new()
    } else {
        ranges
            .iter()
            .zip(&keys)
            .filter(|(_, key)| by_label.get(*key).and_then(|c| cost(c, key.1)).is_some())
            .map(|(&r, _)| {
                let s = &t.host_spans[r as usize];
                ((s.pid, s.tid), s.start, s.end)
            })
            .collect()
    };
    priced_ranges.sort_unstable();
    OptimizerCalls {
        by_label,
        priced_ranges,
    }
}

/// What optimizer_overhead charges to one optimizer's calls, `None` where it charges nothing:
/// a zeroing `zero_grad`'s kernels and the GPU waiting between them (`zero` true, kernels
/// launched), a storm step's waiting between its kernels (their run time is the update's).
pub(crate) fn cost(c: &Calls, zero: bool) -> Option<i64> {
    if zero {
        (c.kernels > 0).then(|| c.kernel_ns + (c.span_ns - c.kernel_ns).max(0))
    } else {
        is_storm(c).then(|| (c.span_ns - c.kernel_ns).max(0))
    }
}

/// Whether an optimizer's step calls are a storm: per-tensor kernels, many per call.
pub(crate) fn is_storm(c: &Calls) -> bool {
    (c.kernels / c.calls.max(1)) as usize >= STORM_KERNELS && c.multi_tensor * 2 < c.kernels
}

/// Whether GPU op `op` was launched in one of the ranges optimizer_overhead prices
/// ([`OptimizerCalls::priced_ranges`], sorted by thread and start).
pub(crate) fn launched_in(t: &Trace, storms: &[((i64, i64), i64, i64)], op: u32) -> bool {
    let l = t.index.op_launch[op as usize];
    t.host_spans.get(l as usize).is_some_and(|h| {
        let (thread, at) = ((h.pid, h.tid), h.start);
        let i = storms.partition_point(|s| (s.0, s.1) <= (thread, at));
        i > 0 && storms[i - 1].0 == thread && storms[i - 1].2 > at
    })
}
