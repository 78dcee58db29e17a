//! One module per rule. A rule reads the model (never a file format) and returns findings.

pub mod allocator_fragmentation;
pub mod copy_hotspots;
pub mod ecc_errors;
pub mod exposed_communication;
pub mod idle_gaps;
pub mod launch_bound;
pub mod low_sm_utilization;
pub mod memory_bandwidth_bound;
pub mod memory_pressure;
pub mod optimizer_overhead;
pub mod pageable_memcpy;
pub mod pcie_link;
pub mod power_headroom;
pub mod roofline;
pub mod software_stack;
pub mod step_outliers;
pub mod tensor_cores;
pub mod throttling;
pub mod underfilled_kernels;

use crate::config::Config;
use crate::finding::Finding;
use crate::window::Window;
use tracehound_parsers::{NONE, Trace};

/// What a rule gets: the trace, the settings and the analysed window (computed once).
pub struct Ctx<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// The settings.
    pub config: &'a Config,
    /// The analysed window.
    pub window: Window,
    /// Per-device idle analysis, computed on first use: the idle-gap rule and the summary's
    /// verdict both need it, and classifying every gap is the costliest step of analysis.
    idle: std::sync::OnceLock<Vec<idle_gaps::DeviceIdle>>,
    /// Collective time and its exposed part per device, computed on first use: the
    /// exposed_communication rule and the summary both read it.
    exposure: std::sync::OnceLock<Vec<crate::collectives::Exposure>>,
    /// Matrix operators on the roofline per device, computed on first use: the roofline
    /// rule and the summary's table read it.
    roofline: std::sync::OnceLock<Vec<crate::roofline::DeviceRoofline>>,
    /// The software stack's facts, computed on first use: the software_stack rule and the
    /// summary's stack section read them.
    stack: std::sync::OnceLock<Vec<crate::stack::StackFact>>,
    /// Matrix operator calls per device, computed on first use: the roofline and the
    /// tensor_cores rule read them.
    matrix: std::sync::OnceLock<Vec<(i32, crate::roofline::DeviceCalls)>>,
    /// Each distinct kernel name classified once (units, architecture): several rules ask
    /// for every kernel, and a trace has millions of kernels but a few thousand names.
    kernel_classes: std::sync::OnceLock<
        rustc_hash::FxHashMap<tracehound_parsers::StrId, crate::hardware::KernelClass>,
    >,
}

impl<'a> Ctx<'a> {
    /// The context of one analysis: the window comes from the trace and the settings.
    pub fn new(trace: &'a Trace, config: &'a Config) -> Self {
        Ctx {
            trace,
            config,
            window: crate::window::analysed_window(trace, config),
            idle: std::sync::OnceLock::new(),
            exposure: std::sync::OnceLock::new(),
            roofline: std::sync::OnceLock::new(),
            stack: std::sync::OnceLock::new(),
            matrix: std::sync::OnceLock::new(),
            kernel_classes: std::sync::OnceLock::new(),
        }
    }

    /// What the name of a kernel says about its math (see [`crate::hardware::classify`]).
    pub fn kernel_class(&self, name: tracehound_parsers::StrId) -> crate::hardware::KernelClass {
        self.kernel_classes
            .get_or_init(|| {
                let mut names: Vec<tracehound_parsers::StrId> = self
                    .trace
                    .gpu_ops
                    .iter()
                    .filter(|o| o.kind == tracehound_parsers::GpuOpKind::Kernel)
                    .map(|o| o.name)
                    .collect();
                names.sort_unstable();
                names.dedup();
                names
                    .into_iter()
                    .map(|n| (n, crate::hardware::classify(self.trace.str(n))))
                    .collect()
            })
            .get(&name)
            .copied()
            .unwrap_or_default()
    }

    /// Matrix operator calls (with recorded shapes) of `device` in the window.
    pub(crate) fn matrix_calls(&self, device: i32) -> &crate::roofline::DeviceCalls {
        static EMPTY: crate::roofline::DeviceCalls = crate::roofline::DeviceCalls {
            calls: Vec::new(),
            kernel_ns: 0,
        };
        self.matrix
            .get_or_init(|| {
                use rayon::prelude::*;
                self.trace
                    .devices()
                    .into_par_iter()
                    .map(|d| (d, crate::roofline::matrix_calls(self, d)))
                    .collect()
            })
            .iter()
            .find(|(d, _)| *d == device)
            .map_or(&EMPTY, |(_, c)| c)
    }

    /// The software stack, layer by layer ([`crate::stack::stack_facts`]).
    pub fn stack(&self) -> &[crate::stack::StackFact] {
        self.stack.get_or_init(|| crate::stack::stack_facts(self))
    }

    /// Matrix operators with recorded shapes on each device's roofline.
    pub fn roofline(&self) -> &[crate::roofline::DeviceRoofline] {
        self.roofline
            .get_or_init(|| crate::roofline::roofline(self))
    }

    /// Collective time per device that ran collectives in the window, and the part of it no
    /// other GPU work overlapped.
    pub fn exposure(&self) -> &[crate::collectives::Exposure] {
        self.exposure
            .get_or_init(|| crate::collectives::exposure(self.trace, &self.window))
    }

    /// The idle accounting, computing it if no rule did, taken out of the context.
    pub fn into_idle(self) -> Vec<idle_gaps::DeviceIdle> {
        self.idle();
        self.idle.into_inner().unwrap_or_default()
    }

    /// Idle accounting of every device that ran GPU work, ascending by device.
    pub fn idle(&self) -> &[idle_gaps::DeviceIdle] {
        self.idle.get_or_init(|| {
            use rayon::prelude::*;
            self.trace
                .devices()
                .into_par_iter()
                .map(|d| idle_gaps::analyse_device(self, d))
                .collect()
        })
    }
}

/// A heuristic.
pub trait Rule: Sync + Send {
    /// Stable id used in output and `--rules` (`idle_gaps`).
    fn id(&self) -> &'static str;
    /// One sentence on what it looks for.
    fn description(&self) -> &'static str;
    /// Runs the rule.
    fn check(&self, cx: &Ctx) -> Vec<Finding>;
    /// Whether the rule reads [`Ctx::idle`]: such rules run after it is computed, so that no
    /// worker thread sits blocked waiting for it while other rules could run.
    fn uses_idle(&self) -> bool {
        false
    }
}

/// Every rule, in a fixed order.
pub fn all() -> Vec<Box<dyn Rule>> {
    vec![
        Box::new(idle_gaps::IdleGaps),
        Box::new(pageable_memcpy::PageableMemcpy),
        Box::new(copy_hotspots::CopyHotspots),
        Box::new(allocator_fragmentation::AllocatorFragmentation),
        Box::new(exposed_communication::ExposedCommunication),
        Box::new(tensor_cores::TensorCores),
        Box::new(roofline::Roofline),
        Box::new(launch_bound::LaunchBound),
        Box::new(underfilled_kernels::UnderfilledKernels),
        Box::new(optimizer_overhead::OptimizerOverhead),
        Box::new(memory_pressure::MemoryPressure),
        Box::new(step_outliers::StepOutliers),
        Box::new(software_stack::SoftwareStack),
        Box::new(low_sm_utilization::LowSmUtilization),
        Box::new(memory_bandwidth_bound::MemoryBandwidthBound),
        Box::new(power_headroom::PowerHeadroom),
        Box::new(throttling::Throttling),
        Box::new(pcie_link::PcieLink),
        Box::new(ecc_errors::EccErrors),
    ]
}

/// A finding of `rule` with its impact, share and severity set from the window; the caller
/// fills breakdown, instances, advice and metrics.
pub(crate) fn new_finding(
    cx: &Ctx,
    rule: &'static str,
    device: Option<i32>,
    title: String,
    impact_ns: i64,
    confidence: crate::finding::Confidence,
    evidence: String,
) -> Finding {
    let share = cx.window.share(impact_ns);
    Finding {
        id: String::new(),
        rule,
        title,
        severity: crate::finding::Severity::from_share(share),
        impact_ns,
        impact_share: share,
        confidence,
        device,
        evidence,
        breakdown: Vec::new(),
        instances: Vec::new(),
        advice: Vec::new(),
        metrics: Default::default(),
    }
}

/// Breakdown rows from `(label, count, time)` groups, largest time first (ties by label),
/// each with its share of `total_ns`, at most `cx.config.max_rows`.
pub(crate) fn rows_by_time(
    cx: &Ctx,
    groups: impl IntoIterator<Item = (String, (u64, i64))>,
    total_ns: i64,
) -> Vec<crate::finding::Row> {
    let mut rows: Vec<crate::finding::Row> = groups
        .into_iter()
        .map(|(label, (count, time_ns))| crate::finding::Row {
            label,
            count,
            time_ns,
            bytes: None,
            python_frame: None,
            cause: None,
            share: Some(time_ns as f64 / total_ns.max(1) as f64),
        })
        .collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    rows
}

/// Name of span `i`, or `fallback` for NONE.
pub(crate) fn span_name<'t>(trace: &'t Trace, i: u32, fallback: &'t str) -> &'t str {
    if i == NONE {
        fallback
    } else {
        trace.str(trace.host_spans[i as usize].name)
    }
}

/// A CUDA API name without the version suffix Nsight Systems adds (`cudaFree_v3020` -> `cudaFree`).
pub(crate) fn api_name(name: &str) -> &str {
    name.split("_v").next().unwrap_or(name)
}

/// CUDA / HIP calls that block the host until the GPU has drained.
pub fn is_sync_call(name: &str) -> bool {
    let n = api_name(name);
    n.ends_with("Synchronize")
        || matches!(
            n,
            "cudaMemcpy"
                | "cudaMemcpy2D"
                | "cudaFree"
                | "cudaFreeHost"
                | "hipMemcpy"
                | "hipFree"
                | "cudaMemset"
                | "cuMemcpyDtoH"
                | "cuMemFree"
        )
}

/// Shortens a kernel or operator name for a table cell: drops template and argument lists.
pub fn short_name(name: &str, max: usize) -> String {
    if name.starts_with("Memcpy") || name.starts_with("Memset") {
        return name.to_string();
    }
    let mut out = String::new();
    let mut depth = 0i32;
    for c in name.chars() {
        match c {
            '<' | '(' => {
                if depth == 0 {
                    out.push(if c == '<' { '<' } else { '(' });
                    out.push('…');
                    out.push(if c == '<' { '>' } else { ')' });
                }
                depth += 1;
            }
            '>' | ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out.trim().trim_start_matches("void ").to_string();
    if out.chars().count() > max {
        let cut: String = out.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        out
    }
}

/// Most frequent value of a list of optional strings (ties: first in sort order).
pub(crate) fn most_common<S: AsRef<str>>(items: &[Option<S>]) -> Option<String> {
    let mut v: Vec<&str> = items.iter().flatten().map(AsRef::as_ref).collect();
    v.sort_unstable();
    let mut best: Option<(&str, usize)> = None;
    let mut k = 0;
    while k < v.len() {
        let mut j = k;
        while j < v.len() && v[j] == v[k] {
            j += 1;
        }
        if best.is_none_or(|(_, n)| j - k > n) {
            best = Some((v[k], j - k));
        }
        k = j;
    }
    best.map(|(s, _)| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            short_name(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
                80
            ),
            "at::native::vectorized_elementwise_kernel<…>(…)"
        );
        assert!(is_sync_call("cudaStreamSynchronize"));
        assert!(is_sync_call("cudaDeviceSynchronize_v3020"));
        assert!(!is_sync_call("cudaMemcpyAsync"));
        assert_eq!(
            most_common(&[Some("b"), None, Some("a"), Some("b")]),
            Some("b".into())
        );
    }
}
