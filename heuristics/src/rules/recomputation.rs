//! Activation checkpointing's recomputation: forward operators that run again inside the
//! backward pass.
//!
//! Autograd's backward functions (`autograd::engine::evaluate_function: …Backward0`) call the
//! backward formulas, which never call the composite forward operators a module calls
//! (`aten::linear`, `aten::layer_norm`, `aten::scaled_dot_product_attention`, `aten::conv2d`,
//! …): those run inside backward only when a checkpoint (`torch.utils.checkpoint`, either
//! form) recomputes the forward to rebuild the activations it did not keep. Their kernels are
//! the price of the memory checkpointing saves; where the activations would fit without it,
//! that price buys nothing. The capture says what the recomputation costs, not whether the
//! memory was needed, so the finding states the first and asks the second. The operators and
//! their cost are found by [`crate::checkpointing`], which `launch_bound` reads to leave the
//! waits before recomputed kernels to this finding.

use super::Rule;
use crate::checkpointing::FORWARD_OPS;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Row, fmt_ns, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "recomputation";

/// The rule.
pub struct Recomputation;

impl Rule for Recomputation {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "forward operators recomputed inside backward (activation checkpointing) and the GPU time they take"
    }

    fn check(&self, cx: &Ctx) -> Vec<crate::finding::Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let scan = cx.recomputation();
        let at = scan.at.as_ref().map(|f| format!(" at {f}")).unwrap_or_default();
        let mut out = Vec::new();
        for dev in scan.devices.iter().filter(|d| d.reported) {
            let (d, kernel_ns, recomputed_ns, waits_ns) =
                (dev.device, dev.kernel_ns, dev.recomputed_ns, dev.waits_ns);
            let impact = recomputed_ns + waits_ns;
            let by_name = &dev.by_name;
            let mut rows: Vec<(String, i64, u64)> = by_name
                .iter()
                .map(|(&n, (ns, calls))| (t.str(n).to_string(), *ns, calls.len() as u64))
                .collect();
            rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let calls: u64 = rows.iter().map(|r| r.2).sum();
            let kernel_share = recomputed_ns as f64 / kernel_ns.max(1) as f64;
            let per_step = crate::finding::a_step(impact as f64, w.steps_in(t))
                .map(|x| format!(", {x}"))
                .unwrap_or_default();
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "Activation checkpointing runs the forward again in backward{at}: {calls} forward operators recomputed ({}), {} of kernels ({:.0}% of GPU {d}'s kernel time) and {} waiting for their launches{per_step}",
                    rows.iter()
                        .take(3)
                        .map(|r| r.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    fmt_ns(recomputed_ns),
                    100.0 * kernel_share,
                    fmt_ns(waits_ns)
                ),
                impact,
                Confidence::High,
                format!(
                    "forward operators ({}) inside autograd's backward functions: backward formulas never call them, so they run there only when a checkpoint recomputes the forward to rebuild activations it did not keep; their kernels took {} ({:.0}% of the device's kernel time in the window), and the GPU idled {} before them while the host ran the forward again (its Python and dispatch, inside backward; measured under the profiler, which slows the host). Whether the step needs the memory this saves is not in the capture",
                    FORWARD_OPS
                        .iter()
                        .filter(|n| rows.iter().any(|r| r.0 == **n))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", "),
                    fmt_ns(recomputed_ns),
                    100.0 * kernel_share,
                    fmt_ns(waits_ns)
                ),
            );
            f.breakdown = rows
                .iter()
                .take(cx.config.max_rows)
                .map(|(label, ns, n)| Row {
                    label: label.clone(),
                    count: *n,
                    time_ns: *ns,
                    bytes: None,
                    python_frame: None,
                    cause: None,
                    share: Some(*ns as f64 / recomputed_ns.max(1) as f64),
                })
                .collect();
            f.advice = vec![
                "If the activations fit without it (torch.cuda.max_memory_allocated() against the card's memory, or one step without checkpointing), checkpoint fewer blocks (every second one, or only the largest), or recompute only the cheap operators with selective checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts with a policy that saves matrix products and attention); in a Hugging Face model, model.gradient_checkpointing_disable(). Where the memory buys a larger batch or a longer sequence, this time is its price.".into(),
            ];
            f.metrics = metrics([
                ("recomputed_ns", recomputed_ns as f64),
                ("launch_waits_ns", waits_ns as f64),
                ("recomputed_ops", calls as f64),
                ("kernel_share", kernel_share),
            ]);
            out.push(f);
        }
        out
    }
}
