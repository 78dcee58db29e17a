//! Power draw far below the board limit (below half, from --query-gpu or -q -x) while the job runs: the GPU is not saturated. Diagnostic: no time impact.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "power_headroom";

/// Power far below the board limit while busy.
pub struct PowerHeadroom;

impl Rule for PowerHeadroom {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "power draw far below the board's limit while the job runs: the GPU is not saturated"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for gpu in crate::counters::gpus(cx.trace) {
            let (Some(limit), Some(w)) = (power_limit(cx.trace, gpu), counter_window(cx, gpu))
            else {
                continue;
            };
            let Some(p) = series(cx.trace, gpu, "pwr") else {
                continue;
            };
            let s: Vec<f64> = in_window(cx.trace, p, &w).iter().map(|x| x.1).collect();
            let (Some(m), Some(peak)) =
                (mean(s.iter().copied()), s.iter().copied().reduce(f64::max))
            else {
                continue;
            };
            if limit <= 0.0 || m / limit >= 0.5 {
                continue;
            }
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu} draws {m:.0} W on average ({:.0}% of its {limit:.0} W limit) while the job runs",
                    100.0 * m / limit
                ),
                Severity::Info,
                format!(
                    "{} samples, mean {m:.0} W, peak {peak:.0} W, limit {limit:.0} W",
                    s.len()
                ),
                "A GPU far below its power limit is not saturated: larger batches, fused kernels and fewer host round trips put the headroom to work.",
            );
            f.metrics = metrics([("mean_w", m), ("peak_w", peak), ("limit_w", limit)]);
            out.push(f);
        }
        out
    }
}
