//! The software stack check as findings: every fact of [`crate::stack::stack_facts`] that
//! needs attention (a runtime newer than the driver supports, matrix kernels built for an
//! older architecture, MIG, other processes on the GPU, retired pages). They cost no
//! measured GPU time: the impact is 0, and the severity says how urgent: a runtime the driver
//! cannot serve and failing memory are high, the rest medium or info.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Severity};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "software_stack";

/// The rule.
pub struct SoftwareStack;

impl Rule for SoftwareStack {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "driver, CUDA runtime and GPU mismatches, older-architecture kernels, MIG, shared GPUs, retired pages"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        cx.stack()
            .iter()
            .filter_map(|f| {
                let warning = f.warning.clone()?;
                let severity = match f.item {
                    "runtime" if warning.contains("major version") => Severity::High,
                    "retired pages" => Severity::High,
                    // A newer minor runtime runs under minor-version compatibility: what the
                    // trace ran, ran; only features it may not use (PTX JIT, new APIs) need the
                    // driver. A field A10G capture (runtime 12.9, driver 12.8) had it second,
                    // medium, above what held its time.
                    "runtime" => Severity::Low,
                    "processes" => Severity::Medium,
                    _ => Severity::Info,
                };
                let mut out = new_finding(
                    cx,
                    ID,
                    None,
                    match f.item {
                        // "the runtime (CUDA 12.4) is newer than the driver supports (CUDA 12.2)"
                        "runtime" => {
                            let head = warning.split(':').next().unwrap_or(&warning);
                            let mut c = head.chars();
                            c.next()
                                .map(|first| first.to_uppercase().chain(c).collect())
                                .unwrap_or_default()
                        }
                        _ => format!("{}: {}", f.item, f.value),
                    },
                    0,
                    Confidence::High,
                    warning.clone(),
                );
                // The item names the finding (`software_stack/matrix_kernels`): its title
                // holds versions and counts.
                out.subject = Some(f.item.replace(' ', "_"));
                out.severity = severity;
                out.advice = vec![match f.item {
                    "runtime" => "Upgrade the NVIDIA driver to a release that supports this CUDA runtime (or install the cuda-compat package of the runtime's version).".into(),
                    "matrix kernels" => "Nothing to change in the installation: the tensor_cores finding names the change (TF32 or bf16, dimensions padded to multiples of 8).".into(),
                    "mig" => "Compare throughput against the slice's share of the GPU, or profile on a full GPU.".into(),
                    "processes" => "Measure on a GPU no other process uses (CUDA_VISIBLE_DEVICES, or nvidia-smi -c EXCLUSIVE_PROCESS).".into(),
                    "retired pages" => "Drain the node and check the GPU against NVIDIA's RMA criteria for retired pages and row remapping.".into(),
                    _ => warning,
                }];
                Some(out)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Severity;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind::Kernel;

    #[test]
    fn a_runtime_newer_than_the_driver_is_reported_by_how_much() {
        let mut t = TB::new().op(Kernel, "k", 7, 0, 1_000, None).build();
        t.meta.stack.driver_cuda = Some(12020);
        t.meta.stack.runtime_cuda = Some(12040);
        let f = crate::testutil::check(&SoftwareStack, &t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Low);
        assert_eq!(f[0].stable_id(), "software_stack/runtime");
        assert!(
            f[0].title.starts_with(
                "The runtime (CUDA 12.4) is newer than the driver supports (CUDA 12.2)"
            ),
            "{}",
            f[0].title
        );
        t.meta.stack.runtime_cuda = Some(13000);
        assert_eq!(
            crate::testutil::check(&SoftwareStack, &t)[0].severity,
            Severity::High
        );
        t.meta.stack.runtime_cuda = Some(12020);
        assert!(crate::testutil::check(&SoftwareStack, &t).is_empty());
    }
}
