//! nvidia-smi memory-controller utilisation of at least 60% and above SM utilisation: memory-bandwidth-bound kernels. Diagnostic: no time impact.

use super::Rule;
use crate::context::Ctx;
use crate::counters::*;
use crate::finding::{Finding, Severity, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "memory_bandwidth_bound";

/// Memory-controller utilisation high while SM utilisation is lower.
pub struct MemoryBandwidthBound;

impl Rule for MemoryBandwidthBound {
    fn id(&self) -> &'static str {
        ID
    }
    fn description(&self) -> &'static str {
        "nvidia-smi memory % high while SM % is lower: memory-bandwidth-bound kernels"
    }
    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for gpu in crate::counters::gpus(cx.trace) {
            let Some(w) = counter_window(cx, gpu) else {
                continue;
            };
            let s = loaded(cx.trace, gpu, &w);
            let hits: Vec<(f64, f64)> = s
                .iter()
                .filter_map(|&(t, sm)| at(cx.trace, gpu, "mem", t).map(|m| (sm, m)))
                .filter(|&(sm, m)| m >= 60.0 && m > sm)
                .collect();
            if hits.len() < 2 {
                continue;
            }
            let msm = mean(hits.iter().map(|h| h.0)).unwrap_or(0.0);
            let mm = mean(hits.iter().map(|h| h.1)).unwrap_or(0.0);
            let mut f = base(
                ID,
                gpu,
                format!(
                    "GPU {gpu}: memory-bandwidth bound in {} of {} samples (memory {mm:.0}% vs SM {msm:.0}%)",
                    hits.len(),
                    s.len()
                ),
                Severity::Low,
                format!(
                    "memory-controller utilisation at least 60% and above SM utilisation in {} samples",
                    hits.len()
                ),
                if cx.pytorch() {
                    "Kernels wait on DRAM: fuse element-wise chains (torch.compile), use bf16/fp8 activations, and prefer layouts that read contiguous memory."
                } else {
                    "Kernels wait on DRAM: fuse kernels that pass the same arrays, use narrower types where precision allows, and read memory contiguously (coalesced)."
                },
            );
            f.metrics = metrics([
                ("samples", hits.len() as f64),
                ("mean_mem_pct", mm),
                ("mean_sm_pct", msm),
            ]);
            out.push(f);
        }
        out
    }
}
