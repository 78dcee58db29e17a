//! SM utilisation low while the job runs, from nvidia-smi counters of a log analysed without a GPU trace (with a trace, `idle_gaps` measures the same thing exactly). Impact: the unused share of the active seconds.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "low_sm_utilization";

/// SM utilisation low while the job runs.
pub struct LowSmUtilization;

impl Rule for LowSmUtilization {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "nvidia-smi SM utilisation low while the job runs (logs analysed without a GPU trace)"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        if !cx.trace.gpu_ops.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for gpu in crate::counters::gpus(cx.trace) {
            let Some(w) = counter_window(cx, gpu) else {
                continue;
            };
            let s = loaded(cx.trace, gpu, &w);
            let Some(m) = mean(s.iter().map(|x| x.1)) else {
                continue;
            };
            if m >= 70.0 || s.len() < 3 {
                continue;
            }
            let low = s.iter().filter(|x| x.1 < 30.0).count();
            let impact = ((1.0 - m / 100.0) * s.len() as f64 * period(cx.trace) as f64) as i64;
            let share = 1.0 - m / 100.0;
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu}: SM utilisation averages {m:.0}% over {} s of activity",
                    s.len()
                ),
                Severity::from_share(share),
                format!(
                    "{} samples while active, {low} of them below 30% SM; the GPU sits idle about {:.0}% of the time",
                    s.len(),
                    100.0 * share
                ),
                "Capture a PyTorch profiler (or nsys) trace of a few steps to see why: tracehound attributes each idle gap to the host activity behind it.",
            );
            f.impact_ns = impact;
            f.impact_share = share;
            f.metrics = metrics([
                ("mean_sm_pct", m),
                ("samples", s.len() as f64),
                ("low_samples", low as f64),
            ]);
            out.push(f);
        }
        out
    }
}
