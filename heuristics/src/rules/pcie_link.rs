//! PCIe link below its maximum generation or width while the GPU works (an idle GPU trains its link down to save power, so idle snapshots do not count).

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Confidence, Finding, Severity};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "pcie_link";

/// PCIe link below its maximum under load.
pub struct PcieLink;

impl Rule for PcieLink {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "PCIe link running below its maximum generation or width under load"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for (k, inv) in cx.trace.inventory.iter().enumerate() {
            let gen_low = matches!(inv.pcie_gen, (Some(c), Some(m)) if c < m);
            let width_low = matches!(inv.pcie_width, (Some(c), Some(m)) if c < m);
            // An idle GPU trains its link down to save power: only a link that is slow while
            // the GPU works (snapshot under load, or P0) counts.
            let under_load =
                inv.gpu_util_pct.is_some_and(|u| u > 0.0) || inv.pstate.as_deref() == Some("P0");
            if !(gen_low || width_low) || !under_load {
                continue;
            }
            let gpu = k as i32;
            let fmt = |p: (Option<u32>, Option<u32>)| {
                format!("{}/{}", p.0.unwrap_or(0), p.1.unwrap_or(0))
            };
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu} ({}) PCIe link below its maximum under load: gen {} x{}",
                    inv.bus_id,
                    fmt(inv.pcie_gen),
                    fmt(inv.pcie_width)
                ),
                if width_low {
                    Severity::Medium
                } else {
                    Severity::Low
                },
                format!(
                    "current/max generation {}, width {}; performance state {}",
                    fmt(inv.pcie_gen),
                    fmt(inv.pcie_width),
                    inv.pstate.as_deref().unwrap_or("?")
                ),
                "Host<->device copies run at a fraction of the link's bandwidth: reseat the card or move it to a full-width slot, and check BIOS PCIe settings and risers.",
            );
            f.confidence = Confidence::High;
            out.push(f);
        }
        out
    }
}
