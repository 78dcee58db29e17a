//! Optimizer and small-op overhead: a single-tensor optimizer (`foreach=False`, or the
//! per-parameter loop of an old optimizer) that launches a storm of tiny kernels per
//! parameter, and `zero_grad()` that zeroes gradients with kernels instead of dropping them.
//!
//! PyTorch marks optimizer calls with `Optimizer.step#<Name>.step` and
//! `Optimizer.zero_grad#<Name>.zero_grad` ranges. Inside `step`, the kernels its launch calls
//! queued are counted; a step whose kernels are at least 50 per call and mostly not
//! `multi_tensor_apply` (the foreach/fused kernels that take many tensors per launch) is a
//! single-tensor optimizer. `zero_grad` with `set_to_none=True` (the default since 2.0)
//! launches nothing; kernels under it mean `set_to_none=False`. The impact is the GPU time
//! the optimizer's kernels span less the time they run: the GPU waiting for the per-tensor
//! launches (part of what `launch_bound` and `idle_gaps` also see), plus the zeroing kernels'
//! own time. Reported from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_by_time};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use std::collections::BTreeMap;
use tracehound_parsers::{GpuOpKind, HostKind};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "optimizer_overhead";

/// The rule.
pub struct OptimizerOverhead;

/// Kernels per optimizer step call from which a mostly per-tensor step is a kernel storm.
const STORM_KERNELS: usize = 50;

#[derive(Default)]
struct Calls {
    calls: u64,
    kernels: u64,
    multi_tensor: u64,
    kernel_ns: i64,
    span_ns: i64,
    single_tensor_frames: u64,
}

impl Rule for OptimizerOverhead {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "single-tensor optimizers and zero_grad without set_to_none: kernel storms per parameter"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        // Kernels (GPU op index) by launching span, for the spans inside optimizer ranges.
        let mut by_range: BTreeMap<(String, bool), Calls> = BTreeMap::new();
        // The optimizer ranges' names, found in the string table (far smaller than the spans).
        let names = t.strings.matching(|n| n.starts_with("Optimizer."));
        if !names.contains(&true) {
            return Vec::new();
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
            return Vec::new();
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
        for (k, &r) in ranges.iter().enumerate() {
            let s = &t.host_spans[r as usize];
            let name = t.str(s.name);
            let zero = name.contains("zero_grad");
            let label = name.split('#').nth(1).unwrap_or(name).to_string();
            let (n, multi, ns, first, last) = per_call[k];
            let c = by_range.entry((label, zero)).or_default();
            c.calls += 1;
            c.kernels += n;
            c.multi_tensor += multi;
            c.kernel_ns += ns;
            if n > 0 {
                c.span_ns += last - first;
            }
        }
        // The per-tensor frames go to the first optimizer step's row (not zero_grad's).
        if let Some(c) = by_range.iter_mut().find(|(k, _)| !k.1).map(|(_, c)| c) {
            c.single_tensor_frames += single_tensor_frames;
        }
        let mut out = Vec::new();
        let mut groups: BTreeMap<String, (u64, i64)> = BTreeMap::new();
        let (mut impact, mut storm_kernels, mut zero_kernels, mut steps) = (0i64, 0u64, 0u64, 0u64);
        let mut names = Vec::new();
        for ((label, zero), c) in &by_range {
            let per_call = c.kernels / c.calls.max(1);
            if *zero {
                if c.kernels == 0 {
                    continue;
                }
                let cost = c.kernel_ns + (c.span_ns - c.kernel_ns).max(0);
                impact += cost;
                zero_kernels += c.kernels;
                groups.insert(
                    format!("{label}: {per_call} zeroing kernels per call (set_to_none=False)"),
                    (c.calls, cost),
                );
            } else if per_call as usize >= STORM_KERNELS && c.multi_tensor * 2 < c.kernels {
                let cost = (c.span_ns - c.kernel_ns).max(0);
                impact += cost;
                storm_kernels += c.kernels;
                steps = steps.max(c.calls);
                names.push(label.clone());
                groups.insert(
                    format!(
                        "{label}: {per_call} kernels per call, {:.0}% multi-tensor{}",
                        100.0 * c.multi_tensor as f64 / c.kernels.max(1) as f64,
                        if c.single_tensor_frames > 0 {
                            " (_single_tensor_* in the stack)"
                        } else {
                            ""
                        }
                    ),
                    (c.calls, cost),
                );
            }
        }
        if groups.is_empty() || w.share(impact) < 0.01 {
            return out;
        }
        let mut f = new_finding(
            cx,
            ID,
            None,
            format!(
                "Optimizer kernel storm: {} cost {}",
                [
                    (storm_kernels > 0).then(|| {
                        format!(
                            "{} kernels per optimizer step from a single-tensor {}",
                            storm_kernels / steps.max(1),
                            names.join(", ")
                        )
                    }),
                    (zero_kernels > 0).then(|| format!("{zero_kernels} zero_grad kernels")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and "),
                fmt_ns(impact)
            ),
            impact,
            Confidence::Medium,
            "impact = GPU time the optimizer's kernels span less the time they run (the GPU waiting for per-tensor launches; overlaps launch_bound), plus the zeroing kernels".into(),
        );
        f.breakdown = rows_by_time(cx, groups, impact);
        if storm_kernels > 0 {
            f.advice.push("Use a multi-tensor optimizer: torch.optim.AdamW(params, fused=True) (or foreach=True, the default when all parameters are on the GPU); drop foreach=False.".into());
        }
        if zero_kernels > 0 {
            f.advice.push("optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0): gradients are dropped, not zeroed by a kernel each.".into());
        }
        f.metrics = metrics([
            ("storm_kernels", storm_kernels as f64),
            ("zero_grad_kernels", zero_kernels as f64),
        ]);
        out.push(f);
        out
    }
}
