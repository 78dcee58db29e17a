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
    /// Whether the rule's findings rest on the GPU recording nothing at some time (idle
    /// gaps, slow steps, launch waits, communication with nothing beside it). A file cut
    /// short lacks records from all through its timeline (Kineto does not write them in time
    /// order), so there such a rule is not run: a gap could be records the cut took.
    fn needs_whole_timeline(&self) -> bool {
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
    failed_calls => FailedCalls,
    idle_gaps => IdleGaps,
    pageable_memcpy => PageableMemcpy,
    pinned_copy_rate => PinnedCopyRate,
    unified_memory => UnifiedMemory,
    copy_hotspots => CopyHotspots,
    allocator_fragmentation => AllocatorFragmentation,
    exposed_communication => ExposedCommunication,
    tensor_cores => TensorCores,
    roofline => Roofline,
    fusion => Fusion,
    launch_bound => LaunchBound,
    sync_stalls => SyncStalls,
    hot_operator => HotOperator,
    fft_lengths => FftLengths,
    underfilled_kernels => UnderfilledKernels,
    optimizer_overhead => OptimizerOverhead,
    recomputation => Recomputation,
    tensor_loop => TensorLoop,
    constant_uploads => ConstantUploads,
    dense_embedding_grad => DenseEmbeddingGrad,
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

/// The rules that take longest on a large trace, costliest first (measured one by one on the
/// 1 GB Kineto benchmark trace: 60-180 ms each, the rest under 30). `analyze` starts them
/// first and hands each next rule to the next free thread, so that no thread is left with a
/// long rule at the end while the other has nothing to do; the rest follow in list order.
/// Only the schedule depends on it, never the output. A rule that computes a query shared
/// with a later one (`unfused_elementwise` the memory-bound model, `tensor_cores` the matrix
/// calls) comes before it, so the later one seldom waits for it.
pub const LONGEST_FIRST: &[&str] = &[
    fusion::ID,
    copy_hotspots::ID,
    launch_bound::ID,
    tensor_cores::ID,
    hot_operator::ID,
    optimizer_overhead::ID,
    allocator_fragmentation::ID,
    memory_pressure::ID,
];

/// The waits for launches that another rule prices, for launch_bound, sync_stalls and the
/// verdict's count of launch waits to leave to it: optimizer_overhead's ranges, recomputation's
/// kernels, tensor_loop's, and constant_uploads' copies with the waits after their syncs, each
/// only where that rule runs (`--rules`, `--skip-rules`) and reports. Here, where the rules are
/// listed, so that no rule reads another.
pub(crate) fn handed<'a>(cx: &'a Ctx<'_>) -> crate::starved::Handed<'a> {
    crate::starved::Handed::new(
        cx.trace,
        if cx.config.runs_rule(optimizer_overhead::ID) {
            &cx.optimizer_calls().priced_ranges
        } else {
            &[]
        },
        cx.config
            .runs_rule(recomputation::ID)
            .then(|| cx.recomputation()),
        cx.config
            .runs_rule(tensor_loop::ID)
            .then(|| cx.tensor_loops()),
        cx.config
            .runs_rule(constant_uploads::ID)
            .then(|| cx.constant_uploads()),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn longest_first_names_rules_once() {
        let ids: Vec<&str> = super::all().iter().map(|r| r.id()).collect();
        for (k, id) in super::LONGEST_FIRST.iter().enumerate() {
            assert!(ids.contains(id), "{id} is no rule");
            assert!(!super::LONGEST_FIRST[..k].contains(id), "{id} twice");
        }
        // Rules that read the idle accounting run after it, whatever their cost.
        assert!(
            super::all()
                .iter()
                .all(|r| !(r.uses_idle() && super::LONGEST_FIRST.contains(&r.id())))
        );
    }
}
