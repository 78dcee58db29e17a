//! Volatile ECC errors from dmon (`sbecc`/`dbecc`) or -q -x: uncorrectable ones are high severity.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Confidence, Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "ecc_errors";

/// Volatile ECC errors.
pub struct EccErrors;

impl Rule for EccErrors {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "volatile ECC errors reported by the GPU"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let mut out = Vec::new();
        for gpu in gpus_with_inventory(t) {
            let max_of = |m: &str| {
                series(t, gpu, m)
                    .and_then(|s| s.samples.iter().map(|x| x.1).reduce(f64::max))
                    .unwrap_or(0.0) as u64
            };
            let inv = t
                .inventory
                .get(gpu as usize)
                .map(|i| i.ecc_volatile)
                .unwrap_or((None, None));
            let sbe = max_of("sbecc").max(inv.0.unwrap_or(0));
            let dbe = max_of("dbecc").max(inv.1.unwrap_or(0));
            if sbe + dbe == 0 {
                continue;
            }
            let mut f = base(
                ID,
                gpu,
                format!("GPU {gpu}: {dbe} uncorrectable and {sbe} correctable ECC errors"),
                if dbe > 0 {
                    Severity::High
                } else {
                    Severity::Low
                },
                "volatile ECC counters since the last driver load".into(),
                "Uncorrectable ECC errors corrupt results and crash jobs: drain the GPU and have it checked (nvidia-smi -q -d ECC,PAGE_RETIREMENT / ROW_REMAPPER).",
            );
            f.confidence = Confidence::High;
            f.metrics = metrics([("correctable", sbe as f64), ("uncorrectable", dbe as f64)]);
            out.push(f);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracehound_parsers::{GpuInventory, Trace};

    #[test]
    fn uncorrectable_errors_are_high() {
        let mut t = Trace::default();
        t.inventory.push(GpuInventory {
            ecc_volatile: (Some(3), Some(1)),
            ..Default::default()
        });
        t.finish();
        let f = crate::testutil::check(&EccErrors, &t);
        assert_eq!(f[0].severity, Severity::High);
        assert_eq!(f[0].metrics["uncorrectable"], 1.0);
        t.inventory[0].ecc_volatile = (Some(0), Some(0));
        assert!(crate::testutil::check(&EccErrors, &t).is_empty());
    }
}
