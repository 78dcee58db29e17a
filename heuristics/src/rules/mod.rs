//! One module per rule, and the list of them. A rule reads the analysis context
//! ([`crate::context::Ctx`]: the model and the core's shared queries), never a file format
//! and never another rule, and returns findings.

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

/// Declares each rule's module and lists the rules, in the order given (the order findings
/// of equal impact keep): adding a rule is its file and one line here.
macro_rules! rules {
    ($($module:ident => $rule:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every rule, in a fixed order.
        pub fn all() -> Vec<Box<dyn Rule>> {
            vec![$(Box::new($module::$rule)),*]
        }
    };
}

rules! {
    idle_gaps => IdleGaps,
    pageable_memcpy => PageableMemcpy,
    copy_hotspots => CopyHotspots,
    allocator_fragmentation => AllocatorFragmentation,
    exposed_communication => ExposedCommunication,
    tensor_cores => TensorCores,
    roofline => Roofline,
    fusion => Fusion,
    launch_bound => LaunchBound,
    underfilled_kernels => UnderfilledKernels,
    optimizer_overhead => OptimizerOverhead,
    memory_pressure => MemoryPressure,
    step_outliers => StepOutliers,
    recompilation => Recompilation,
    software_stack => SoftwareStack,
    low_sm_utilization => LowSmUtilization,
    memory_bandwidth_bound => MemoryBandwidthBound,
    power_headroom => PowerHeadroom,
    throttling => Throttling,
    pcie_link => PcieLink,
    ecc_errors => EccErrors,
}
