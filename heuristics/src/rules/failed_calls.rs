//! CUDA runtime and driver calls that returned an error, as the capture records them
//! ([`crate::failures`]). A failed kernel launch runs nothing: where launches failed, the
//! trace's idle time and missing kernels are that failure, not a slow host or tracing that was
//! off, and no performance conclusion holds until the program runs. Such a finding names the
//! calls, their error and what it means, costs no measured time (impact 0) and ranks first
//! (unpriced, share = failed launches over all launches). Other failed calls (a copy, a
//! free) are listed with impact 0 at info severity: worth knowing, the run still did its work.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::failures::{self, call_name, code_text};
use crate::finding::{Confidence, Finding, Severity, UNPRICED, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "failed_calls";

/// The rule.
pub struct FailedCalls;

impl Rule for FailedCalls {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "CUDA calls that returned an error: kernel launches that ran nothing, failed copies"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let Some(f) = failures::failures(cx.trace) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let failed = f.failed_launches();
        if failed > 0 {
            let all = f.launch_calls.max(failed);
            let share = failed as f64 / all as f64;
            let first = f.launches[0];
            let mut finding = new_finding(
                cx,
                ID,
                None,
                format!(
                    "{failed} of {all} kernel launches failed ({} returned {}): {}",
                    call_name(&first.name),
                    code_text(first.code),
                    if failed == all {
                        "no kernel ran, so the capture holds no GPU work to judge"
                    } else {
                        "those kernels never ran, and the program's results and timings are not what they seem"
                    }
                ),
                0,
                Confidence::High,
                format!(
                    "the capture records each call's return value: {}. A failed launch queues nothing: the GPU's idle time around these calls is the failure, not a slow host, and any time the program measured over them measured nothing",
                    failures::list(&f.launches)
                ),
            );
            finding.subject = Some("launches".into());
            finding.severity = Severity::High;
            finding.advice = advice(first.code);
            finding.metrics = metrics([
                (UNPRICED, share),
                ("failed_launches", failed as f64),
                ("launches", all as f64),
                ("code", first.code as f64),
            ]);
            out.push(finding);
        }
        if !f.other.is_empty() {
            let calls: u64 = f.other.iter().map(|c| c.count).sum();
            let mut finding = new_finding(
                cx,
                ID,
                None,
                format!(
                    "{calls} CUDA {} returned an error: {}",
                    if calls == 1 { "call" } else { "calls" },
                    failures::list(&f.other[..f.other.len().min(3)])
                ),
                0,
                Confidence::High,
                format!(
                    "the capture records each call's return value: {}",
                    failures::list(&f.other)
                ),
            );
            finding.subject = Some("calls".into());
            finding.severity = Severity::Info;
            finding.advice = vec![CHECK.into()];
            finding.metrics = metrics([("failed_calls", calls as f64)]);
            out.push(finding);
        }
        out
    }
}

/// Checking every call is the fix whatever the code: the program carried on past the error.
const CHECK: &str = "Check the return value of every CUDA call, and cudaGetLastError() after each kernel launch (a CUDA_CHECK macro), so that a failure stops the program instead of letting it run on and time nothing.";

/// What to do about launches that failed with `code`.
fn advice(code: i64) -> Vec<String> {
    let specific = match code {
        222 | 35 | 803 => Some(
            "The driver is older than the toolkit that built the code: upgrade the driver, or build machine code for this GPU's architecture (nvcc -gencode arch=compute_XY,code=sm_XY with its compute capability) so the driver does not have to compile newer PTX; nvidia-smi shows the CUDA version the driver supports.",
        ),
        209 | 98 | 200 => Some(
            "The binary holds no code this GPU can run: build for its architecture (nvcc -gencode arch=compute_XY,code=sm_XY; for PyTorch extensions TORCH_CUDA_ARCH_LIST), or add PTX (code=compute_XY) that the driver can compile.",
        ),
        9 | 701 => Some(
            "The launch asks for more than the GPU allows per block: fewer threads per block, less dynamic shared memory, or fewer registers (--maxrregcount, __launch_bounds__); cudaOccupancyMaxPotentialBlockSize gives a size that fits.",
        ),
        700 | 719 => Some(
            "A kernel faulted and the context is lost, so every later launch fails too: run the program under compute-sanitizer to find the access.",
        ),
        2 => Some(
            "The device ran out of memory: free or reuse buffers before launching, or process smaller batches.",
        ),
        _ => None,
    };
    specific
        .map(String::from)
        .into_iter()
        .chain(std::iter::once(CHECK.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TB;
    use tracehound_parsers::FailedCalls as Failed;
    use tracehound_parsers::GpuOpKind::Memcpy;

    #[test]
    fn launches_that_failed_lead_unpriced_with_their_error() {
        let mut t = TB::new().op(Memcpy, "Memcpy HtoD", 7, 0, 1_000, None).build();
        t.meta.failed_calls = vec![
            Failed {
                name: "cudaLaunchKernel_v7000".into(),
                code: 222,
                count: 3,
            },
            Failed {
                name: "cudaMemcpy_v3020".into(),
                code: 1,
                count: 1,
            },
        ];
        let out = crate::testutil::check(&FailedCalls, &t);
        assert_eq!(out.len(), 2);
        assert!(out[0].unpriced());
        assert_eq!(out[0].severity, Severity::High);
        assert!(
            out[0].title.starts_with("3 of 3 kernel launches failed (cudaLaunchKernel returned 222 (cudaErrorUnsupportedPtxVersion"),
            "{}",
            out[0].title
        );
        assert!(out[0].title.ends_with("no kernel ran, so the capture holds no GPU work to judge"));
        assert!(out[0].advice[0].contains("upgrade the driver"));
        assert_eq!(out[1].severity, Severity::Info);
        assert!(out[1].title.contains("cudaMemcpy ×1 returned 1 (cudaErrorInvalidValue"));
    }
}
