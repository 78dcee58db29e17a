//! Power draw far below the board limit (below half, from --query-gpu or -q -x) while the job runs: the GPU is not saturated. Diagnostic: no time impact.
//!
//! A memory-bound run draws little power by nature: its kernels wait on DRAM, not on the
//! math units that burn the watts. When the trace's kernels are memory-bound
//! ([`crate::membound::KernelBound::Memory`]) or nvidia-smi's memory-controller utilisation
//! averages at least [`MEMORY_BUSY_PCT`], low power says nothing about a CPU or data-loading
//! problem, and the rule stays quiet.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "power_headroom";

/// Power far below the board limit while busy.
pub struct PowerHeadroom;

/// Mean memory-controller utilisation (%) from which a run is memory-bound by nvidia-smi's
/// account: the `memory_bandwidth_bound` rule's threshold.
pub const MEMORY_BUSY_PCT: f64 = 60.0;

/// Whether `gpu`'s work is memory-bound: by the trace's kernels, or by nvidia-smi's
/// memory-controller utilisation over the window.
fn memory_bound(cx: &Ctx, gpu: i32, w: &crate::window::Window) -> bool {
    let by_kernels = cx
        .membound()
        .summary_of(gpu)
        .is_some_and(|m| m.bound == Some(crate::membound::KernelBound::Memory));
    let by_counters = series(cx.trace, gpu, "mem")
        .and_then(|s| mean(in_window(cx.trace, s, w).iter().map(|x| x.1)))
        .is_some_and(|m| m >= MEMORY_BUSY_PCT);
    by_kernels || by_counters
}

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
            if limit <= 0.0 || m / limit >= 0.5 || memory_bound(cx, gpu, &w) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tracehound_parsers::{CounterPeriod, CounterSeries, Trace};

    fn series(metric: &str, values: &[f64]) -> CounterSeries {
        CounterSeries {
            gpu: 0,
            metric: metric.into(),
            unit: String::new(),
            samples: values
                .iter()
                .enumerate()
                .map(|(k, v)| (k as i64 * CounterPeriod::DEFAULT_NS, *v))
                .collect(),
        }
    }

    fn log(mem: f64) -> Trace {
        let mut t = Trace {
            counters: vec![
                series("sm", &[90.0, 90.0, 90.0]),
                series("mem", &[mem, mem, mem]),
                series("pwr", &[250.0, 250.0, 250.0]),
                series("power_limit", &[700.0, 700.0, 700.0]),
            ],
            ..Default::default()
        };
        t.finish();
        t
    }

    #[test]
    fn low_power_is_reported_unless_the_memory_controller_is_busy() {
        let f = crate::testutil::check(&PowerHeadroom, &log(20.0));
        assert_eq!(f.len(), 1, "250 W of 700 W with the memory controller at 20%");
        // A memory-bound run draws little power by nature: quiet.
        assert!(crate::testutil::check(&PowerHeadroom, &log(85.0)).is_empty());
    }
}
