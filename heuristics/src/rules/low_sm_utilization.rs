//! nvidia-smi utilisation (the share of time a kernel ran) low while the job runs, from nvidia-smi counters of a log analysed without a GPU trace (with a trace, `idle_gaps` measures the same thing exactly). Impact: the unused share of the active seconds.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, fmt_ns, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "low_sm_utilization";

/// SM utilisation low while the job runs.
pub struct LowSmUtilization;

impl Rule for LowSmUtilization {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "nvidia-smi utilisation (time with a kernel running) low while the job runs (logs analysed without a GPU trace)"
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
            let every = period(cx.trace);
            let active = s.len() as i64 * every;
            let impact = ((1.0 - m / 100.0) * active as f64) as i64;
            let share = 1.0 - m / 100.0;
            // nvidia-smi's utilisation (dmon's `sm`, the query's `utilization.gpu`) is the share
            // of each sample period in which any kernel ran, not how much of the SMs it used.
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu}: nvidia-smi utilisation (time with a kernel running) averages {m:.0}% over {} of activity",
                    fmt_ns(active)
                ),
                Severity::from_share(share),
                format!(
                    "{} samples while active, one every {}, {low} of them below 30%; no kernel ran about {:.0}% of the time (at the log's {} resolution: which gaps, and why, takes a trace)",
                    s.len(),
                    fmt_ns(every),
                    100.0 * share,
                    fmt_ns(every)
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
