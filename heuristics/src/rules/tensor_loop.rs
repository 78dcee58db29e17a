//! A Python loop over a list of tensors, one kernel per tensor, whose launches the GPU waits
//! for: an EMA of the weights updated parameter by parameter, gradients clipped or scaled one
//! by one, `p.grad.zero_()` per parameter. A `torch._foreach_*` operator takes the whole list
//! in a few launches. The loops are found by [`crate::tensor_loops`]; the impact is the GPU
//! idle right before their kernels that waited for a slow host (launch_bound's kind of wait,
//! which launch_bound leaves to this finding where it reports), measured under the profiler,
//! which slows every call it records. Reported from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use crate::tensor_loops::counterpart;
use std::collections::BTreeMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "tensor_loop";

/// The rule.
pub struct TensorLoop;

impl Rule for TensorLoop {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "Python loops over a list of tensors (one per-tensor kernel each, an EMA or clipping by hand) and the GPU's waits for their launches"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let loops = cx.tensor_loops();
        let steps = w.steps_in(t);
        let per_step = |n: f64| n / steps.max(1) as f64;
        let mut out = Vec::new();
        for dev in loops.devices.iter().filter(|d| d.reported) {
            // Runs grouped by their operators and line.
            let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
            let mut names: Vec<&str> = Vec::new();
            let mut calls = 0usize;
            for r in &loops.runs {
                let ops: Vec<&str> = r.names.iter().map(|&n| t.str(n)).collect();
                for n in &ops {
                    if !names.contains(n) {
                        names.push(n);
                    }
                }
                calls += r.calls;
                let g = groups
                    .entry((
                        format!("{} (runs of {} calls)", ops.join(" → "), r.calls),
                        t.user_frame(r.first).map(str::to_string),
                    ))
                    .or_default();
                g.0 += r.calls as u64;
            }
            // Waits by group: each run's share of the loop calls (the waits are the device's,
            // counted over every loop kernel).
            for g in groups.values_mut() {
                g.1 = (dev.waits_ns as f64 * g.0 as f64 / calls.max(1) as f64).round() as i64;
            }
            let frame = loops
                .runs
                .first()
                .and_then(|r| t.user_frame(r.first))
                .map(|f| format!(" at {f}"))
                .unwrap_or_default();
            let a_step = if steps > 0 {
                format!(
                    " ({:.0} calls and {} a step)",
                    per_step(calls as f64),
                    fmt_ns(per_step(dev.waits_ns as f64).round() as i64)
                )
            } else {
                String::new()
            };
            let d = dev.device;
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "A Python loop over a list of tensors{frame}: {calls} calls of {} back to back, one kernel each; GPU {d} waited {} for their launches{a_step}",
                    names.join(", "),
                    fmt_ns(dev.waits_ns)
                ),
                dev.waits_ns,
                Confidence::Medium,
                format!(
                    "{} runs of at least {} consecutive calls of per-tensor operators ({}) with nothing between them on their thread; {} of their kernels started on an idle GPU with nothing queued, {} of idle before them{}",
                    loops.runs.len(),
                    crate::tensor_loops::MIN_RUN,
                    names.join(", "),
                    dev.kernels,
                    fmt_ns(dev.waits_ns),
                    crate::starved::profiler_note(cx)
                ),
            );
            f.breakdown = rows_with_frames(cx, groups, dev.waits_ns);
            let foreach: Vec<String> = names
                .iter()
                .filter_map(|n| counterpart(n).map(|c| format!("{n} → {c}")))
                .collect();
            let ema = names.contains(&"aten::mul_") && names.contains(&"aten::add_");
            let norms = names
                .iter()
                .any(|n| matches!(*n, "aten::norm" | "aten::linalg_vector_norm"));
            let zeroing = names.contains(&"aten::zero_");
            f.advice = Vec::new();
            if zeroing {
                f.advice.push("Gradients zeroed one by one (model.zero_grad(set_to_none=False), or p.grad.zero_() per parameter): zero_grad(set_to_none=True), the default, drops them with no kernel at all.".to_string());
            }
            f.advice.push(format!(
                "Where the loop walks a list of tensors (parameters, gradients, an EMA copy), one foreach call per operator takes the whole list in a few launches: {}{}{}. Where it updates one tensor many times, one operation over the stacked inputs replaces it.",
                foreach.join(", "),
                if ema {
                    "; an EMA written as mul_ then add_ is one torch._foreach_lerp_(ema, params, 1 - decay)"
                } else {
                    ""
                },
                if norms {
                    "; a norm per gradient for clipping is torch.nn.utils.clip_grad_norm_ (or get_total_norm), which uses torch._foreach_norm"
                } else {
                    ""
                }
            ));
            f.metrics = metrics([
                ("launch_waits_ns", dev.waits_ns as f64),
                ("waited_kernels", dev.kernels as f64),
                ("calls", calls as f64),
                ("runs", loops.runs.len() as f64),
            ]);
            out.push(f);
        }
        out
    }
}
