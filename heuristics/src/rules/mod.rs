//! One module per rule, and the list of them. A rule reads the analysis context
//! ([`crate::context::Ctx`]: the model and the core's shared queries), never a file format
//! and never another rule, and returns findings.

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

use crate::context::Ctx;
use crate::finding::Finding;

/// A heuristic.
pub trait Rule: Sync + Send {
    /// The rule's id, its module's `ID` (`idle_gaps`): the `rule` of its findings, the first
    /// part of their stable ids, and the name `--rules` takes.
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
