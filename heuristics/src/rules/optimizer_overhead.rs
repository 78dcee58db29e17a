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
//! launches (part of what `idle_gaps` also sees; `launch_bound` and the verdict leave the
//! waits inside the storm steps and zeroing `zero_grad` ranges to this rule where it reports),
//! plus the zeroing kernels' own time ([`crate::optimizer::cost`]). Reported from 1% of the
//! window.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use std::collections::BTreeMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "optimizer_overhead";

/// The rule.
pub struct OptimizerOverhead;

impl Rule for OptimizerOverhead {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "single-tensor optimizers and zero_grad without set_to_none: kernel storms per parameter"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let by_range = &cx.optimizer_calls().by_label;
        let mut out = Vec::new();
        let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
        let (mut impact, mut storm_kernels, mut zero_kernels, mut steps) = (0i64, 0u64, 0u64, 0u64);
        let mut names = Vec::new();
        for ((label, zero), c) in by_range {
            let per_call = c.kernels / c.calls.max(1);
            let Some(cost) = crate::optimizer::cost(c, *zero) else {
                continue;
            };
            if *zero {
                impact += cost;
                zero_kernels += c.kernels;
                groups.insert(
                    (
                        format!(
                            "{}: {per_call} zeroing kernels per call (set_to_none=False)",
                            c.range
                        ),
                        c.frame.clone(),
                    ),
                    (c.calls, cost),
                );
            } else {
                impact += cost;
                storm_kernels += c.kernels;
                steps = steps.max(c.calls);
                names.push(label.clone());
                groups.insert(
                    (
                        format!(
                            "{}: {per_call} kernels per call, {:.0}% multi-tensor{}",
                            c.range,
                            100.0 * c.multi_tensor as f64 / c.kernels.max(1) as f64,
                            if c.single_tensor_frames > 0 {
                                " (_single_tensor_* in the stack)"
                            } else {
                                ""
                            }
                        ),
                        c.frame.clone(),
                    ),
                    (c.calls, cost),
                );
            }
        }
        // The scan decided whether these calls cost enough to report (their ranges are
        // priced then): one decision for this finding and the waits others leave to it.
        if groups.is_empty() || cx.optimizer_calls().priced_ranges.is_empty() {
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
            "impact = GPU time the optimizer's kernels span less the time they run (the GPU waiting for per-tensor launches, which launch_bound leaves to this finding), plus the zeroing kernels".into(),
        );
        f.breakdown = rows_with_frames(cx, groups, impact);
        if storm_kernels > 0 {
            // In the optimizer's own name where the trace gives it (`Adam.step`).
            let opt = names
                .first()
                .and_then(|n| n.strip_suffix(".step"))
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or("AdamW");
            f.advice.push(format!("Use a multi-tensor optimizer: torch.optim.{opt}(params, fused=True) (or foreach=True, the default when all parameters are on the GPU); drop foreach=False."));
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

