//! Power or thermal throttling under load (SM ≥ 50%): dmon violation counters in samples whose SM clock is below 90% of its maximum (or not recorded), active clocks-event reasons in -q -x, SM clock below 90% of its maximum. Impact: the seconds under load scaled by the clock shortfall.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "throttling";

/// Power / thermal throttling and clocks below max under load.
pub struct Throttling;

impl Rule for Throttling {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "power or thermal throttling: violation counters, active clocks-event reasons, SM clock below max under load"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let mut out = Vec::new();
        for gpu in gpus_with_inventory(t) {
            let w = counter_window(cx, gpu);
            let busy: Vec<(i64, f64)> = w
                .as_ref()
                .map(|w| loaded(t, gpu, w))
                .unwrap_or_default()
                .into_iter()
                .filter(|x| x.1 >= 50.0)
                .collect();
            let max_clock = series(t, gpu, "pclk_max")
                .and_then(|s| s.samples.last().map(|x| x.1))
                .or_else(|| t.inventory.get(gpu as usize).and_then(|i| i.sm_clock_mhz.1));
            // A violation counter says the GPU hit a limit in that sample, not that it slowed:
            // where the SM clock of the sample is recorded and stays within 10% of the maximum,
            // nothing was lost. (An H200 log shows pviol 28-31% at 1965-1980 of 1980 MHz and
            // 40% of its power limit.) The maximum is the known one, else the highest clock of
            // the busy samples without a violation: a GPU capped for the whole run has none,
            // and its violations all stand.
            let violating = |ts: i64| {
                ["pviol", "tviol"]
                    .iter()
                    .any(|m| at(t, gpu, m, ts).is_some_and(|v| v > 0.0))
            };
            let reference = max_clock.filter(|m| *m > 0.0).or_else(|| {
                busy.iter()
                    .filter(|&&(ts, _)| !violating(ts))
                    .filter_map(|&(ts, _)| at(t, gpu, "pclk", ts))
                    .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))))
            });
            let at_full_clock = |ts: i64| {
                matches!((at(t, gpu, "pclk", ts), reference), (Some(c), Some(r)) if r > 0.0 && c >= 0.9 * r)
            };
            let viol = |m: &str| {
                busy.iter()
                    .filter(|&&(ts, _)| {
                        at(t, gpu, m, ts).is_some_and(|v| v > 0.0) && !at_full_clock(ts)
                    })
                    .count()
            };
            let (pviol, tviol) = (viol("pviol"), viol("tviol"));
            let mut lost = 0.0;
            let mut slow = 0;
            if let Some(max) = max_clock.filter(|m| *m > 0.0) {
                for &(ts, _) in &busy {
                    if let Some(c) = at(t, gpu, "pclk", ts)
                        && c < 0.9 * max
                    {
                        slow += 1;
                        lost += (1.0 - c / max) * period(t) as f64;
                    }
                }
            }
            let reasons: Vec<String> = t
                .inventory
                .get(gpu as usize)
                // A snapshot's reasons count only when it was taken under load.
                .filter(|i| i.gpu_util_pct.is_some_and(|u| u > 0.0))
                .map(|i| {
                    i.throttle_reasons
                        .iter()
                        .filter(|r| {
                            !matches!(
                                r.as_str(),
                                "gpu_idle"
                                    | "applications_clocks_setting"
                                    | "display_clocks_setting"
                            )
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if pviol + tviol + slow == 0 && reasons.is_empty() {
                continue;
            }
            let share = w.as_ref().map_or(0.0, |w| w.share(lost as i64));
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu} throttles under load: {}",
                    [
                        (pviol > 0).then(|| format!("power violation in {pviol} s")),
                        (tviol > 0).then(|| format!("thermal violation in {tviol} s")),
                        (slow > 0).then(|| format!("SM clock below 90% of max in {slow} s")),
                        (!reasons.is_empty())
                            .then(|| format!("active reasons: {}", reasons.join(", "))),
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; ")
                ),
                if tviol > 0 || reasons.iter().any(|r| r.contains("thermal")) {
                    Severity::Medium
                } else {
                    Severity::from_share(share).max(Severity::Low)
                },
                format!(
                    "{} busy samples (SM ≥ 50%); max SM clock {}",
                    busy.len(),
                    max_clock.map_or("unknown".into(), |m| format!("{m:.0} MHz"))
                ),
                "Check cooling and power capping (nvidia-smi -q -d PERFORMANCE, nvidia-smi -pl); a power-capped GPU runs slower kernels at the same utilisation.",
            );
            f.impact_ns = lost as i64;
            f.impact_share = share;
            f.metrics = metrics([
                ("power_violation_s", pviol as f64),
                ("thermal_violation_s", tviol as f64),
                ("slow_clock_s", slow as f64),
            ]);
            out.push(f);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracehound_parsers::{CounterPeriod, CounterSeries, GpuInventory, Trace};
    const SAMPLE_NS: i64 = CounterPeriod::DEFAULT_NS;

    fn series(metric: &str, values: &[f64]) -> CounterSeries {
        CounterSeries {
            gpu: 0,
            metric: metric.into(),
            unit: String::new(),
            samples: values
                .iter()
                .enumerate()
                .map(|(k, v)| (k as i64 * SAMPLE_NS, *v))
                .collect(),
        }
    }

    fn check(t: &Trace) -> Vec<Finding> {
        crate::testutil::check(&Throttling, t)
    }

    #[test]
    fn slow_clocks_under_load_cost_time() {
        let mut t = Trace {
            counters: vec![
                series("sm", &[90.0, 90.0, 90.0, 0.0]),
                series("pclk", &[990.0, 1980.0, 1980.0, 345.0]),
                series("tviol", &[1.0, 0.0, 0.0, 0.0]),
            ],
            ..Default::default()
        };
        t.inventory.push(GpuInventory {
            sm_clock_mhz: (None, Some(1980.0)),
            ..Default::default()
        });
        t.finish();
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].metrics["slow_clock_s"], 1.0);
        assert_eq!(f[0].metrics["thermal_violation_s"], 1.0);
        assert_eq!(f[0].impact_ns, SAMPLE_NS / 2, "one second at half clock");
        assert_eq!(f[0].severity, Severity::Medium);
    }

    #[test]
    fn a_violation_at_full_clock_slowed_nothing() {
        // The H200 dmon log's busy seconds: pviol 28% and 31% while the SM clock stays at
        // 1965-1980 MHz, its highest in the log (no maximum known without a snapshot).
        let mut t = Trace {
            counters: vec![
                series("sm", &[61.0, 71.0, 89.0, 71.0]),
                series("pclk", &[1980.0, 1965.0, 1980.0, 1980.0]),
                series("pviol", &[0.0, 28.0, 0.0, 31.0]),
            ],
            ..Default::default()
        };
        t.finish();
        assert!(check(&t).is_empty(), "{:?}", check(&t));
        // The same counters at a third of the clock are throttling.
        t.counters[1] = series("pclk", &[1980.0, 660.0, 1980.0, 660.0]);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].metrics["power_violation_s"], 2.0);
    }

    #[test]
    fn a_gpu_capped_for_the_whole_run_throttles() {
        // Every busy second violates at the same 1100 MHz, and no maximum is known: the log's
        // own highest clock is a capped one, so it cannot clear the violations.
        let mut t = Trace {
            counters: vec![
                series("sm", &[95.0; 6]),
                series("pclk", &[1100.0; 6]),
                series("pviol", &[100.0; 6]),
            ],
            ..Default::default()
        };
        t.finish();
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].metrics["power_violation_s"], 6.0);
    }

    #[test]
    fn idle_downclocking_is_not_throttling() {
        let mut t = Trace {
            counters: vec![
                series("sm", &[0.0, 5.0, 0.0]),
                series("pclk", &[345.0, 345.0, 345.0]),
            ],
            ..Default::default()
        };
        t.inventory.push(GpuInventory {
            sm_clock_mhz: (None, Some(1980.0)),
            throttle_reasons: vec!["sw_power_cap".into()],
            gpu_util_pct: Some(0.0),
            ..Default::default()
        });
        t.finish();
        assert!(check(&t).is_empty());
    }
}
